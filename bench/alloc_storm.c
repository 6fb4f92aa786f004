/*
 * An allocation storm: PAIRS malloc/free pairs of 16..512 bytes with 10,000 blocks live,
 * sizes from a fixed xorshift sequence (the same run every time): each pair is one malloc
 * and one free of a real block (no free(NULL)). With THREADS > 1 the
 * pairs and the live blocks are split evenly between that many threads.
 * Usage: alloc_storm [PAIRS [THREADS]]   (default 2,000,000 pairs, 1 thread)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define LIVE 10000

struct storm {
	long pairs;
	int live;
	uint32_t seed;
};

static void *storm_run(void *arg)
{
	struct storm *s = arg;
	void **slot = calloc((size_t)s->live, sizeof(*slot));
	uint32_t x = s->seed;
	if (!slot)
		exit(10);
	for (long i = 0; i < s->pairs; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		size_t k = (size_t)(i % s->live);
		if (i >= s->live)
			free(slot[k]);
		char *p = malloc(16 + x % 497);
		if (!p)
			exit(10);
		p[0] = (char)i;
		slot[k] = p;
	}
	for (long k = 0; k < s->live && k < s->pairs; k++)
		free(slot[k]);
	free(slot);
	return NULL;
}

int main(int argc, char **argv)
{
	long pairs = argc > 1 ? atol(argv[1]) : 2000000;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	if (pairs < 1 || threads < 1 || threads > 64) {
		fprintf(stderr, "usage: alloc_storm [PAIRS [THREADS]]\n");
		return 2;
	}
	struct storm s[64];
	pthread_t t[64];
	for (int i = 0; i < threads; i++) {
		s[i].pairs = pairs / threads + (i < pairs % threads);
		s[i].live = LIVE / threads;
		s[i].seed = 2463534242u + (uint32_t)i;
	}
	if (threads == 1) {
		storm_run(&s[0]);
		return 0;
	}
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, storm_run, &s[i])) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}
