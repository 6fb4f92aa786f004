/* Unit tests for tracer/heap: live blocks charged into a ledger over a fake address space, checked against a reference model. */
#include <stdlib.h>
#include <string.h>

#include "common/snap.h"
#include "tests/unit/suites.h"
#include "tracer/memory/heap.h"
#include "tracer/memory/ledger.h"

/* An assertion for hot loops: a passing ck_assert costs a message to the runner in fork mode, this costs nothing. */
#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)
#define REQUIRE_EQ(a, b) do { \
	unsigned long a_ = (unsigned long)(a), b_ = (unsigned long)(b); \
	REQUIRE(a_ == b_, "%s == %s failed: %lu, %lu", #a, #b, a_, b_); \
} while (0)

#define PG 4096ULL
#define BASE 0x10000000ULL          /* the fake space where large blocks live, measured page by page */
#define NPAGES 4096
#define SMALL 0x7f0000000000ULL     /* small blocks, never measured, so outside the fake space */
#define LARGE (16 * PG)

/* The fake target: one flag per page of [BASE, BASE + NPAGES pages), set while the page is resident. */
static struct fake {
	unsigned char res[NPAGES];
	uint64_t calls;
} F;

static uint64_t A(unsigned page) { return BASE + page * PG; }

static void setup(void) { memset(&F, 0, sizeof(F)); }

static void touch(unsigned p0, unsigned p1)
{
	for (unsigned p = p0; p < p1; p++)
		F.res[p] = 1;
}

static void drop(unsigned p0, unsigned p1)
{
	for (unsigned p = p0; p < p1; p++)
		F.res[p] = 0;
}

static uint64_t resident_bytes(uint64_t start, uint64_t end)
{
	uint64_t n = 0;
	for (uint64_t a = start; a < end; a += PG)
		n += F.res[(a - BASE) / PG];
	return n * PG;
}

static uint64_t fake_measure(void *arg, uint64_t start, uint64_t end)
{
	struct fake *f = arg;
	f->calls++;
	REQUIRE(start < end, "measure of an empty range %#lx-%#lx", (unsigned long)start, (unsigned long)end);
	REQUIRE(start % PG == 0 && end % PG == 0, "measure of an unaligned range %#lx-%#lx",
		(unsigned long)start, (unsigned long)end);
	REQUIRE(start >= BASE && end <= A(NPAGES), "measure outside the fake space: %#lx-%#lx",
		(unsigned long)start, (unsigned long)end);
	return resident_bytes(start, end);
}

static void expect_stack(const struct ledger *l, uint32_t stack, uint64_t charged, uint64_t reserved, uint64_t count)
{
	if (stack >= l->n_stacks) {
		REQUIRE(charged == 0 && reserved == 0 && count == 0, "stack %u past the %zu sums", stack, l->n_stacks);
		return;
	}
	REQUIRE(l->by_stack[stack].charged == charged, "stack %u charged %lu, expected %lu", stack,
		(unsigned long)l->by_stack[stack].charged, (unsigned long)charged);
	REQUIRE(l->by_stack[stack].reserved == reserved, "stack %u reserved %lu, expected %lu", stack,
		(unsigned long)l->by_stack[stack].reserved, (unsigned long)reserved);
	REQUIRE(l->by_stack[stack].count == count, "stack %u holds %lu blocks, expected %lu", stack,
		(unsigned long)l->by_stack[stack].count, (unsigned long)count);
	if (count)
		REQUIRE(l->kind[stack] == SNAP_KIND_HEAP, "stack %u of kind %c", stack, l->kind[stack]);
}

static void expect_block(const struct heap *h, uint64_t ptr, uint64_t size, uint32_t stack, int large)
{
	const struct heap_block *b = heap_find(h, ptr);
	REQUIRE(b, "block %#lx not found", (unsigned long)ptr);
	REQUIRE(b->ptr == ptr && b->size == size && b->stack == stack && b->large == large,
		"block %#lx found as %#lx size %lu stack %u large %d, expected size %lu stack %u large %d",
		(unsigned long)ptr, (unsigned long)b->ptr, (unsigned long)b->size, b->stack, b->large,
		(unsigned long)size, stack, large);
}

/*
 * The table itself: every entry is reached from its home slot without
 * crossing an empty one (so find cannot miss it), no address twice, and n
 * counts the entries.
 */
static void check_table(const struct heap *h)
{
	size_t used = 0;
	for (size_t i = 0; i < h->cap; i++) {
		if (!h->v[i].ptr)
			continue;
		used++;
		REQUIRE(heap_find(h, h->v[i].ptr) == &h->v[i], "slot %zu (%#lx) is not what find returns", i,
			(unsigned long)h->v[i].ptr);
	}
	REQUIRE_EQ(used, h->n);
	REQUIRE(h->n * 4 <= h->cap * 3, "%zu blocks in %zu slots", h->n, h->cap);
}

/* What tracer/ptrace/breakpoints.c record() does when a realloc returns result for old. */
static void realloc_as_traced(struct heap *h, uint64_t old, uint64_t size, uint64_t result, uint32_t stack)
{
	if (old && (result || size == 0))
		heap_free(h, old);
	if (result)
		ck_assert_int_eq(heap_alloc(h, result, size, stack), 0);
}

