/* Unit tests for tracer/memory/pages: the touch view's page ledger against a reference model. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/pages.h"

#define PG 4096ULL
#define MB2 (2ULL << 20)

static uint64_t none(void *arg, uint64_t s, uint64_t e)
{
	(void)arg; (void)s; (void)e;
	return 0;
}

static struct ledger L;
static struct pages P;

static void setup(void)
{
	ledger_init(&L, none, NULL);
	pages_init(&P, &L, 't');
}

static void teardown(void)
{
	pages_fin(&P);
	ledger_fin(&L);
}

START_TEST(test_touch_charges_once)
{
	ck_assert_int_eq(pages_touch(&P, 0x10000, 0x13000, 5, 0), 3 * PG);
	/* A second fault on a resident page (a retried fault, a huge page collapsed over it) changes nothing. */
	ck_assert_int_eq(pages_touch(&P, 0x11000, 0x15000, 6, 0), 2 * PG);
	ck_assert_uint_eq(L.charged, 5 * PG);
	ck_assert_uint_eq(L.by_stack[5].charged, 3 * PG);
	ck_assert_uint_eq(L.by_stack[6].charged, 2 * PG);
	ck_assert_uint_eq(L.by_stack[5].count, 3);
	ck_assert_uint_eq(pages_stack(&P, 0x12fff), 5);
	ck_assert_uint_eq(pages_stack(&P, 0x14000), 6);
	ck_assert_uint_eq(pages_stack(&P, 0x15000), PAGES_NONE);
}
END_TEST

START_TEST(test_huge_page_and_release)
{
	/* A transparent huge page is charged as what it is. */
	ck_assert_int_eq(pages_touch(&P, 4 * MB2, 5 * MB2, 2, 0), (int64_t)MB2);
	ck_assert_uint_eq(L.charged, MB2);
	/* madvise(DONTNEED) of half of it, then munmap of a range far wider than what is resident. */
	ck_assert_uint_eq(pages_release(&P, 4 * MB2, 4 * MB2 + MB2 / 2), MB2 / 2);
	ck_assert_uint_eq(L.by_stack[2].charged, MB2 / 2);
	ck_assert_uint_eq(pages_release(&P, 0, 1ULL << 46), MB2 / 2);
	ck_assert_uint_eq(L.charged, 0);
	ck_assert_uint_eq(P.n, 0);
}
END_TEST

START_TEST(test_move)
{
	pages_touch(&P, 0x100000, 0x104000, 1, 0);
	pages_touch(&P, 0x900000, 0x901000, 2, 0);
	/* mremap over the page at 0x900000: it goes, the moved ones keep their stack. */
	ck_assert_int_eq(pages_move(&P, 0x100000, 0x4000, 0x8ff000), 0);
	ck_assert_uint_eq(L.by_stack[2].charged, 0);
	ck_assert_uint_eq(L.by_stack[1].charged, 4 * PG);
	ck_assert_uint_eq(pages_resident(&P, 0x100000, 0x104000), 0);
	ck_assert_uint_eq(pages_resident(&P, 0x8ff000, 0x903000), 4 * PG);
	ck_assert_uint_eq(pages_stack(&P, 0x902000), 1);
}
END_TEST

/* Random touches, releases and moves over a small window, against one byte per page. */
#define WPAGES 3000
static uint32_t model[WPAGES];

static uint64_t model_charge(uint32_t stack)
{
	uint64_t n = 0;
	for (size_t i = 0; i < WPAGES; i++)
		n += model[i] == stack;
	return n * PG;
}

START_TEST(test_against_model)
{
	const uint64_t base = 0x7f0000000000ULL - 700 * PG;  /* straddles region edges */
	for (size_t i = 0; i < WPAGES; i++)
		model[i] = PAGES_NONE;
	srand(7);
	for (int step = 0; step < 4000; step++) {
		size_t a = (size_t)rand() % WPAGES, len = 1 + (size_t)rand() % 600;
		if (a + len > WPAGES)
			len = WPAGES - a;
		uint32_t stack = 1 + (uint32_t)(rand() % 5);
		int op = rand() % 10;
		if (op < 6) {
			pages_touch(&P, base + a * PG, base + (a + len) * PG, stack, 0);
			for (size_t i = a; i < a + len; i++)
				if (model[i] == PAGES_NONE)
					model[i] = stack;
		} else if (op < 9) {
			pages_release(&P, base + a * PG, base + (a + len) * PG);
			for (size_t i = a; i < a + len; i++)
				model[i] = PAGES_NONE;
		} else {
			size_t to = (size_t)rand() % (WPAGES - len);
			pages_move(&P, base + a * PG, len * PG, base + to * PG);
			uint32_t tmp[600];
			for (size_t i = 0; i < len; i++) {
				tmp[i] = model[a + i];
				model[a + i] = PAGES_NONE;
			}
			for (size_t i = 0; i < len; i++)
				model[to + i] = tmp[i];
		}
		uint64_t total = 0;
		for (uint32_t s = 1; s <= 5; s++) {
			uint64_t want = model_charge(s);
			total += want;
			uint64_t got = s < L.n_stacks ? L.by_stack[s].charged : 0;
			if (got != want)
				ck_abort_msg("step %d: stack %u charged %llu, model %llu", step, s,
					     (unsigned long long)got, (unsigned long long)want);
		}
		if (L.charged != total)
			ck_abort_msg("step %d: total %llu, model %llu", step, (unsigned long long)L.charged,
				     (unsigned long long)total);
		size_t probe = (size_t)rand() % WPAGES;
		if (pages_stack(&P, base + probe * PG) != model[probe])
			ck_abort_msg("step %d: page %zu", step, probe);
	}
	pages_clear(&P);
	ck_assert_uint_eq(L.charged, 0);
}
END_TEST

Suite *pages_suite(void)
{
	Suite *s = suite_create("pages");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_touch_charges_once);
	tcase_add_test(tc, test_huge_page_and_release);
	tcase_add_test(tc, test_move);
	tcase_add_test(tc, test_against_model);
	suite_add_tcase(s, tc);
	return s;
}
