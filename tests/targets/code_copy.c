/*
 * Maps part of its own executable a second time, elsewhere in memory, as V8
 * does with node's embedded builtins, and allocates from a function running
 * in that copy: 100 blocks of 10,000 bytes made by copy_alloc (through the
 * copy) and held, then "copy done" and all freed. The frame in the copy must
 * be named copy_alloc, and the stack must go on through it to main.
 */
#include <fcntl.h>
#include <stdint.h>

#include "target.h"

#define BLOCKS 100
#define SIZE 10000

typedef void alloc_fn(void *(*)(size_t), size_t, void **);

/*
 * Runs in the copy: nothing position-dependent (no global, no call through
 * the PLT), the allocator passed in, and a store after the call so that it
 * is no tail call: its frame is on the stack when malloc runs.
 */
NOINLINE void copy_alloc(void *(*m)(size_t), size_t n, void **out)
{
	*out = m(n);
}

/* The file offset of the byte at addr in the executable's mapping that holds it. */
static long file_offset_of(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	long off = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, fo;
		if (sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &fo) == 3 && addr >= lo && addr < hi) {
			off = (long)(fo + (addr - lo));
			break;
		}
	}
	fclose(f);
	return off;
}

int main(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	long off = file_offset_of((uintptr_t)copy_alloc);
	int fd = open("/proc/self/exe", O_RDONLY);
	if (off < 0 || fd < 0) {
		perror("code_copy: own file");
		return 10;
	}
	long page = off & ~(ps - 1);
	/* Two pages: the function may cross a page end. */
	char *copy = mmap(NULL, 2 * (size_t)ps, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, page);
	if (copy == MAP_FAILED) {
		perror("code_copy: mmap");
		return 11;
	}
	close(fd);
	alloc_fn *fn = (alloc_fn *)(void *)(copy + (off - page));
	static void *held[BLOCKS];
	for (int i = 0; i < BLOCKS; i++) {
		fn(malloc, SIZE, &held[i]);
		if (!held[i])
			return 12;
		memset(held[i], 1, SIZE);
	}
	printf("copy done\n");
	fflush(stdout);
	for (int i = 0; i < BLOCKS; i++)
		free(held[i]);
	return 0;
}
