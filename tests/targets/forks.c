/*
 * A process tree for fork handling: `forks MODE`.
 *
 * Every mode but child-image first prints "forks MODE", then parent_alloc
 * mallocs and writes 10 MiB (held until the child has been waited for) and
 * starts one child; the parent waits for it and prints "child exited N" (or
 * "child killed by signal N"), then exits 0.
 *   fork        the child (fork) mallocs and writes 30 MiB in child_alloc,
 *               prints "child holds 30 MiB" and exits 0 holding it
 *   exec        the child (fork) execs this program in child-image mode
 *   spawn       posix_spawn of child-image (glibc: clone(CLONE_VM|CLONE_VFORK))
 *   vfork       vfork, then exec of child-image
 *   wait-fork   prints "ready", waits for a line on stdin, then does what fork does
 *   child-image exec_image_alloc mallocs and writes 20 MiB, the program
 *               prints "child image holds 20 MiB" and exits 3 holding it
 * The child's pid goes to stderr ("forks: child pid N"), never to stdout, so
 * that stdout is the same in every run, traced or not.
 */
#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>

#include "target.h"

extern char **environ;

static unsigned char *parent_buf, *child_buf, *image_buf;
static char self[4096];

static void *check(void *p)
{
	if (!p) {
		perror("forks: out of memory");
		exit(10);
	}
	return p;
}

NOINLINE static void parent_alloc(void)
{
	parent_buf = check(malloc(10 * MiB));
	memset(parent_buf, 0x11, 10 * MiB);
}

NOINLINE static void child_alloc(void)
{
	child_buf = check(malloc(30 * MiB));
	memset(child_buf, 0x22, 30 * MiB);
}

NOINLINE static void exec_image_alloc(void)
{
	image_buf = check(malloc(20 * MiB));
	memset(image_buf, 0x33, 20 * MiB);
}

static void exec_child_image(void)
{
	char *args[] = { self, "child-image", NULL };
	execv(self, args);
	perror("forks: cannot exec child image");
	_exit(127);
}

static pid_t start_child(const char *mode)
{
	pid_t pid;
	fflush(stdout); /* nothing buffered may be written twice, or out of order */
	if (!strcmp(mode, "fork") || !strcmp(mode, "exec")) {
		pid = fork();
		if (pid == 0) {
			if (!strcmp(mode, "exec"))
				exec_child_image();
			child_alloc();
			printf("child holds 30 MiB\n");
			exit(0);
		}
	} else if (!strcmp(mode, "vfork")) {
		pid = vfork();
		if (pid == 0)
			exec_child_image();
	} else {
		char *args[] = { self, "child-image", NULL };
		int err = posix_spawn(&pid, self, NULL, NULL, args, environ);
		if (err) {
			errno = err;
			perror("forks: posix_spawn");
			exit(1);
		}
	}
	if (pid < 0) {
		perror("forks: cannot start a child");
		exit(1);
	}
	fprintf(stderr, "forks: child pid %d\n", (int)pid);
	return pid;
}

static void wait_child(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("forks: waitpid");
			exit(1);
		}
	if (WIFEXITED(status))
		printf("child exited %d\n", WEXITSTATUS(status));
	else
		printf("child killed by signal %d\n", WTERMSIG(status));
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "fork", "exec", "spawn", "vfork", "wait-fork", "child-image" };
	const char *mode = argc == 2 ? argv[1] : "";
	int known = 0;
	for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++)
		known |= !strcmp(mode, modes[k]);
	if (!known) {
		fprintf(stderr, "usage: forks fork|exec|spawn|vfork|wait-fork|child-image\n");
		return 2;
	}
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		perror("forks: /proc/self/exe");
		return 1;
	}
	self[n] = 0;

	if (!strcmp(mode, "child-image")) {
		exec_image_alloc();
		printf("child image holds 20 MiB\n");
		return 3;
	}
	printf("forks %s\n", mode);
	if (!strcmp(mode, "wait-fork")) {
		char line[128];
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin)) {
			fprintf(stderr, "forks: end of input\n");
			return 3;
		}
		mode = "fork";
	}
	parent_alloc();
	wait_child(start_child(mode));
	free(parent_buf);
	return 0;
}
