/*
 * Runs a command and measures it from a process small enough not to show: `timed OUT CMD [ARGS...]`
 * writes "SECONDS MAXRSS_BYTES PID" to the file OUT: the command's wall time (fork to reaped), its
 * ru_maxrss and its pid. A command forked straight from bench/run (Python) would report at least the
 * runner's own size: the kernel keeps the largest RSS a process had, before its exec too.
 * SIGTERM to timed kills the command (SIGKILL) and still reaps it, so that its CPU time reaches
 * timed's parent. Exits with the command's status, or 128+N when it was killed by signal N; 127 if
 * it could not run.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t child;

static void on_term(int sig)
{
	(void)sig;
	if (child > 0)
		kill(child, SIGKILL);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: timed OUT CMD [ARGS...]\n");
		return 2;
	}
	struct timespec t0, t1;
	struct sigaction sa = { .sa_handler = on_term };
	sigset_t term, old;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, &old); /* no SIGTERM between fork and knowing the child */
	sigaction(SIGTERM, &sa, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("timed: fork");
		return 127;
	}
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[2], argv + 2);
		fprintf(stderr, "timed: cannot run %s: %m\n", argv[2]);
		_exit(127);
	}
	child = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR) {
			perror("timed: wait4");
			return 127;
		}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	FILE *f = fopen(argv[1], "w");
	if (!f || fprintf(f, "%.6f %ld %d\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
			  ru.ru_maxrss * 1024L, (int)pid) < 0 || fclose(f)) {
		perror("timed: cannot write the result");
		return 127;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
