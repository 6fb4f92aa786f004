/* Unit tests for tracer/ledger: ranges charged by residency in a fake address space, kept in step with a reference model. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "tracer/memory/ledger.h"

/* An assertion for hot loops: a passing ck_assert costs a message to the runner in fork mode, this costs nothing. */
#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)
#define REQUIRE_EQ(a, b) do { \
	unsigned long a_ = (unsigned long)(a), b_ = (unsigned long)(b); \
	REQUIRE(a_ == b_, "%s == %s failed: %lu, %lu", #a, #b, a_, b_); \
} while (0)

#define PG 4096ULL
#define BASE 0x10000000ULL
#define NPAGES 256

/* The fake target: one flag per page of [BASE, BASE + NPAGES pages), set while the page is resident. */
struct fake {
	unsigned char res[NPAGES];
	uint64_t calls;
};

static struct fake F;

static uint64_t A(unsigned page) { return BASE + page * PG; }

static void fake_reset(void) { memset(&F, 0, sizeof(F)); }

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

/* What mremap does to the pages: they leave the source and replace whatever was at the destination. */
static void fake_move(unsigned from, unsigned n, unsigned to)
{
	unsigned char tmp[NPAGES];
	memcpy(tmp, &F.res[from], n);
	memset(&F.res[from], 0, n);
	memcpy(&F.res[to], tmp, n);
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
	REQUIRE(start % PG == 0 && end % PG == 0, "measure of an unaligned range");
	REQUIRE(start >= BASE && end <= A(NPAGES), "measure outside the fake space");
	return resident_bytes(start, end);
}

static void setup(void) { fake_reset(); }

/* Recomputes every total from the ranges themselves and checks the ranges are sorted, aligned and disjoint. */
static void check_sums(const struct ledger *l)
{
	uint64_t charged = 0, reserved = 0;
	struct ledger_charge *per = calloc(l->n_stacks ? l->n_stacks : 1, sizeof(*per));
	REQUIRE(per, "out of memory");
	for (size_t i = 0; i < l->n_segs; i++) {
		const struct ledger_seg *s = &l->segs[i];
		REQUIRE(s->start < s->end, "range %zu is empty", i);
		REQUIRE(s->start % PG == 0 && s->end % PG == 0, "range %zu is unaligned", i);
		if (i > 0)
			REQUIRE(l->segs[i - 1].end <= s->start, "ranges %zu and %zu overlap or are out of order", i - 1, i);
		REQUIRE(s->stack < l->n_stacks, "range %zu has stack %u past the %zu sums", i, s->stack, l->n_stacks);
		REQUIRE(s->charged <= s->end - s->start, "range %zu charged more than its size", i);
		charged += s->charged;
		reserved += s->end - s->start;
		per[s->stack].charged += s->charged;
		per[s->stack].reserved += s->end - s->start;
		per[s->stack].count++;
	}
	REQUIRE_EQ(l->charged, charged);
	REQUIRE_EQ(l->reserved, reserved);
	for (size_t k = 0; k < l->n_stacks; k++) {
		REQUIRE(l->by_stack[k].charged == per[k].charged, "stack %zu charged %lu, ranges sum %lu", k,
			      (unsigned long)l->by_stack[k].charged, (unsigned long)per[k].charged);
		REQUIRE(l->by_stack[k].reserved == per[k].reserved, "stack %zu reserved %lu, ranges sum %lu", k,
			      (unsigned long)l->by_stack[k].reserved, (unsigned long)per[k].reserved);
		REQUIRE(l->by_stack[k].count == per[k].count, "stack %zu count %lu, ranges %lu", k,
			      (unsigned long)l->by_stack[k].count, (unsigned long)per[k].count);
	}
	free(per);
}

/* Every range charged with what the fake says is resident in it now. */
static void check_fresh(const struct ledger *l)
{
	for (size_t i = 0; i < l->n_segs; i++)
		REQUIRE(l->segs[i].charged == resident_bytes(l->segs[i].start, l->segs[i].end),
			      "range %zu charged %lu, resident %lu", i, (unsigned long)l->segs[i].charged,
			      (unsigned long)resident_bytes(l->segs[i].start, l->segs[i].end));
}

static void expect_seg(const struct ledger *l, size_t i, unsigned p0, unsigned p1, uint32_t stack)
{
	REQUIRE(i < l->n_segs, "range %zu expected, %zu ranges", i, l->n_segs);
	REQUIRE(l->segs[i].start == A(p0) && l->segs[i].end == A(p1) && l->segs[i].stack == stack,
		      "range %zu is %#lx-%#lx stack %u, expected %#lx-%#lx stack %u", i,
		      (unsigned long)l->segs[i].start, (unsigned long)l->segs[i].end, l->segs[i].stack,
		      (unsigned long)A(p0), (unsigned long)A(p1), stack);
}

static void expect_stack(const struct ledger *l, uint32_t stack, uint64_t charged, uint64_t reserved, uint64_t count)
{
	REQUIRE(stack < l->n_stacks, "stack %u past the %zu sums", stack, l->n_stacks);
	REQUIRE_EQ(l->by_stack[stack].charged, charged);
	REQUIRE_EQ(l->by_stack[stack].reserved, reserved);
	REQUIRE_EQ(l->by_stack[stack].count, count);
}

static void add(struct ledger *l, unsigned p0, unsigned p1, uint32_t stack)
{
	ck_assert_int_eq(ledger_add(l, A(p0), A(p1), stack, 'm'), 0);
	check_sums(l);
}

static void rm(struct ledger *l, unsigned p0, unsigned p1)
{
	ck_assert_int_eq(ledger_remove(l, A(p0), A(p1)), 0);
	check_sums(l);
}

