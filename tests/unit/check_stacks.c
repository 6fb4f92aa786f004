/* Unit tests for tracer/stacks: frames interned by (module, offset), stacks as trie nodes read back through their parents. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "tracer/stacks/stacks.h"

/* An assertion for hot loops: a passing ck_assert costs a message to the runner in fork mode, this costs nothing. */
#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* Reads a node's stack back, innermost first, as stacks_intern takes it; returns its depth. */
static size_t read_stack(const struct stacks *s, uint32_t node, uint32_t *out, size_t max)
{
	size_t n = 0;
	while (node != STACKS_ROOT) {
		REQUIRE(node < s->n_nodes, "node %u past the %zu nodes", node, s->n_nodes);
		REQUIRE(n < max, "node chain longer than %zu", max);
		out[n++] = s->nodes[node].frame;
		uint32_t parent = s->nodes[node].parent;
		REQUIRE(parent < node, "node %u has parent %u, not an older node", node, parent);
		node = parent;
	}
	return n;
}

static void expect_stack(const struct stacks *s, uint32_t node, const uint32_t *frames, size_t n)
{
	uint32_t got[64];
	REQUIRE(node != STACKS_FAILED, "interning failed");
	size_t m = read_stack(s, node, got, 64);
	REQUIRE(m == n, "node %u has %zu frames, expected %zu", node, m, n);
	for (size_t i = 0; i < n; i++)
		REQUIRE(got[i] == frames[i], "frame %zu of node %u is %u, expected %u", i, node, got[i], frames[i]);
}

START_TEST(test_same_frame_gives_the_same_id)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	uint32_t a = stacks_frame(&s, 3, 0x1234);
	uint32_t b = stacks_frame(&s, 3, 0x1238);
	uint32_t c = stacks_frame(&s, 4, 0x1234);
	uint32_t d = stacks_frame(&s, 0, 0x1234);
	ck_assert_uint_ne(a, STACKS_FAILED);
	ck_assert_uint_ne(a, b);
	ck_assert_uint_ne(a, c);
	ck_assert_uint_ne(a, d);
	ck_assert_uint_ne(c, d);
	ck_assert_uint_eq(stacks_frame(&s, 3, 0x1234), a);
	ck_assert_uint_eq(stacks_frame(&s, 3, 0x1238), b);
	ck_assert_uint_eq(stacks_frame(&s, 4, 0x1234), c);
	ck_assert_uint_eq(stacks_frame(&s, 0, 0x1234), d);
	ck_assert_uint_eq(s.n_frames, 4);
	/* The frame table says what each id stands for. */
	ck_assert_uint_eq(s.frames[b].module, 3);
	ck_assert_uint_eq(s.frames[b].offset, 0x1238);
	ck_assert_uint_eq(s.frames[c].module, 4);
	ck_assert_ptr_null(s.frames[c].name);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_a_million_frames_keep_their_ids_and_make_stacks)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	enum { MODS = 50, OFFS = 20000 };
	static uint32_t ids[MODS][OFFS];
	for (uint32_t m = 0; m < MODS; m++)
		for (uint32_t o = 0; o < OFFS; o++)
			ids[m][o] = stacks_frame(&s, m, (uint64_t)o * 7 + m);
	ck_assert_uint_ne(ids[MODS - 1][OFFS - 1], STACKS_FAILED);
	ck_assert_uint_eq(s.n_frames, MODS * OFFS);
	for (uint32_t m = MODS; m-- > 0;)
		for (uint32_t o = 0; o < OFFS; o++) {
			uint32_t id = ids[m][o];
			REQUIRE(stacks_frame(&s, m, (uint64_t)o * 7 + m) == id, "module %u offset %#x changed id", m, o * 7 + m);
			REQUIRE(s.frames[id].module == m && s.frames[id].offset == (uint64_t)o * 7 + m,
				"frame %u does not hold module %u offset %#x", id, m, o * 7 + m);
		}
	ck_assert_uint_eq(s.n_frames, MODS * OFFS);

	/* Stacks over a million frame ids: one frame each, then under a common outer frame. */
	uint32_t outer = ids[0][0];
	for (uint32_t m = 0; m < MODS; m++)
		for (uint32_t o = 0; o < OFFS; o++) {
			uint32_t one = stacks_intern(&s, &ids[m][o], 1);
			expect_stack(&s, one, &ids[m][o], 1);
			uint32_t two[2] = { ids[m][o], outer };
			uint32_t node = stacks_intern(&s, two, 2);
			expect_stack(&s, node, two, 2);
		}
	ck_assert_uint_eq(s.n_nodes, 1 + 2 * (size_t)MODS * OFFS);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_absolute_frames_do_not_collide_with_module_zero)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	static const uint64_t offs[] = { 0, 0x1000, 0x400000, 0x7fffffffe000ULL, 0x7ffffffff000ULL, 0x7fffffffffffULL };
	enum { N = sizeof(offs) / sizeof(offs[0]) };
	uint32_t abs_ids[N], mod0[N], mod1[N];
	for (size_t i = 0; i < N; i++) {
		abs_ids[i] = stacks_frame(&s, STACKS_NO_MODULE, offs[i]);
		mod0[i] = stacks_frame(&s, 0, offs[i]);
		mod1[i] = stacks_frame(&s, 1, offs[i]);
	}
	ck_assert_uint_eq(s.n_frames, 3 * N);
	for (size_t i = 0; i < N; i++) {
		ck_assert_uint_ne(abs_ids[i], mod0[i]);
		ck_assert_uint_ne(abs_ids[i], mod1[i]);
		ck_assert_uint_ne(mod0[i], mod1[i]);
		ck_assert_uint_eq(stacks_frame(&s, STACKS_NO_MODULE, offs[i]), abs_ids[i]);
		ck_assert_uint_eq(stacks_frame(&s, 0, offs[i]), mod0[i]);
		ck_assert_uint_eq(stacks_frame(&s, 1, offs[i]), mod1[i]);
		ck_assert_uint_eq(s.frames[abs_ids[i]].module, STACKS_NO_MODULE);
		ck_assert_uint_eq(s.frames[abs_ids[i]].offset, offs[i]);
		ck_assert_uint_eq(s.frames[mod0[i]].module, 0);
		ck_assert_uint_eq(s.frames[mod0[i]].offset, offs[i]);
	}
	ck_assert_uint_eq(s.n_frames, 3 * N);
	stacks_fin(&s);
}
END_TEST

