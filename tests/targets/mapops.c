/*
 * Mapping operations with known resident peaks, one scenario per argument:
 *   partial   10 MiB written, its middle 4 MiB unmapped, then 8 MiB more: peak 14 MiB
 *   mremap    4 MiB grown (moved) to 16 MiB and written: peak 16 MiB, 12 of them charged
 *             to the grower; then shrunk to 2 MiB and 10 MiB more mapped (12 MiB < 16)
 *   madvise   30 MiB written, dropped with MADV_DONTNEED, 20 MiB written again: peak 30 MiB
 *   merge     two adjacent mappings the kernel merges, 6 MiB and 2 MiB written: peak 8 MiB
 *   zeropage  40 MiB only read (zero page), 4 MiB written: peak 4 MiB
 *   shared    12 MiB MAP_SHARED|MAP_ANONYMOUS written: peak 12 MiB
 *   brk       sbrk 24 MiB written, then released: peak 24 MiB
 *   badunmap  10 MiB written, three munmap calls that fail (EINVAL), 4 MiB more: peak 14 MiB
 * Each function that maps memory is named for what it does, for the attribution checks.
 */

#include <errno.h>
#include <stdint.h>

#include "target.h"

NOINLINE static void *partial_map(void) { return map_anon(10 * MiB); }
NOINLINE static void *partial_more(void) { return map_anon(8 * MiB); }

static void partial(void)
{
	char *p = partial_map();
	touch(p, 10 * MiB);
	munmap(p + 3 * MiB, 4 * MiB);
	char *q = partial_more();
	touch(q, 8 * MiB);
	munmap(q, 8 * MiB);
	munmap(p, 3 * MiB);
	munmap(p + 7 * MiB, 3 * MiB);
}

NOINLINE static void *mremap_first(void) { return map_anon(4 * MiB); }
NOINLINE static void *mremap_grow(void *p) { return mremap(p, 4 * MiB, 16 * MiB, MREMAP_MAYMOVE); }
NOINLINE static void *mremap_after(void) { return map_anon(10 * MiB); }

static void remap(void)
{
	char *p = mremap_first();
	touch(p, 4 * MiB);
	p = mremap_grow(p);
	if (p == MAP_FAILED) {
		perror("mremap");
		exit(11);
	}
	touch(p, 16 * MiB);
	/* Move it whole to a fresh place: the pages (and their charge) go with it. */
	char *hole = map_anon(16 * MiB);
	munmap(hole, 16 * MiB);
	p = mremap(p, 16 * MiB, 16 * MiB, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	if (p != hole) {
		perror("mremap move");
		exit(11);
	}
	p = mremap(p, 16 * MiB, 2 * MiB, 0);
	if (p == MAP_FAILED) {
		perror("mremap shrink");
		exit(11);
	}
	char *q = mremap_after();
	touch(q, 10 * MiB);
	munmap(q, 10 * MiB);
	munmap(p, 2 * MiB);
}

NOINLINE static void *madvise_map(void) { return map_anon(30 * MiB); }

static void advise(void)
{
	char *p = madvise_map();
	touch(p, 30 * MiB);
	madvise(p, 30 * MiB, MADV_DONTNEED);
	touch(p, 20 * MiB);
	munmap(p, 30 * MiB);
}

NOINLINE static void *merge_a(char *at) { return mmap(at, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0); }
NOINLINE static void *merge_b(char *at) { return mmap(at, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0); }

/* True when [lo, hi) lies within one line of /proc/self/maps: the kernel merged the two mappings. */
static int one_vma(uintptr_t lo, uintptr_t hi)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int merged = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s <= lo && e >= hi)
			merged = 1;
	}
	if (f)
		fclose(f);
	return merged;
}

static void merge(void)
{
	/* Find 16 MiB of free address space, then map its two halves separately. */
	char *hole = map_anon(16 * MiB);
	munmap(hole, 16 * MiB);
	char *a = merge_a(hole), *b = merge_b(hole + 8 * MiB);
	if (a != hole || b != hole + 8 * MiB) {
		perror("mmap fixed");
		exit(12);
	}
	touch(a, 6 * MiB);
	touch(b, 2 * MiB);
	printf("merged=%d\n", one_vma((uintptr_t)a, (uintptr_t)(b + 8 * MiB)));
	munmap(a, 16 * MiB);
}

NOINLINE static void *zero_map(void) { return map_anon(40 * MiB); }
NOINLINE static void *zero_written(void) { return map_anon(4 * MiB); }

/* RssAnon of this process in bytes. */
static long rss_anon(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib * 1024;
}

static void zeropage(void)
{
	char *z = zero_map();
	long ps = sysconf(_SC_PAGESIZE);
	unsigned sum = 0;
	long before = rss_anon();
	for (size_t i = 0; i < 40 * MiB; i += (size_t)ps)
		sum += ((volatile char *)z)[i];
	/* Some kernels have no shared zero page (pvm_no_zero_page): reads allocate real memory there. */
	printf("read_resident=%ld\n", rss_anon() - before);
	char *w = zero_written();
	touch(w, 4 * MiB);
	printf("sum=%u\n", sum);
	munmap(w, 4 * MiB);
	munmap(z, 40 * MiB);
}

NOINLINE static void *shared_map(void)
{
	void *p = mmap(NULL, 12 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(13);
	return p;
}

static void shared(void)
{
	char *p = shared_map();
	touch(p, 12 * MiB);
	munmap(p, 12 * MiB);
}

NOINLINE static void *brk_grow(void) { return sbrk(24 * MiB); }

static void heap_brk(void)
{
	char *p = brk_grow();
	if (p == (void *)-1)
		exit(14);
	touch(p, 24 * MiB);
	sbrk(-(intptr_t)(24 * MiB));
}

NOINLINE static void *bad_map(void) { return map_anon(10 * MiB); }
NOINLINE static void *bad_more(void) { return map_anon(4 * MiB); }

static void bad_unmap(void)
{
	char *p = bad_map();
	touch(p, 10 * MiB);
	/* Refused by the kernel: an unaligned start, no length, a range past the end of the address space. */
	int einval = 0;
	einval += munmap(p + 1, MiB) < 0 && errno == EINVAL;
	einval += munmap(p, 0) < 0 && errno == EINVAL;
	einval += munmap(p, (size_t)-4096) < 0 && errno == EINVAL;
	printf("einval=%d\n", einval);
	char *q = bad_more();
	touch(q, 4 * MiB);
	munmap(q, 4 * MiB);
	munmap(p, 10 * MiB);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: mapops partial|mremap|madvise|merge|zeropage|shared|brk|badunmap\n");
		return 2;
	}
	const char *m = argv[1];
	if (!strcmp(m, "partial")) partial();
	else if (!strcmp(m, "mremap")) remap();
	else if (!strcmp(m, "madvise")) advise();
	else if (!strcmp(m, "merge")) merge();
	else if (!strcmp(m, "zeropage")) zeropage();
	else if (!strcmp(m, "shared")) shared();
	else if (!strcmp(m, "brk")) heap_brk();
	else if (!strcmp(m, "badunmap")) bad_unmap();
	else return 2;
	printf("%s done\n", m);
	return 0;
}
