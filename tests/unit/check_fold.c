/* Unit tests for common/fold: what is the user's own code, module names, and folding a snapshot without losing a byte. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "common/fold.h"
#include "common/snap.h"

START_TEST(test_normalize)
{
	char out[256];
	fold_normalize("/work/main/build/../tests/./targets//py/a.py", out, sizeof(out));
	ck_assert_str_eq(out, "/work/main/tests/targets/py/a.py");
	fold_normalize("/..", out, sizeof(out));
	ck_assert_str_eq(out, "/");
	fold_normalize("../a/../../b", out, sizeof(out));
	ck_assert_str_eq(out, "../../b");
	fold_normalize("/a/b/", out, sizeof(out));
	ck_assert_str_eq(out, "/a/b");
}
END_TEST

START_TEST(test_python_files)
{
	ck_assert_str_eq(fold_python_library("/usr/lib/python3/dist-packages/numpy/core/overrides.py"),
			 "numpy/core/overrides.py");
	ck_assert_str_eq(fold_python_library("/home/u/.pyenv/versions/3.12.1/lib/python3.12/json/decoder.py"),
			 "json/decoder.py");
	ck_assert_str_eq(fold_python_library("/v/lib/python3.11/site-packages/pandas/core/frame.py"),
			 "pandas/core/frame.py");
	ck_assert_ptr_null(fold_python_library("/home/u/proj/lib/seed.py"));
	ck_assert_ptr_null(fold_python_library("/home/u/python3.11/seed.py"));

	ck_assert(fold_own_python(NULL, "/home/u/proj/seed.py"));
	ck_assert(fold_own_python(NULL, "seed.py"));
	ck_assert(!fold_own_python(NULL, "/usr/lib/python3.11/json/decoder.py"));
	ck_assert(!fold_own_python(NULL, "/usr/lib/python3/dist-packages/pandas/core/frame.py"));
	ck_assert(!fold_own_python(NULL, "<frozen importlib._bootstrap>"));
	ck_assert(!fold_own_python(NULL, "<__array_function__ internals>"));
	ck_assert(fold_own_python(NULL, "<ipython-input-3-1a2b>"));
	ck_assert(!fold_own_python(NULL, ""));

	ck_assert(fold_import_file("<frozen importlib._bootstrap>"));
	ck_assert(fold_import_file("<frozen importlib._bootstrap_external>"));
	ck_assert(fold_import_file("/usr/lib/python3.11/importlib/__init__.py"));
	ck_assert(!fold_import_file("<frozen importlib.util>"));
	ck_assert(!fold_import_file("/home/u/importer.py"));
}
END_TEST

START_TEST(test_module_names)
{
	char m[128];
	fold_module_name("/usr/lib/python3/dist-packages/numpy/core/overrides.py", m, sizeof(m));
	ck_assert_str_eq(m, "numpy.core.overrides");
	fold_module_name("/usr/lib/python3/dist-packages/numpy/__init__.py", m, sizeof(m));
	ck_assert_str_eq(m, "numpy");
	fold_module_name("/usr/lib/python3.11/json/decoder.py", m, sizeof(m));
	ck_assert_str_eq(m, "json.decoder");
	fold_module_name("<frozen os>", m, sizeof(m));
	ck_assert_str_eq(m, "os");
	fold_module_name("/home/u/proj/util.py", m, sizeof(m));
	ck_assert_str_eq(m, "util");
	fold_module_name("/usr/lib/python3/dist-packages/numpy/core/overrides.py", m, 6);
	ck_assert_str_eq(m, "numpy");
}
END_TEST

START_TEST(test_native_frames)
{
	ck_assert(fold_own_native(NULL, "/home/u/src/app", NULL, "make_rows", 0));
	ck_assert(!fold_own_native(NULL, "/usr/lib/x86_64-linux-gnu/libc.so.6", NULL, "malloc", 0));
	ck_assert(!fold_own_native(NULL, "/home/u/src/app", "/usr/include/c++/12/bits/stl_vector.h", "push_back", 0));
	ck_assert(!fold_own_native(NULL, "/home/u/src/app", NULL, "std::vector<int>::push_back(int const&)", 0));
	ck_assert(!fold_own_native(NULL, "/home/u/src/app", NULL, "_start", 0));
	ck_assert(!fold_own_native(NULL, "[vdso]", NULL, NULL, 0));
	ck_assert(!fold_own_native(NULL, "/v/lib/python3.11/site-packages/numpy/core/_m.so", NULL, NULL, 1));
	/* pyenv's interpreter lives in a home directory: in a Python stack it is never own code. */
	ck_assert(fold_own_native(NULL, "/home/u/.pyenv/versions/3.12.1/bin/python3.12", NULL, "main", 0));
	ck_assert(!fold_own_native(NULL, "/home/u/.pyenv/versions/3.12.1/bin/python3.12", NULL, "main", 1));

	struct fold_own own = { NULL, 0 };
	ck_assert_int_eq(fold_own_add(&own, "/home/u/src/lib/"), 0);
	ck_assert(fold_own_native(&own, "/usr/lib/libfoo.so", "/home/u/src/lib/foo.c", "foo", 0));
	ck_assert(!fold_own_native(&own, "/home/u/src/app", "/home/u/src/main.c", "main", 0));
	ck_assert(fold_own_python(&own, "/home/u/src/lib/../lib/x.py"));
	ck_assert(!fold_own_python(&own, "/home/u/src/library/x.py"));
	fold_own_fin(&own);
}
END_TEST

