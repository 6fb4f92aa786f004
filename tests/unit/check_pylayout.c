/*
 * Unit tests for tracer/pylayout's reader of _Py_DebugOffsets: tables
 * written here as CPython 3.13, 3.14 and its main branch lay them out, a
 * free-threaded one, and tables an untrusted process could hand over.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "tracer/stacks/pylayout.h"

/* Where a table's sections start (byte positions), counted off CPython's headers for this test. */
struct sections { uint16_t interp, ts, ts_native, frame, code, bytes, unicode; };
static const struct sections s313 = { 48, 152, 6, 224, 272, 512, 536 };
static const struct sections s314 = { 48, 176, 6, 248, 312, 592, 616 };
static const struct sections s315 = { 48, 176, 8, 304, 368, 680, 704 };

/* The offsets a table gives, in the order a struct pylayout lists them. */
struct values {
	uint64_t interp_head, interp_next, threads_head, current_frame, thread_id;
	uint64_t f_size, f_previous, f_executable, f_instr, f_owner;
	uint64_t c_size, c_firstlineno, c_filename, c_qualname, c_linetable, c_adaptive;
	uint64_t ascii_size;
};
/* CPython 3.13.0's (x86-64), as its _PyRuntime holds them. */
static const struct values v313 = { 632, 7264, 7344, 72, 152, 80, 8, 0, 56, 70, 208, 68, 112, 128, 136, 200, 40 };
/* A 3.14's: the frame's owner moved, the code object grew. */
static const struct values v314 = { 760, 7288, 7368, 72, 152, 80, 8, 0, 56, 74, 224, 68, 112, 128, 136, 216, 40 };

static uint8_t d[PYL_DEBUG_OFFSETS_MAX];

static void put(size_t at, uint64_t v)
{
	memcpy(d + at, &v, sizeof(v));
}

static void table(const struct sections *s, const struct values *v, uint64_t version, uint64_t free_threaded)
{
	memset(d, 0, sizeof(d));
	memcpy(d, "xdebugpy", 8);
	put(8, version);
	put(16, free_threaded);
	put(24, 200000); put(40, v->interp_head);
	put(s->interp, 12000); put(s->interp + 8, 0); put(s->interp + 16, v->interp_next); put(s->interp + 24, v->threads_head);
	put(s->ts, 400); put(s->ts + 8, 0); put(s->ts + 16, 8); put(s->ts + 24, 16); put(s->ts + 32, v->current_frame);
	put(s->ts + 8u * (s->ts_native - 1u), v->thread_id); put(s->ts + 8u * s->ts_native, v->thread_id + 8);
	put(s->frame, v->f_size); put(s->frame + 8, v->f_previous); put(s->frame + 16, v->f_executable);
	put(s->frame + 24, v->f_instr); put(s->frame + 32, v->f_size - 8); put(s->frame + 40, v->f_owner);
	put(s->code, v->c_size); put(s->code + 8, v->c_filename); put(s->code + 16, v->c_filename + 8);
	put(s->code + 24, v->c_qualname); put(s->code + 32, v->c_linetable); put(s->code + 40, v->c_firstlineno);
	put(s->code + 72, v->c_adaptive);
	put(s->bytes, 40); put(s->bytes + 8, 16); put(s->bytes + 16, 32);
	put(s->unicode, v->ascii_size + 24); put(s->unicode + 8, 32); put(s->unicode + 16, 16); put(s->unicode + 24, v->ascii_size);
}

static int build(struct pylayout *l, uint32_t version, char *why)
{
	return pylayout_from_debug_offsets(l, d, sizeof(d), version, why, 256);
}

/* Every offset a built layout gives stays inside what pystack.c's buffers hold. */
static void check_bounded(const struct pylayout *l)
{
	ck_assert_uint_le(l->ts_native_thread_id + 8u, 512);
	ck_assert_uint_le(l->ts_current_frame + 8u, 512);
	ck_assert_uint_eq(l->ts_next, 8);
	ck_assert_uint_le(l->frame_owner + 1u, 128);
	ck_assert_uint_le(l->frame_instr + 8u, 128);
	ck_assert_uint_le(l->frame_previous + 8u, 128);
	ck_assert_uint_le(l->frame_code + 8u, 128);
	ck_assert_uint_ge(l->code_filename, l->code_firstlineno);
	ck_assert_uint_ge(l->code_qualname, l->code_firstlineno);
	ck_assert_uint_ge(l->code_linetable, l->code_firstlineno);
	ck_assert_uint_le(l->code_filename + 8u, l->code_firsttraceable);
	ck_assert_uint_le(l->code_qualname + 8u, l->code_firsttraceable);
	ck_assert_uint_le(l->code_linetable + 8u, l->code_firsttraceable);
	ck_assert_uint_le(l->code_firsttraceable + 4u - l->code_firstlineno, 256);
	ck_assert_uint_le(l->bytes_size + 8u, l->bytes_data);
	ck_assert_uint_le(l->bytes_data, 40);
	ck_assert_uint_le(l->compact_size, 128);
	ck_assert_uint_le(l->str_state + 4u, l->ascii_size);
	ck_assert_uint_le(l->str_length + 8u, l->ascii_size);
}

