/*
 * Fork and exec: the parent mallocs and writes 16 MiB (held throughout), then N times forks a
 * child that execs PROGRAM (default /bin/true) and waits for it. Under ptfil (without
 * --follow-forks) each child is cleaned of breakpoints at its first stop and stops only at its
 * mapping calls; the main snapshot holds the parent's peak: about 16 MiB.
 * Usage: fork_exec [N [PROGRAM]]   (default 200 children of /bin/true)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HELD (16UL << 20)

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200;
	char *prog = argc > 2 ? argv[2] : "/bin/true";
	if (n < 1) {
		fprintf(stderr, "usage: fork_exec [N [PROGRAM]]\n");
		return 2;
	}
	char *held = malloc(HELD);
	if (!held) {
		perror("fork_exec: malloc");
		return 10;
	}
	memset(held, 1, HELD);
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork_exec: fork");
			return 1;
		}
		if (pid == 0) {
			char *args[] = { prog, NULL };
			execv(prog, args);
			_exit(127);
		}
		int status;
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR) {
				perror("fork_exec: waitpid");
				return 1;
			}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "fork_exec: child %ld failed (status %#x)\n", i, status);
			return 1;
		}
	}
	__asm__ volatile("" : : "r"(held) : "memory");
	free(held);
	return 0;
}