START_TEST(test_malloc_and_free_charge_each_stack_exactly)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	ck_assert_int_eq(heap_alloc(&h, SMALL + 0x10, 100, 1), 0);
	ck_assert_int_eq(heap_alloc(&h, SMALL + 0x90, 200, 2), 0);
	ck_assert_int_eq(heap_alloc(&h, SMALL + 0x170, 300, 2), 0);
	/* A stack id past the ledger's first allocation of sums. */
	ck_assert_int_eq(heap_alloc(&h, SMALL + 0x2a0, LARGE - 1, 70000), 0);
	expect_stack(&l, 1, 100, 100, 1);
	expect_stack(&l, 2, 500, 500, 2);
	expect_stack(&l, 70000, LARGE - 1, LARGE - 1, 1);
	expect_stack(&l, 0, 0, 0, 0);
	ck_assert_uint_eq(l.charged, 600 + LARGE - 1);
	ck_assert_uint_eq(l.reserved, 600 + LARGE - 1);
	ck_assert_uint_eq(h.n, 4);
	ck_assert_uint_eq(h.allocs, 4);
	expect_block(&h, SMALL + 0x10, 100, 1, 0);
	expect_block(&h, SMALL + 0x90, 200, 2, 0);
	expect_block(&h, SMALL + 0x170, 300, 2, 0);
	expect_block(&h, SMALL + 0x2a0, LARGE - 1, 70000, 0);
	/* Small blocks are charged at their size: nothing is measured, no range is made. */
	ck_assert_uint_eq(l.measures, 0);
	ck_assert_uint_eq(l.n_segs, 0);

	ck_assert_int_eq(heap_free(&h, SMALL + 0x90), 1);
	expect_stack(&l, 2, 300, 300, 1);
	ck_assert_ptr_null(heap_find(&h, SMALL + 0x90));
	expect_block(&h, SMALL + 0x170, 300, 2, 0);
	ck_assert_int_eq(heap_free(&h, SMALL + 0x10), 1);
	expect_stack(&l, 1, 0, 0, 0);
	ck_assert_int_eq(heap_free(&h, SMALL + 0x2a0), 1);
	ck_assert_int_eq(heap_free(&h, SMALL + 0x170), 1);
	for (uint32_t s = 0; s < l.n_stacks; s++)
		expect_stack(&l, s, 0, 0, 0);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(l.reserved, 0);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_eq(h.frees, 4);
	ck_assert_uint_eq(h.unknown_frees, 0);
	check_table(&h);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_free_of_an_unknown_pointer_is_ignored_and_counted)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	/* Attached to a running program: its first free is of a block made before ptfil came. */
	ck_assert_int_eq(heap_free(&h, SMALL + 0x40), 0);
	ck_assert_uint_eq(h.unknown_frees, 1);
	ck_assert_uint_eq(h.frees, 0);
	ck_assert_uint_eq(l.charged, 0);

	ck_assert_int_eq(heap_alloc(&h, SMALL + 0x100, 64, 3), 0);
	touch(0, 8);
	ck_assert_int_eq(heap_alloc(&h, A(0), 8 * PG, 4), 0);
	uint64_t charged = l.charged, reserved = l.reserved, measures = l.measures;
	ck_assert_uint_eq(charged, 64 + 8 * PG);
	/* Never allocated, inside a known block, or in the large block's pages: nothing changes. */
	ck_assert_int_eq(heap_free(&h, SMALL + 0x200), 0);
	ck_assert_int_eq(heap_free(&h, SMALL + 0x110), 0);
	ck_assert_int_eq(heap_free(&h, A(1)), 0);
	ck_assert_uint_eq(h.unknown_frees, 4);
	/* free(NULL) is no free at all. */
	ck_assert_int_eq(heap_free(&h, 0), 0);
	ck_assert_uint_eq(h.unknown_frees, 4);
	ck_assert_uint_eq(l.charged, charged);
	ck_assert_uint_eq(l.reserved, reserved);
	ck_assert_uint_eq(l.measures, measures);
	expect_stack(&l, 3, 64, 64, 1);
	expect_stack(&l, 4, 8 * PG, 8 * PG, 1);
	ck_assert_uint_eq(h.n, 2);
	ck_assert_uint_eq(h.frees, 0);

	/* A double free: the second is unknown and takes nothing twice. */
	ck_assert_int_eq(heap_free(&h, SMALL + 0x100), 1);
	ck_assert_int_eq(heap_free(&h, SMALL + 0x100), 0);
	ck_assert_int_eq(heap_free(&h, A(0)), 1);
	ck_assert_int_eq(heap_free(&h, A(0)), 0);
	ck_assert_uint_eq(h.frees, 2);
	ck_assert_uint_eq(h.unknown_frees, 6);
	expect_stack(&l, 3, 0, 0, 0);
	expect_stack(&l, 4, 0, 0, 0);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(l.reserved, 0);
	ck_assert_uint_eq(l.n_segs, 0);
	/* A NULL result is no block. */
	ck_assert_int_eq(heap_alloc(&h, 0, 100, 3), 0);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_ptr_null(heap_find(&h, 0));
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_same_pointer_reused_after_free)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	uint64_t p = SMALL + 0x1000;
	for (uint32_t round = 0; round < 3; round++) {
		ck_assert_int_eq(heap_alloc(&h, p, 100 + round, 10 + round), 0);
		expect_block(&h, p, 100 + round, 10 + round, 0);
		expect_stack(&l, 10 + round, 100 + round, 100 + round, 1);
		ck_assert_uint_eq(l.charged, 100 + round);
		ck_assert_int_eq(heap_free(&h, p), 1);
		ck_assert_ptr_null(heap_find(&h, p));
		expect_stack(&l, 10 + round, 0, 0, 0);
	}
	/* The same address as a large block (glibc hands a freed mmap'd chunk's address out again). */
	touch(0, 20);
	ck_assert_int_eq(heap_alloc(&h, A(0) + 16, 20 * PG - 16, 5), 0);
	expect_block(&h, A(0) + 16, 20 * PG - 16, 5, 1);
	ck_assert_int_eq(heap_free(&h, A(0) + 16), 1);
	ck_assert_int_eq(heap_alloc(&h, A(0) + 16, 100, 6), 0);
	expect_block(&h, A(0) + 16, 100, 6, 0);
	expect_stack(&l, 5, 0, 0, 0);
	expect_stack(&l, 6, 100, 100, 1);
	ck_assert_uint_eq(l.n_segs, 0);

	/* A free that was not seen: the new block at the address replaces the old one and its charge. */
	ck_assert_int_eq(heap_alloc(&h, p, 500, 7), 0);
	ck_assert_int_eq(heap_alloc(&h, p, 40, 8), 0);
	expect_block(&h, p, 40, 8, 0);
	expect_stack(&l, 7, 0, 0, 0);
	expect_stack(&l, 8, 40, 40, 1);
	ck_assert_int_eq(heap_alloc(&h, A(0) + 16, 20 * PG - 16, 9), 0);
	expect_stack(&l, 6, 0, 0, 0);
	expect_stack(&l, 9, 20 * PG - 16, 20 * PG - 16, 1);
	ck_assert_uint_eq(h.n, 2);
	ck_assert_uint_eq(l.charged, 40 + 20 * PG - 16);
	ck_assert_int_eq(heap_alloc(&h, A(0) + 16, 32, 9), 0);
	expect_stack(&l, 9, 32, 32, 1);
	ck_assert_uint_eq(l.n_segs, 0);
	ck_assert_uint_eq(l.charged, 40 + 32);
	check_table(&h);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_realloc_as_the_tracer_records_it)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	uint64_t p = SMALL + 0x40, q = SMALL + 0x4000;

	/* realloc(NULL, n) is malloc. */
	realloc_as_traced(&h, 0, 100, p, 1);
	expect_block(&h, p, 100, 1, 0);
	expect_stack(&l, 1, 100, 100, 1);

	/* Grown in place: one block, at its new size, charged to the stack that grew it. */
	realloc_as_traced(&h, p, 250, p, 2);
	expect_block(&h, p, 250, 2, 0);
	expect_stack(&l, 1, 0, 0, 0);
	expect_stack(&l, 2, 250, 250, 1);
	ck_assert_uint_eq(h.n, 1);

	/* Moved: the old address is gone, the new one holds the block. */
	realloc_as_traced(&h, p, 1000, q, 3);
	ck_assert_ptr_null(heap_find(&h, p));
	expect_block(&h, q, 1000, 3, 0);
	expect_stack(&l, 2, 0, 0, 0);
	expect_stack(&l, 3, 1000, 1000, 1);
	ck_assert_uint_eq(l.charged, 1000);

	/* Failed (NULL for a size): the block stays as it was. */
	realloc_as_traced(&h, q, 1ULL << 40, 0, 4);
	expect_block(&h, q, 1000, 3, 0);
	expect_stack(&l, 3, 1000, 1000, 1);
	expect_stack(&l, 4, 0, 0, 0);

	/* Grown in place to a large block's size, then shrunk back: measured while large, by size after. */
	drop(0, NPAGES);
	realloc_as_traced(&h, 0, 500, A(0), 5);
	touch(0, 3);
	realloc_as_traced(&h, A(0), 20 * PG, A(0), 6);
	expect_block(&h, A(0), 20 * PG, 6, 1);
	expect_stack(&l, 5, 0, 0, 0);
	expect_stack(&l, 6, 3 * PG, 20 * PG, 1);
	ck_assert_uint_eq(l.n_segs, 1);
	realloc_as_traced(&h, A(0), 700, A(0), 7);
	expect_block(&h, A(0), 700, 7, 0);
	expect_stack(&l, 6, 0, 0, 0);
	expect_stack(&l, 7, 700, 700, 1);
	ck_assert_uint_eq(l.n_segs, 0);

	/* realloc(p, 0) returning NULL frees p. */
	realloc_as_traced(&h, q, 0, 0, 8);
	ck_assert_ptr_null(heap_find(&h, q));
	expect_stack(&l, 3, 0, 0, 0);
	expect_stack(&l, 8, 0, 0, 0);
	/* realloc(p, 0) returning a minimal block: a zero-size block in its place. */
	realloc_as_traced(&h, A(0), 0, SMALL + 0x80, 9);
	ck_assert_ptr_null(heap_find(&h, A(0)));
	expect_block(&h, SMALL + 0x80, 0, 9, 0);
	expect_stack(&l, 7, 0, 0, 0);
	expect_stack(&l, 9, 0, 0, 1);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(h.n, 1);
	/* A realloc of a block from before attach: the new block is charged, nothing else moves. */
	realloc_as_traced(&h, SMALL + 0x9990, 64, SMALL + 0xa000, 10);
	expect_stack(&l, 10, 64, 64, 1);
	ck_assert_uint_eq(h.unknown_frees, 1);
	ck_assert_uint_eq(l.charged, 64);
	check_table(&h);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_zero_size_blocks_are_counted_and_charge_nothing)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	for (unsigned i = 0; i < 5; i++)
		ck_assert_int_eq(heap_alloc(&h, SMALL + 32 * i, 0, 2), 0);
	ck_assert_int_eq(heap_alloc(&h, SMALL + 0x1000, 10, 2), 0);
	expect_stack(&l, 2, 10, 10, 6);
	ck_assert_uint_eq(h.n, 6);
	for (unsigned i = 0; i < 5; i++)
		expect_block(&h, SMALL + 32 * i, 0, 2, 0);
	ck_assert_uint_eq(l.measures, 0);
	for (unsigned i = 0; i < 5; i++)
		ck_assert_int_eq(heap_free(&h, SMALL + 32 * i), 1);
	expect_stack(&l, 2, 10, 10, 1);
	ck_assert_uint_eq(h.n, 1);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_threshold_boundary_size_equal_is_large)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	/* Nothing resident: a small block is charged its size regardless, a large one nothing yet. */
	ck_assert_int_eq(heap_alloc(&h, A(0), LARGE - 1, 1), 0);
	expect_block(&h, A(0), LARGE - 1, 1, 0);
	expect_stack(&l, 1, LARGE - 1, LARGE - 1, 1);
	ck_assert_uint_eq(l.measures, 0);
	ck_assert_int_eq(heap_alloc(&h, A(100), LARGE, 2), 0);
	expect_block(&h, A(100), LARGE, 2, 1);
	expect_stack(&l, 2, 0, LARGE, 1);
	ck_assert_uint_eq(l.measures, 1);
	ck_assert_uint_eq(l.n_segs, 1);
	ck_assert_uint_eq(l.segs[0].start, A(100));
	ck_assert_uint_eq(l.segs[0].end, A(100) + LARGE);
	ck_assert_uint_eq(l.segs[0].stack, 2);
	heap_fin(&h);
	ledger_fin(&l);

	/* A threshold of 0 means the default one. */
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, 0, PG);
	ck_assert_uint_eq(h.threshold, HEAP_DEFAULT_LARGE);
	ck_assert_int_eq(heap_alloc(&h, A(0), HEAP_DEFAULT_LARGE - 1, 1), 0);
	ck_assert_int_eq(heap_alloc(&h, A(100), HEAP_DEFAULT_LARGE, 2), 0);
	expect_block(&h, A(0), HEAP_DEFAULT_LARGE - 1, 1, 0);
	expect_block(&h, A(100), HEAP_DEFAULT_LARGE, 2, 1);
	expect_stack(&l, 1, HEAP_DEFAULT_LARGE - 1, HEAP_DEFAULT_LARGE - 1, 1);
	expect_stack(&l, 2, 0, HEAP_DEFAULT_LARGE, 1);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_large_block_charged_by_residency_and_measured_again)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	/* As glibc's mmap'd chunks: 16 bytes into a page, ending 16 bytes into the last one. */
	uint64_t ptr = A(10) + 16, size = 20 * PG;
	touch(10, 11);
	touch(14, 18);
	ck_assert_int_eq(heap_alloc(&h, ptr, size, 3), 0);
	/* Edges by size (PG - 16 at the head, 16 at the tail), the 19 inner pages by residency. */
	ck_assert_uint_eq(l.n_segs, 1);
	ck_assert_uint_eq(l.segs[0].start, A(11));
	ck_assert_uint_eq(l.segs[0].end, A(30));
	expect_stack(&l, 3, PG + 4 * PG, size, 1);
	ck_assert_uint_eq(l.charged, 5 * PG);
	ck_assert_uint_eq(l.measures, 1);

	/* The program writes to more of it: charged when measured again, not before. */
	touch(20, 31);
	expect_stack(&l, 3, 5 * PG, size, 1);
	ledger_refresh(&l, ptr, ptr + size);
	expect_stack(&l, 3, PG + 14 * PG, size, 1);
	/* Pages given back (madvise) leave the charge when measured. */
	drop(11, 25);
	ledger_refresh_all(&l);
	expect_stack(&l, 3, PG + 5 * PG, size, 1);
	ck_assert_uint_eq(l.charged, 6 * PG);

	/* A second large block, page-aligned on both ends: no edges at all. */
	touch(40, 60);
	ck_assert_int_eq(heap_alloc(&h, A(40), 20 * PG, 4), 0);
	expect_stack(&l, 4, 20 * PG, 20 * PG, 1);
	ck_assert_uint_eq(l.n_segs, 2);
	ck_assert_int_eq(heap_free(&h, ptr), 1);
	expect_stack(&l, 3, 0, 0, 0);
	ck_assert_uint_eq(l.n_segs, 1);
	ck_assert_uint_eq(l.segs[0].start, A(40));
	ck_assert_int_eq(heap_free(&h, A(40)), 1);
	expect_stack(&l, 4, 0, 0, 0);
	ck_assert_uint_eq(l.n_segs, 0);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(l.reserved, 0);
	/* Only ranges inside the blocks were ever measured (fake_measure checks the rest). */
	ck_assert_uint_eq(F.calls, l.measures);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_large_block_edges_rounded_to_the_heap_page_size)
{
	struct ledger l;
	struct heap h;
	/* A large block with no whole page inside: all of it charged by size, nothing measured. */
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, 100, PG);
	touch(0, 4);
	ck_assert_int_eq(heap_alloc(&h, A(1) + 100, 200, 1), 0);
	ck_assert_int_eq(heap_alloc(&h, A(2) + PG / 2, PG, 2), 0);
	expect_block(&h, A(1) + 100, 200, 1, 1);
	expect_block(&h, A(2) + PG / 2, PG, 2, 1);
	expect_stack(&l, 1, 200, 200, 1);
	expect_stack(&l, 2, PG, PG, 1);
	ck_assert_uint_eq(l.measures, 0);
	ck_assert_uint_eq(l.n_segs, 0);
	/* One page more and its whole page is measured. */
	ck_assert_int_eq(heap_alloc(&h, A(5) + PG / 2, 2 * PG, 3), 0);
	ck_assert_uint_eq(l.n_segs, 1);
	ck_assert_uint_eq(l.segs[0].start, A(6));
	ck_assert_uint_eq(l.segs[0].end, A(7));
	expect_stack(&l, 3, PG, 2 * PG, 1);
	touch(6, 7);
	ledger_refresh_all(&l);
	expect_stack(&l, 3, 2 * PG, 2 * PG, 1);
	ck_assert_int_eq(heap_free(&h, A(1) + 100), 1);
	ck_assert_int_eq(heap_free(&h, A(2) + PG / 2), 1);
	ck_assert_int_eq(heap_free(&h, A(5) + PG / 2), 1);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(l.n_segs, 0);
	heap_fin(&h);
	ledger_fin(&l);

	/* 16 KiB pages: the inner range follows the heap's page size, not 4 KiB. */
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, 4 * PG);
	drop(0, NPAGES);
	touch(0, 64);
	uint64_t ptr = A(1) + 16, size = 25 * PG;   /* ends 16 bytes into page 26 */
	ck_assert_int_eq(heap_alloc(&h, ptr, size, 5), 0);
	ck_assert_uint_eq(l.n_segs, 1);
	ck_assert_uint_eq(l.segs[0].start, A(4));
	ck_assert_uint_eq(l.segs[0].end, A(24));
	/* Head: A(4) - ptr; tail: ptr + size - A(24); between, 20 pages resident. */
	expect_stack(&l, 5, (A(4) - ptr) + (ptr + size - A(24)) + 20 * PG, size, 1);
	ck_assert_uint_eq(l.charged, size);
	drop(0, 64);
	ledger_refresh_all(&l);
	expect_stack(&l, 5, size - 20 * PG, size, 1);
	ck_assert_int_eq(heap_free(&h, ptr), 1);
	expect_stack(&l, 5, 0, 0, 0);
	ck_assert_uint_eq(l.n_segs, 0);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_peak_kept_when_a_block_is_freed_right_after_a_high)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	ck_assert_int_eq(heap_alloc(&h, SMALL, 1000, 1), 0);
	ck_assert_int_eq(ledger_check_peak(&l, 1.0, 0), 1);
	ck_assert_uint_eq(l.peak.charged, 1000);

	/* A small block at the top, freed at once: the tracer checks the peak first, then forgets it. */
	ck_assert_int_eq(heap_alloc(&h, SMALL + 0x1000, LARGE - 1, 3), 0);
	ck_assert_int_eq(ledger_check_peak(&l, 2.0, 0), 1);
	ck_assert_int_eq(heap_free(&h, SMALL + 0x1000), 1);
	ck_assert_uint_eq(l.charged, 1000);
	ck_assert_uint_eq(l.peak.charged, 1000 + LARGE - 1);
	ck_assert_uint_gt(l.n_at_peak, 3);
	ck_assert_uint_eq(l.at_peak[3].charged, LARGE - 1);
	ck_assert_uint_eq(l.at_peak[3].count, 1);
	expect_stack(&l, 3, 0, 0, 0);

	/* A large block is mapped, then written to while no event is seen. */
	uint64_t big = A(0) + 16, size = 100 * PG;
	ck_assert_int_eq(heap_alloc(&h, big, size, 2), 0);
	ck_assert_uint_eq(l.charged, 1000 + PG);
	ck_assert_int_eq(ledger_check_peak(&l, 3.0, 0), 0);
	touch(0, 101);
	/* Its free, as the tracer does it: measure the block, check the peak, then forget it. */
	const struct heap_block *b = heap_find(&h, big);
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(b->large, 1);
	ledger_refresh(&l, b->ptr, b->ptr + b->size);
	ck_assert_int_eq(ledger_check_peak(&l, 4.0, 0), 1);
	ck_assert_int_eq(heap_free(&h, big), 1);
	ck_assert_uint_eq(l.charged, 1000);
	ck_assert_uint_eq(l.peak.charged, 1000 + size);
	ck_assert_uint_eq(l.peak.reserved, 1000 + size);
	ck_assert(l.peak.time == 4.0);
	ck_assert_uint_eq(l.at_peak[2].charged, size);
	ck_assert_uint_eq(l.at_peak[2].count, 1);
	ck_assert_uint_eq(l.at_peak[1].charged, 1000);
	ck_assert_uint_eq(l.at_peak[3].count, 0);
	expect_stack(&l, 2, 0, 0, 0);
	/* Lower since: no new peak, the copy stays. */
	ck_assert_int_eq(ledger_check_peak(&l, 5.0, 0), 0);
	ck_assert_uint_eq(l.at_peak[2].charged, size);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_clear_forgets_every_block_and_its_charge)
{
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	touch(0, NPAGES);
	for (unsigned i = 0; i < 2000; i++)
		ck_assert_int_eq(heap_alloc(&h, SMALL + 64 * i, i, i % 7), 0);
	for (unsigned i = 0; i < 10; i++)
		ck_assert_int_eq(heap_alloc(&h, A(40 * i) + 16, 30 * PG, 8), 0);
	ck_assert_uint_eq(l.n_segs, 10);
	ck_assert_uint_gt(l.charged, 0);
	heap_clear(&h);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(l.reserved, 0);
	ck_assert_uint_eq(l.n_segs, 0);
	for (uint32_t s = 0; s < l.n_stacks; s++)
		expect_stack(&l, s, 0, 0, 0);
	ck_assert_ptr_null(heap_find(&h, SMALL + 64));
	ck_assert_ptr_null(heap_find(&h, A(0) + 16));
	check_table(&h);
	/* The new image's blocks are recorded as before; the old ones' frees are unknown. */
	ck_assert_int_eq(heap_alloc(&h, SMALL + 64, 77, 1), 0);
	expect_stack(&l, 1, 77, 77, 1);
	ck_assert_int_eq(heap_free(&h, SMALL + 128), 0);
	ck_assert_uint_eq(l.charged, 77);
	heap_fin(&h);
	ck_assert_ptr_null(heap_find(&h, SMALL + 64));
	ledger_fin(&l);
}
END_TEST