/*
 * stacks_frame promises one id per (module, offset), but its hash key keeps
 * only 17 bits of the module and folds an offset past 2^47 into the module
 * bits, so distinct frames can share a key. Before the clash was resolved,
 * the second frame got a fresh id on every call.
 */
START_TEST(test_frames_sharing_a_key_through_module_ids_past_2_17_keep_one_id_each)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	/* Modules 0, 2^17 and 2^18 at the same offset all share a key. */
	uint32_t first = stacks_frame(&s, 0, 0x1000);
	uint32_t a = stacks_frame(&s, 1u << 17, 0x1000);
	uint32_t b = stacks_frame(&s, 1u << 17, 0x1000);
	uint32_t c = stacks_frame(&s, 1u << 18, 0x1000);
	ck_assert_uint_ne(a, first);
	ck_assert_uint_ne(c, first);
	ck_assert_uint_ne(c, a);
	ck_assert_msg(a == b, "module 1<<17 offset 0x1000 got ids %u then %u", a, b);
	ck_assert_uint_eq(stacks_frame(&s, 0, 0x1000), first);
	ck_assert_uint_eq(stacks_frame(&s, 1u << 18, 0x1000), c);
	ck_assert_uint_eq(stacks_frame(&s, 1u << 17, 0x1000), a);
	ck_assert_uint_eq(s.n_frames, 3);
	ck_assert_uint_eq(s.frames[a].module, 1u << 17);
	ck_assert_uint_eq(s.frames[c].module, 1u << 18);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_absolute_address_past_2_47_sharing_a_key_keeps_one_id)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	/* The vsyscall page, absolute, shares a key with module 0 at 0x7fffff600000. */
	uint32_t m0 = stacks_frame(&s, 0, 0x7fffff600000ULL);
	uint32_t v1 = stacks_frame(&s, STACKS_NO_MODULE, 0xffffffffff600000ULL);
	uint32_t v2 = stacks_frame(&s, STACKS_NO_MODULE, 0xffffffffff600000ULL);
	ck_assert_uint_ne(v1, m0);
	ck_assert_msg(v1 == v2, "absolute 0xffffffffff600000 got ids %u then %u", v1, v2);
	ck_assert_uint_eq(stacks_frame(&s, 0, 0x7fffff600000ULL), m0);
	ck_assert_uint_eq(s.n_frames, 2);
	ck_assert_uint_eq(s.frames[v1].offset, 0xffffffffff600000ULL);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_empty_stack_is_the_root)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	size_t n0 = s.n_nodes;
	ck_assert_uint_eq(stacks_intern(&s, NULL, 0), STACKS_ROOT);
	uint32_t f = stacks_frame(&s, 1, 0x10);
	ck_assert_uint_eq(stacks_intern(&s, &f, 0), STACKS_ROOT);
	ck_assert_uint_eq(s.n_nodes, n0);
	uint32_t node = stacks_intern(&s, &f, 1);
	ck_assert_uint_ne(node, STACKS_ROOT);
	ck_assert_uint_eq(s.nodes[node].parent, STACKS_ROOT);
	ck_assert_uint_eq(s.nodes[node].frame, f);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_intern_reads_back_innermost_first)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	uint32_t fr[5];
	for (int i = 0; i < 5; i++)
		fr[i] = stacks_frame(&s, (uint32_t)i % 2, 0x100 + (uint64_t)i * 0x10);
	uint32_t node = stacks_intern(&s, fr, 5);
	expect_stack(&s, node, fr, 5);
	/* The outermost frame hangs off the root. */
	uint32_t outer = node;
	while (s.nodes[outer].parent != STACKS_ROOT)
		outer = s.nodes[outer].parent;
	ck_assert_uint_eq(s.nodes[outer].frame, fr[4]);
	/* Reversed, it is another stack. */
	uint32_t rev[5] = { fr[4], fr[3], fr[2], fr[1], fr[0] };
	uint32_t other = stacks_intern(&s, rev, 5);
	ck_assert_uint_ne(other, node);
	expect_stack(&s, other, rev, 5);
	/* Recursion: a frame repeated in one stack. */
	uint32_t rec[4] = { fr[0], fr[0], fr[0], fr[1] };
	uint32_t r = stacks_intern(&s, rec, 4);
	expect_stack(&s, r, rec, 4);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_same_stack_gives_the_same_node)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	uint32_t fr[3] = { stacks_frame(&s, 2, 0x30), stacks_frame(&s, 2, 0x20), stacks_frame(&s, 1, 0x10) };
	uint32_t a = stacks_intern(&s, fr, 3);
	size_t n = s.n_nodes;
	uint32_t copy[3];
	memcpy(copy, fr, sizeof(fr));
	ck_assert_uint_eq(stacks_intern(&s, copy, 3), a);
	ck_assert_uint_eq(s.n_nodes, n);
	/* The frames found again by (module, offset) make the same stack. */
	uint32_t again[3] = { stacks_frame(&s, 2, 0x30), stacks_frame(&s, 2, 0x20), stacks_frame(&s, 1, 0x10) };
	ck_assert_uint_eq(stacks_intern(&s, again, 3), a);
	ck_assert_uint_eq(s.n_nodes, n);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_shared_outer_frames_share_nodes)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	uint32_t main_ = stacks_frame(&s, 0, 0x100), f1 = stacks_frame(&s, 0, 0x200);
	uint32_t f2a = stacks_frame(&s, 1, 0x300), f2b = stacks_frame(&s, 1, 0x400);
	uint32_t a[3] = { f2a, f1, main_ };
	uint32_t b[3] = { f2b, f1, main_ };
	uint32_t na = stacks_intern(&s, a, 3);
	size_t n = s.n_nodes;
	uint32_t nb = stacks_intern(&s, b, 3);
	/* Only the innermost node is new. */
	ck_assert_uint_eq(s.n_nodes, n + 1);
	ck_assert_uint_ne(na, nb);
	ck_assert_uint_eq(s.nodes[na].parent, s.nodes[nb].parent);
	expect_stack(&s, na, a, 3);
	expect_stack(&s, nb, b, 3);

	/* The shared prefix is itself a stack: interning it finds the existing node. */
	uint32_t prefix[2] = { f1, main_ };
	ck_assert_uint_eq(stacks_intern(&s, prefix, 2), s.nodes[na].parent);
	ck_assert_uint_eq(stacks_intern(&s, &main_, 1), s.nodes[s.nodes[na].parent].parent);
	ck_assert_uint_eq(s.n_nodes, n + 1);

	/* Same inner frames under another outer frame share nothing. */
	uint32_t other = stacks_frame(&s, 0, 0x900);
	uint32_t c[3] = { f2a, f1, other };
	uint32_t nc = stacks_intern(&s, c, 3);
	ck_assert_uint_eq(s.n_nodes, n + 4);
	ck_assert_uint_ne(nc, na);
	ck_assert_uint_ne(s.nodes[nc].parent, s.nodes[na].parent);
	expect_stack(&s, nc, c, 3);
	stacks_fin(&s);
}
END_TEST

