/*
 * Scale: many live blocks, many distinct stacks, many threads.
 *
 *   scale BLOCKS DEPTH THREADS
 *
 * Each of THREADS threads (0: the main thread alone) allocates its share of
 * BLOCKS blocks of 32 bytes and keeps them all until every thread is done. A
 * block is allocated at the bottom of a chain of DEPTH calls, each to left()
 * or right() as the bits of the block's number say, so the blocks come from
 * 2^DEPTH distinct call stacks (DEPTH 17: 131,072). Prints "done N" with the
 * number of blocks, then frees everything and exits 0.
 */
#include <pthread.h>

#include "target.h"

static long per_thread;
static int depth;
static void ***blocks;
static pthread_barrier_t all_done;

NOINLINE static void *chain(long n, int level);

NOINLINE static void *left(long n, int level) { return chain(n, level); }
NOINLINE static void *right(long n, int level) { return chain(n, level); }

NOINLINE static void *chain(long n, int level)
{
	if (level == depth) {
		void *p = malloc(32);
		if (!p) {
			perror("scale: malloc");
			exit(10);
		}
		memset(p, 1, 32);
		return p;
	}
	return (n >> level & 1) ? right(n, level + 1) : left(n, level + 1);
}

static void *worker(void *arg)
{
	long k = (long)arg;
	for (long i = 0; i < per_thread; i++)
		blocks[k][i] = chain(k * per_thread + i, 0);
	pthread_barrier_wait(&all_done);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: scale BLOCKS DEPTH THREADS\n");
		return 2;
	}
	long total = atol(argv[1]);
	depth = atoi(argv[2]);
	int threads = atoi(argv[3]);
	int n = threads > 0 ? threads : 1;
	per_thread = total / n;
	blocks = calloc((size_t)n, sizeof(*blocks));
	for (int k = 0; k < n; k++)
		blocks[k] = calloc((size_t)per_thread, sizeof(void *));
	if (threads == 0) {
		pthread_barrier_init(&all_done, NULL, 1);
		worker(0);
	} else {
		pthread_t *t = calloc((size_t)threads, sizeof(*t));
		pthread_barrier_init(&all_done, NULL, (unsigned)threads + 1);
		for (long k = 0; k < threads; k++)
			pthread_create(&t[k], NULL, worker, (void *)k);
		pthread_barrier_wait(&all_done);
		for (int k = 0; k < threads; k++)
			pthread_join(t[k], NULL);
	}
	printf("done %ld\n", per_thread * n);
	for (int k = 0; k < n; k++) {
		for (long i = 0; i < per_thread; i++)
			free(blocks[k][i]);
		free(blocks[k]);
	}
	free(blocks);
	return 0;
}