START_TEST(test_clustered_pointers_spread_over_the_table)
{
	/* Heap addresses are aligned and close together; the table must not pile them into long probe runs. */
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	static const uint64_t steps[] = { 16, 32, 48, 4096, 1 << 20 };
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		for (uint64_t i = 0; i < 100000; i++)
			REQUIRE_EQ(heap_alloc(&h, SMALL + 16 + steps[k] * i, 8, 1), 0);
		/* Runs of occupied slots: a find of an address not there (an unknown free) walks to the end of one. */
		uint64_t seen = 0, longest = 0;
		size_t start = 0;
		while (start < h.cap && h.v[start].ptr)
			start++;
		REQUIRE(start < h.cap, "no empty slot");
		for (size_t j = 1, run = 0; j <= h.cap; j++) {
			if (h.v[(start + j) & (h.cap - 1)].ptr) {
				run++;
				continue;
			}
			seen += run * run;
			if (run > longest)
				longest = run;
			run = 0;
		}
		REQUIRE(seen < 4 * h.n && longest < 64, "step %lu: an address sits in a run of %.2f slots on average, longest %lu",
			(unsigned long)steps[k], (double)seen / (double)h.n, (unsigned long)longest);
		heap_clear(&h);
	}
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

/*
 * The reference model for many blocks: every address ever used, whether its
 * block is live, and per stack what the ledger must hold. Large blocks live
 * in slots of the fake space, one block a slot at most.
 */
