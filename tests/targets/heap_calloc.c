/*
 * calloc(1 GiB), then one byte written in every tenth page: 26,215 pages resident
 * (about 102 MiB) of 1 GiB reserved. glibc serves it with a fresh mmap, which is
 * already zero, so calloc itself writes nothing. Held, then freed.
 */
#include "target.h"

#define BIG (1024UL * MiB)

NOINLINE static char *calloc_big(void)
{
	char *p = calloc(1, BIG);
	if (!p) {
		perror("calloc");
		exit(10);
	}
	return p;
}

NOINLINE static size_t touch_tenth(char *p)
{
	long ps = sysconf(_SC_PAGESIZE);
	size_t pages = 0;
	for (size_t i = 0; i < BIG; i += 10 * (size_t)ps, pages++)
		((volatile char *)p)[i] = 1;
	return pages * (size_t)ps;
}

int main(void)
{
	char *p = calloc_big();
	size_t touched = touch_tenth(p);
	keep(p);
	free(p);
	printf("touched=%zu\n", touched);
	return 0;
}
