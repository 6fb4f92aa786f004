/*
 * 4 threads, each making 250,000 malloc/free pairs (sizes 16..256, one block live at a
 * time), half before and half after a checkpoint. At the checkpoint thread i (0..3)
 * holds 500 * (i+1) blocks of 300 * (i+1) bytes, made by hold_blocks, and all four
 * wait at a barrier holding them: 5,000 blocks, 4,500,000 bytes. Every block a pair
 * makes is smaller than any held block, and each thread frees its held blocks before
 * pairing again, so the checkpoint is the process's heap peak.
 */
#include <pthread.h>

#include "target.h"

#define THREADS 4
#define PAIRS 250000
#define HOLD_N(i) (500 * ((i) + 1))
#define HOLD_SIZE(i) (300 * ((i) + 1))

static pthread_barrier_t checkpoint;

NOINLINE static void pairs(long n, unsigned *seed)
{
	for (long k = 0; k < n; k++) {
		*seed = *seed * 1103515245u + 12345u;
		char *p = malloc(16 + (*seed >> 16) % 241);
		if (!p)
			exit(10);
		p[0] = 1;
		keep(p);
		free(p);
	}
}

NOINLINE static void hold_blocks(void **held, int n, size_t size)
{
	for (int k = 0; k < n; k++) {
		held[k] = malloc(size);
		if (!held[k])
			exit(10);
		memset(held[k], 1, size);
	}
}

NOINLINE static void *thread_main(void *arg)
{
	long i = (long)arg;
	unsigned seed = (unsigned)i + 1;
	static void *held[THREADS][HOLD_N(THREADS - 1)];
	pairs(PAIRS / 2, &seed);
	hold_blocks(held[i], HOLD_N(i), HOLD_SIZE(i));
	pthread_barrier_wait(&checkpoint);
	for (int k = 0; k < HOLD_N(i); k++)
		free(held[i][k]);
	pairs(PAIRS - PAIRS / 2, &seed);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	printf("start\n");
	pthread_barrier_init(&checkpoint, NULL, THREADS);
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, thread_main, (void *)i)) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("done\n");
	return 0;
}