static void mv(struct ledger *l, unsigned from, unsigned n, unsigned to)
{
	fake_move(from, n, to);
	ck_assert_int_eq(ledger_move(l, A(from), n * PG, A(to)), 0);
	check_sums(l);
}

START_TEST(test_add_charges_resident_pages_and_reserves_the_size)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(1, 3);
	touch(5, 6);
	ck_assert_int_eq(ledger_add(&l, A(0), A(8), 3, 'm'), 0);
	check_sums(&l);
	ck_assert_uint_eq(l.n_segs, 1);
	expect_seg(&l, 0, 0, 8, 3);
	ck_assert_uint_eq(l.charged, 3 * PG);
	ck_assert_uint_eq(l.reserved, 8 * PG);
	expect_stack(&l, 3, 3 * PG, 8 * PG, 1);
	ck_assert_int_eq(l.kind[3], 'm');
	ck_assert_uint_eq(l.measures, 1);
	ck_assert_uint_eq(F.calls, 1);

	/* A range nothing was written to is reserved but not charged. */
	ck_assert_int_eq(ledger_add(&l, A(16), A(20), 7, 'b'), 0);
	check_sums(&l);
	ck_assert_uint_eq(l.n_segs, 2);
	expect_seg(&l, 1, 16, 20, 7);
	ck_assert_uint_eq(l.charged, 3 * PG);
	ck_assert_uint_eq(l.reserved, 12 * PG);
	expect_stack(&l, 7, 0, 4 * PG, 1);
	expect_stack(&l, 0, 0, 0, 0);
	ck_assert_int_eq(l.kind[7], 'b');
	ck_assert_uint_eq(l.measures, 2);

	/* Added below an existing range, it still lands in address order. */
	touch(10, 12);
	add(&l, 10, 12, 0);
	expect_seg(&l, 0, 0, 8, 3);
	expect_seg(&l, 1, 10, 12, 0);
	expect_seg(&l, 2, 16, 20, 7);
	ck_assert_uint_eq(l.charged, 5 * PG);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_add_with_stack_ids_past_the_first_allocation)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 3);
	add(&l, 0, 1, 5);
	add(&l, 1, 2, 300);
	add(&l, 2, 4, 70000);
	ck_assert_uint_gt(l.n_stacks, 70000);
	expect_stack(&l, 5, PG, PG, 1);
	expect_stack(&l, 300, PG, PG, 1);
	expect_stack(&l, 70000, PG, 2 * PG, 1);
	ck_assert_int_eq(l.kind[300], 'm');
	ledger_fin(&l);
}
END_TEST

