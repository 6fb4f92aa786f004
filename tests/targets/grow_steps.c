/*
 * A program that grows in steps, for the live view (tests/e2e/test_live.py):
 * `grow_steps STEPS [DIR]`.
 *
 * Each step, grow_step mallocs 10 MiB (mmapped by glibc) and writes all of
 * it, so that after step k the program holds k x 10 MiB charged to the one
 * stack main -> grow_step. After the last step, shrink frees all but two
 * blocks (20 MiB now, the peak STEPS x 10 MiB before). Then it frees the
 * rest, prints the sum of what it wrote and exits with status 0.
 *
 * Without DIR a step comes every half second. With DIR the test sets the
 * pace: after step k the program creates DIR/at-K and waits for DIR/go-K
 * (after shrink: DIR/at-shrunk and DIR/go-shrunk); it gives up after two
 * minutes with status 3, so a failed test never leaves it behind. Its pid
 * is in DIR/pid from the start.
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "target.h"

#define STEP (10 * MiB)
#define MAX_STEPS 64

static unsigned char *blocks[MAX_STEPS];

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void create(const char *dir, const char *name, const char *text)
{
	char path[4096], tmp[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	FILE *f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) || rename(tmp, path)) {
		perror(path);
		exit(4);
	}
}

/* Says where it is (DIR/at-NAME) and waits for the test's DIR/go-NAME; without DIR, half a second. */
static void pause_at(const char *dir, const char *name)
{
	if (!dir) {
		sleep_ms(500);
		return;
	}
	char at[64], go[4096];
	snprintf(at, sizeof(at), "at-%s", name);
	create(dir, at, "");
	snprintf(go, sizeof(go), "%s/go-%s", dir, name);
	for (int i = 0; access(go, F_OK); i++) {
		if (i >= 120 * 50) {
			fprintf(stderr, "grow_steps: nobody said go-%s in two minutes\n", name);
			exit(3);
		}
		sleep_ms(20);
	}
}

NOINLINE static unsigned char *grow_step(int k)
{
	unsigned char *p = malloc(STEP);
	if (!p) {
		perror("grow_steps: malloc");
		exit(10);
	}
	memset(p, k + 1, STEP);
	keep(p);
	return p;
}

NOINLINE static uint64_t shrink(int steps, int keep_blocks)
{
	uint64_t sum = 0;
	for (int k = keep_blocks; k < steps; k++) {
		sum += blocks[k][0] + blocks[k][STEP - 1];
		free(blocks[k]);
		blocks[k] = NULL;
	}
	return sum;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: grow_steps STEPS [DIR]\n");
		return 2;
	}
	int steps = atoi(argv[1]);
	const char *dir = argc > 2 ? argv[2] : NULL;
	if (steps < 1 || steps > MAX_STEPS) {
		fprintf(stderr, "grow_steps: STEPS is 1 to %d\n", MAX_STEPS);
		return 2;
	}
	if (dir) {
		char pid[32];
		snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
		create(dir, "pid", pid);
	}
	for (int k = 0; k < steps; k++) {
		char name[16];
		blocks[k] = grow_step(k);
		snprintf(name, sizeof(name), "%d", k + 1);
		pause_at(dir, name);
	}
	uint64_t sum = shrink(steps, steps < 2 ? steps : 2);
	pause_at(dir, "shrunk");
	sum += shrink(steps < 2 ? steps : 2, 0);
	printf("grew %d steps of 10 MiB, sum %llu\n", steps, (unsigned long long)sum);
	return 0;
}