START_TEST(test_pylayout_debug_313_is_compiled_in)
{
	struct pylayout l;
	char why[256] = "";
	table(&s313, &v313, 0x030d00f0, 0);
	ck_assert_msg(build(&l, 0x030d00f0, why) == 0, "refused: %s", why);
	ck_assert_int_eq(l.debug_offsets, 1);
	struct pylayout c = *pylayout_for(3, 13);
	ck_assert_int_eq(c.debug_offsets, 0);
	c.debug_offsets = 1;
	/* Field by field, so a failure names the one that differs. */
#define SAME(f) ck_assert_uint_eq(l.f, c.f)
	SAME(minor); SAME(runtime_interp_head); SAME(interp_next); SAME(interp_threads_head);
	SAME(ts_next); SAME(ts_native_thread_id); SAME(ts_cframe); SAME(cframe_current); SAME(ts_current_frame);
	SAME(frame_code); SAME(frame_previous); SAME(frame_instr); SAME(frame_owner); SAME(frame_is_entry);
	SAME(code_firstlineno); SAME(code_filename); SAME(code_qualname); SAME(code_linetable); SAME(code_adaptive);
	SAME(code_firsttraceable); SAME(ascii_size); SAME(compact_size); SAME(str_length); SAME(str_state);
	SAME(bytes_size); SAME(bytes_data);
#undef SAME
	ck_assert(!memcmp(&l, &c, sizeof(l)));
	/* A later patch release reads the same. */
	ck_assert_int_eq(build(&l, 0x030d05f0, why), 0);
}
END_TEST

START_TEST(test_pylayout_debug_314_and_later)
{
	struct pylayout l;
	char why[256] = "";
	table(&s314, &v314, 0x030e00f0, 0);
	ck_assert_msg(build(&l, 0x030e00f0, why) == 0, "refused: %s", why);
	ck_assert_uint_eq(l.minor, 14);
	ck_assert_uint_eq(l.runtime_interp_head, 760);
	ck_assert_uint_eq(l.interp_next, 7288);
	ck_assert_uint_eq(l.interp_threads_head, 7368);
	ck_assert_uint_eq(l.ts_current_frame, 72);
	ck_assert_uint_eq(l.ts_cframe, PYL_NONE);
	ck_assert_uint_eq(l.cframe_current, PYL_NONE);
	ck_assert_uint_eq(l.ts_native_thread_id, 160);
	ck_assert_uint_eq(l.frame_owner, 74);
	ck_assert_uint_eq(l.frame_is_entry, PYL_NONE);
	ck_assert_uint_eq(l.code_adaptive, 216);
	ck_assert_uint_eq(l.code_firsttraceable, 200); /* not in the table: 16 bytes before co_code_adaptive */
	ck_assert_uint_eq(l.compact_size, 56);         /* nor this: PyASCIIObject and two words */
	ck_assert_uint_eq(l.bytes_data, 32);
	check_bounded(&l);
	/* A 3.13 table is no 3.14's, nor a 3.14 table a 3.13's. */
	ck_assert_int_eq(build(&l, 0x030d00f0, why), -1);
	table(&s313, &v313, 0x030e00f0, 0);
	ck_assert_int_eq(build(&l, 0x030e00f0, why), -1);
	/* A version after the newest ptfil knows: tried with every table since 3.14's. */
	table(&s314, &v314, 0x031000a1, 0);
	ck_assert_msg(build(&l, 0x031000a1, why) == 0, "refused: %s", why);
	ck_assert_uint_eq(l.minor, 16);
	/* The main branch's: a longer thread state section, native_thread_id further in it. */
	table(&s315, &v314, 0x030f00a5, 0);
	ck_assert_msg(build(&l, 0x030f00a5, why) == 0, "refused: %s", why);
	ck_assert_uint_eq(l.minor, 15);
	ck_assert_uint_eq(l.ts_native_thread_id, 160);
	ck_assert_uint_eq(l.code_adaptive, 216);
	check_bounded(&l);
}
END_TEST

START_TEST(test_pylayout_debug_free_threaded)
{
	struct pylayout l;
	char why[256] = "";
	table(&s313, &v313, 0x030d00f0, 1);
	ck_assert_int_eq(build(&l, 0x030d00f0, why), -1);
	ck_assert_str_eq(why, "a free-threaded CPython 3.13t build, whose objects ptfil does not read yet");
	table(&s314, &v314, 0x030e00f0, 1);
	ck_assert_int_eq(build(&l, 0x030e00f0, why), -1);
	ck_assert_msg(strstr(why, "free-threaded CPython 3.14t") != NULL, "%s", why);
}
END_TEST