START_TEST(test_add_over_a_live_range_replaces_the_overlap)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 8);
	add(&l, 0, 8, 1);
	ck_assert_uint_eq(l.charged, 8 * PG);
	/* Page 2 is released after the last measure: the cut range must be measured again. */
	drop(2, 3);
	add(&l, 4, 12, 2);
	ck_assert_uint_eq(l.n_segs, 2);
	expect_seg(&l, 0, 0, 4, 1);
	expect_seg(&l, 1, 4, 12, 2);
	expect_stack(&l, 1, 3 * PG, 4 * PG, 1);
	expect_stack(&l, 2, 4 * PG, 8 * PG, 1);
	check_fresh(&l);

	/* The very same range again (MAP_FIXED over it): the new stack takes it whole. */
	add(&l, 4, 12, 5);
	ck_assert_uint_eq(l.n_segs, 2);
	expect_seg(&l, 1, 4, 12, 5);
	expect_stack(&l, 2, 0, 0, 0);
	expect_stack(&l, 5, 4 * PG, 8 * PG, 1);

	/* Over the tail of one range and all of the next. */
	add(&l, 2, 14, 6);
	ck_assert_uint_eq(l.n_segs, 2);
	expect_seg(&l, 0, 0, 2, 1);
	expect_seg(&l, 1, 2, 14, 6);
	expect_stack(&l, 1, 2 * PG, 2 * PG, 1);
	expect_stack(&l, 5, 0, 0, 0);
	expect_stack(&l, 6, 5 * PG, 12 * PG, 1);

	/* Inside one range: it is cut in two around the new one. */
	add(&l, 6, 8, 7);
	ck_assert_uint_eq(l.n_segs, 4);
	expect_seg(&l, 1, 2, 6, 6);
	expect_seg(&l, 2, 6, 8, 7);
	expect_seg(&l, 3, 8, 14, 6);
	expect_stack(&l, 6, 3 * PG, 10 * PG, 2);
	expect_stack(&l, 7, 2 * PG, 2 * PG, 1);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_remove_whole_range_frees_it_without_measuring)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 16);
	add(&l, 0, 8, 1);
	add(&l, 8, 16, 2);
	uint64_t m0 = l.measures;
	rm(&l, 0, 8);
	ck_assert_uint_eq(l.n_segs, 1);
	expect_seg(&l, 0, 8, 16, 2);
	expect_stack(&l, 1, 0, 0, 0);
	expect_stack(&l, 2, 8 * PG, 8 * PG, 1);
	ck_assert_uint_eq(l.charged, 8 * PG);
	ck_assert_uint_eq(l.reserved, 8 * PG);
	ck_assert_uint_eq(l.measures, m0);
	ck_assert_int_eq(ledger_overlaps(&l, A(0), A(8)), 0);
	rm(&l, 8, 16);
	ck_assert_uint_eq(l.n_segs, 0);
	ck_assert_uint_eq(l.charged, 0);
	ck_assert_uint_eq(l.reserved, 0);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_remove_middle_leaves_two_ranges_measured_again)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 10);
	add(&l, 0, 10, 4);
	/* Released after the last measure, one page on each side of the hole. */
	drop(1, 2);
	drop(8, 9);
	uint64_t m0 = l.measures;
	rm(&l, 4, 6);
	ck_assert_uint_eq(l.n_segs, 2);
	expect_seg(&l, 0, 0, 4, 4);
	expect_seg(&l, 1, 6, 10, 4);
	ck_assert_uint_eq(l.segs[0].charged, 3 * PG);
	ck_assert_uint_eq(l.segs[1].charged, 3 * PG);
	expect_stack(&l, 4, 6 * PG, 8 * PG, 2);
	ck_assert_uint_eq(l.measures, m0 + 2);
	ck_assert_int_eq(ledger_overlaps(&l, A(4), A(6)), 0);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_remove_head_and_tail_keep_the_rest)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 12);
	add(&l, 0, 12, 9);
	drop(5, 6);
	uint64_t m0 = l.measures;
	rm(&l, 0, 3);
	ck_assert_uint_eq(l.n_segs, 1);
	expect_seg(&l, 0, 3, 12, 9);
	expect_stack(&l, 9, 8 * PG, 9 * PG, 1);
	ck_assert_uint_eq(l.measures, m0 + 1);
	rm(&l, 10, 12);
	ck_assert_uint_eq(l.n_segs, 1);
	expect_seg(&l, 0, 3, 10, 9);
	expect_stack(&l, 9, 6 * PG, 7 * PG, 1);
	ck_assert_uint_eq(l.measures, m0 + 2);
	/* A removal reaching past the range's ends takes exactly what lies inside. */
	rm(&l, 8, 40);
	expect_seg(&l, 0, 3, 8, 9);
	expect_stack(&l, 9, 4 * PG, 5 * PG, 1);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_remove_spanning_several_ranges)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 30);
	add(&l, 0, 4, 1);
	add(&l, 6, 10, 2);
	add(&l, 12, 16, 3);
	add(&l, 20, 24, 4);
	uint64_t m0 = l.measures;
	rm(&l, 2, 14);
	ck_assert_uint_eq(l.n_segs, 3);
	expect_seg(&l, 0, 0, 2, 1);
	expect_seg(&l, 1, 14, 16, 3);
	expect_seg(&l, 2, 20, 24, 4);
	expect_stack(&l, 1, 2 * PG, 2 * PG, 1);
	expect_stack(&l, 2, 0, 0, 0);
	expect_stack(&l, 3, 2 * PG, 2 * PG, 1);
	expect_stack(&l, 4, 4 * PG, 4 * PG, 1);
	ck_assert_uint_eq(l.measures, m0 + 2);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_remove_of_a_gap_changes_nothing)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 10);
	add(&l, 0, 4, 1);
	add(&l, 6, 10, 2);
	uint64_t m0 = l.measures, c0 = l.charged, r0 = l.reserved;
	rm(&l, 4, 6);
	rm(&l, 50, 60);
	ck_assert_int_eq(ledger_remove(&l, A(2), A(2)), 0);
	ck_assert_uint_eq(l.n_segs, 2);
	ck_assert_uint_eq(l.measures, m0);
	ck_assert_uint_eq(l.charged, c0);
	ck_assert_uint_eq(l.reserved, r0);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_move_whole_range_frees_the_old_addresses)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 4);
	drop(1, 2);
	add(&l, 0, 4, 1);
	add(&l, 10, 12, 2);
	mv(&l, 0, 4, 40);
	ck_assert_uint_eq(l.n_segs, 2);
	expect_seg(&l, 0, 10, 12, 2);
	expect_seg(&l, 1, 40, 44, 1);
	ck_assert_uint_eq(l.segs[1].charged, 3 * PG);
	expect_stack(&l, 1, 3 * PG, 4 * PG, 1);
	ck_assert_int_eq(ledger_overlaps(&l, A(0), A(4)), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(40), A(44)), 0);
	check_fresh(&l);

	/* Back down, below the other range. */
	mv(&l, 40, 4, 2);
	expect_seg(&l, 0, 2, 6, 1);
	expect_seg(&l, 1, 10, 12, 2);
	ck_assert_int_eq(ledger_overlaps(&l, A(40), A(44)), 0);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_move_replaces_what_was_at_the_destination)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 4);
	drop(2, 3);
	touch(38, 46);
	add(&l, 0, 4, 1);
	add(&l, 38, 46, 2);
	mv(&l, 0, 4, 40);
	ck_assert_uint_eq(l.n_segs, 3);
	expect_seg(&l, 0, 38, 40, 2);
	expect_seg(&l, 1, 40, 44, 1);
	expect_seg(&l, 2, 44, 46, 2);
	expect_stack(&l, 1, 3 * PG, 4 * PG, 1);
	expect_stack(&l, 2, 4 * PG, 4 * PG, 2);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_move_of_the_middle_of_a_range)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 8);
	add(&l, 0, 8, 1);
	mv(&l, 2, 2, 20);
	ck_assert_uint_eq(l.n_segs, 3);
	expect_seg(&l, 0, 0, 2, 1);
	expect_seg(&l, 1, 4, 8, 1);
	expect_seg(&l, 2, 20, 22, 1);
	expect_stack(&l, 1, 8 * PG, 8 * PG, 3);
	ck_assert_int_eq(ledger_overlaps(&l, A(2), A(4)), 0);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_move_spanning_two_ranges_and_a_gap)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 8);
	add(&l, 0, 3, 1);
	add(&l, 5, 8, 2);
	mv(&l, 2, 4, 30);
	ck_assert_uint_eq(l.n_segs, 4);
	expect_seg(&l, 0, 0, 2, 1);
	expect_seg(&l, 1, 6, 8, 2);
	expect_seg(&l, 2, 30, 31, 1);
	expect_seg(&l, 3, 33, 34, 2);
	expect_stack(&l, 1, 3 * PG, 3 * PG, 2);
	expect_stack(&l, 2, 3 * PG, 3 * PG, 2);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_move_from_nothing_still_clears_the_destination)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 4);
	add(&l, 0, 4, 1);
	mv(&l, 50, 2, 0);
	ck_assert_uint_eq(l.n_segs, 1);
	expect_seg(&l, 0, 2, 4, 1);
	expect_stack(&l, 1, 2 * PG, 2 * PG, 1);
	/* A zero-length move, or one onto itself, is nothing. */
	uint64_t m0 = l.measures;
	ck_assert_int_eq(ledger_move(&l, A(2), 0, A(40)), 0);
	ck_assert_int_eq(ledger_move(&l, A(2), 2 * PG, A(2)), 0);
	check_sums(&l);
	expect_seg(&l, 0, 2, 4, 1);
	ck_assert_uint_eq(l.measures, m0);
	ledger_fin(&l);
}
END_TEST

