/* A shared library whose constructor allocates, before main: 300 blocks of 10,000 bytes through ctor_alloc. */
#include "target.h"

#define CTOR_N 300
#define CTOR_SIZE 10000

static void *blocks[CTOR_N];

NOINLINE void *ctor_alloc(size_t size)
{
	void *p = malloc(size);
	if (!p)
		exit(10);
	memset(p, 1, size);
	return p;
}

__attribute__((constructor)) static void heapctor_init(void)
{
	for (int i = 0; i < CTOR_N; i++)
		blocks[i] = ctor_alloc(CTOR_SIZE);
}

void heapctor_release(void)
{
	for (int i = 0; i < CTOR_N; i++)
		free(blocks[i]);
}
