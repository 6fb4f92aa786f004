/*
 * Malloc-family blocks with known live totals, one scenario per argument:
 *   chain       f0 -> f1 -> f2, f2 calls malloc: 2000 blocks of 10,000 bytes live at once
 *               (20,000,000 bytes, all written), then all freed: peak 20,000,000 through f2
 *   pairs N     N malloc(64)/free pairs, one block live at a time (the stop-budget test runs
 *               it with two values of N and compares the stop counts)
 *   realloc     every realloc case and every aligned allocator, each in its own named
 *               function, live together at the peak (see the table above realloc_scenario)
 *   sizes       1000 blocks of sizes 0 to 39,960 from malloc and 100 from calloc, made by
 *               sized_blocks, live at once; prints, for malloc's and for calloc's, the bytes
 *               asked for and the sum of malloc_usable_size over them (what glibc's own
 *               accounting says they hold)
 * Each scenario prints "<mode> done" last.
 */
#include <malloc.h>

#include "target.h"

#define CHAIN_BLOCKS 2000
#define CHAIN_SIZE 10000

static void *chain[CHAIN_BLOCKS];

NOINLINE static void *f2(size_t size)
{
	void *p = malloc(size);
	if (!p) {
		perror("malloc");
		exit(10);
	}
	memset(p, 1, size);
	return p;
}

NOINLINE static void *f1(size_t size) { return f2(size); }
NOINLINE static void *f0(size_t size) { return f1(size); }

static void run_chain(void)
{
	for (int i = 0; i < CHAIN_BLOCKS; i++)
		chain[i] = f0(CHAIN_SIZE);
	for (int i = 0; i < CHAIN_BLOCKS; i++)
		free(chain[i]);
}

NOINLINE static void pair(size_t size)
{
	void *p = malloc(size);
	keep(p);
	free(p);
}

static void run_pairs(long n)
{
	for (long i = 0; i < n; i++)
		pair(64);
}

/*
 * The realloc scenario. Live at the peak (requested sizes; all small blocks):
 *   realloc_inplace   malloc 20,000 at the top of the heap, grown in place to 30,000
 *   realloc_moved     malloc 12,000 with a block after it, grown (moved) to 24,000
 *   realloc_shrink    malloc 40,000, shrunk in place to 16,000
 *   realloc_null      realloc(NULL, 18,000)
 *   realloc_zero      malloc 50,000 then realloc(p, 0), which frees it: 0 live
 *   realloc_large     malloc 200,000 grown to 1,000,000 (glibc mremaps it), all written:
 *                     a large block, 1,000,000 resident bytes
 *   align_posix       posix_memalign(64, 13,000)
 *   align_aligned     aligned_alloc(256, 14,336)
 *   align_memalign    memalign(128, 15,000)
 *   align_valloc      valloc(17,000)
 *   alloc_calloc      calloc(100, 190) = 19,000
 *   alloc_reallocarray reallocarray(NULL, 100, 110) grown to reallocarray(p, 200, 110) = 22,000
 * The blocker after realloc_moved's block (4,000 bytes, from realloc_blocker) is live too.
 * Everything is written in full so that nothing depends on residency for small blocks.
 */
#define R_INPLACE 30000
#define R_MOVED 24000
#define R_BLOCKER 4000
#define R_SHRINK 16000
#define R_NULL 18000
#define R_LARGE 1000000
#define A_POSIX 13000
#define A_ALIGNED 14336
#define A_MEMALIGN 15000
#define A_VALLOC 17000
#define A_CALLOC 19000
#define A_REALLOCARRAY 22000

static void *live[16];
static int n_live;

static void *hold(void *p, size_t size)
{
	if (!p) {
		perror("allocation");
		exit(12);
	}
	memset(p, 2, size);
	live[n_live++] = p;
	return p;
}

NOINLINE static void realloc_zero(void)
{
	void *p = malloc(50000);
	memset(p, 3, 50000);
	/* glibc frees p and returns NULL. */
	p = realloc(p, 0);
	keep(p);
	if (p)
		free(p);
}

NOINLINE static void *realloc_shrink(void)
{
	char *p = malloc(40000);
	memset(p, 3, 40000);
	char *q = realloc(p, R_SHRINK);
	printf("shrink_inplace=%d\n", q == p);
	return hold(q, R_SHRINK);
}

NOINLINE static void *realloc_blocker(void) { return hold(malloc(R_BLOCKER), R_BLOCKER); }