START_TEST(test_pseudo_frames_are_reused_by_name)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	uint32_t real = stacks_frame(&s, STACKS_NO_MODULE, 0);
	uint32_t a = stacks_pseudo_frame(&s, "[main thread stack]");
	uint32_t b = stacks_pseudo_frame(&s, "[brk heap]");
	ck_assert_uint_ne(a, STACKS_FAILED);
	ck_assert_uint_ne(a, b);
	ck_assert_uint_ne(a, real);
	ck_assert_uint_ne(b, real);
	ck_assert_uint_eq(stacks_pseudo_frame(&s, "[main thread stack]"), a);
	/* Found by the text, not the pointer. */
	char name[] = "[brk heap]";
	ck_assert_uint_eq(stacks_pseudo_frame(&s, name), b);
	ck_assert_uint_eq(s.n_frames, 3);
	ck_assert_str_eq(s.frames[a].name, "[main thread stack]");
	ck_assert_uint_eq(s.frames[a].module, STACKS_NO_MODULE);
	/* A real frame at the same place is still its own. */
	ck_assert_uint_eq(stacks_frame(&s, STACKS_NO_MODULE, 0), real);
	ck_assert_ptr_null(s.frames[real].name);
	/* A pseudo frame makes a one-frame stack like any other. */
	uint32_t node = stacks_intern(&s, &a, 1);
	ck_assert_uint_eq(stacks_intern(&s, &a, 1), node);
	expect_stack(&s, node, &a, 1);
	stacks_fin(&s);
}
END_TEST

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/*
 * 100,000 distinct stacks of 10 frames: the outer 6 drawn from 4 frames, so
 * prefixes are shared heavily, the inner 4 spelling the stack's number in
 * base 32, so no two are alike.
 */
