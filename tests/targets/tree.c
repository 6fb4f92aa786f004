/*
 * A process tree whose combined peak is not the sum of its processes' peaks: `tree`.
 *
 * The parent holds 20 MiB (alloc_parent) throughout. First it forks child A,
 * which holds 30 MiB (alloc_a) and exits; once A has been waited for, it
 * forks child B, which holds 50 MiB (alloc_b), and then forks and execs this
 * program again as `tree third RFD WFD`, which holds 10 MiB (alloc_third)
 * while B still holds its 50. So the tree's real combined maximum is
 * 20 + 50 + 10 = 80 MiB, while the processes' own peaks add up to 110 MiB.
 *
 * Every child says on a pipe that it holds its memory and waits, on another
 * pipe, for the parent's word to exit: the overlaps are the same in every
 * run and nothing sleeps. Each buffer is malloc'd and written, so it is
 * resident, in its own noinline function. Before any fork, churn_parent
 * makes 3000 malloc/free pairs of 100 bytes and child B makes 300, so that
 * each process's counters (heap.allocs, stops) are its own to check.
 *
 * Only the parent writes to stdout, a line per phase; the children's pids go
 * to stderr ("tree: a pid N", "tree: b pid N", "tree: third pid N"), so that
 * stdout is the same in every run, traced or not. Exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>

#include "target.h"

enum { PARENT_MIB = 20, A_MIB = 30, B_MIB = 50, THIRD_MIB = 10 };
enum { PARENT_CHURN = 3000, B_CHURN = 300 };

static char self[4096];

static void *check(void *p)
{
	if (!p) {
		perror("tree: out of memory");
		exit(10);
	}
	return p;
}

/* Writes every byte of p's mib MiB, so that they are resident; returns p. */
static unsigned char *fill(unsigned char *p, size_t mib, int byte)
{
	check(p);
	memset(p, byte, mib * MiB);
	keep(p);
	return p;
}

/* Each calls malloc itself: the innermost frame above the allocator names the process's part. */
NOINLINE static unsigned char *alloc_parent(void) { return fill(malloc(PARENT_MIB * MiB), PARENT_MIB, 0x11); }
NOINLINE static unsigned char *alloc_a(void) { return fill(malloc(A_MIB * MiB), A_MIB, 0x22); }
NOINLINE static unsigned char *alloc_b(void) { return fill(malloc(B_MIB * MiB), B_MIB, 0x33); }
NOINLINE static unsigned char *alloc_third(void) { return fill(malloc(THIRD_MIB * MiB), THIRD_MIB, 0x44); }

/* n malloc/free pairs of 100 bytes. */
NOINLINE static void churn(int n)
{
	for (int i = 0; i < n; i++) {
		void *p = check(malloc(100));
		keep(p);
		free(p);
	}
}

NOINLINE static void churn_parent(void) { churn(PARENT_CHURN); }
NOINLINE static void churn_b(void) { churn(B_CHURN); }

static void write_byte(int fd)
{
	char c = 'x';
	while (write(fd, &c, 1) != 1)
		if (errno != EINTR) {
			perror("tree: write");
			_exit(1);
		}
}

/* Reads one byte from fd; exits when the other end is gone instead. */
static void read_byte(int fd, const char *what)
{
	char c;
	ssize_t n;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1) {
		fprintf(stderr, "tree: no word from %s\n", what);
		_exit(1);
	}
}

/* A child's two pipes: it writes "holding" on ready[1] and reads "exit" on go[0]. */
struct link {
	pid_t pid;
	int ready[2];
	int go[2];
};

static void open_link(struct link *l)
{
	/* Close-on-exec: the third is given its own ends only, so no child keeps another's pipe open. */
	if (pipe2(l->ready, O_CLOEXEC) || pipe2(l->go, O_CLOEXEC)) {
		perror("tree: pipe");
		exit(1);
	}
}

/* In the child: hold what alloc returns, say so, wait for the word, exit 0. */
static void child_holds(struct link *l, unsigned char *(*alloc)(void))
{
	close(l->ready[0]);
	close(l->go[1]);
	keep(alloc());
	write_byte(l->ready[1]);
	read_byte(l->go[0], "the parent");
	_exit(0);
}

static pid_t start(struct link *l, const char *name, void (*body)(struct link *))
{
	fflush(stdout); /* nothing buffered may be written twice */
	pid_t pid = fork();
	if (pid < 0) {
		perror("tree: fork");
		exit(1);
	}
	if (pid == 0)
		body(l);
	fprintf(stderr, "tree: %s pid %d\n", name, (int)pid);
	close(l->ready[1]);
	close(l->go[0]);
	l->pid = pid;
	return pid;
}

static void body_a(struct link *l) { child_holds(l, alloc_a); }

static void body_b(struct link *l)
{
	churn_b();
	child_holds(l, alloc_b);
}

static void body_third(struct link *l)
{
	char rfd[16], wfd[16];
	/* The exec'd image keeps its ends: it reads go[0] and writes ready[1]. */
	close(l->ready[0]);
	close(l->go[1]);
	if (fcntl(l->go[0], F_SETFD, 0) || fcntl(l->ready[1], F_SETFD, 0)) {
		perror("tree: fcntl");
		_exit(1);
	}
	snprintf(rfd, sizeof(rfd), "%d", l->go[0]);
	snprintf(wfd, sizeof(wfd), "%d", l->ready[1]);
	char *args[] = { self, "third", rfd, wfd, NULL };
	execv(self, args);
	perror("tree: cannot exec the third");
	_exit(127);
}

static void finish(struct link *l, const char *name)
{
	int status;
	write_byte(l->go[1]);
	while (waitpid(l->pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("tree: waitpid");
			exit(1);
		}
	close(l->ready[0]);
	close(l->go[1]);
	if (WIFEXITED(status))
		printf("%s exited %d\n", name, WEXITSTATUS(status));
	else
		printf("%s killed by signal %d\n", name, WTERMSIG(status));
}

static int third(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int rfd = atoi(argv[2]), wfd = atoi(argv[3]);
	keep(alloc_third());
	write_byte(wfd);
	read_byte(rfd, "the parent");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "third"))
		return third(argc, argv);
	if (argc != 1) {
		fprintf(stderr, "usage: tree\n");
		return 2;
	}
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		perror("tree: /proc/self/exe");
		return 1;
	}
	self[n] = 0;

	churn_parent();
	unsigned char *mine = alloc_parent();
	printf("parent holds %d MiB\n", PARENT_MIB);

	struct link a, b, c;
	open_link(&a);
	start(&a, "a", body_a);
	read_byte(a.ready[0], "a");
	printf("a holds %d MiB\n", A_MIB);
	finish(&a, "a");

	open_link(&b);
	start(&b, "b", body_b);
	read_byte(b.ready[0], "b");
	open_link(&c);
	start(&c, "third", body_third);
	read_byte(c.ready[0], "third");
	printf("b holds %d MiB, third holds %d MiB\n", B_MIB, THIRD_MIB);
	finish(&c, "third");
	finish(&b, "b");

	free(mine);
	printf("done\n");
	return 0;
}
