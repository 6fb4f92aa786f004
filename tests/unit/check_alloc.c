/*
 * The heap-event sink (tracer/memory/alloc.c) without a process: what a
 * source says (a call began, returned, a block freed) becomes blocks in the
 * ledger, a call inside the one in flight is nested, a longjmp out of the
 * call in flight is seen by its return slot or its stack pointer, and a free
 * is measured before the block goes.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/heap.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/resid.h"
#include "tracer/memory/tree.h"

static uint64_t nothing_resident(void *arg, uint64_t start, uint64_t end)
{
	(void)arg; (void)start; (void)end;
	return 0;
}

static struct tracer T;
static struct proc P;
static struct tracee t;
static struct ledger L;
static struct heap H;
static struct proc_peak PK;
static struct resid R;
static struct tree TR;
static struct tree_share TS;
static struct alloc_call C;

static void setup(void)
{
	memset(&T, 0, sizeof(T));
	memset(&P, 0, sizeof(P));
	memset(&t, 0, sizeof(t));
	memset(&PK, 0, sizeof(PK));
	memset(&C, 0, sizeof(C));
	memset(&TR, 0, sizeof(TR));
	memset(&TS, 0, sizeof(TS));
	memset(&R, 0, sizeof(R));
	R.pagemap_fd = R.stat_fd = R.statm_fd = -1;
	ledger_init(&L, nothing_resident, NULL);
	heap_init(&H, &L, 64 * 1024, 4096);
	P.ledger = &L;
	P.heap = &H;
	P.pk = &PK;
	P.resid = &R;
	P.tree = &TS;
	P.profiled = P.ready = 1;
	P.nthreads = 1;
	T.tree = &TR;
	T.procs = &P;
	t.p = &P;
	t.call = &C;
}

static void teardown(void)
{
	heap_fin(&H);
	ledger_fin(&L);
}

static void call_sized(enum alloc_fn fn, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t sp, uint32_t stack, int usable)
{
	uint64_t a[3] = { a0, a1, a2 };
	ck_assert(alloc_follow(&T, &t));
	alloc_enter(&T, &t, fn, a, sp, usable);
	alloc_set_stack(&t, stack);
}

static void call(enum alloc_fn fn, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t sp, uint32_t stack)
{
	call_sized(fn, a0, a1, a2, sp, stack, 0);
}

START_TEST(test_malloc_and_free)
{
	call(ALLOC_MALLOC, 1000, 0, 0, 0x7000, 3);
	ck_assert(alloc_active(&t));
	alloc_exit(&T, &t, 0x1000, 0, 0);
	ck_assert(!alloc_active(&t));
	ck_assert_uint_eq(L.charged, 1000);
	ck_assert_uint_eq(L.by_stack[3].charged, 1000);
	ck_assert(alloc_follow(&T, &t));
	alloc_free(&T, &t, 0x1000);
	ck_assert_uint_eq(L.charged, 0);
	/* The free was measured first: its block is in the peak. */
	ck_assert_uint_eq(L.peak.charged, 1000);
	ck_assert_uint_eq(L.at_peak[3].charged, 1000);
}
END_TEST

START_TEST(test_nested_call_is_counted_not_charged)
{
	call(ALLOC_REALLOC, 0, 5000, 0, 0x7000, 2);
	/* realloc(NULL, n) calling malloc: not followed, counted once per event. */
	ck_assert(!alloc_follow(&T, &t));
	ck_assert(!alloc_follow(&T, &t));
	ck_assert_uint_eq(T.counts.nested_calls, 2);
	ck_assert_uint_eq(P.counts.nested_calls, 2);
	alloc_exit(&T, &t, 0x2000, 0, 0);
	ck_assert_uint_eq(L.charged, 5000);
	ck_assert_uint_eq(L.by_stack[2].count, 1);
}
END_TEST

