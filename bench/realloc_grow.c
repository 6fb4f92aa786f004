/*
 * Realloc growth: one buffer grown by realloc in STEP_KIB steps to MIB MiB, each new part
 * written in full (one byte per page) before the next step, then freed. Peak: MIB MiB, all
 * of it resident. glibc serves a block this large with its own mapping and grows it with
 * mremap, so each step is one realloc and, under ptfil, one mremap.
 * Usage: realloc_grow [MIB [STEP_KIB]]   (default 400 MiB in 256 KiB steps: 1,600 reallocs)
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void touch(char *p, size_t from, size_t to, size_t ps)
{
	for (size_t i = from; i < to; i += ps)
		((volatile char *)p)[i] = 1;
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 400;
	long step_kib = argc > 2 ? atol(argv[2]) : 256;
	if (mib < 1 || step_kib < 1) {
		fprintf(stderr, "usage: realloc_grow [MIB [STEP_KIB]]\n");
		return 2;
	}
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	size_t total = (size_t)mib << 20, step = (size_t)step_kib << 10, size = 0;
	char *p = NULL;
	while (size < total) {
		size_t next = size + step < total ? size + step : total;
		char *q = realloc(p, next);
		if (!q) {
			perror("realloc_grow: realloc");
			return 10;
		}
		p = q;
		touch(p, size, next, ps);
		size = next;
	}
	free(p);
	return 0;
}