#define NSTACKS 16
#define NSLOTS 64
#define SLOT_PAGES 32
#define MAXBLOCKS 400000

struct mblock {
	uint64_t ptr, size;
	uint32_t stack;
	int live;
};

struct mlarge {
	uint64_t ptr, size, charged;
	uint32_t stack;
	int live;
};

static struct {
	struct mblock b[MAXBLOCKS];
	size_t n;
	size_t live[MAXBLOCKS], n_live;   /* indexes into b of the live blocks */
	size_t pos[MAXBLOCKS];            /* where each live block sits in live[] */
	struct mlarge large[NSLOTS];
	struct ledger_charge per[NSTACKS];
	uint64_t allocs, frees, unknown;
} M;

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint64_t large_charge(const struct mlarge *b)
{
	uint64_t lo = (b->ptr + PG - 1) & ~(PG - 1), hi = (b->ptr + b->size) & ~(PG - 1);
	return b->size - (hi - lo) + resident_bytes(lo, hi);
}

static void model_charge(uint32_t stack, uint64_t charged, uint64_t size, int sign)
{
	if (sign > 0) {
		M.per[stack].charged += charged;
		M.per[stack].reserved += size;
		M.per[stack].count++;
	} else {
		M.per[stack].charged -= charged;
		M.per[stack].reserved -= size;
		M.per[stack].count--;
	}
}