/* A Python program: script.py:3 imports pkg (two import-system frames, then pkg's body), which mallocs. */
enum { F_MALLOC, F_SO1, F_SO2, F_BODY, F_IMP1, F_IMP2, F_SCRIPT, F_SCRIPT2, N_FRAMES };

static void python_snap(struct snap *s)
{
	snap_init(s);
	s->n_modules = 2;
	s->modules = calloc(2, sizeof(*s->modules));
	s->modules[0].path = strdup("/usr/lib/x86_64-linux-gnu/libc.so.6");
	s->modules[1].path = strdup("/v/lib/python3.11/site-packages/pkg/_ext.cpython-311-x86_64-linux-gnu.so");
	s->n_frames = N_FRAMES;
	s->frames = calloc(N_FRAMES, sizeof(*s->frames));
	struct { int kind; int32_t module; uint64_t offset; const char *fn, *file; uint32_t line; } f[N_FRAMES] = {
		[F_MALLOC] = { SNAP_FRAME_NATIVE, 0, 0x100, "malloc", NULL, 0 },
		[F_SO1] = { SNAP_FRAME_NATIVE, 1, 0x10, NULL, NULL, 0 },
		[F_SO2] = { SNAP_FRAME_NATIVE, 1, 0x20, NULL, NULL, 0 },
		[F_BODY] = { SNAP_FRAME_PYTHON, -1, 0, "<module>", "/v/lib/python3.11/site-packages/pkg/__init__.py", 4 },
		[F_IMP1] = { SNAP_FRAME_PYTHON, -1, 0, "_call_with_frames_removed", "<frozen importlib._bootstrap>", 241 },
		[F_IMP2] = { SNAP_FRAME_PYTHON, -1, 0, "_find_and_load", "<frozen importlib._bootstrap>", 1178 },
		[F_SCRIPT] = { SNAP_FRAME_PYTHON, -1, 0, "<module>", "/home/u/script.py", 3 },
		[F_SCRIPT2] = { SNAP_FRAME_PYTHON, -1, 0, "<module>", "/home/u/script.py", 5 },
	};
	for (int i = 0; i < N_FRAMES; i++) {
		s->frames[i].kind = f[i].kind;
		s->frames[i].module = f[i].module;
		s->frames[i].offset = f[i].offset;
		s->frames[i].function = f[i].fn ? strdup(f[i].fn) : NULL;
		s->frames[i].file = f[i].file ? strdup(f[i].file) : NULL;
		s->frames[i].line = f[i].line;
	}
	/* Two stacks, outermost first: script:3 > imp2 > imp1 > body > so2 > so1 > malloc, and the same with so2 only. */
	static const uint32_t a[] = { F_SCRIPT, F_IMP2, F_IMP1, F_BODY, F_SO2, F_SO1, F_MALLOC };
	static const uint32_t b[] = { F_SCRIPT2, F_IMP2, F_IMP1, F_BODY, F_SO2, F_SO1, F_MALLOC };
	s->nodes = calloc(1 + 14, sizeof(*s->nodes));
	s->n_nodes = 1;
	uint32_t leaf[2];
	for (int k = 0; k < 2; k++) {
		uint32_t parent = 0;
		for (int i = 0; i < 7; i++) {
			s->nodes[s->n_nodes].parent = parent;
			s->nodes[s->n_nodes].frame = (k ? b : a)[i];
			parent = (uint32_t)s->n_nodes++;
		}
		leaf[k] = parent;
	}
	s->n_stacks = 3;
	s->stacks = calloc(3, sizeof(*s->stacks));
	s->stacks[0] = (struct snap_stack){ .node = leaf[0], .kind = SNAP_KIND_HEAP, .charged = 1000, .reserved = 1000, .count = 1 };
	s->stacks[1] = (struct snap_stack){ .node = leaf[1], .kind = SNAP_KIND_HEAP, .charged = 500, .reserved = 500, .count = 2 };
	/* The same stack as the first once more (a hostile or old file may hold it twice): merged. */
	s->stacks[2] = s->stacks[0];
}