/*
 * Thread A munmaps [0, 8) and thread B's mmap is given [0, 4) at once; the
 * tracer hears of B's mmap before A's return. A's release, taken with the
 * epoch of its start, must leave B's block alone, and so must one whose
 * newer range lies inside it.
 */
START_TEST(test_remove_older_leaves_ranges_added_since)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 12);
	touch(20, 30);
	add(&l, 0, 8, 1);
	add(&l, 8, 12, 3);
	add(&l, 20, 30, 1);
	uint64_t epoch = ledger_epoch(&l);
	drop(0, 8);
	touch(0, 2);
	add(&l, 0, 4, 2);          /* B's block, where A's was */
	add(&l, 24, 26, 2);        /* a newer range inside the other release */
	ck_assert_int_eq(ledger_remove_older(&l, A(0), A(8), epoch), 0);
	check_sums(&l);
	ck_assert_int_eq(ledger_remove_older(&l, A(20), A(30), epoch), 0);
	check_sums(&l);
	ck_assert_uint_eq(l.n_segs, 3);
	expect_seg(&l, 0, 0, 4, 2);
	expect_seg(&l, 1, 8, 12, 3);
	expect_seg(&l, 2, 24, 26, 2);
	expect_stack(&l, 1, 0, 0, 0);
	expect_stack(&l, 2, 4 * PG, 6 * PG, 2);
	expect_stack(&l, 3, 4 * PG, 4 * PG, 1);
	/* With the epoch now, it is ledger_remove. */
	ck_assert_int_eq(ledger_remove_older(&l, A(0), A(30), ledger_epoch(&l)), 0);
	ck_assert_uint_eq(l.n_segs, 0);
	check_sums(&l);
	ledger_fin(&l);
}
END_TEST

/*
 * An mremap moves [0, 4) to [40, 44); another thread's mmap at the old
 * address is seen first: it stays. The part of the old range it took over
 * was cut away when it was added (the ledger could not know), so that part
 * does not reach the destination (ledger.h).
 */
START_TEST(test_move_older_leaves_a_newer_range_at_the_source)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 4);
	add(&l, 0, 4, 1);
	uint64_t epoch = ledger_epoch(&l);
	fake_move(0, 4, 40);
	touch(0, 1);
	add(&l, 0, 2, 2);
	ck_assert_int_eq(ledger_move_older(&l, A(0), 4 * PG, A(40), epoch), 0);
	check_sums(&l);
	ck_assert_uint_eq(l.n_segs, 2);
	expect_seg(&l, 0, 0, 2, 2);
	expect_seg(&l, 1, 42, 44, 1);
	expect_stack(&l, 1, 2 * PG, 2 * PG, 1);
	expect_stack(&l, 2, 1 * PG, 2 * PG, 1);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_refresh_measures_only_overlapping_ranges)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	add(&l, 0, 4, 1);
	add(&l, 4, 8, 2);
	add(&l, 10, 14, 3);
	add(&l, 20, 24, 4);
	ck_assert_uint_eq(l.charged, 0);
	touch(0, 30);

	uint64_t m0 = l.measures, c0 = F.calls;
	ledger_refresh(&l, A(5), A(11));
	check_sums(&l);
	ck_assert_uint_eq(l.measures, m0 + 2);
	ck_assert_uint_eq(F.calls, c0 + 2);
	expect_stack(&l, 1, 0, 4 * PG, 1);
	expect_stack(&l, 2, 4 * PG, 4 * PG, 1);
	expect_stack(&l, 3, 4 * PG, 4 * PG, 1);
	expect_stack(&l, 4, 0, 4 * PG, 1);

	/* Ranges that only touch the refreshed one at its ends are left alone. */
	ledger_refresh(&l, A(8), A(10));
	ledger_refresh(&l, A(14), A(20));
	ledger_refresh(&l, A(30), A(40));
	ck_assert_uint_eq(l.measures, m0 + 2);
	expect_stack(&l, 4, 0, 4 * PG, 1);

	ledger_refresh(&l, A(3), A(4));
	check_sums(&l);
	ck_assert_uint_eq(l.measures, m0 + 3);
	expect_stack(&l, 1, 4 * PG, 4 * PG, 1);
	expect_stack(&l, 4, 0, 4 * PG, 1);

	/* Released pages come off the charge when their range is refreshed. */
	drop(0, 2);
	ledger_refresh(&l, A(0), A(1));
	check_sums(&l);
	expect_stack(&l, 1, 2 * PG, 4 * PG, 1);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_refresh_all_measures_every_range)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	add(&l, 0, 4, 1);
	add(&l, 6, 9, 2);
	add(&l, 100, 120, 3);
	touch(1, 3);
	touch(6, 9);
	touch(110, 200);
	uint64_t m0 = l.measures;
	ledger_refresh_all(&l);
	check_sums(&l);
	check_fresh(&l);
	ck_assert_uint_eq(l.measures, m0 + 3);
	ck_assert_uint_eq(l.charged, 2 * PG + 3 * PG + 10 * PG);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_overlaps_at_the_edges)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	ck_assert_int_eq(ledger_overlaps(&l, A(0), A(100)), 0);
	add(&l, 4, 8, 1);
	add(&l, 12, 16, 2);
	ck_assert_int_eq(ledger_overlaps(&l, A(8), A(9)), 0);
	ck_assert_int_eq(ledger_overlaps(&l, A(0), A(4)), 0);
	ck_assert_int_eq(ledger_overlaps(&l, A(8), A(12)), 0);
	ck_assert_int_eq(ledger_overlaps(&l, A(16), A(100)), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(4), A(5)), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(7), A(8)), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(8) - 1, A(8)), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(0), A(4) + 1), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(8), A(12) + 1), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(0), A(100)), 0);
	ck_assert_int_ne(ledger_overlaps(&l, A(5), A(6)), 0);
	ledger_fin(&l);
}
END_TEST

