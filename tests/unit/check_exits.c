/*
 * Unit tests for symbols/exits: a function's returns found in bytes written
 * here instruction by instruction, and in glibc's malloc from its file.
 */
#include <string.h>

#include "tests/unit/suites.h"
#include "symbols/exits.h"
#include "symbols/sym.h"

#define BASE 0x401000ULL

/*
 * push %rbx; test %rdi,%rdi; je +4 (to the second ret); mov %rdi,%rax; pop %rbx; ret;
 * xor %eax,%eax; pop %rbx; rep ret
 */
static const uint8_t two_rets[] = {
	0x53, 0x48, 0x85, 0xff, 0x74, 0x05, 0x48, 0x89, 0xf8, 0x5b, 0xc3,
	0x31, 0xc0, 0x5b, 0xf3, 0xc3,
};

START_TEST(test_exits_two_rets)
{
	uint64_t at[EXITS_MAX];
	ck_assert_uint_eq(exits_find(two_rets, sizeof(two_rets), BASE, at, EXITS_MAX), 2);
	ck_assert_uint_eq(at[0], BASE + 10);
	ck_assert_uint_eq(at[1], BASE + 14);
	/* More returns than room: not hookable at its returns. */
	ck_assert_uint_eq(exits_find(two_rets, sizeof(two_rets), BASE, at, 1), 0);
}
END_TEST

START_TEST(test_exits_other_ways_out)
{
	uint64_t at[EXITS_MAX];
	uint8_t code[32];
	/* A tail call: jmp rel32 to a target past the function's end. */
	static const uint8_t tail[] = { 0x48, 0x85, 0xff, 0x74, 0x05, 0xe9, 0x00, 0x10, 0x00, 0x00, 0xc3 };
	ck_assert_uint_eq(exits_find(tail, sizeof(tail), BASE, at, EXITS_MAX), 0);
	/* A conditional branch out of it (jne rel8 back before its start). */
	static const uint8_t branch_out[] = { 0x48, 0x85, 0xff, 0x75, 0xf0, 0xc3 };
	ck_assert_uint_eq(exits_find(branch_out, sizeof(branch_out), BASE, at, EXITS_MAX), 0);
	/* A jump through a register (jmp *%rax), as a jump table or a tail call through a pointer. */
	static const uint8_t indirect[] = { 0x48, 0x85, 0xff, 0x74, 0x02, 0xff, 0xe0, 0xc3 };
	ck_assert_uint_eq(exits_find(indirect, sizeof(indirect), BASE, at, EXITS_MAX), 0);
	/* ret $8 pops more than the return address. */
	static const uint8_t ret_imm[] = { 0x31, 0xc0, 0xc2, 0x08, 0x00 };
	ck_assert_uint_eq(exits_find(ret_imm, sizeof(ret_imm), BASE, at, EXITS_MAX), 0);
	/* Bytes that are not a whole instruction at the end. */
	static const uint8_t cut[] = { 0xc3, 0x48, 0x8b };
	ck_assert_uint_eq(exits_find(cut, sizeof(cut), BASE, at, EXITS_MAX), 0);
	/* No return at all (a function that only calls abort). */
	static const uint8_t noret[] = { 0xe8, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x0b };
	ck_assert_uint_eq(exits_find(noret, sizeof(noret), BASE, at, EXITS_MAX), 0);
	/* A jump within it and a call out of it are fine. */
	memcpy(code, (const uint8_t[]){ 0xe8, 0x00, 0x10, 0x00, 0x00, 0xeb, 0x00, 0xc3 }, 8);
	ck_assert_uint_eq(exits_find(code, 8, BASE, at, EXITS_MAX), 1);
	ck_assert_uint_eq(at[0], BASE + 7);
}
END_TEST

/* glibc's malloc, from the file: every return found is a ret byte, inside the function. */
START_TEST(test_exits_glibc_malloc)
{
	struct sym_file *f = sym_open("/lib/x86_64-linux-gnu/libc.so.6");
	ck_assert_ptr_nonnull(f);
	uint64_t at[EXITS_MAX], off, size;
	ck_assert_int_eq(sym_dynamic_extent(f, "malloc", &off, &size), 0);
	size_t n = exits_of(f, "malloc", at, EXITS_MAX);
	ck_assert_msg(n > 0, "glibc's malloc has a way out other than ret: the ptrace path would keep 3 stops a pair");
	for (size_t i = 0; i < n; i++) {
		uint8_t b[2];
		ck_assert_uint_ge(at[i], off);
		ck_assert_uint_lt(at[i], off + size);
		ck_assert_int_eq(sym_read(f, at[i], b, 2), 0);
		ck_assert(b[0] == 0xc3 || ((b[0] == 0xf3 || b[0] == 0xf2) && b[1] == 0xc3));
	}
	ck_assert_uint_eq(exits_of(f, "no_such_function_here", at, EXITS_MAX), 0);
	sym_close(f);
}
END_TEST

Suite *exits_suite(void)
{
	Suite *s = suite_create("exits");
	TCase *tc = tcase_create("returns");
	tcase_add_test(tc, test_exits_two_rets);
	tcase_add_test(tc, test_exits_other_ways_out);
	tcase_add_test(tc, test_exits_glibc_malloc);
	suite_add_tcase(s, tc);
	return s;
}
