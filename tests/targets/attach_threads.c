/*
 * A multi-threaded program to attach to, driven by lines on stdin.
 *
 * before_attach_alloc mallocs and writes 24 MiB, held to the end; the program
 * prints "ready" and waits for the line "go". Then it starts three threads:
 * worker_one, worker_two and worker_three each malloc and write 4, 8 and
 * 12 MiB in 1 MiB blocks (above glibc's mmap threshold: each block is its own
 * mapping, and for ptfil a large block charged by its resident pages). Once
 * all three hold their blocks the main thread prints "holding" (peak: 24 MiB
 * + 24 MiB) and waits for the line "release"; then the workers free their
 * blocks and exit, the main thread joins them, prints "done" and exits 0.
 */
#include <pthread.h>

#include "target.h"

#define BEFORE_SIZE (24 * MiB)

static unsigned char *before_buf;
static void *held[3][12];
static pthread_barrier_t holding, released;

static void *check(void *p)
{
	if (!p) {
		perror("attach_threads: out of memory");
		exit(10);
	}
	return p;
}

NOINLINE static void before_attach_alloc(void)
{
	before_buf = check(malloc(BEFORE_SIZE));
	memset(before_buf, 0x5a, BEFORE_SIZE);
}

/* Each worker: n blocks of 1 MiB, written, held until the main thread reads "release". */
static void hold_and_release(int k, int n)
{
	pthread_barrier_wait(&holding);
	pthread_barrier_wait(&released);
	for (int i = 0; i < n; i++)
		free(held[k][i]);
}

NOINLINE static void *worker_one(void *arg)
{
	(void)arg;
	for (int i = 0; i < 4; i++) {
		held[0][i] = check(malloc(MiB));
		memset(held[0][i], 1, MiB);
	}
	hold_and_release(0, 4);
	return NULL;
}

NOINLINE static void *worker_two(void *arg)
{
	(void)arg;
	for (int i = 0; i < 8; i++) {
		held[1][i] = check(malloc(MiB));
		memset(held[1][i], 2, MiB);
	}
	hold_and_release(1, 8);
	return NULL;
}

NOINLINE static void *worker_three(void *arg)
{
	(void)arg;
	for (int i = 0; i < 12; i++) {
		held[2][i] = check(malloc(MiB));
		memset(held[2][i], 3, MiB);
	}
	hold_and_release(2, 12);
	return NULL;
}

int main(void)
{
	void *(*const workers[3])(void *) = { worker_one, worker_two, worker_three };
	pthread_t t[3];

	before_attach_alloc();
	printf("ready\n");
	fflush(stdout);
	expect_line("go");

	pthread_barrier_init(&holding, NULL, 4);
	pthread_barrier_init(&released, NULL, 4);
	for (int k = 0; k < 3; k++)
		if (pthread_create(&t[k], NULL, workers[k], NULL)) {
			perror("pthread_create");
			return 1;
		}
	pthread_barrier_wait(&holding);
	printf("holding\n");
	fflush(stdout);
	expect_line("release");
	pthread_barrier_wait(&released);
	for (int k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	keep(before_buf);
	free(before_buf);
	printf("done\n");
	return 0;
}
