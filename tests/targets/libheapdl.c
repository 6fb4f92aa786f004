/* A shared library the heap_dso target dlopens: dl_alloc makes 200 blocks of 10,000 bytes. */
#include "target.h"

#define DL_N 200
#define DL_SIZE 10000

static void *blocks[DL_N];

NOINLINE void *dl_alloc(size_t size)
{
	void *p = malloc(size);
	if (!p)
		exit(10);
	memset(p, 1, size);
	return p;
}

void heapdl_hold(void)
{
	for (int i = 0; i < DL_N; i++)
		blocks[i] = dl_alloc(DL_SIZE);
}

void heapdl_release(void)
{
	for (int i = 0; i < DL_N; i++)
		free(blocks[i]);
}