NOINLINE static void *realloc_moved(void)
{
	char *p = malloc(12000);
	memset(p, 3, 12000);
	realloc_blocker();
	char *q = realloc(p, R_MOVED);
	printf("moved=%d\n", q != p);
	return hold(q, R_MOVED);
}

NOINLINE static void *realloc_inplace(void)
{
	/* The last block carved from the top of the heap grows into the top chunk in place. */
	char *p = malloc(20000);
	memset(p, 3, 20000);
	char *q = realloc(p, R_INPLACE);
	printf("grow_inplace=%d\n", q == p);
	return hold(q, R_INPLACE);
}

/*
 * A null pointer the compiler cannot see, or it calls malloc instead. glibc's
 * realloc then jumps to malloc, whose return is realloc's.
 */
static void *volatile no_block;
NOINLINE static void *realloc_null(void) { return hold(realloc(no_block, R_NULL), R_NULL); }

NOINLINE static void *realloc_large(void)
{
	char *p = malloc(200000);
	memset(p, 3, 200000);
	return hold(realloc(p, R_LARGE), R_LARGE);
}

NOINLINE static void *align_posix(void)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, A_POSIX))
		p = NULL;
	return hold(p, A_POSIX);
}

NOINLINE static void *align_aligned(void) { return hold(aligned_alloc(256, A_ALIGNED), A_ALIGNED); }
NOINLINE static void *align_memalign(void) { return hold(memalign(128, A_MEMALIGN), A_MEMALIGN); }
NOINLINE static void *align_valloc(void) { return hold(valloc(A_VALLOC), A_VALLOC); }
NOINLINE static void *alloc_calloc(void) { return hold(calloc(100, A_CALLOC / 100), A_CALLOC); }

NOINLINE static void *alloc_reallocarray(void)
{
	char *p = reallocarray(NULL, 100, A_REALLOCARRAY / 200);
	memset(p, 3, A_REALLOCARRAY / 2);
	return hold(reallocarray(p, 200, A_REALLOCARRAY / 200), A_REALLOCARRAY);
}

static void run_realloc(void)
{
	/* Releases first (realloc(p, 0), the shrink), then only growth up to the peak. */
	realloc_zero();
	realloc_shrink();
	realloc_moved();
	realloc_null();
	realloc_large();
	align_posix();
	align_aligned();
	align_memalign();
	align_valloc();
	alloc_calloc();
	alloc_reallocarray();
	realloc_inplace();
	for (int i = 0; i < n_live; i++)
		free(live[i]);
}

#define SIZED_BLOCKS 1000
#define SIZED_CALLOCS 100

/* asked and usable: [0] malloc's blocks, [1] calloc's. */
NOINLINE static void sized_blocks(void **v, size_t *asked, size_t *usable)
{
	for (int i = 0; i < SIZED_BLOCKS + SIZED_CALLOCS; i++) {
		/* Sizes over the whole range of small chunks, every residue mod 16 among them. */
		size_t size = (size_t)(i * 4007) % 40000;
		if (i < SIZED_BLOCKS)
			v[i] = malloc(size);
		else
			v[i] = calloc(size / 8 + 1, 8), size = (size / 8 + 1) * 8;
		if (!v[i])
			exit(10);
		memset(v[i], 2, size);
		asked[i >= SIZED_BLOCKS] += size;
		usable[i >= SIZED_BLOCKS] += malloc_usable_size(v[i]);
	}
}

static void run_sizes(void)
{
	static void *v[SIZED_BLOCKS + SIZED_CALLOCS];
	size_t asked[2] = { 0, 0 }, usable[2] = { 0, 0 };
	sized_blocks(v, asked, usable);
	printf("malloc asked=%zu usable=%zu\ncalloc asked=%zu usable=%zu\n", asked[0], usable[0], asked[1], usable[1]);
	for (int i = 0; i < SIZED_BLOCKS + SIZED_CALLOCS; i++)
		free(v[i]);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "chain";
	/* stdio takes its buffer now (from main), not in the middle of a scenario. */
	printf("%s start\n", mode);
	if (!strcmp(mode, "chain"))
		run_chain();
	else if (!strcmp(mode, "pairs") && argc > 2)
		run_pairs(atol(argv[2]));
	else if (!strcmp(mode, "realloc"))
		run_realloc();
	else if (!strcmp(mode, "sizes"))
		run_sizes();
	else {
		fprintf(stderr, "usage: heap_chain chain | pairs N | realloc | sizes\n");
		return 2;
	}
	printf("%s done\n", mode);
	return 0;
}