START_TEST(test_realloc_moves_shrinks_and_frees)
{
	call(ALLOC_MALLOC, 4000, 0, 0, 0x7000, 1);
	alloc_exit(&T, &t, 0x1000, 0, 0);
	call(ALLOC_REALLOC, 0x1000, 9000, 0, 0x7000, 2);
	/* The old block is measured before it can go: 4,000 is a peak. */
	ck_assert_uint_eq(L.peak.charged, 4000);
	alloc_exit(&T, &t, 0x3000, 0, 0);
	ck_assert_uint_eq(L.charged, 9000);
	ck_assert_uint_eq(L.by_stack[1].charged, 0);
	ck_assert_uint_eq(L.by_stack[2].charged, 9000);
	/* A failed realloc leaves the block alone. */
	call(ALLOC_REALLOC, 0x3000, 1ull << 40, 0, 0x7000, 4);
	alloc_exit(&T, &t, 0, 0, 0);
	ck_assert_uint_eq(L.charged, 9000);
	/* realloc(p, 0) frees p. */
	call(ALLOC_REALLOC, 0x3000, 0, 0, 0x7000, 4);
	alloc_exit(&T, &t, 0, 0, 0);
	ck_assert_uint_eq(L.charged, 0);
}
END_TEST

START_TEST(test_sizes_of_the_family)
{
	call(ALLOC_CALLOC, 100, 30, 0, 0x7000, 1);
	alloc_exit(&T, &t, 0x1000, 0, 0);
	ck_assert_uint_eq(L.by_stack[1].charged, 3000);
	/* calloc's product overflows: nothing charged, nothing live. */
	call(ALLOC_CALLOC, 1ull << 40, 1ull << 40, 0, 0x7000, 2);
	alloc_exit(&T, &t, 0x9000, 0, 0);
	ck_assert_uint_eq(L.by_stack[2].charged, 0);
	call(ALLOC_POSIX_MEMALIGN, 0x7ff0, 64, 700, 0x7000, 3);
	alloc_exit(&T, &t, 0, 0x5000, 0);
	ck_assert_uint_eq(L.by_stack[3].charged, 700);
	/* posix_memalign failed (ENOMEM): no block, whatever the source read. */
	call(ALLOC_POSIX_MEMALIGN, 0x7ff0, 64, 800, 0x7000, 4);
	alloc_exit(&T, &t, 12, 0x6000, 0);
	ck_assert_uint_eq(L.by_stack[4].charged, 0);
	call(ALLOC_PVALLOC, 5000, 0, 0, 0x7000, 5);
	alloc_exit(&T, &t, 0x8000, 0, 0);
	ck_assert_uint_eq(L.by_stack[5].charged, 8192);
	call(ALLOC_REALLOCARRAY, 0, 10, 30, 0x7000, 6);
	alloc_exit(&T, &t, 0xa000, 0, 0);
	ck_assert_uint_eq(L.by_stack[6].charged, 300);
}
END_TEST

/* glibc's blocks at their usable size, from the chunk size word the source read at the return. */
START_TEST(test_usable_sizes)
{
	/* malloc(100): a 112-byte chunk (PREV_INUSE set), 104 usable. */
	call_sized(ALLOC_MALLOC, 100, 0, 0, 0x7000, 1, 1);
	alloc_exit(&T, &t, 0x1000, 0, 112 | 1);
	ck_assert_uint_eq(L.by_stack[1].charged, 104);
	/* A chunk of its own mapping (IS_MMAPPED): two header words. */
	call_sized(ALLOC_CALLOC, 100, 200, 0, 0x7000, 2, 1);
	alloc_exit(&T, &t, 0x100000, 0, 0x5000 | 2);
	ck_assert_uint_eq(L.by_stack[2].charged, 0x5000 - 16);
	/* realloc: the new block at its usable size, the old one gone. */
	call_sized(ALLOC_REALLOC, 0x1000, 300, 0, 0x7000, 3, 1);
	alloc_exit(&T, &t, 0x2000, 0, 320 | 1);
	ck_assert_uint_eq(L.by_stack[1].charged, 0);
	ck_assert_uint_eq(L.by_stack[3].charged, 312);
	/* posix_memalign: the chunk of the block it stored. */
	call_sized(ALLOC_POSIX_MEMALIGN, 0x7ff0, 64, 700, 0x7000, 4, 1);
	alloc_exit(&T, &t, 0, 0x5000, 720 | 1);
	ck_assert_uint_eq(L.by_stack[4].charged, 712);
	ck_assert_uint_eq(T.counts.usable_blocks, 4);
	/* Not read, or a word that cannot be this block's (smaller than asked for): the size asked for. */
	call_sized(ALLOC_MALLOC, 5000, 0, 0, 0x7000, 5, 1);
	alloc_exit(&T, &t, 0x9000, 0, 0);
	call_sized(ALLOC_MALLOC, 5000, 0, 0, 0x7000, 6, 1);
	alloc_exit(&T, &t, 0xb000, 0, 64 | 1);
	ck_assert_uint_eq(L.by_stack[5].charged, 5000);
	ck_assert_uint_eq(L.by_stack[6].charged, 5000);
	/* A call not entered with usable (--exact-sizes, another allocator): the word is not looked at. */
	call(ALLOC_MALLOC, 100, 0, 0, 0x7000, 7);
	alloc_exit(&T, &t, 0xd000, 0, 112 | 1);
	ck_assert_uint_eq(L.by_stack[7].charged, 100);
	ck_assert_uint_eq(T.counts.usable_blocks, 4);
}
END_TEST