static void model_check_sums(const struct ledger *l, const struct heap *h, int step)
{
	uint64_t charged = 0, reserved = 0;
	for (uint32_t s = 0; s < NSTACKS; s++) {
		const struct ledger_charge *c = s < l->n_stacks ? &l->by_stack[s] : &(struct ledger_charge){ 0, 0, 0 };
		REQUIRE(c->charged == M.per[s].charged && c->reserved == M.per[s].reserved && c->count == M.per[s].count,
			"step %d stack %u: charged %lu reserved %lu count %lu, model %lu %lu %lu", step, s,
			(unsigned long)c->charged, (unsigned long)c->reserved, (unsigned long)c->count,
			(unsigned long)M.per[s].charged, (unsigned long)M.per[s].reserved, (unsigned long)M.per[s].count);
		charged += M.per[s].charged;
		reserved += M.per[s].reserved;
	}
	REQUIRE_EQ(l->charged, charged);
	REQUIRE_EQ(l->reserved, reserved);
	REQUIRE_EQ(h->allocs, M.allocs);
	REQUIRE_EQ(h->frees, M.frees);
	REQUIRE_EQ(h->unknown_frees, M.unknown);
}

/* Every address ever used: found as its live block, or not found once freed. */
static void model_check_all(const struct heap *h)
{
	size_t live = 0;
	for (size_t i = 0; i < M.n; i++) {
		const struct heap_block *b = heap_find(h, M.b[i].ptr);
		if (!M.b[i].live) {
			REQUIRE(!b, "freed block %#lx still found", (unsigned long)M.b[i].ptr);
			continue;
		}
		live++;
		REQUIRE(b && b->ptr == M.b[i].ptr && b->size == M.b[i].size && b->stack == M.b[i].stack && !b->large,
			"live block %#lx lost or changed", (unsigned long)M.b[i].ptr);
	}
	for (unsigned s = 0; s < NSLOTS; s++) {
		const struct mlarge *m = &M.large[s];
		if (!m->ptr)
			continue;
		const struct heap_block *b = heap_find(h, m->ptr);
		if (!m->live) {
			REQUIRE(!b, "freed large block %#lx still found", (unsigned long)m->ptr);
			continue;
		}
		live++;
		REQUIRE(b && b->ptr == m->ptr && b->size == m->size && b->stack == m->stack && b->large,
			"live large block %#lx lost or changed", (unsigned long)m->ptr);
	}
	REQUIRE_EQ(h->n, live);
	check_table(h);
}

