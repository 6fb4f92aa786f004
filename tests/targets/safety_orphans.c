/*
 * A main process that exits while the children it forked still run: `safety_orphans`.
 *
 * It prints "ready". On the line "go" on stdin it forks a keeper, which forks WORKERS
 * workers and waits for them; each worker mallocs, writes, checks and frees blocks
 * (worker_unit) until its stdin ends, then exits 30 + its number (40 + it, if a block read
 * back wrong). The main process prints "forked" once the workers run. On the line "exit" it
 * prints "main exits" and exits 4, leaving keeper and workers running. The keeper prints
 * "worker I exited S" (or "worker I killed by signal N") for each and "keeper done", and
 * exits 0. The keeper's and the workers' pids go to stderr ("keeper N", "worker I N"), so
 * that stdout is the same in every run, traced or not.
 */
#include <poll.h>
#include <sys/wait.h>
#include <time.h>

#include "target.h"

#define WORKERS 3

NOINLINE static int worker_unit(unsigned seed)
{
	static const size_t sizes[] = { 40, 700, 6000, 180 * 1024 };
	return blocks_round(sizes, sizeof(sizes) / sizeof(sizes[0]), seed);
}

/* Allocates until stdin is closed by its writer (never reads it: the main process does). */
static void worker(int i)
{
	int bad = 0;
	struct timespec ts = { 0, 500 * 1000 };
	for (unsigned k = 0;; k++) {
		bad += worker_unit(k);
		struct pollfd pfd = { .fd = 0, .events = POLLIN };
		if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP))
			break;
		nanosleep(&ts, NULL);
	}
	_exit((bad ? 40 : 30) + i);
}

static void keeper(int ready_fd)
{
	pid_t pids[WORKERS];
	for (int i = 0; i < WORKERS; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			_exit(10);
		}
		if (pids[i] == 0) {
			close(ready_fd);
			worker(i + 1);
		}
		fprintf(stderr, "worker %d %d\n", i + 1, (int)pids[i]);
	}
	close(ready_fd);
	for (int i = 0; i < WORKERS; i++) {
		int status;
		if (waitpid(pids[i], &status, 0) != pids[i]) {
			perror("waitpid");
			_exit(10);
		}
		if (WIFEXITED(status))
			printf("worker %d exited %d\n", i + 1, WEXITSTATUS(status));
		else
			printf("worker %d killed by signal %d\n", i + 1, WTERMSIG(status));
	}
	printf("keeper done\n");
	fflush(stdout);
	_exit(0);
}

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(line, "go\n")) {
			int ready[2];
			if (pipe(ready))
				return 10;
			pid_t pid = fork();
			if (pid < 0)
				return 10;
			if (pid == 0) {
				close(ready[0]);
				keeper(ready[1]);
			}
			fprintf(stderr, "keeper %d\n", (int)pid);
			close(ready[1]);
			char c;
			while (read(ready[0], &c, 1) > 0) /* end of file once every worker runs */
				;
			close(ready[0]);
			printf("forked\n");
		} else if (!strcmp(line, "exit\n")) {
			printf("main exits\n");
			return 4;
		}
		fflush(stdout);
	}
	return 0;
}
