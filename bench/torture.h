/*
 * What the torture targets (bench/torture_*.c, driven by bench/torture) share: deterministic units
 * of allocating work whose checksums a replay recomputes, the finish request, the summary line.
 *
 * Every target runs until SIGTERM (and SIGINT too with --int), then prints one line
 *     NAME counts=A,B,... sum=HEX
 * and exits 0. Each count says how many units of one stream of work it did; the sum is their
 * checksums added (addition, so the order the threads ran in does not matter). `NAME --replay
 * A,B,...` does the same units in one thread, untraced, without forks, threads or signals, and
 * prints the line it should have printed: bench/torture compares the two.
 */
#ifndef PTFIL_BENCH_TORTURE_H
#define PTFIL_BENCH_TORTURE_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TORTURE_MAX_COUNTS 16

/* Set by SIGTERM (and by SIGINT with --int): every loop of a target checks it between units. */
static volatile sig_atomic_t torture_stop;
/* --int: SIGINT finishes the target as SIGTERM does (a program whose own handler decides its status). */
static int torture_int;
/* --replay: the counts given, else -1. */
static long torture_replay[TORTURE_MAX_COUNTS];
static int torture_nreplay = -1;

static inline uint64_t torture_mix(uint64_t x)
{
	/* splitmix64's finaliser: every input bit reaches every output bit. */
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/*
 * One unit of work of a stream: 1 to 8 heap blocks of 16..2063 bytes, each filled with a byte
 * of its own, then read back at three places and freed. A block the allocator handed out twice,
 * or a computation the tracer disturbed, changes the checksum. Async-signal-safe only where the
 * interrupted code is not in the allocator (torture_signals arranges that).
 */
static __attribute__((noinline, unused)) uint64_t torture_unit(uint64_t stream, uint64_t i)
{
	uint64_t x = torture_mix(stream * 0x100000001b3ULL ^ i), h = x;
	int n = 1 + (int)(x % 8);
	unsigned char *p[8];
	size_t size[8];
	for (int k = 0; k < n; k++) {
		size[k] = 16 + torture_mix(x + (uint64_t)k) % 2048;
		p[k] = malloc(size[k]);
		if (!p[k]) {
			static const char msg[] = "torture: out of memory\n";
			if (write(2, msg, sizeof(msg) - 1) < 0)
				_exit(10);
			_exit(10);
		}
		memset(p[k], (int)((x >> (8 * k)) & 0xff), size[k]);
	}
	for (int k = 0; k < n; k++) {
		h = torture_mix(h ^ p[k][0] ^ ((uint64_t)p[k][size[k] / 2] << 8) ^ ((uint64_t)p[k][size[k] - 1] << 16));
		free(p[k]);
	}
	return h;
}

static inline void torture_on_signal(int sig)
{
	(void)sig;
	torture_stop = 1;
}

/*
 * Parses [--int] [--replay A,B,...] and installs the finish handler (in normal mode). Returns
 * the number of replay counts, or -1 when the target is to run for real.
 */
static inline int torture_setup(int argc, char **argv, const char *usage)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--int") == 0) {
			torture_int = 1;
		} else if (strcmp(argv[i], "--replay") == 0 && i + 1 < argc) {
			torture_nreplay = 0;
			for (char *tok = strtok(argv[++i], ","); tok && torture_nreplay < TORTURE_MAX_COUNTS;
			     tok = strtok(NULL, ","))
				torture_replay[torture_nreplay++] = atol(tok);
		} else {
			fprintf(stderr, "usage: %s [--int] [--replay COUNTS]\n", usage);
			exit(2);
		}
	}
	if (torture_nreplay < 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = torture_on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGTERM, &sa, NULL);
		if (torture_int)
			sigaction(SIGINT, &sa, NULL);
	}
	return torture_nreplay;
}

/* The count replay number k, or exits 2 when the replay gave fewer. */
static inline long torture_count(int k)
{
	if (k >= torture_nreplay) {
		fprintf(stderr, "torture: --replay needs at least %d counts\n", k + 1);
		exit(2);
	}
	return torture_replay[k];
}

static inline void torture_print(const char *name, const long *counts, int n, uint64_t sum)
{
	printf("%s counts=", name);
	for (int k = 0; k < n; k++)
		printf(k ? ",%ld" : "%ld", counts[k]);
	printf(" sum=%016llx\n", (unsigned long long)sum);
	fflush(stdout);
}

/* Says the target is set up and running: bench/torture waits for this line before its first attach. */
static inline void torture_ready(void)
{
	printf("ready\n");
	fflush(stdout);
}

static inline void torture_sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) && errno == EINTR && !torture_stop)
		;
}

#endif
