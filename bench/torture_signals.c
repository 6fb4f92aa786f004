/*
 * Torture target: signals at 1 kHz (setitimer's SIGALRM) into a worker thread whose handler
 * runs on an alternate stack mapped above the thread's own stack (SA_ONSTACK) and itself
 * allocates and frees. The worker does its real work with SIGALRM blocked and takes the signal
 * only while it rests (1 ms every 4 units) and around calls into the malloc family that hold no
 * allocator state (free(NULL), a malloc too large to succeed): so the handler's malloc runs
 * while another malloc is in flight, as a tracer sees it, without the reentrancy a real program
 * must not have. A handler whose number is a multiple of 50 and that interrupted such a call
 * leaves by siglongjmp, abandoning it.
 * Usage: torture_signals [--int] [--replay UNITS,SIGNALS]   (bench/torture.h says the rest)
 */
#include <pthread.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/time.h>

#include "torture.h"

#define WORK_STREAM 30
#define SIGNAL_STREAM 31
#define STACK_SIZE (1024 * 1024)
#define ALT_SIZE (64 * 1024)
#define SAFE_CALLS 16
#define JUMP_EVERY 50

static sigjmp_buf back;
static volatile sig_atomic_t in_safe;
static volatile long signals, jumps, off_alt;
static volatile uint64_t signal_sum;
static long units;
static uint64_t unit_sum;
static char *alt_lo, *alt_hi;
/* Volatile so that the compiler keeps the calls: free(NULL) and an impossible malloc. */
static void *volatile nothing;
static volatile size_t impossible = SIZE_MAX - 4096;

static void on_alarm(int sig)
{
	(void)sig;
	int e = errno;
	char here;
	if (&here < alt_lo || &here >= alt_hi)
		off_alt++;
	signal_sum += torture_unit(SIGNAL_STREAM, (uint64_t)signals);
	signals++;
	errno = e;
	if (in_safe && signals % JUMP_EVERY == 0) {
		jumps++;
		siglongjmp(back, 1);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	stack_t ss = { .ss_sp = alt_lo, .ss_size = ALT_SIZE, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL)) {
		perror("torture_signals: sigaltstack");
		exit(1);
	}
	while (!torture_stop) {
		unit_sum += torture_unit(WORK_STREAM, (uint64_t)units);
		units++;
		/* A handler that jumps comes back here, with SIGALRM blocked again (the mask saved). */
		sigsetjmp(back, 1);
		in_safe = 1;
		pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
		for (int k = 0; k < SAFE_CALLS; k++) {
			free(nothing);
			void *q = malloc(impossible);
			if (q)
				free(q);
		}
		pthread_sigmask(SIG_BLOCK, &alrm, NULL);
		in_safe = 0;
		if (units % 4 == 0) {
			/* A rest, with the signal open: here the handler interrupts no allocator call. */
			pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
			torture_sleep_us(1000);
			pthread_sigmask(SIG_BLOCK, &alrm, NULL);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (torture_setup(argc, argv, "torture_signals") >= 0) {
		long counts[2] = { torture_count(0), torture_count(1) };
		uint64_t sum = 0;
		for (long i = 0; i < counts[0]; i++)
			sum += torture_unit(WORK_STREAM, (uint64_t)i);
		for (long i = 0; i < counts[1]; i++)
			sum += torture_unit(SIGNAL_STREAM, (uint64_t)i);
		torture_print("torture_signals", counts, 2, sum);
		return 0;
	}
	/* One mapping: the worker's stack at its bottom, the alternate stack at its top, above it. */
	char *region = mmap(NULL, STACK_SIZE + 4096 + ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	if (region == MAP_FAILED) {
		perror("torture_signals: mmap");
		return 1;
	}
	mprotect(region + STACK_SIZE, 4096, PROT_NONE);
	alt_lo = region + STACK_SIZE + 4096;
	alt_hi = alt_lo + ALT_SIZE;

	/* The worker takes SIGALRM; the main thread takes the finish request. */
	sigset_t blocked, waiting;
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGALRM);
	sigaddset(&blocked, SIGTERM);
	if (torture_int)
		sigaddset(&blocked, SIGINT);
	pthread_sigmask(SIG_BLOCK, &blocked, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, region, STACK_SIZE);
	pthread_t t;
	if (pthread_create(&t, &attr, worker, NULL)) {
		perror("torture_signals: pthread_create");
		return 1;
	}
	struct itimerval every_ms = { { 0, 1000 }, { 0, 1000 } };
	setitimer(ITIMER_REAL, &every_ms, NULL);
	torture_ready();
	pthread_sigmask(SIG_SETMASK, NULL, &waiting);
	sigdelset(&waiting, SIGTERM);
	sigdelset(&waiting, SIGINT);
	while (!torture_stop)
		sigsuspend(&waiting);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	pthread_join(t, NULL);
	if (off_alt) {
		fprintf(stderr, "torture_signals: %ld handlers ran off the alternate stack\n", (long)off_alt);
		return 5;
	}
	long counts[2] = { units, signals };
	torture_print("torture_signals", counts, 2, unit_sum + signal_sum);
	return 0;
}
