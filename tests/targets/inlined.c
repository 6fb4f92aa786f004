/*
 * Source lines and inlined calls, built as a release build is: -O2 -g.
 * fill_rows is inlined into make_table, which is not: the 48 MiB block is
 * allocated by code that belongs to fill_rows but runs in make_table's frame.
 * A profile should show both, each at its own line, fill_rows marked inlined.
 * Prints "sum N" from the table, so a run under ptfil can be compared with one without.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_BYTES (48u << 20)

static inline __attribute__((always_inline)) char *fill_rows(size_t n, int v)
{
	char *p = malloc(n); /* LINE_MALLOC */
	if (p)
		memset(p, v, n);
	return p;
}

__attribute__((noinline)) char *make_table(size_t n, int v)
{
	char *t = fill_rows(n, v); /* LINE_CALL */
	__asm__ volatile("" ::: "memory");
	return t;
}

int main(int argc, char **argv)
{
	(void)argv;
	char *t = make_table(TABLE_BYTES, argc); /* LINE_MAIN */
	if (!t)
		return 1;
	unsigned long sum = 0;
	for (size_t i = 0; i < TABLE_BYTES; i += 4096)
		sum += (unsigned char)t[i];
	printf("sum %lu\n", sum);
	free(t);
	return 0;
}
