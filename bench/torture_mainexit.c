/*
 * Torture target: the main thread starts 4 workers, then calls pthread_exit when it has a
 * SIGUSR1 (or after --main-ms MS), leaving a zombie leader behind; the workers go on allocating,
 * and the first of them also loads and unloads torture_lib.so every 32 units (a load whose
 * /proc/PID/maps a dead leader would read empty). The last worker to finish prints the summary
 * and exits 0. bench/torture sends the SIGUSR1 while ptfil is attached.
 * Usage: torture_mainexit [--main-ms MS] [--int] [--replay U0,U1,U2,U3,LOADS]
 *        (bench/torture.h says the rest)
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "torture.h"

#define WORKERS 4
#define STREAM 40
#define LOAD_EVERY 32

struct worker {
	int id;
	long units;
	uint64_t sum;
};

static struct worker workers[WORKERS];
static long loads;
static uint64_t load_sum;
static _Atomic int running = WORKERS;
static char lib[PATH_MAX];

/* Loads the library beside this program, runs unit i of its stream, unloads it. */
static uint64_t load_unit(long i)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "torture_mainexit: dlopen: %s\n", dlerror());
		exit(1);
	}
	uint64_t (*fn)(uint64_t) = (uint64_t (*)(uint64_t))dlsym(h, "torture_lib_work");
	if (!fn) {
		fprintf(stderr, "torture_mainexit: dlsym: %s\n", dlerror());
		exit(1);
	}
	uint64_t r = fn((uint64_t)i);
	dlclose(h);
	return r;
}

static void summary(void)
{
	long counts[WORKERS + 1];
	uint64_t sum = load_sum;
	for (int i = 0; i < WORKERS; i++) {
		counts[i] = workers[i].units;
		sum += workers[i].sum;
	}
	counts[WORKERS] = loads;
	torture_print("torture_mainexit", counts, WORKERS + 1, sum);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	while (!torture_stop) {
		w->sum += torture_unit(STREAM + (uint64_t)w->id, (uint64_t)w->units);
		w->units++;
		if (w->id == 0 && w->units % LOAD_EVERY == 0) {
			load_sum += load_unit(loads);
			loads++;
		}
		if (w->units % 8 == 0)
			torture_sleep_us(1000);
	}
	/* The last one out speaks for all: the others' counts are final once they have counted down. */
	if (atomic_fetch_sub(&running, 1) == 1) {
		summary();
		exit(0);
	}
	return NULL;
}

static void find_lib(void)
{
	ssize_t n = readlink("/proc/self/exe", lib, sizeof(lib) - 32);
	if (n < 0) {
		perror("torture_mainexit: readlink");
		exit(1);
	}
	lib[n] = 0;
	char *slash = strrchr(lib, '/');
	strcpy(slash ? slash + 1 : lib, "torture_lib.so");
}

static volatile sig_atomic_t leave_main;

static void on_usr1(int sig)
{
	(void)sig;
	leave_main = 1;
}

int main(int argc, char **argv)
{
	long main_ms = -1;
	if (argc > 2 && strcmp(argv[1], "--main-ms") == 0) {
		main_ms = atol(argv[2]);
		argv[2] = argv[0];
		argc -= 2;
		argv += 2;
	}
	int replay = torture_setup(argc, argv, "torture_mainexit [--main-ms MS]") >= 0;
	find_lib();
	for (int i = 0; i < WORKERS; i++)
		workers[i].id = i;
	if (replay) {
		for (int i = 0; i < WORKERS; i++)
			for (long n = torture_count(i); workers[i].units < n; workers[i].units++)
				workers[i].sum += torture_unit(STREAM + (uint64_t)i, (uint64_t)workers[i].units);
		for (long n = torture_count(WORKERS); loads < n; loads++)
			load_sum += load_unit(loads);
		summary();
		return 0;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	/* SIGUSR1 is for this thread alone: the workers start with it blocked. */
	sigset_t usr1, waiting;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &waiting);
	pthread_t t;
	for (int i = 0; i < WORKERS; i++)
		if (pthread_create(&t, NULL, work, &workers[i])) {
			perror("torture_mainexit: pthread_create");
			return 1;
		}
	torture_ready();
	if (main_ms >= 0) {
		torture_sleep_us(main_ms * 1000);
	} else {
		pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
		while (!leave_main && !torture_stop)
			sigsuspend(&waiting);
	}
	pthread_exit(NULL);
}
