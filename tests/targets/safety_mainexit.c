/*
 * A process whose main thread exits before the others: `safety_mainexit`.
 *
 * It starts WORKERS threads that malloc, write, check and free blocks in a loop
 * (worker_unit), and a control thread that reads commands on stdin, then prints "ready".
 * Commands:
 *   mainexit  the main thread prints "main exits" and calls pthread_exit; the control
 *             thread waits until it is a zombie, then prints "main exited"
 *   dlopen    the control thread dlopens libheapdl.so (from beside this program), makes and
 *             frees its blocks and some of its own, prints "dlopened"
 * When stdin ends the workers stop; the control thread prints "workers 4 errors N"
 * (blocks that read back wrong) and exits 3. Every line it prints is the same traced or not.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "target.h"

#define WORKERS 4

static volatile int stop;
static int errors; /* atomically updated */
static sem_t main_may_exit;
static char libpath[PATH_MAX];

NOINLINE static int worker_unit(unsigned seed)
{
	static const size_t sizes[] = { 32, 500, 3000, 200 * 1024 };
	return blocks_round(sizes, sizeof(sizes) / sizeof(sizes[0]), seed);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(long)arg * 1000;
	struct timespec ts = { 0, 200 * 1000 };
	while (!stop) {
		int bad = worker_unit(seed++);
		if (bad)
			__atomic_add_fetch(&errors, bad, __ATOMIC_SEQ_CST);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* The state letter of thread tid of this process, or 0. */
static char thread_state(pid_t tid)
{
	char path[64], line[128];
	char state = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)getpid(), (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "State:", 6))
			sscanf(line + 6, " %c", &state);
	fclose(f);
	return state;
}

static void wait_main_zombie(void)
{
	for (int i = 0; i < 20000; i++) {
		if (thread_state(getpid()) == 'Z')
			return;
		usleep(1000);
	}
	fprintf(stderr, "safety_mainexit: the main thread did not end\n");
	exit(11);
}

NOINLINE static void use_library(void)
{
	void *h = dlopen(libpath, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(12);
	}
	void (*hold)(void) = (void (*)(void))dlsym(h, "heapdl_hold");
	void (*release)(void) = (void (*)(void))dlsym(h, "heapdl_release");
	if (!hold || !release) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		exit(12);
	}
	hold();
	release();
	int bad = 0;
	for (unsigned k = 0; k < 50; k++)
		bad += worker_unit(k);
	__atomic_add_fetch(&errors, bad, __ATOMIC_SEQ_CST);
}

static void *control(void *arg)
{
	pthread_t *workers = arg;
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "mainexit\n")) {
			sem_post(&main_may_exit);
			wait_main_zombie();
			printf("main exited\n");
		} else if (!strcmp(line, "dlopen\n")) {
			use_library();
			printf("dlopened\n");
		}
		fflush(stdout);
	}
	stop = 1;
	for (int i = 0; i < WORKERS; i++)
		pthread_join(workers[i], NULL);
	printf("workers %d errors %d\n", WORKERS, errors);
	exit(3);
}

int main(void)
{
	/* Found now: /proc/self/exe of a process whose main thread has ended cannot be read. */
	ssize_t n = readlink("/proc/self/exe", libpath, sizeof(libpath) - 32);
	if (n < 0) {
		perror("readlink");
		return 1;
	}
	libpath[n] = 0;
	char *slash = strrchr(libpath, '/');
	strcpy(slash ? slash + 1 : libpath, "libheapdl.so");

	static pthread_t workers[WORKERS];
	pthread_t ctl;
	sem_init(&main_may_exit, 0, 0);
	for (long i = 0; i < WORKERS; i++)
		if (pthread_create(&workers[i], NULL, worker, (void *)i))
			return 10;
	if (pthread_create(&ctl, NULL, control, workers))
		return 10;
	printf("ready\n");
	fflush(stdout);
	while (sem_wait(&main_may_exit))
		;
	printf("main exits\n");
	fflush(stdout);
	pthread_exit(NULL);
}
