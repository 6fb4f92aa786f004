/*
 * Torture target: forks in a loop. Each child does one unit of allocating work, sends its
 * checksum up a pipe and exits; the parent does a unit of its own meanwhile, then reads the
 * child's checksum and reaps it. A child that dies of a signal (an int3 left in its copy of the
 * code is a SIGTRAP) ends the parent with status 3; one killed by SIGINT (Ctrl-C reached it
 * first) ends the parent by SIGINT as well, as if the parent had been reached first.
 * Usage: torture_forks [--int] [--replay FORKS]   (bench/torture.h says the rest)
 */
#include <sys/wait.h>

#include "torture.h"

#define PARENT_STREAM 10
#define CHILD_STREAM 11

static void child(int fd, long i)
{
	uint64_t h = torture_unit(CHILD_STREAM, (uint64_t)i);
	_exit(write(fd, &h, sizeof(h)) == (ssize_t)sizeof(h) ? 0 : 4);
}

int main(int argc, char **argv)
{
	uint64_t sum = 0;
	long forks = 0;
	if (torture_setup(argc, argv, "torture_forks") >= 0) {
		for (long n = torture_count(0); forks < n; forks++)
			sum += torture_unit(PARENT_STREAM, (uint64_t)forks) + torture_unit(CHILD_STREAM, (uint64_t)forks);
		torture_print("torture_forks", &forks, 1, sum);
		return 0;
	}
	torture_ready();
	while (!torture_stop) {
		int fd[2];
		if (pipe(fd)) {
			perror("torture_forks: pipe");
			return 1;
		}
		pid_t pid = fork();
		if (pid < 0) {
			close(fd[0]);
			close(fd[1]);
			if (errno == EAGAIN || errno == EINTR) {
				torture_sleep_us(1000);
				continue;
			}
			perror("torture_forks: fork");
			return 1;
		}
		if (pid == 0) {
			close(fd[0]);
			child(fd[1], forks);
		}
		close(fd[1]);
		uint64_t mine = torture_unit(PARENT_STREAM, (uint64_t)forks), h = 0;
		ssize_t got;
		while ((got = read(fd[0], &h, sizeof(h))) < 0 && errno == EINTR)
			;
		close(fd[0]);
		int st;
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR) {
				perror("torture_forks: waitpid");
				return 1;
			}
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGINT && !torture_int) {
			signal(SIGINT, SIG_DFL);
			raise(SIGINT);
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) || got != (ssize_t)sizeof(h)) {
			if (WIFSIGNALED(st))
				fprintf(stderr, "torture_forks: child %d (fork %ld) died of signal %d\n", (int)pid, forks,
					WTERMSIG(st));
			else
				fprintf(stderr, "torture_forks: child %d (fork %ld) exited %d, sent %zd bytes\n", (int)pid,
					forks, WEXITSTATUS(st), got);
			return 3;
		}
		sum += mine + h;
		forks++;
		torture_sleep_us(200);
	}
	torture_print("torture_forks", &forks, 1, sum);
	return 0;
}