enum { NSTACKS = 100000, DEPTH = 10, OUTER = 6 };

static void make_stack(uint32_t i, const uint32_t *pool, uint32_t *out)
{
	for (int k = 0; k < DEPTH - OUTER; k++)
		out[k] = pool[4 + ((i >> (5 * k)) & 31)];
	for (int k = DEPTH - OUTER; k < DEPTH; k++)
		out[k] = pool[rnd() % 4];
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

START_TEST(test_a_million_frames_intern_and_read_back)
{
	struct stacks s;
	ck_assert_int_eq(stacks_init(&s), 0);
	uint32_t pool[36];
	for (int k = 0; k < 36; k++)
		pool[k] = stacks_frame(&s, (uint32_t)k % 3, 0x1000 + (uint64_t)k * 0x40);
	uint32_t *all = malloc((size_t)NSTACKS * DEPTH * sizeof(*all));
	uint32_t *ids = malloc(NSTACKS * sizeof(*ids));
	uint32_t *sorted = malloc(NSTACKS * sizeof(*sorted));
	ck_assert_ptr_nonnull(all);
	ck_assert_ptr_nonnull(ids);
	ck_assert_ptr_nonnull(sorted);
	rng_state = 0x2545f4914f6cdd1dULL;
	for (uint32_t i = 0; i < NSTACKS; i++) {
		make_stack(i, pool, &all[(size_t)i * DEPTH]);
		ids[i] = stacks_intern(&s, &all[(size_t)i * DEPTH], DEPTH);
		REQUIRE(ids[i] != STACKS_FAILED, "stack %u failed to intern", i);
	}
	size_t nodes = s.n_nodes;
	/* Shared prefixes cost nothing again: far fewer nodes than frames. */
	ck_assert_uint_lt(nodes, (size_t)NSTACKS * DEPTH / 2);
	ck_assert_uint_eq(s.n_frames, 36);
	for (uint32_t i = 0; i < NSTACKS; i++) {
		expect_stack(&s, ids[i], &all[(size_t)i * DEPTH], DEPTH);
		sorted[i] = ids[i];
	}
	qsort(sorted, NSTACKS, sizeof(*sorted), cmp_u32);
	for (uint32_t i = 1; i < NSTACKS; i++)
		REQUIRE(sorted[i - 1] != sorted[i], "two distinct stacks share node %u", sorted[i]);
	/* Again in another order: the same ids and no new nodes. */
	for (uint32_t i = NSTACKS; i-- > 0;)
		REQUIRE(stacks_intern(&s, &all[(size_t)i * DEPTH], DEPTH) == ids[i], "stack %u changed node", i);
	ck_assert_uint_eq(s.n_nodes, nodes);
	free(all);
	free(ids);
	free(sorted);
	stacks_fin(&s);
}
END_TEST

Suite *stacks_suite(void)
{
	Suite *s = suite_create("stacks");
	TCase *tc = tcase_create("stacks");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_same_frame_gives_the_same_id);
	tcase_add_test(tc, test_a_million_frames_keep_their_ids_and_make_stacks);
	tcase_add_test(tc, test_absolute_frames_do_not_collide_with_module_zero);
	tcase_add_test(tc, test_frames_sharing_a_key_through_module_ids_past_2_17_keep_one_id_each);
	tcase_add_test(tc, test_absolute_address_past_2_47_sharing_a_key_keeps_one_id);
	tcase_add_test(tc, test_empty_stack_is_the_root);
	tcase_add_test(tc, test_intern_reads_back_innermost_first);
	tcase_add_test(tc, test_same_stack_gives_the_same_node);
	tcase_add_test(tc, test_shared_outer_frames_share_nodes);
	tcase_add_test(tc, test_pseudo_frames_are_reused_by_name);
	tcase_add_test(tc, test_a_million_frames_intern_and_read_back);
	suite_add_tcase(s, tc);
	return s;
}
