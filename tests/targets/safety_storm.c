/*
 * Eight threads that malloc and free without pause, to attach to and detach from many times:
 * `safety_storm`. It prints "ready" once every thread runs; when stdin ends the threads
 * stop, and it prints "threads 8 errors N" (blocks that read back wrong) and exits 6.
 * Every line it prints is the same traced or not.
 */
#include <pthread.h>

#include "target.h"

#define THREADS 8

static volatile int stop;
static int started, errors; /* atomically updated */

/* A few blocks of small and middle sizes, filled, read back and freed; returns the bad ones. */
NOINLINE static int storm_unit(unsigned seed)
{
	unsigned char *b[6];
	size_t sizes[6];
	int bad = 0;
	for (int i = 0; i < 6; i++) {
		sizes[i] = 16 + (seed * 2654435761u >> (i * 4)) % 3000;
		b[i] = malloc(sizes[i]);
		if (!b[i])
			exit(10);
		b[i][0] = b[i][sizes[i] - 1] = (unsigned char)(seed + i);
	}
	for (int i = 0; i < 6; i++) {
		if (b[i][0] != (unsigned char)(seed + i) || b[i][sizes[i] - 1] != (unsigned char)(seed + i))
			bad++;
		free(b[i]);
	}
	return bad;
}

static void *storm(void *arg)
{
	unsigned seed = (unsigned)(long)arg * 100000;
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	while (!stop) {
		int bad = storm_unit(seed++);
		if (bad)
			__atomic_add_fetch(&errors, bad, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, storm, (void *)i))
			return 10;
	while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < THREADS)
		usleep(1000);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin))
		;
	stop = 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("threads %d errors %d\n", THREADS, errors);
	return 6;
}
