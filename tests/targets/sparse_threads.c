/*
 * The seed scenario, and ptfil's demo: 4 threads each map 128 MiB and write
 * 1 MiB of it (as OpenBLAS's per-thread buffers do); then main maps 50 MiB,
 * writes all of it, holds it, and unmaps it. Resident peak: 54 MiB; reserved:
 * over 562 MiB.
 */
#include <pthread.h>

#include "target.h"

#define THREADS 4

static void *buffers[THREADS];

NOINLINE static void *thread_buffer_alloc(void)
{
	void *p = map_anon(128 * MiB);
	touch(p, 1 * MiB);
	return p;
}

NOINLINE static void *worker(void *arg)
{
	long i = (long)arg;
	buffers[i] = thread_buffer_alloc();
	keep(buffers[i]);
	return NULL;
}

NOINLINE static void *load_dataset(void)
{
	void *p = map_anon(50 * MiB);
	touch(p, 50 * MiB);
	return p;
}

NOINLINE static void process_dataset(void *p)
{
	keep(p);
	usleep(50000); /* hold it a moment */
	munmap(p, 50 * MiB);
}

int main(void)
{
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i)) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	process_dataset(load_dataset());
	printf("done: %d threads x 128 MiB reserved, 1 MiB touched; 50 MiB dataset\n", THREADS);
	return 0;
}
