/*
 * Children and threads that come and go while ptfil is attached: `safety_spawn MODE`.
 *
 * It prints "ready", then, by MODE:
 *   fork     for every line "fork" on stdin, forks one child that mallocs, writes, checks
 *            and frees blocks (child_work) and exits 21; the parent waits for it and prints
 *            "child exited 21" (or "child killed by signal N").
 *   threads  starts detached threads one after the other, never more than 4 alive, each of
 *            which mallocs, writes, checks and frees blocks (thread_work) and exits, until
 *            stdin ends.
 * When stdin ends it prints "errors N" (blocks that read back wrong: 0 unless something
 * disturbed it) and "done", and exits 5. Every line it prints is the same traced or not.
 */
#include <pthread.h>
#include <sys/wait.h>

#include "target.h"

#define MAX_ALIVE 4

static volatile int stop;
static int alive;  /* detached threads running, atomically updated */
static int errors; /* atomically updated */

/* Blocks of a few sizes (a large one is mmapped by glibc) filled with seed, read back, freed; returns the bad ones. */
NOINLINE static int blocks_work(unsigned seed)
{
	static const size_t sizes[] = { 24, 200, 1000, 4000, 300 * 1024 };
	return blocks_round(sizes, sizeof(sizes) / sizeof(sizes[0]), seed);
}

NOINLINE static void child_work(void)
{
	int bad = 0;
	for (unsigned k = 0; k < 20; k++)
		bad += blocks_work(k);
	_exit(bad ? 22 : 21);
}

static int fork_mode(void)
{
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (strcmp(line, "fork\n"))
			continue;
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 10;
		}
		if (pid == 0)
			child_work();
		int status;
		if (waitpid(pid, &status, 0) != pid) {
			perror("waitpid");
			return 10;
		}
		if (WIFEXITED(status))
			printf("child exited %d\n", WEXITSTATUS(status));
		else
			printf("child killed by signal %d\n", WTERMSIG(status));
		fflush(stdout);
	}
	return 0;
}

NOINLINE static void *thread_work(void *arg)
{
	int bad = 0;
	for (unsigned k = 0; k < 3; k++)
		bad += blocks_work((unsigned)(long)arg + k);
	__atomic_add_fetch(&errors, bad, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&alive, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *wait_for_eof(void *arg)
{
	(void)arg;
	char line[64];
	while (fgets(line, sizeof(line), stdin))
		;
	stop = 1;
	return NULL;
}

static int threads_mode(void)
{
	pthread_t reader;
	if (pthread_create(&reader, NULL, wait_for_eof, NULL))
		return 10;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (long n = 0; !stop; n++) {
		while (__atomic_load_n(&alive, __ATOMIC_SEQ_CST) >= MAX_ALIVE)
			usleep(100);
		__atomic_add_fetch(&alive, 1, __ATOMIC_SEQ_CST);
		pthread_t t;
		if (pthread_create(&t, &attr, thread_work, (void *)n)) {
			perror("pthread_create");
			return 10;
		}
	}
	while (__atomic_load_n(&alive, __ATOMIC_SEQ_CST))
		usleep(100);
	pthread_join(reader, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "fork") && strcmp(argv[1], "threads"))) {
		fprintf(stderr, "usage: safety_spawn fork|threads\n");
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	int rc = strcmp(argv[1], "fork") ? threads_mode() : fork_mode();
	if (rc)
		return rc;
	printf("errors %d\n", errors);
	printf("done\n");
	return 5;
}
