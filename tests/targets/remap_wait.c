/*
 * A mapping moved by mremap while ptfil is attached, driven by lines on
 * stdin: `remap_wait`.
 *
 * It prints "ready" and waits for the line "go". Then write_first maps
 * 8 MiB and writes every page; a 4 KiB guard mapped right after it keeps the
 * kernel from growing it in place, so grow_moved's mremap to 32 MiB moves
 * it (its 8 MiB of pages go with it, no fault) and write_rest writes the
 * other 24 MiB. Then drop_scratch maps, writes and unmaps 1 MiB: a release,
 * which under attach ptfil finds by comparing its pages with the kernel's
 * (where it must not take the moved pages for released ones); 100 ms later
 * write_more maps and writes 2 MiB more: the peak, 34 MiB, comes after that
 * comparison. It prints "moved=1" (or "moved=0" when the kernel grew it in
 * place after all), its RssAnon, and "holding", waits for "release", and
 * exits 0. The touch view: 8 MiB charged to write_first, 24 MiB to
 * write_rest and 2 MiB to write_more, whichever addresses the pages have
 * when the peak is read.
 * Huge pages are turned off for the mapping, so that each page is a fault.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "target.h"

#define FIRST (8 * MiB)
#define GROWN (32 * MiB)

NOINLINE static char *write_first(void)
{
	char *p = map_anon(FIRST);
	madvise(p, FIRST, MADV_NOHUGEPAGE);
	/* The guard: the page right after the mapping, so that it cannot grow where it is. */
	if (mmap(p + FIRST, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED)
		fprintf(stderr, "remap_wait: no guard page\n");
	touch(p, FIRST);
	return p;
}

NOINLINE static char *grow_moved(char *p)
{
	char *q = mremap(p, FIRST, GROWN, MREMAP_MAYMOVE);
	if (q == MAP_FAILED) {
		perror("mremap");
		exit(2);
	}
	madvise(q, GROWN, MADV_NOHUGEPAGE);
	printf("moved=%d\n", q != p);
	return q;
}

NOINLINE static void write_rest(char *q) { touch(q + FIRST, GROWN - FIRST); }

NOINLINE static void drop_scratch(void)
{
	char *s = map_anon(MiB);
	touch(s, MiB);
	munmap(s, MiB);
}

NOINLINE static char *write_more(void)
{
	char *m = map_anon(2 * MiB);
	madvise(m, 2 * MiB, MADV_NOHUGEPAGE);
	touch(m, 2 * MiB);
	return m;
}

static void print_rss_anon(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "RssAnon:", 8))
			fputs(line, stdout);
	if (f)
		fclose(f);
}

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	expect_line("go");
	char *q = grow_moved(write_first());
	write_rest(q);
	drop_scratch();
	usleep(100 * 1000);
	char *m = write_more();
	print_rss_anon();
	printf("holding\n");
	fflush(stdout);
	expect_line("release");
	keep(q);
	keep(m);
	printf("done\n");
	return 0;
}
