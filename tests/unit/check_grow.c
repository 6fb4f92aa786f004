/* Unit tests for common/grow: capacities as the hand-rolled growth they replace computed them, contents kept, overflow refused. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "common/grow.h"

struct rec {
	uint64_t a;
	uint32_t b;
};

START_TEST(test_first_growth_allocates_the_minimum)
{
	struct rec *v = NULL;
	size_t cap = 0;
	ck_assert_int_eq(grow_array(&v, &cap, 1, sizeof(*v), 32), 0);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(cap, 32);
	v[31].a = 7; /* all of it is there (ASan would say otherwise) */
	free(v);
}
END_TEST

START_TEST(test_room_enough_changes_nothing)
{
	struct rec *v = NULL;
	size_t cap = 0;
	ck_assert_int_eq(grow_array(&v, &cap, 0, sizeof(*v), 32), 0);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(cap, 0);
	ck_assert_int_eq(grow_array(&v, &cap, 5, sizeof(*v), 32), 0);
	struct rec *was = v;
	for (size_t need = 0; need <= 32; need++) {
		ck_assert_int_eq(grow_array(&v, &cap, need, sizeof(*v), 64), 0);
		ck_assert_ptr_eq(v, was);
		ck_assert_uint_eq(cap, 32);
	}
	free(v);
}
END_TEST

/* One element at a time, as every converted caller grows: 32, 64, 128... as `cap ? cap * 2 : 32` did. */
START_TEST(test_one_at_a_time_doubles_from_the_minimum)
{
	struct rec *v = NULL;
	size_t cap = 0, want = 0;
	for (size_t n = 0; n < 5000; n++) {
		if (n == want)
			want = want ? want * 2 : 32;
		ck_assert_int_eq(grow_array(&v, &cap, n + 1, sizeof(*v), 32), 0);
		ck_assert_uint_eq(cap, want);
		v[n].a = n * 3;
		v[n].b = (uint32_t)n;
	}
	for (size_t n = 0; n < 5000; n++) {
		ck_assert_uint_eq(v[n].a, n * 3);
		ck_assert_uint_eq(v[n].b, n);
	}
	free(v);
}
END_TEST

/* A jump past twice the capacity doubles until it fits, as the buffers' `while (cap < need) cap *= 2` did. */
START_TEST(test_a_jump_doubles_until_it_fits)
{
	char *buf = NULL;
	size_t cap = 0;
	ck_assert_int_eq(grow_array(&buf, &cap, 300, 1, 256), 0);
	ck_assert_uint_eq(cap, 512);
	memset(buf, 'x', 300);
	ck_assert_int_eq(grow_array(&buf, &cap, 5000, 1, 256), 0);
	ck_assert_uint_eq(cap, 8192);
	for (size_t i = 0; i < 300; i++)
		ck_assert_int_eq(buf[i], 'x');
	free(buf);
}
END_TEST

START_TEST(test_min_zero_counts_from_one)
{
	uint32_t *v = NULL;
	size_t cap = 0;
	ck_assert_int_eq(grow_array(&v, &cap, 1, sizeof(*v), 0), 0);
	ck_assert_uint_eq(cap, 1);
	ck_assert_int_eq(grow_array(&v, &cap, 5, sizeof(*v), 0), 0);
	ck_assert_uint_eq(cap, 8);
	free(v);
}
END_TEST

/* A minimum of need is an exact size (the views' frame buffers, the ledger's copy at the peak). */
START_TEST(test_min_of_need_is_exact)
{
	uint32_t *v = NULL;
	size_t cap = 0;
	ck_assert_int_eq(grow_array(&v, &cap, 7, sizeof(*v), 7), 0);
	ck_assert_uint_eq(cap, 7);
	ck_assert_int_eq(grow_array(&v, &cap, 4, sizeof(*v), 4), 0);
	ck_assert_uint_eq(cap, 7);
	ck_assert_int_eq(grow_array(&v, &cap, 13, sizeof(*v), 13), 0);
	ck_assert_uint_eq(cap, 13);
	v[12] = 1;
	free(v);
}
END_TEST

/* A size that does not fit in size_t is refused before any allocation, the array and capacity untouched. */
START_TEST(test_overflow_is_refused_and_changes_nothing)
{
	struct rec *v = NULL;
	size_t cap = 0;
	ck_assert_int_eq(grow_array(&v, &cap, 10, sizeof(*v), 16), 0);
	struct rec *was = v;
	v[3].a = 42;
	const size_t needs[] = { SIZE_MAX / sizeof(*v) + 1, SIZE_MAX / 2, SIZE_MAX - 1, SIZE_MAX };
	for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
		errno = 0;
		ck_assert_int_eq(grow_array(&v, &cap, needs[i], sizeof(*v), 16), -1);
		ck_assert_int_eq(errno, ENOMEM);
		ck_assert_ptr_eq(v, was);
		ck_assert_uint_eq(cap, 16);
	}
	/* Past SIZE_MAX / 2 doubling would wrap: the capacity is need itself, and need * 2 bytes is refused. */
	uint16_t *h = NULL;
	size_t hcap = (SIZE_MAX >> 1) + 1;
	errno = 0;
	ck_assert_int_eq(grow_array(&h, &hcap, hcap + 1, sizeof(*h), 0), -1);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_ptr_null(h);
	ck_assert_uint_eq(hcap, (SIZE_MAX >> 1) + 1);
	ck_assert_uint_eq(v[3].a, 42);
	free(v);
}
END_TEST

Suite *grow_suite(void)
{
	Suite *s = suite_create("grow");
	TCase *tc = tcase_create("grow");
	tcase_add_test(tc, test_first_growth_allocates_the_minimum);
	tcase_add_test(tc, test_room_enough_changes_nothing);
	tcase_add_test(tc, test_one_at_a_time_doubles_from_the_minimum);
	tcase_add_test(tc, test_a_jump_doubles_until_it_fits);
	tcase_add_test(tc, test_min_zero_counts_from_one);
	tcase_add_test(tc, test_min_of_need_is_exact);
	tcase_add_test(tc, test_overflow_is_refused_and_changes_nothing);
	suite_add_tcase(s, tc);
	return s;
}