static void model_free_small(struct heap *h, size_t k)
{
	size_t i = M.live[k];
	REQUIRE_EQ(heap_free(h, M.b[i].ptr), 1);
	M.b[i].live = 0;
	model_charge(M.b[i].stack, M.b[i].size, M.b[i].size, -1);
	M.live[k] = M.live[--M.n_live];
	M.pos[M.live[k]] = k;
	M.frees++;
}

static void model_alloc_small(struct heap *h, uint64_t ptr, size_t i)
{
	uint64_t size = rnd() % 3 ? rnd() % 512 : rnd() % LARGE;
	uint32_t stack = (uint32_t)(rnd() % NSTACKS);
	REQUIRE_EQ(heap_alloc(h, ptr, size, stack), 0);
	M.b[i] = (struct mblock){ ptr, size, stack, 1 };
	M.pos[i] = M.n_live;
	M.live[M.n_live++] = i;
	model_charge(stack, size, size, 1);
	M.allocs++;
}

static const uint64_t seeds[] = { 0x9e3779b97f4a7c15ULL, 0x243f6a8885a308d3ULL };

START_TEST(test_many_blocks_with_frees_interleaved_stay_consistent)
{
	memset(&M, 0, sizeof(M));
	rng_state = seeds[_i];
	struct ledger l;
	struct heap h;
	ledger_init(&l, fake_measure, &F);
	heap_init(&h, &l, LARGE, PG);
	uint64_t next = SMALL + 16;
	size_t most = 0;
	unsigned ops[7] = { 0 };
	/* Up past 100,000 live blocks, then down to none, with frees all along. */
	for (int step = 0, phase = 0; phase < 2; step++) {
		unsigned op = (unsigned)(rnd() % 100);
		if (phase == 0 && M.n_live >= 110000)
			phase = 1;
		if (phase == 1 && M.n_live == 0)
			break;
		unsigned alloc_share = phase == 0 ? 72 : 20;
		if (op < alloc_share && M.n < MAXBLOCKS) {
			/* A new address, or (one time in eight) one freed earlier. */
			size_t i = M.n++;
			uint64_t ptr;
			size_t reuse = M.n > 1 ? (size_t)(rnd() % (M.n - 1)) : 0;
			if (rnd() % 8 == 0 && M.n > 1 && !M.b[reuse].live && M.b[reuse].ptr) {
				ptr = M.b[reuse].ptr;
				M.b[reuse].ptr = 0;   /* the address now belongs to entry i */
				ops[1]++;
			} else {
				ptr = next;
				next += 16 * (1 + rnd() % 40);
				ops[0]++;
			}
			model_alloc_small(&h, ptr, i);
		} else if (op < 94 && M.n_live) {
			model_free_small(&h, (size_t)(rnd() % M.n_live));
			ops[2]++;
		} else if (op < 96) {
			/* An address never allocated, or one already freed. */
			size_t i = M.n ? (size_t)(rnd() % M.n) : 0;
			uint64_t ptr = M.n && !M.b[i].live && M.b[i].ptr ? M.b[i].ptr : next + 16 * (1 + rnd() % 100);
			REQUIRE_EQ(heap_free(&h, ptr), 0);
			M.unknown++;
			ops[3]++;
		} else if (op < 99) {
			/* A large block comes or goes in its slot. */
			unsigned s = (unsigned)(rnd() % NSLOTS);
			struct mlarge *m = &M.large[s];
			if (m->live) {
				REQUIRE_EQ(heap_free(&h, m->ptr), 1);
				model_charge(m->stack, m->charged, m->size, -1);
				m->live = 0;
				M.frees++;
			} else {
				m->ptr = A(s * SLOT_PAGES) + 16 * (rnd() % 4 ? 1 : (rnd() % (PG / 16)));
				m->size = LARGE + rnd() % ((SLOT_PAGES - 2) * PG - LARGE);
				m->stack = (uint32_t)(rnd() % NSTACKS);
				REQUIRE_EQ(heap_alloc(&h, m->ptr, m->size, m->stack), 0);
				m->charged = large_charge(m);
				m->live = 1;
				model_charge(m->stack, m->charged, m->size, 1);
				M.allocs++;
			}
			ops[4]++;
		} else {
			/* The program writes or releases pages; then the tracer measures every range again. */
			unsigned p0 = (unsigned)(rnd() % NPAGES), p1 = p0 + 1 + (unsigned)(rnd() % 200);
			if (p1 > NPAGES)
				p1 = NPAGES;
			if (rnd() % 2)
				touch(p0, p1);
			else
				drop(p0, p1);
			ledger_refresh_all(&l);
			for (unsigned s = 0; s < NSLOTS; s++) {
				struct mlarge *m = &M.large[s];
				if (!m->live)
					continue;
				uint64_t now = large_charge(m);
				M.per[m->stack].charged += now - m->charged;
				m->charged = now;
			}
			ops[5]++;
		}
		model_check_sums(&l, &h, step);
		if (M.n_live > most)
			most = M.n_live;
		if (step % 25000 == 0) {
			model_check_all(&h);
			ops[6]++;
		}
	}
	model_check_all(&h);
	ck_assert_uint_ge(most, 100000);
	for (int k = 0; k < 7; k++)
		ck_assert_uint_gt(ops[k], 0);
	/* The large blocks left go too; then nothing at all is charged. */
	for (unsigned s = 0; s < NSLOTS; s++) {
		struct mlarge *m = &M.large[s];
		if (m->live) {
			REQUIRE_EQ(heap_free(&h, m->ptr), 1);
			model_charge(m->stack, m->charged, m->size, -1);
			m->live = 0;
			M.frees++;
		}
	}
	model_check_sums(&l, &h, -1);
	model_check_all(&h);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(l.reserved, 0);
	ck_assert_uint_eq(l.n_segs, 0);
	ck_assert_uint_eq(F.calls, l.measures);
	heap_fin(&h);
	ledger_fin(&l);
}
END_TEST

