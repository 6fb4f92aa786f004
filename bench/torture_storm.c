/*
 * Torture target: a malloc/free storm on 8 threads, in batches of 500 pairs of 16..512 bytes
 * with 512 blocks live per thread and a 2 ms sleep between batches (a traced batch takes
 * longer than that: the threads are in the malloc family most of the time a tracer is there).
 * Each block is marked at both ends when allocated and checked when freed; a thread's checksum
 * depends only on how many batches it ran, so that a replay of the same counts reproduces it.
 * Usage: torture_storm [--int] [--replay B0,...,B7]   (bench/torture.h says the rest)
 */
#include <pthread.h>

#include "torture.h"

#define THREADS 8
#define LIVE 512
#define BATCH 500

struct storm {
	int id;
	long batches, pairs;
	uint32_t x;
	uint64_t sum;
	unsigned char *slot[LIVE];
	size_t size[LIVE];
};

static struct storm storms[THREADS];

static void storm_init(struct storm *s, int id)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->x = 2463534242u + (uint32_t)id * 7919u;
}

static void storm_free(struct storm *s, int k)
{
	unsigned char *p = s->slot[k];
	s->sum = torture_mix(s->sum ^ p[0] ^ ((uint64_t)p[s->size[k] - 1] << 8) ^ ((uint64_t)s->size[k] << 16));
	free(p);
	s->slot[k] = NULL;
}

static void storm_batch(struct storm *s)
{
	for (int j = 0; j < BATCH; j++) {
		s->x ^= s->x << 13;
		s->x ^= s->x >> 17;
		s->x ^= s->x << 5;
		int k = (int)(s->pairs % LIVE);
		if (s->slot[k])
			storm_free(s, k);
		size_t size = 16 + s->x % 497;
		unsigned char *p = malloc(size);
		if (!p)
			exit(10);
		p[0] = p[size - 1] = (unsigned char)(s->x >> 24);
		s->slot[k] = p;
		s->size[k] = size;
		s->pairs++;
	}
	s->batches++;
}

static void storm_end(struct storm *s)
{
	for (int k = 0; k < LIVE; k++)
		if (s->slot[k])
			storm_free(s, k);
}

static void *storm_thread(void *arg)
{
	struct storm *s = arg;
	while (!torture_stop) {
		storm_batch(s);
		torture_sleep_us(2000);
	}
	storm_end(s);
	return NULL;
}

int main(int argc, char **argv)
{
	long counts[THREADS];
	uint64_t sum = 0;
	int replay = torture_setup(argc, argv, "torture_storm") >= 0;
	for (int i = 0; i < THREADS; i++)
		storm_init(&storms[i], i);
	if (replay) {
		for (int i = 0; i < THREADS; i++) {
			for (long n = torture_count(i); storms[i].batches < n;)
				storm_batch(&storms[i]);
			storm_end(&storms[i]);
		}
	} else {
		pthread_t t[THREADS];
		for (int i = 0; i < THREADS; i++)
			if (pthread_create(&t[i], NULL, storm_thread, &storms[i])) {
				perror("torture_storm: pthread_create");
				return 1;
			}
		torture_ready();
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
	}
	for (int i = 0; i < THREADS; i++) {
		counts[i] = storms[i].batches;
		sum += storms[i].sum;
	}
	torture_print("torture_storm", counts, THREADS, sum);
	return 0;
}