START_TEST(test_left_behind)
{
	call(ALLOC_MALLOC, 10, 0, 0, 0x7000, 1);
	/* A call from inside runs below the entry's stack pointer: still in flight. */
	ck_assert(!alloc_left_behind(&t, 0x6f00, ALLOC_SLOT_UNKNOWN));
	/* At the same stack pointer the slot decides: the hijacked return still there. */
	ck_assert(!alloc_left_behind(&t, 0x7000, ALLOC_SLOT_OURS));
	ck_assert(alloc_active(&t));
	/* Above it, with the slot not read: left (siglongjmp). */
	ck_assert(alloc_left_behind(&t, 0x7100, ALLOC_SLOT_UNKNOWN));
	ck_assert(!alloc_active(&t));
	/* A slot read and overwritten wins over the stack pointer (a handler on a higher signal stack). */
	call(ALLOC_MALLOC, 10, 0, 0, 0x7000, 1);
	ck_assert(!alloc_left_behind(&t, 0x9000, ALLOC_SLOT_OURS));
	ck_assert(alloc_left_behind(&t, 0x6000, ALLOC_SLOT_OVERWRITTEN));
	/* A call left behind is never charged, and the next one is followed. */
	ck_assert(alloc_follow(&T, &t));
	ck_assert_uint_eq(L.charged, 0);
	ck_assert_uint_eq(T.counts.nested_calls, 0);
}
END_TEST

START_TEST(test_blocks_seen_at_a_return)
{
	ck_assert(alloc_follow(&T, &t));
	alloc_block(&T, &t, 0x1000, 24, 7);
	alloc_block(&T, &t, 0x2000, 0, 7);
	ck_assert_uint_eq(L.by_stack[7].charged, 24);
	ck_assert_uint_eq(L.by_stack[7].count, 1);
	ck_assert_uint_eq(T.counts.usable_blocks, 1);
	ck_assert_uint_eq(T.counts.unsized_blocks, 1);
	ck_assert_uint_eq(P.counts.unsized_blocks, 1);
}
END_TEST

START_TEST(test_not_followed_before_ready)
{
	P.ready = 0;
	ck_assert(!alloc_follow(&T, &t));
	ck_assert_uint_eq(T.counts.nested_calls, 0);
}
END_TEST

Suite *alloc_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_malloc_and_free);
	tcase_add_test(tc, test_nested_call_is_counted_not_charged);
	tcase_add_test(tc, test_realloc_moves_shrinks_and_frees);
	tcase_add_test(tc, test_sizes_of_the_family);
	tcase_add_test(tc, test_usable_sizes);
	tcase_add_test(tc, test_left_behind);
	tcase_add_test(tc, test_blocks_seen_at_a_return);
	tcase_add_test(tc, test_not_followed_before_ready);
	suite_add_tcase(s, tc);
	return s;
}
