/*
 * Torture target: short-lived detached threads, started one after another with at most 8
 * alive at once; each does one unit of allocating work, adds its checksum and exits.
 * Usage: torture_threads [--int] [--replay THREADS]   (bench/torture.h says the rest)
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "torture.h"

#define STREAM 20
#define ALIVE 8

static sem_t slots;
static _Atomic uint64_t sum;

static void *short_thread(void *arg)
{
	atomic_fetch_add(&sum, torture_unit(STREAM, (uint64_t)(uintptr_t)arg));
	sem_post(&slots);
	return NULL;
}

int main(int argc, char **argv)
{
	long started = 0;
	if (torture_setup(argc, argv, "torture_threads") >= 0) {
		uint64_t s = 0;
		for (long n = torture_count(0); started < n; started++)
			s += torture_unit(STREAM, (uint64_t)started);
		torture_print("torture_threads", &started, 1, s);
		return 0;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	sem_init(&slots, 0, ALIVE);
	torture_ready();
	while (!torture_stop) {
		if (sem_wait(&slots))
			continue; /* EINTR: look at the finish request again */
		pthread_t t;
		int e = pthread_create(&t, &attr, short_thread, (void *)(uintptr_t)started);
		if (e) {
			sem_post(&slots);
			if (e == EAGAIN) {
				torture_sleep_us(1000);
				continue;
			}
			fprintf(stderr, "torture_threads: pthread_create: %s\n", strerror(e));
			return 1;
		}
		started++;
		torture_sleep_us(200);
	}
	/* Every thread started has added its checksum once all the slots are back. */
	for (int k = 0; k < ALIVE; k++)
		while (sem_wait(&slots))
			;
	torture_print("torture_threads", &started, 1, atomic_load(&sum));
	return 0;
}
