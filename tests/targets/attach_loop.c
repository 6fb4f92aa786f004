/*
 * A long-running, single-threaded program to attach to and detach from:
 * `attach_loop ITERATIONS [catch]` (catch: with handlers for SIGURG and
 * SIGWINCH, which do nothing it prints).
 *
 * Before the loop, before_alloc mallocs a 16 MiB buffer and writes all of it
 * (resident before any attach: charged to [before attach]). Then it prints
 * "ready" and runs iterations about 10 ms apart, at least ITERATIONS of them
 * and then on until its SIGUSR2 handler has run (so a test that attaches,
 * detaches and checks the process before sending SIGUSR2 never finds it
 * gone, however slow the machine), each of which
 * - replaces one of RING small blocks kept live by ring_alloc (malloc, then
 *   realloc to grow it: every block in the ring is under 4.2 KiB, so the ring
 *   never holds more than 34 KiB), so at any moment 7 or 8 live blocks pass
 *   through ring_alloc, all made in the last RING iterations;
 * - makes and frees temporary blocks in scratch_work: small (malloc), large
 *   (calloc of 96 KiB and of 192 KiB, >= ptfil's 64 KiB large-block size) and
 *   a realloc that grows a block across the large-block size;
 * - folds the content of every block into a checksum.
 * Only the first ITERATIONS iterations go into the checksum. At the end it
 * checksums the 16 MiB buffer too, prints the checksum, the
 * number of SIGUSR2 signals its handler saw and its number of threads, and
 * exits with status 7. Every line it prints depends only on ITERATIONS and
 * the number of SIGUSR2 sent, so its output is the same traced or not.
 */
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "target.h"

#define BEFORE_SIZE (16 * MiB)
#define RING 8

static unsigned char *before_buf;
static unsigned char *ring[RING];
static volatile sig_atomic_t usr2_count;

static volatile sig_atomic_t other_count;

static void on_other(int sig)
{
	(void)sig;
	other_count++;
}

static void on_usr2(int sig)
{
	(void)sig;
	usr2_count++;
}

static uint64_t fold(uint64_t sum, const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		sum = (sum << 5 | sum >> 59) ^ (sum + p[i]);
	return sum;
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seed * 31u + i * 7u + (i >> 8));
}

static void *check(void *p)
{
	if (!p) {
		perror("attach_loop: out of memory");
		exit(10);
	}
	return p;
}

NOINLINE static void before_alloc(void)
{
	before_buf = check(malloc(BEFORE_SIZE));
	fill(before_buf, BEFORE_SIZE, 99);
}

/* Replaces ring slot i % RING by a new block of 64..1063 bytes, grown by realloc to under 4.2 KiB. */
NOINLINE static uint64_t ring_alloc(long i, uint64_t sum)
{
	int slot = (int)(i % RING);
	free(ring[slot]);
	ring[slot] = NULL;
	size_t first = 64 + (size_t)(i * 37 % 1000);
	size_t grown = first + 1024 + (size_t)(i * 101 % 2048);
	unsigned char *p = check(malloc(first));
	fill(p, first, (unsigned)i);
	p = check(realloc(p, grown));
	sum = fold(sum, p, first); /* what realloc must have kept */
	fill(p + first, grown - first, (unsigned)i + 1);
	ring[slot] = p;
	keep(p);
	return fold(sum, p, grown);
}

NOINLINE static uint64_t scratch_work(long i, uint64_t sum)
{
	size_t small = 16 + (size_t)(i * 53 % 500);
	unsigned char *a = check(malloc(small));
	fill(a, small, (unsigned)i + 2);
	sum = fold(sum, a, small);

	unsigned char *b = check(calloc(1, 96 * 1024));
	sum = fold(sum, b, 256); /* calloc's zeroes */
	fill(b, 96 * 1024, (unsigned)i + 3);
	sum = fold(sum, b + 4096 * (size_t)(i % 24), 4096);

	unsigned char *c = check(calloc(3, 64 * 1024));
	fill(c, 3 * 64 * 1024, (unsigned)i + 4);
	sum = fold(sum, c + 8192 * (size_t)(i % 24), 8192);

	unsigned char *d = check(malloc(8000));
	fill(d, 8000, (unsigned)i + 5);
	d = check(realloc(d, 80000));
	sum = fold(sum, d, 8000);
	fill(d + 8000, 72000, (unsigned)i + 6);
	sum = fold(sum, d + 72000, 8000);

	free(c);
	free(a);
	free(d);
	free(b);
	return sum;
}

/* About 10 ms; a signal may cut it short, which changes nothing the program prints. */
static void pause_10ms(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	nanosleep(&ts, NULL);
}

static long threads_now(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Threads:", 8))
			n = strtol(line + 8, NULL, 10);
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "catch"))) {
		fprintf(stderr, "usage: attach_loop ITERATIONS [catch]\n");
		return 2;
	}
	long iterations = strtol(argv[1], NULL, 10);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr2;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	if (argc == 3) {
		/* catch: SIGURG and SIGWINCH have handlers (as in a Go program), which change nothing it prints. */
		sa.sa_handler = on_other;
		sigaction(SIGURG, &sa, NULL);
		sigaction(SIGWINCH, &sa, NULL);
	}

	before_alloc();
	printf("ready\n");
	fflush(stdout);

	uint64_t sum = 1469598103934665603ULL;
	for (long i = 0; i < iterations || !usr2_count; i++) {
		uint64_t s = scratch_work(i, ring_alloc(i, sum));
		if (i < iterations)
			sum = s;
		pause_10ms();
	}
	sum = fold(sum, before_buf, BEFORE_SIZE);
	for (int k = 0; k < RING; k++)
		free(ring[k]);
	free(before_buf);

	printf("iterations %ld\n", iterations);
	printf("checksum %016llx\n", (unsigned long long)sum);
	printf("usr2 %d\n", (int)usr2_count);
	printf("threads %ld\n", threads_now());
	return 7;
}
