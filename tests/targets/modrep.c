/*
 * A program whose allocations go through libmodrep.so, which defines the
 * malloc family (loaded from where LD_LIBRARY_PATH points), for the tests of
 * a library replaced on disk while the program runs (tests/e2e/test_modules.py).
 * Prints "build N" (the library's), "sum HEX" (the checksum of a block in the
 * library's code) and "ready", then obeys one command per line on stdin:
 *   sum    prints "sum HEX" again: the same unless someone wrote into that code
 *   alloc  allocates 8 MiB through modrep_alloc and writes it, prints "allocated"
 *   free   frees it, prints "freed"
 * At the end of its input it prints "bye" and exits with status 5.
 */
#include <stdint.h>

#include "target.h"

int modrep_build(void);
uint64_t modrep_sum(void);

#define MODREP_ALLOC (8 * MiB)

NOINLINE static void *modrep_alloc(size_t size)
{
	char *p = malloc(size);
	if (!p) {
		perror("modrep: out of memory");
		exit(10);
	}
	memset(p, 1, size);
	return p;
}

int main(void)
{
	char line[64];
	void *block = NULL;

	printf("build %d\nsum %016llx\nready\n", modrep_build(), (unsigned long long)modrep_sum());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "sum\n")) {
			printf("sum %016llx\n", (unsigned long long)modrep_sum());
		} else if (!strcmp(line, "alloc\n")) {
			free(block);
			block = modrep_alloc(MODREP_ALLOC);
			printf("allocated\n");
		} else if (!strcmp(line, "free\n")) {
			free(block);
			block = NULL;
			printf("freed\n");
		} else {
			printf("unknown command %s", line);
		}
		fflush(stdout);
	}
	free(block);
	printf("bye\n");
	return 5;
}