START_TEST(test_pylayout_debug_hostile)
{
	struct pylayout l;
	char why[256];
	/* No cookie (a 3.11's _PyRuntime, say), a table of another version, a nonsense free_threaded. */
	table(&s313, &v313, 0x030d00f0, 0);
	memcpy(d, "xdebugpz", 8);
	ck_assert_int_eq(build(&l, 0x030d00f0, why), -1);
	ck_assert_msg(strstr(why, "CPython 3.13") && strstr(why, "xdebugpy"), "%s", why);
	table(&s313, &v313, 0x030c00f0, 0);
	ck_assert_int_eq(build(&l, 0x030d00f0, why), -1);
	ck_assert_msg(strstr(why, "3.12") != NULL, "%s", why);
	table(&s313, &v313, 0x030d00f0, 7);
	ck_assert_int_eq(build(&l, 0x030d00f0, why), -1);
	/* Too few bytes, and a version before 3.13 (which has no table). */
	table(&s313, &v313, 0x030d00f0, 0);
	ck_assert_int_eq(pylayout_from_debug_offsets(&l, d, 300, 0x030d00f0, why, sizeof(why)), -1);
	table(&s313, &v313, 0x030c00f0, 0);
	ck_assert_int_eq(build(&l, 0x030c00f0, why), -1);
	/* Offsets past their struct, too big for the readers, misaligned, or in the wrong order. */
	struct { size_t at; uint64_t v; } bad[] = {
		{ 40, 300000 },                                  /* interpreters_head past _PyRuntimeState */
		{ 24, 0 },                                       /* a struct of no size */
		{ 48 + 24, 20000 },                              /* threads_head past PyInterpreterState */
		{ 48 + 24, 7345 },                               /* misaligned */
		{ 152, 100000 },                                 /* a thread state of 100000 bytes */
		{ 152 + 8, 8 },                                  /* prev is not first */
		{ 152 + 48, 176 },                               /* native_thread_id apart from thread_id */
		{ 152 + 32, 1000 },                              /* current_frame past the state */
		{ 224 + 40, 200 },                               /* the frame's owner past the frame */
		{ 224 + 16, 8 },                                 /* f_executable where previous is */
		{ 272 + 72, 8 },                                 /* co_code_adaptive before co_filename */
		{ 272 + 40, 150 },                               /* co_firstlineno after co_filename */
		{ 272 + 8, 2000 },                               /* co_filename past the code object */
		{ 512 + 16, 8 },                                 /* ob_sval before ob_size ends */
		{ 536, 80 },                                     /* PyUnicodeObject no word more than compact */
		{ 536 + 24, 4096 },                              /* asciiobject_size past the str */
		{ 536 + 8, UINT64_MAX },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		table(&s313, &v313, 0x030d00f0, 0);
		put(bad[i].at, bad[i].v);
		why[0] = '\0';
		ck_assert_msg(build(&l, 0x030d00f0, why) == -1, "bad[%zu] (%zu = %llu) accepted", i, bad[i].at,
			      (unsigned long long)bad[i].v);
		ck_assert_msg(why[0] != '\0', "bad[%zu] refused without a reason", i);
	}
	/* Every word of a good table changed at random: refused with a reason, or within bounds. */
	srandom(15);
	for (int k = 0; k < 20000; k++) {
		table(k & 1 ? &s314 : &s313, k & 1 ? &v314 : &v313, k & 1 ? 0x030e00f0 : 0x030d00f0, 0);
		int words = 1 + (int)(random() % 3);
		for (int w = 0; w < words; w++) {
			size_t at = 8 * (size_t)(random() % 90);
			uint64_t v = random() % 4 == 0 ? (uint64_t)random() << 32 | (uint64_t)random() : (uint64_t)(random() % 9000);
			put(at, v);
		}
		why[0] = '\0';
		if (build(&l, k & 1 ? 0x030e00f0 : 0x030d00f0, why) == 0)
			check_bounded(&l);
		else
			ck_assert(why[0] != '\0');
	}
	/* Nothing but 0xff after a good header. */
	table(&s313, &v313, 0x030d00f0, 0);
	memset(d + 24, 0xff, sizeof(d) - 24);
	ck_assert_int_eq(build(&l, 0x030d00f0, why), -1);
}
END_TEST

Suite *pylayout_suite(void)
{
	Suite *s = suite_create("pylayout");
	TCase *tc = tcase_create("debug_offsets");
	tcase_add_test(tc, test_pylayout_debug_313_is_compiled_in);
	tcase_add_test(tc, test_pylayout_debug_314_and_later);
	tcase_add_test(tc, test_pylayout_debug_free_threaded);
	tcase_add_test(tc, test_pylayout_debug_hostile);
	suite_add_tcase(s, tc);
	return s;
}
