/* Helpers shared by the small programs the end-to-end tests trace. */
#ifndef PTFIL_TARGET_H
#define PTFIL_TARGET_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MiB (1024UL * 1024UL)
#define NOINLINE __attribute__((noinline, noclone))

/* Reads lines from stdin until one equals word; exits 3 at end of input (the test gave up). */
static inline void expect_line(const char *word)
{
	char line[128];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, word))
			return;
	}
	fprintf(stderr, "end of input before '%s'\n", word);
	exit(3);
}

/* Writes one byte in every page of [p, p+len), so exactly len bytes become resident. */
static inline void touch(void *p, size_t len)
{
	long ps = sysconf(_SC_PAGESIZE);
	for (size_t i = 0; i < len; i += (size_t)ps)
		((volatile char *)p)[i] = 1;
}

static inline void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(10);
	}
	return p;
}

/*
 * One round of work on the heap: a block of each size (a large one is mmapped
 * by glibc) filled with seed, read back and freed. Returns how many read back
 * wrong: a target checks that it computed right under ptfil.
 */
static inline int blocks_round(const size_t *sizes, size_t n, unsigned seed)
{
	unsigned char *b[16];
	int bad = 0;
	if (n > 16)
		exit(11);
	for (size_t i = 0; i < n; i++) {
		b[i] = malloc(sizes[i]);
		if (!b[i])
			exit(10);
		memset(b[i], (int)(seed + i), sizes[i]);
	}
	for (size_t i = 0; i < n; i++) {
		if (b[i][0] != (unsigned char)(seed + i) || b[i][sizes[i] - 1] != (unsigned char)(seed + i))
			bad++;
		free(b[i]);
	}
	return bad;
}

/* Keeps the compiler from dropping work the test depends on. */
static inline void keep(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

#endif