/* munmap's exit stop is skipped unless the unmap may cut a hole in one mapping (which can fail). */
START_TEST(test_holes_only_strictly_inside_a_run_of_adjacent_ranges)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	ck_assert_int_eq(ledger_holes(&l, A(1), A(2)), 0);
	add(&l, 4, 8, 1);
	add(&l, 8, 12, 2);   /* adjacent to the first: maybe one mapping to the kernel */
	add(&l, 20, 24, 3);
	ck_assert_int_ne(ledger_holes(&l, A(5), A(6)), 0);
	ck_assert_int_ne(ledger_holes(&l, A(5), A(10)), 0);   /* across the two adjacent ranges */
	ck_assert_int_ne(ledger_holes(&l, A(8), A(9)), 0);    /* the second's head, inside the run */
	ck_assert_int_ne(ledger_holes(&l, A(6), A(8)), 0);    /* the first's tail, the second after it */
	ck_assert_int_eq(ledger_holes(&l, A(4), A(6)), 0);    /* the run's head */
	ck_assert_int_eq(ledger_holes(&l, A(10), A(12)), 0);  /* the run's tail */
	ck_assert_int_eq(ledger_holes(&l, A(4), A(12)), 0);   /* all of it */
	ck_assert_int_eq(ledger_holes(&l, A(21), A(24)), 0);
	ck_assert_int_ne(ledger_holes(&l, A(21), A(23)), 0);
	ck_assert_int_eq(ledger_holes(&l, A(10), A(22)), 0);  /* across a gap */
	ck_assert_int_eq(ledger_holes(&l, A(13), A(14)), 0);  /* in a gap */
	ck_assert_int_eq(ledger_holes(&l, A(5), A(5)), 0);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_adjacent_ranges_are_charged_each_by_its_own_pages)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 4);
	add(&l, 0, 4, 1);
	add(&l, 4, 8, 2);
	/* The kernel shows one VMA; the ledger keeps two ranges and two owners. */
	ck_assert_uint_eq(l.n_segs, 2);
	expect_stack(&l, 1, 4 * PG, 4 * PG, 1);
	expect_stack(&l, 2, 0, 4 * PG, 1);

	/* Adjacent again and from the same stack: still a range of its own. */
	add(&l, 8, 12, 2);
	ck_assert_uint_eq(l.n_segs, 3);
	expect_stack(&l, 2, 0, 8 * PG, 2);

	touch(4, 6);
	touch(9, 12);
	uint64_t m0 = l.measures;
	ledger_refresh(&l, A(4), A(12));
	check_sums(&l);
	ck_assert_uint_eq(l.measures, m0 + 2);
	ck_assert_uint_eq(l.segs[1].charged, 2 * PG);
	ck_assert_uint_eq(l.segs[2].charged, 3 * PG);
	expect_stack(&l, 1, 4 * PG, 4 * PG, 1);
	expect_stack(&l, 2, 5 * PG, 8 * PG, 2);

	/* A hole across the boundary cuts both. */
	rm(&l, 3, 5);
	ck_assert_uint_eq(l.n_segs, 3);
	expect_seg(&l, 0, 0, 3, 1);
	expect_seg(&l, 1, 5, 8, 2);
	expect_seg(&l, 2, 8, 12, 2);
	expect_stack(&l, 1, 3 * PG, 3 * PG, 1);
	expect_stack(&l, 2, 4 * PG, 7 * PG, 2);
	check_fresh(&l);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_peak_records_first_and_higher_charges_only)
{
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	ck_assert_int_eq(l.has_peak, 0);

	/* The first call records whatever there is. */
	ck_assert_int_eq(ledger_check_peak(&l, 1.0, 11), 1);
	ck_assert_int_eq(l.has_peak, 1);
	ck_assert_uint_eq(l.peak.charged, 0);
	ck_assert_uint_eq(l.peak.rss, 11);
	ck_assert(l.peak.time == 1.0);
	/* Nothing higher: no new peak. */
	ck_assert_int_eq(ledger_check_peak(&l, 1.5, 12), 0);
	ck_assert_uint_eq(l.peak.rss, 11);

	touch(0, 6);
	touch(10, 13);
	add(&l, 0, 8, 1);
	add(&l, 10, 14, 2);
	ck_assert_int_eq(ledger_check_peak(&l, 2.0, 22), 1);
	ck_assert_uint_eq(l.peak.charged, 9 * PG);
	ck_assert_uint_eq(l.peak.reserved, 12 * PG);
	ck_assert_uint_eq(l.peak.rss, 22);
	ck_assert(l.peak.time == 2.0);
	ck_assert_uint_ge(l.n_at_peak, 3);
	ck_assert_uint_le(l.n_at_peak, l.n_stacks);
	ck_assert_int_eq(memcmp(l.at_peak, l.by_stack, l.n_at_peak * sizeof(*l.at_peak)), 0);
	size_t n_saved = l.n_at_peak;
	struct ledger_charge *saved = malloc(n_saved * sizeof(*saved));
	ck_assert_ptr_nonnull(saved);
	memcpy(saved, l.by_stack, n_saved * sizeof(*saved));

	/* Lower charge, larger reservation: the peak and its per-stack copy stay as they were. */
	rm(&l, 0, 4);
	add(&l, 40, 60, 3);
	ck_assert_uint_lt(l.charged, 9 * PG);
	ck_assert_int_eq(ledger_check_peak(&l, 3.0, 99), 0);
	ck_assert_uint_eq(l.peak.charged, 9 * PG);
	ck_assert_uint_eq(l.peak.reserved, 12 * PG);
	ck_assert_uint_eq(l.peak.rss, 22);
	ck_assert(l.peak.time == 2.0);
	ck_assert_int_eq(memcmp(l.at_peak, saved, n_saved * sizeof(*saved)), 0);
	ck_assert_int_ne(memcmp(l.by_stack, saved, n_saved * sizeof(*saved)), 0);

	/* Back to exactly the peak charge: not a new peak. */
	touch(40, 44);
	ledger_refresh(&l, A(40), A(41));
	ck_assert_uint_eq(l.charged, 9 * PG);
	ck_assert_int_eq(ledger_check_peak(&l, 4.0, 100), 0);
	ck_assert(l.peak.time == 2.0);
	ck_assert_int_eq(memcmp(l.at_peak, saved, n_saved * sizeof(*saved)), 0);

	/* Higher, with a stack id past the old copy's length: the copy grows to hold it. */
	touch(150, 152);
	add(&l, 150, 152, 900);
	ck_assert_int_eq(ledger_check_peak(&l, 5.0, 123), 1);
	ck_assert_uint_eq(l.peak.charged, 11 * PG);
	ck_assert_uint_gt(l.n_at_peak, 900);
	ck_assert_int_eq(memcmp(l.at_peak, l.by_stack, l.n_at_peak * sizeof(*l.at_peak)), 0);
	ck_assert_uint_eq(l.at_peak[900].charged, 2 * PG);
	ck_assert_uint_eq(l.at_peak[1].charged, 2 * PG);
	ck_assert_uint_eq(l.at_peak[3].count, 1);

	/* Later changes do not reach the copy. */
	rm(&l, 150, 152);
	ck_assert_uint_eq(l.at_peak[900].charged, 2 * PG);
	ck_assert_uint_eq(l.at_peak[900].count, 1);
	free(saved);
	ledger_fin(&l);
}
END_TEST