static void names(const struct snap *s, uint32_t node, const char **out, size_t *n)
{
	uint32_t frames[32];
	*n = snap_stack_frames(s, node, frames, 32);
	for (size_t k = 0; k < *n; k++)
		out[k] = s->frames[frames[k]].function ? s->frames[frames[k]].function : "?";
}

START_TEST(test_fold_snapshot)
{
	struct snap s;
	python_snap(&s);
	uint32_t frames[16];
	size_t n = snap_stack_frames(&s, s.stacks[0].node, frames, 16);
	ck_assert_uint_eq(n, 7);
	/* Anchored on the script's line, before any folding. */
	ck_assert_uint_eq(fold_anchor(&s, NULL, frames, n), 6);

	struct fold_options fo = { .imports = 1, .natives = 1 };
	ck_assert_int_eq(fold_snap(&s, &fo), 2 * (1 + 1)); /* per stack: one import frame and one native frame folded away */
	ck_assert_uint_eq(s.n_stacks, 2);
	uint64_t total = 0;
	for (size_t i = 0; i < s.n_stacks; i++)
		total += s.stacks[i].charged;
	ck_assert_uint_eq(total, 2500);
	const struct snap_stack *big = s.stacks[0].charged == 2000 ? &s.stacks[0] : &s.stacks[1];
	ck_assert_uint_eq(big->charged, 2000);
	ck_assert_uint_eq(big->count, 2);
	const char *fn[32];
	names(&s, big->node, fn, &n);
	ck_assert_uint_eq(n, 5);
	ck_assert_str_eq(fn[0], "malloc");
	ck_assert_str_eq(fn[1], "[_ext\xe2\x80\xa6so, 2 frames]");
	ck_assert_str_eq(fn[2], "<module>");
	ck_assert_str_eq(fn[3], "[import pkg]");
	ck_assert_str_eq(fn[4], "<module>");
	/* The two stacks share their folded frames: one frame each, added once. */
	ck_assert_uint_eq(s.n_frames, N_FRAMES + 2);
	snap_fin(&s);

	/* Without the native fold (a --native run keeps every frame): imports only. */
	python_snap(&s);
	s.n_counters = 1;
	s.counters = calloc(1, sizeof(*s.counters));
	s.counters[0].name = strdup("options.native_frames");
	s.counters[0].count = 1;
	ck_assert_int_eq(fold_snap(&s, &fo), 2);
	names(&s, s.stacks[0].node, fn, &n);
	ck_assert_uint_eq(n, 6);
	ck_assert_str_eq(fn[4], "[import pkg]");
	snap_fin(&s);
}
END_TEST

START_TEST(test_lines_by_anchor)
{
	struct snap s;
	python_snap(&s);
	size_t n = 0;
	struct fold_line *v = fold_lines(&s, NULL, s.stacks, s.n_stacks, &n);
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(v[0].frame, F_SCRIPT);
	ck_assert_uint_eq(v[0].charged, 2000);
	ck_assert_uint_eq(v[0].stacks, 2);
	ck_assert_uint_eq(v[1].frame, F_SCRIPT2);
	char buf[64];
	fold_frame_brief(&s, v[0].frame, buf, sizeof(buf));
	ck_assert_str_eq(buf, "<module> (script.py:3)");
	fold_frame_brief(&s, F_SO1, buf, sizeof(buf));
	ck_assert_str_eq(buf, "_ext.cpython-311-x86_64-linux-gnu.so + 0x10");
	free(v);
	/* No frame of the user's when --own names somewhere else: one line for all. */
	struct fold_own own = { NULL, 0 };
	ck_assert_int_eq(fold_own_add(&own, "/elsewhere"), 0);
	v = fold_lines(&s, &own, s.stacks, s.n_stacks, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(v[0].frame, UINT32_MAX);
	ck_assert_uint_eq(v[0].charged, 2500);
	free(v);
	fold_own_fin(&own);
	snap_fin(&s);
}
END_TEST

Suite *fold_suite(void)
{
	Suite *s = suite_create("fold");
	TCase *tc = tcase_create("fold");
	tcase_add_test(tc, test_normalize);
	tcase_add_test(tc, test_python_files);
	tcase_add_test(tc, test_module_names);
	tcase_add_test(tc, test_native_frames);
	tcase_add_test(tc, test_fold_snapshot);
	tcase_add_test(tc, test_lines_by_anchor);
	suite_add_tcase(s, tc);
	return s;
}
