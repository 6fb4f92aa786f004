/*
 * A signal handler on an alternate stack that lies above the thread's stack, calling malloc
 * and free while the thread is itself in malloc or free: `safety_altstack`.
 *
 * One thread runs on a stack this program maps, with its sigaltstack mapped above it; a
 * timer raises SIGALRM every 150 us (blocked in every other thread, so it interrupts this
 * one) for about two seconds, while the thread mallocs and frees 24-byte blocks without
 * pause. The handler mallocs and frees 200-byte blocks: another tcache bin than the loop's,
 * filled before the timer starts, so glibc's allocator is never re-entered on one list or
 * lock. It prints "handler ran" (if the timer ever fired), "errors N" (blocks that read
 * back wrong, handlers that ran on another stack) and exits 4.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include "target.h"

#define STACK_SIZE (1024 * 1024)
#define ALT_SIZE (64 * 1024)

static unsigned char *region; /* [thread stack][gap][alternate stack] */
static volatile sig_atomic_t handler_runs, handler_errors;

static void on_alarm(int sig)
{
	(void)sig;
	unsigned char here;
	unsigned char *alt = region + 2 * STACK_SIZE;
	if (&here < alt || &here >= alt + ALT_SIZE)
		handler_errors++;
	unsigned char *p = malloc(200);
	if (!p) {
		handler_errors++;
		return;
	}
	memset(p, 0x5a, 200);
	if (p[0] != 0x5a || p[199] != 0x5a)
		handler_errors++;
	free(p);
	handler_runs++;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

NOINLINE static int loop_unit(unsigned seed)
{
	unsigned char *p = malloc(24);
	if (!p)
		exit(10);
	memset(p, (int)seed, 24);
	int bad = p[0] != (unsigned char)seed || p[23] != (unsigned char)seed;
	free(p);
	return bad;
}

static void *run(void *arg)
{
	(void)arg;
	stack_t ss = { .ss_sp = region + 2 * STACK_SIZE, .ss_size = ALT_SIZE, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL)) {
		perror("sigaltstack");
		exit(10);
	}
	free(malloc(200)); /* the handler's tcache bin holds a block from now on */
	free(malloc(24));

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);

	struct itimerval it = { { 0, 150 }, { 0, 150 } };
	setitimer(ITIMER_REAL, &it, NULL);
	long errors = 0;
	double end = now() + 2.0;
	for (unsigned k = 0; now() < end; k++)
		errors += loop_unit(k);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	return (void *)errors;
}

int main(void)
{
	/* The thread's stack at the bottom of the region, its alternate stack a stack's length above its top. */
	region = map_anon(2 * STACK_SIZE + ALT_SIZE);
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);

	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, region, STACK_SIZE);
	pthread_t t;
	if (pthread_create(&t, &attr, run, NULL))
		return 10;
	void *errors;
	pthread_join(t, &errors);
	printf("%s\n", handler_runs ? "handler ran" : "handler never ran");
	printf("errors %ld\n", (long)errors + handler_errors);
	return 4;
}
