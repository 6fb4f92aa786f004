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

/* Keeps the compiler from dropping work the test depends on. */
static inline void keep(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

#endif
