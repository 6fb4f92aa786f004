/*
 * A program whose observable behaviour must not change under ptfil:
 *   exit N      maps and writes 8 MiB in make_work(), exits with status N
 *   segv        maps and writes 8 MiB in make_work(), then dereferences NULL
 *   signals     prints its pid, then for each "wait" line on stdin waits for one
 *               more SIGUSR1 and prints "handled K"; then raises SIGUSR1 three
 *               times itself; on "quit" prints the total and exits
 *   sigint      counts SIGINT; prints "ready", waits for "quit" on stdin, prints the count
 *   echo        copies stdin to stdout, then prints a byte count and checksum
 *   sleep       maps and writes 8 MiB in make_work(), prints "ready", sleeps 60 s (default signal actions)
 */
#include <signal.h>
#include <stdint.h>

#include "target.h"

static volatile sig_atomic_t handled;
static void on_sig(int sig) { (void)sig; handled++; }

NOINLINE static void *make_work(void)
{
	void *p = map_anon(8 * MiB);
	touch(p, 8 * MiB);
	return p;
}

static char *read_line(char *buf, size_t n)
{
	if (!fgets(buf, (int)n, stdin))
		return NULL;
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

static int signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	/* Blocked outside sigsuspend, so a signal that comes early waits instead of being lost. */
	sigprocmask(SIG_BLOCK, &block, &old);
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	int seen = 0;
	while (read_line(line, sizeof(line))) {
		if (!strcmp(line, "wait")) {
			while (handled == seen)
				sigsuspend(&old);
			seen = handled;
			printf("handled %d\n", seen);
			fflush(stdout);
		} else if (!strcmp(line, "quit")) {
			break;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	int before = handled;
	for (int i = 0; i < 3; i++)
		raise(SIGUSR1);
	printf("raised 3, handled %d\n", handled - before);
	printf("total %d\n", (int)handled);
	return 0;
}

static int sigint(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: the read below is interrupted */
	printf("ready\n");
	fflush(stdout);
	char line[64];
	for (;;) {
		if (read_line(line, sizeof(line))) {
			if (!strcmp(line, "quit"))
				break;
		} else if (!ferror(stdin) || handled == 0) {
			break;
		} else {
			clearerr(stdin);
		}
	}
	printf("sigint %d\n", (int)handled);
	return 0;
}

static int echo(void)
{
	char buf[4096];
	size_t n, total = 0;
	unsigned long sum = 0;
	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
		fwrite(buf, 1, n, stdout);
		for (size_t i = 0; i < n; i++)
			sum = sum * 31 + (unsigned char)buf[i];
		total += n;
	}
	printf("\nbytes %zu checksum %lu\n", total, sum);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "exit") && argc > 2) {
		keep(make_work());
		printf("exiting with %d\n", atoi(argv[2]));
		return atoi(argv[2]);
	}
	if (!strcmp(argv[1], "segv")) {
		keep(make_work());
		printf("about to crash\n");
		fflush(stdout);
		volatile int *np = (volatile int *)(uintptr_t)(argc - argc);
		*np = 1;
		return 0;
	}
	if (!strcmp(argv[1], "signals"))
		return signals();
	if (!strcmp(argv[1], "sigint"))
		return sigint();
	if (!strcmp(argv[1], "echo"))
		return echo();
	if (!strcmp(argv[1], "sleep")) {
		keep(make_work());
		printf("ready\n");
		fflush(stdout);
		sleep(60);
		return 0;
	}
	return 2;
}