/*
 * The reference model: per page, the identity of the range holding it (0 for
 * none), its stack, and whether it was resident when its range was last
 * measured. A range of the ledger is a maximal run of pages with one identity.
 */
#define NSTACKVALS 8
static const uint32_t stack_vals[NSTACKVALS] = { 0, 1, 2, 3, 5, 63, 64, 1000 };
#define MAXSTACK 1001

struct model {
	uint32_t id[NPAGES];
	uint32_t stack[NPAGES];
	unsigned char seen[NPAGES];
	uint32_t next_id;
	char kind[MAXSTACK];
	int has_peak;
	uint64_t peak_charged, peak_reserved, peak_rss;
	double peak_time;
	struct ledger_charge at_peak[MAXSTACK];
};

struct run {
	unsigned p0, p1;
	uint32_t id, stack;
};

static size_t model_runs(const struct model *m, struct run *r)
{
	size_t n = 0;
	for (unsigned p = 0; p < NPAGES;) {
		if (!m->id[p]) {
			p++;
			continue;
		}
		unsigned q = p;
		while (q < NPAGES && m->id[q] == m->id[p])
			q++;
		r[n++] = (struct run){ p, q, m->id[p], m->stack[p] };
		p = q;
	}
	return n;
}

static void model_charges(const struct model *m, struct ledger_charge *per)
{
	struct run r[NPAGES];
	size_t n = model_runs(m, r);
	memset(per, 0, MAXSTACK * sizeof(*per));
	for (size_t i = 0; i < n; i++) {
		per[r[i].stack].count++;
		for (unsigned p = r[i].p0; p < r[i].p1; p++) {
			per[r[i].stack].reserved += PG;
			per[r[i].stack].charged += m->seen[p] * PG;
		}
	}
}

/* Runs that are new or changed since `before` are the ones the ledger measured: they see residency now. */
static uint64_t model_settle(struct model *m, const struct run *before, size_t nb)
{
	struct run r[NPAGES];
	size_t n = model_runs(m, r);
	uint64_t measured = 0;
	for (size_t i = 0; i < n; i++) {
		int kept = 0;
		for (size_t j = 0; j < nb && !kept; j++)
			kept = before[j].p0 == r[i].p0 && before[j].p1 == r[i].p1 && before[j].id == r[i].id;
		if (kept)
			continue;
		measured++;
		for (unsigned p = r[i].p0; p < r[i].p1; p++)
			m->seen[p] = F.res[p];
	}
	return measured;
}