Suite *heap_suite(void)
{
	Suite *s = suite_create("heap");
	TCase *tc = tcase_create("heap");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_malloc_and_free_charge_each_stack_exactly);
	tcase_add_test(tc, test_free_of_an_unknown_pointer_is_ignored_and_counted);
	tcase_add_test(tc, test_same_pointer_reused_after_free);
	tcase_add_test(tc, test_realloc_as_the_tracer_records_it);
	tcase_add_test(tc, test_zero_size_blocks_are_counted_and_charge_nothing);
	tcase_add_test(tc, test_threshold_boundary_size_equal_is_large);
	tcase_add_test(tc, test_large_block_charged_by_residency_and_measured_again);
	tcase_add_test(tc, test_large_block_edges_rounded_to_the_heap_page_size);
	tcase_add_test(tc, test_peak_kept_when_a_block_is_freed_right_after_a_high);
	tcase_add_test(tc, test_clear_forgets_every_block_and_its_charge);
	suite_add_tcase(s, tc);

	TCase *mt = tcase_create("heap-many");
	tcase_set_timeout(mt, 120);
	tcase_add_checked_fixture(mt, setup, NULL);
	tcase_add_test(mt, test_clustered_pointers_spread_over_the_table);
	tcase_add_loop_test(mt, test_many_blocks_with_frees_interleaved_stay_consistent, 0,
			    (int)(sizeof(seeds) / sizeof(seeds[0])));
	suite_add_tcase(s, mt);
	return s;
}
