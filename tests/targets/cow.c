/*
 * Copy-on-write between a parent and its forked child: `cow`.
 *
 * The parent mallocs and writes 100 MiB (cow_parent), then forks. The child
 * writes the first 10 MiB of that same buffer (cow_child_write), so the
 * kernel copies those 10 MiB for it, while the other 90 MiB stay shared
 * with the parent. Both hold until the child has said on a pipe that it
 * wrote and the parent has printed it; then the child exits, and the parent
 * after it. Memory the tree held at once: 100 + 10 = 110 MiB, not 200.
 *
 * Only the parent writes to stdout; the child's pid goes to stderr
 * ("cow: child pid N"). Exits 0.
 */
#include <errno.h>
#include <sys/wait.h>

#include "target.h"

enum { PARENT_MIB = 100, CHILD_MIB = 10 };

static unsigned char *buf;

NOINLINE static void cow_parent(void)
{
	buf = malloc(PARENT_MIB * MiB);
	if (!buf) {
		perror("cow: out of memory");
		exit(10);
	}
	memset(buf, 0x11, PARENT_MIB * MiB);
}

NOINLINE static void cow_child_write(void)
{
	memset(buf, 0x22, CHILD_MIB * MiB);
	keep(buf);
}

static void write_byte(int fd)
{
	char c = 'x';
	while (write(fd, &c, 1) != 1)
		if (errno != EINTR) {
			perror("cow: write");
			_exit(1);
		}
}

static int read_byte(int fd)
{
	char c;
	ssize_t n;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1 ? 0 : -1;
}

int main(void)
{
	int ready[2], go[2], status;
	cow_parent();
	printf("parent holds %d MiB\n", PARENT_MIB);
	fflush(stdout);
	if (pipe(ready) || pipe(go)) {
		perror("cow: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("cow: fork");
		return 1;
	}
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		cow_child_write();
		write_byte(ready[1]);
		_exit(read_byte(go[0]) ? 1 : 0);
	}
	fprintf(stderr, "cow: child pid %d\n", (int)pid);
	close(ready[1]);
	close(go[0]);
	if (read_byte(ready[0])) {
		fprintf(stderr, "cow: no word from the child\n");
		return 1;
	}
	printf("child wrote %d MiB of it\n", CHILD_MIB);
	fflush(stdout);
	write_byte(go[1]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("cow: waitpid");
			return 1;
		}
	printf("child exited %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	if (buf[0] != 0x11 || buf[CHILD_MIB * MiB] != 0x11) {
		fprintf(stderr, "cow: the child's writes reached the parent\n");
		return 1;
	}
	free(buf);
	return 0;
}