static void check_against_model(const struct ledger *l, const struct model *m)
{
	check_sums(l);
	struct run r[NPAGES];
	size_t n = model_runs(m, r);
	REQUIRE_EQ(l->n_segs, n);
	for (size_t i = 0; i < n; i++) {
		expect_seg(l, i, r[i].p0, r[i].p1, r[i].stack);
		uint64_t seen = 0;
		for (unsigned p = r[i].p0; p < r[i].p1; p++)
			seen += m->seen[p] * PG;
		REQUIRE(l->segs[i].charged == seen, "range %zu charged %lu, model %lu", i,
			      (unsigned long)l->segs[i].charged, (unsigned long)seen);
	}
	static struct ledger_charge per[MAXSTACK];
	model_charges(m, per);
	for (size_t k = 0; k < MAXSTACK; k++) {
		if (k < l->n_stacks) {
			REQUIRE_EQ(memcmp(&l->by_stack[k], &per[k], sizeof(per[k])), 0);
			if (per[k].count)
				REQUIRE_EQ(l->kind[k], m->kind[k]);
		} else {
			REQUIRE_EQ(per[k].count, 0);
		}
	}
	REQUIRE_EQ(l->has_peak, m->has_peak);
	if (m->has_peak) {
		REQUIRE_EQ(l->peak.charged, m->peak_charged);
		REQUIRE_EQ(l->peak.reserved, m->peak_reserved);
		REQUIRE_EQ(l->peak.rss, m->peak_rss);
		REQUIRE(l->peak.time == m->peak_time, "peak time %g, model %g", l->peak.time, m->peak_time);
		for (size_t k = 0; k < MAXSTACK; k++) {
			if (k < l->n_at_peak)
				REQUIRE_EQ(memcmp(&l->at_peak[k], &m->at_peak[k], sizeof(m->at_peak[k])), 0);
			else
				REQUIRE_EQ(m->at_peak[k].count, 0);
		}
	}
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void random_range(unsigned *p0, unsigned *p1)
{
	unsigned len = 1 + (unsigned)(rnd() % 40);
	*p0 = (unsigned)(rnd() % NPAGES);
	*p1 = *p0 + len > NPAGES ? NPAGES : *p0 + len;
}

static const uint64_t seeds[] = { 0x9e3779b97f4a7c15ULL, 0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL };

START_TEST(test_random_operations_match_a_page_model)
{
	static struct model m;
	memset(&m, 0, sizeof(m));
	rng_state = seeds[_i];
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	struct run before[NPAGES];
	unsigned ops[8] = { 0 };
	for (int step = 0; step < 4000; step++) {
		size_t nb = model_runs(&m, before);
		uint64_t m0 = l.measures, expect_measured = 0;
		int at_least = 0;
		unsigned p0, p1, op = (unsigned)(rnd() % 100);
		random_range(&p0, &p1);
		if (op < 25) {
			uint32_t stack = stack_vals[rnd() % NSTACKVALS];
			char kind = (char)('a' + rnd() % 4);
			REQUIRE_EQ(ledger_add(&l, A(p0), A(p1), stack, kind), 0);
			m.next_id++;
			for (unsigned p = p0; p < p1; p++) {
				m.id[p] = m.next_id;
				m.stack[p] = stack;
			}
			m.kind[stack] = kind;
			expect_measured = model_settle(&m, before, nb);
			ops[0]++;
		} else if (op < 40) {
			REQUIRE_EQ(ledger_remove(&l, A(p0), A(p1)), 0);
			for (unsigned p = p0; p < p1; p++)
				m.id[p] = 0;
			expect_measured = model_settle(&m, before, nb);
			ops[1]++;
		} else if (op < 52) {
			unsigned n = 1 + (unsigned)(rnd() % 24), from = (unsigned)(rnd() % (NPAGES - n + 1)), to;
			do
				to = (unsigned)(rnd() % (NPAGES - n + 1));
			while (to < from + n && from < to + n);
			fake_move(from, n, to);
			REQUIRE_EQ(ledger_move(&l, A(from), n * PG, A(to)), 0);
			/* Each run lifted out is a range of its own at the destination. */
			uint32_t ids[NPAGES], stacks[NPAGES], prev = 0;
			for (unsigned k = 0; k < n; k++) {
				unsigned p = from + k;
				if (m.id[p] && m.id[p] != prev)
					m.next_id++;
				prev = m.id[p];
				ids[k] = m.id[p] ? m.next_id : 0;
				stacks[k] = m.stack[p];
				m.id[p] = 0;
			}
			for (unsigned k = 0; k < n; k++) {
				m.id[to + k] = ids[k];
				m.stack[to + k] = stacks[k];
			}
			expect_measured = model_settle(&m, before, nb);
			/* A range cut at the source and again at the destination may be measured in between. */
			at_least = 1;
			ops[2]++;
		} else if (op < 72) {
			/* The target writes or releases pages; the ledger is not told. */
			if (rnd() % 2)
				touch(p0, p1);
			else
				drop(p0, p1);
			ops[3]++;
		} else if (op < 84) {
			ledger_refresh(&l, A(p0), A(p1));
			for (size_t i = 0; i < nb; i++) {
				if (before[i].p0 < p1 && p0 < before[i].p1) {
					expect_measured++;
					for (unsigned p = before[i].p0; p < before[i].p1; p++)
						m.seen[p] = F.res[p];
				}
			}
			ops[4]++;
		} else if (op < 86) {
			ledger_refresh_all(&l);
			for (unsigned p = 0; p < NPAGES; p++)
				m.seen[p] = F.res[p];
			expect_measured = nb;
			ops[5]++;
		} else if (op < 96) {
			int expect = ledger_overlaps(&l, A(p0), A(p1)) != 0, model = 0;
			for (unsigned p = p0; p < p1; p++)
				model |= m.id[p] != 0;
			REQUIRE_EQ(expect, model);
			ops[6]++;
		} else {
			static struct ledger_charge per[MAXSTACK];
			model_charges(&m, per);
			uint64_t charged = 0, reserved = 0;
			for (size_t k = 0; k < MAXSTACK; k++) {
				charged += per[k].charged;
				reserved += per[k].reserved;
			}
			int expect = !m.has_peak || charged > m.peak_charged;
			REQUIRE_EQ(ledger_check_peak(&l, step, step * 7), expect);
			if (expect) {
				m.has_peak = 1;
				m.peak_charged = charged;
				m.peak_reserved = reserved;
				m.peak_rss = (uint64_t)step * 7;
				m.peak_time = step;
				memcpy(m.at_peak, per, sizeof(per));
			}
			ops[7]++;
		}
		REQUIRE(at_least ? l.measures - m0 >= expect_measured : l.measures - m0 == expect_measured,
			      "step %d op %u: %lu measures, expected %s%lu", step, op, 
			      (unsigned long)(l.measures - m0), at_least ? "at least " : "", (unsigned long)expect_measured);
		check_against_model(&l, &m);
	}
	for (int k = 0; k < 8; k++)
		ck_assert_uint_gt(ops[k], 0);
	REQUIRE_EQ(F.calls, l.measures);
	ledger_fin(&l);
}
END_TEST

START_TEST(test_capped_range_never_rises_and_shrinks_with_its_pages)
{
	/* Memory there before ptfil: charged at its residency then; new pages are the new blocks'. */
	struct ledger l;
	ledger_init(&l, fake_measure, &F);
	touch(0, 4);
	ck_assert_int_eq(ledger_add_capped(&l, A(0), A(16), 2, 'p'), 0);
	ck_assert_uint_eq(l.charged, 4 * PG);
	ck_assert_uint_eq(l.reserved, 16 * PG);
	/* Pages that go take their charge with them... */
	drop(0, 1);
	ledger_refresh_all(&l);
	ck_assert_uint_eq(l.charged, 3 * PG);
	/* ...pages that come later do not add to it. */
	touch(4, 10);
	ledger_refresh_all(&l);
	ck_assert_uint_eq(l.charged, 3 * PG);
	drop(0, 16);
	ledger_refresh_all(&l);
	ck_assert_uint_eq(l.charged, 0);
	/* Once down, it stays down when pages come back. */
	touch(0, 16);
	ledger_refresh_all(&l);
	ck_assert_uint_eq(l.charged, 0);
	/* A range added over part of it (a block allocated there) is charged in full. */
	add(&l, 4, 8, 5);
	ck_assert_uint_eq(l.charged, 4 * PG);
	expect_stack(&l, 5, 4 * PG, 4 * PG, 1);
	expect_stack(&l, 2, 0, 12 * PG, 2);
	ledger_fin(&l);
}
END_TEST

Suite *ledger_suite(void)
{
	Suite *s = suite_create("ledger");
	TCase *tc = tcase_create("ledger");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_add_charges_resident_pages_and_reserves_the_size);
	tcase_add_test(tc, test_add_with_stack_ids_past_the_first_allocation);
	tcase_add_test(tc, test_add_over_a_live_range_replaces_the_overlap);
	tcase_add_test(tc, test_remove_whole_range_frees_it_without_measuring);
	tcase_add_test(tc, test_remove_middle_leaves_two_ranges_measured_again);
	tcase_add_test(tc, test_remove_head_and_tail_keep_the_rest);
	tcase_add_test(tc, test_remove_spanning_several_ranges);
	tcase_add_test(tc, test_remove_of_a_gap_changes_nothing);
	tcase_add_test(tc, test_move_whole_range_frees_the_old_addresses);
	tcase_add_test(tc, test_move_replaces_what_was_at_the_destination);
	tcase_add_test(tc, test_move_of_the_middle_of_a_range);
	tcase_add_test(tc, test_move_spanning_two_ranges_and_a_gap);
	tcase_add_test(tc, test_move_from_nothing_still_clears_the_destination);
	tcase_add_test(tc, test_remove_older_leaves_ranges_added_since);
	tcase_add_test(tc, test_move_older_leaves_a_newer_range_at_the_source);
	tcase_add_test(tc, test_refresh_measures_only_overlapping_ranges);
	tcase_add_test(tc, test_refresh_all_measures_every_range);
	tcase_add_test(tc, test_overlaps_at_the_edges);
	tcase_add_test(tc, test_holes_only_strictly_inside_a_run_of_adjacent_ranges);
	tcase_add_test(tc, test_adjacent_ranges_are_charged_each_by_its_own_pages);
	tcase_add_test(tc, test_peak_records_first_and_higher_charges_only);
	tcase_add_test(tc, test_capped_range_never_rises_and_shrinks_with_its_pages);
	suite_add_tcase(s, tc);

	TCase *rt = tcase_create("ledger-model");
	tcase_set_timeout(rt, 120);
	tcase_add_checked_fixture(rt, setup, NULL);
	tcase_add_loop_test(rt, test_random_operations_match_a_page_model, 0, (int)(sizeof(seeds) / sizeof(seeds[0])));
	suite_add_tcase(s, rt);
	return s;
}
