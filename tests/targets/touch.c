/*
 * The touch view's target: memory reserved by one function and made resident
 * by another, and every way a page becomes resident that the fault path must
 * see. Each function is NOINLINE so that a stack names it. What each one
 * makes resident (and what a test expects the touch view to charge it):
 *
 *   reserve_map    mmap 64 MiB, writes nothing           touch 0, alloc: 64 MiB reserved
 *   write_map      writes 16 MiB of that mapping          touch 16 MiB
 *   alloc_block    malloc(8 MiB), writes nothing          touch ~0 (the allocator's own header page)
 *   fill_block     writes the 8 MiB block                 touch 8 MiB
 *   read_into      read() of 4 MiB of /dev/zero into a fresh mapping: the kernel writes it   touch 4 MiB
 *   populate       mmap 4 MiB with MAP_POPULATE: resident with no fault of the program's    touch 4 MiB
 *   huge_pages     8 MiB with MADV_HUGEPAGE, one byte written per 2 MiB                    touch 8 MiB (4 huge pages)
 *   only_read      reads every page of 32 MiB (the shared zero page)                       touch 0
 *
 * At the end it prints its own RssAnon (from /proc/self/status), the figure
 * the touch view's peak must match, then exits without freeing anything (the
 * peak is at the exit).
 *
 * `touch attach` is for ptfil attach: it prints "ready", waits for the line
 * "go", runs huge_pages (its first write is the first page fault after the
 * attach, a huge page), prints "holding" and its RssAnon, and exits 0 on the
 * line "release".
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define MiB (1024UL * 1024)

static volatile unsigned char sink;

NOINLINE static unsigned char *reserve_map(void)
{
	unsigned char *p = mmap(NULL, 64 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(10);
	madvise(p, 64 * MiB, MADV_NOHUGEPAGE);
	return p;
}

NOINLINE static void write_map(unsigned char *p)
{
	for (size_t i = 0; i < 16 * MiB; i += 4096)
		p[i] = 1;
}

NOINLINE static unsigned char *alloc_block(void)
{
	unsigned char *b = malloc(8 * MiB);
	if (!b)
		exit(11);
	madvise((void *)((unsigned long)b & ~4095UL), 8 * MiB, MADV_NOHUGEPAGE);
	return b;
}

NOINLINE static void fill_block(unsigned char *b)
{
	for (size_t i = 0; i < 8 * MiB; i += 4096)
		b[i] = 2;
}

NOINLINE static void read_into(void)
{
	unsigned char *p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open("/dev/zero", O_RDONLY);
	if (p == MAP_FAILED || fd < 0)
		exit(12);
	madvise(p, 4 * MiB, MADV_NOHUGEPAGE);
	size_t got = 0;
	while (got < 4 * MiB) {
		ssize_t n = read(fd, p + got, 4 * MiB - got);
		if (n <= 0)
			exit(13);
		got += (size_t)n;
	}
	close(fd);
}

NOINLINE static void populate(void)
{
	void *p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		exit(14);
}

NOINLINE static void huge_pages(void)
{
	/* 8 MiB aligned to 2 MiB inside a 10 MiB reservation, asked to be huge pages. */
	unsigned char *p = mmap(NULL, 10 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(15);
	unsigned char *a = (unsigned char *)(((unsigned long)p + 2 * MiB - 1) & ~(2 * MiB - 1));
	madvise(a, 8 * MiB, MADV_HUGEPAGE);
	for (size_t i = 0; i < 8 * MiB; i += 2 * MiB)
		a[i] = 3;
}

NOINLINE static void only_read(void)
{
	unsigned char *p = mmap(NULL, 32 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(16);
	madvise(p, 32 * MiB, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < 32 * MiB; i += 4096)
		sink += p[i];
}

static long rss_anon_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static void expect(const char *word)
{
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, word))
			return;
	}
	exit(3);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "attach")) {
		printf("ready\n");
		fflush(stdout);
		expect("go");
		huge_pages();
		printf("holding\nrss_anon_kib %ld\n", rss_anon_kib());
		fflush(stdout);
		expect("release");
		return 0;
	}
	unsigned char *m = reserve_map();
	write_map(m);
	unsigned char *b = alloc_block();
	fill_block(b);
	read_into();
	populate();
	huge_pages();
	only_read();
	printf("rss_anon_kib %ld\n", rss_anon_kib());
	fflush(stdout);
	return 0;
}
