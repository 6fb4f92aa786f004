/* The frame tree (tools/flame.c): merging by label, inclusive and self sums, diffs, per-function totals. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/suites.h"
#include "tools/flame.h"
#include "tools/view.h"
#include "common/snap.h"

/*
 * A small snapshot built in memory. Frames: 0 main, 1 walk, 2 leaf, 3 walk
 * (a second call site of walk: merges with 1), 4 unnamed in module 0, 5
 * unnamed without a module.
 */
static void make_snap(struct snap *s)
{
	static const char *names[] = { "main", "walk", "leaf", "walk", NULL, NULL };
	static const struct snap_node nodes[] = {
		{ 0, 0 },  /* 0 root */
		{ 0, 0 },  /* 1 main */
		{ 1, 1 },  /* 2 main>walk */
		{ 2, 3 },  /* 3 main>walk>walk (recursion, other site) */
		{ 3, 2 },  /* 4 main>walk>walk>leaf */
		{ 1, 3 },  /* 5 main>walk (other site: same label as node 2) */
		{ 1, 4 },  /* 6 main>prog + 0x50 */
		{ 0, 5 },  /* 7 0x7fff0000 */
	};
	snap_init(s);
	s->n_modules = 1;
	s->modules = calloc(1, sizeof(*s->modules));
	s->modules[0].path = strdup("/usr/bin/prog");
	s->n_frames = 6;
	s->frames = calloc(6, sizeof(*s->frames));
	for (int i = 0; i < 6; i++) {
		s->frames[i].module = i == 5 ? -1 : 0;
		s->frames[i].offset = i == 5 ? 0x7fff0000 : 0x10 * (i + 1);
		s->frames[i].function = names[i] ? strdup(names[i]) : NULL;
	}
	s->n_nodes = sizeof(nodes) / sizeof(nodes[0]);
	s->nodes = malloc(sizeof(nodes));
	memcpy(s->nodes, nodes, sizeof(nodes));
	static const struct snap_stack st[] = {
		{ 4, 'h', 300, 300, 3, 0 },   /* leaf under walk under walk */
		{ 3, 'h', 100, 100, 1, 0 },   /* walk (recursive) itself */
		{ 5, 'm', 1000, 4000, 1, 0 }, /* walk, other site: merges with node 2 */
		{ 2, 'h', 5, 5, 1, 0 },       /* walk, first site */
		{ 6, 'm', 40, 4096, 1, 0 },
		{ 7, 'm', 7, 7, 1, 0 },
		{ 0, 'b', 9, 8192, 1, 0 },    /* no stack */
	};
	s->n_stacks = sizeof(st) / sizeof(st[0]);
	s->stacks = malloc(sizeof(st));
	memcpy(s->stacks, st, sizeof(st));
	s->n_live = 1;
	s->live = malloc(sizeof(*s->live));
	s->live[0] = st[0];
}

/* The node reached from the root through the given labels, or FLAME_NONE. */
static uint32_t find(const struct flame *f, const char *const *path)
{
	uint32_t n = FLAME_ROOT;
	for (; *path; path++) {
		uint32_t c = f->nodes[n].first_child;
		while (c && strcmp(f->labels[f->nodes[c].label], *path) != 0)
			c = f->nodes[c].next_sibling;
		if (!c)
			return FLAME_NONE;
		n = c;
	}
	return n;
}

START_TEST(test_merge_and_sums)
{
	struct snap s;
	struct flame f;
	make_snap(&s);
	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	ck_assert_int_eq(f.two, 0);
	/* root, main, walk, walk>walk, leaf, prog + 0x50, 0x7fff0000, [no stack] */
	ck_assert_uint_eq(f.n_nodes, 8);
	ck_assert_uint_eq(f.nodes[FLAME_ROOT].charged[0], 300 + 100 + 1000 + 5 + 40 + 7 + 9);
	ck_assert_uint_eq(f.nodes[FLAME_ROOT].reserved[0], 300 + 100 + 4000 + 5 + 4096 + 7 + 8192);
	ck_assert_uint_eq(f.nodes[FLAME_ROOT].self_charged[0], 0);

	const char *walk[] = { "main", "walk", NULL };
	uint32_t w = find(&f, walk);
	ck_assert_uint_ne(w, FLAME_NONE);
	ck_assert_uint_eq(f.nodes[w].self_charged[0], 1005);       /* both call sites */
	ck_assert_uint_eq(f.nodes[w].charged[0], 1005 + 100 + 300);
	ck_assert_uint_eq(f.nodes[w].count[0], 1 + 1 + 1 + 3);
	ck_assert_uint_eq(f.nodes[w].kinds, FLAME_KIND_HEAP | FLAME_KIND_MMAP);
	ck_assert_uint_eq(f.nodes[w].depth, 2);
	ck_assert_str_eq(f.labels[f.nodes[w].module], "prog");

	const char *leaf[] = { "main", "walk", "walk", "leaf", NULL };
	uint32_t l = find(&f, leaf);
	ck_assert_uint_ne(l, FLAME_NONE);
	ck_assert_uint_eq(f.nodes[l].charged[0], 300);
	ck_assert_uint_eq(f.max_depth, 4);

	const char *anon[] = { "main", "prog + 0x50", NULL };
	ck_assert_uint_ne(find(&f, anon), FLAME_NONE);
	const char *addr[] = { "0x7fff0000", NULL };
	ck_assert_uint_ne(find(&f, addr), FLAME_NONE);
	const char *none[] = { FLAME_NO_STACK, NULL };
	uint32_t ns = find(&f, none);
	ck_assert_uint_ne(ns, FLAME_NONE);
	ck_assert_uint_eq(f.nodes[ns].self_reserved[0], 8192);
	ck_assert_uint_eq(f.nodes[ns].module, FLAME_NONE);

	/* Children largest first: under the root, main (1445) before [no stack] (9) before 0x7fff0000 (7). */
	uint32_t c = f.nodes[FLAME_ROOT].first_child;
	ck_assert_str_eq(f.labels[f.nodes[c].label], "main");
	c = f.nodes[c].next_sibling;
	ck_assert_str_eq(f.labels[f.nodes[c].label], FLAME_NO_STACK);
	c = f.nodes[c].next_sibling;
	ck_assert_str_eq(f.labels[f.nodes[c].label], "0x7fff0000");
	ck_assert_uint_eq(f.nodes[c].next_sibling, 0);
	flame_fin(&f);
	snap_fin(&s);
}
END_TEST

START_TEST(test_functions_count_recursion_once)
{
	struct snap s;
	struct flame f;
	size_t n = 0;
	make_snap(&s);
	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	struct flame_func *fn = flame_functions(&f, &n);
	ck_assert_ptr_nonnull(fn);
	ck_assert_uint_eq(n, 6);  /* main walk leaf prog + 0x50 0x7fff0000 [no stack] */
	ck_assert_str_eq(f.labels[fn[0].label], "main");
	ck_assert_uint_eq(fn[0].inclusive[0], 1445);
	ck_assert_uint_eq(fn[0].self[0], 0);
	ck_assert_str_eq(f.labels[fn[1].label], "walk");
	ck_assert_uint_eq(fn[1].inclusive[0], 1405);        /* not 1805: the recursion counts once */
	ck_assert_uint_eq(fn[1].self[0], 1005 + 100);
	ck_assert_str_eq(f.labels[fn[2].label], "leaf");
	ck_assert_uint_eq(fn[2].inclusive[0], 300);
	ck_assert_uint_eq(fn[2].self[0], 300);
	free(fn);
	flame_fin(&f);
	snap_fin(&s);
}
END_TEST

START_TEST(test_diff_slots)
{
	struct snap a, b;
	struct flame f;
	make_snap(&a);
	make_snap(&b);
	b.stacks[0].charged *= 2;    /* leaf doubled */
	b.stacks[5].charged = 0;     /* 0x7fff0000 gone */
	ck_assert_int_eq(flame_build(&f, &a, &b, FLAME_PEAK), 0);
	ck_assert_int_eq(f.two, 1);
	ck_assert_uint_eq(f.n_nodes, 8);
	const char *leaf[] = { "main", "walk", "walk", "leaf", NULL };
	uint32_t l = find(&f, leaf);
	ck_assert_uint_eq(f.nodes[l].charged[0], 300);
	ck_assert_uint_eq(f.nodes[l].charged[1], 600);
	ck_assert_uint_eq(f.nodes[FLAME_ROOT].charged[1], f.nodes[FLAME_ROOT].charged[0] + 300 - 7);
	size_t changed = 0;
	for (size_t i = 1; i < f.n_nodes; i++)
		changed += f.nodes[i].self_charged[0] != f.nodes[i].self_charged[1];
	ck_assert_uint_eq(changed, 2);
	flame_fin(&f);

	/* The live set. */
	ck_assert_int_eq(flame_build(&f, &a, NULL, FLAME_LIVE), 0);
	ck_assert_uint_eq(f.n_nodes, 5);  /* root main walk walk leaf */
	ck_assert_uint_eq(f.nodes[FLAME_ROOT].charged[0], 300);
	flame_fin(&f);
	snap_fin(&a);
	snap_fin(&b);
}
END_TEST

START_TEST(test_labels_made_safe)
{
	struct snap s;
	char buf[FLAME_LABEL_MAX + 1];
	snap_init(&s);
	s.n_frames = 3;
	s.frames = calloc(3, sizeof(*s.frames));
	s.frames[0].module = -1;
	s.frames[0].function = strdup("a\x1b[31m\xff\xc3\xa9z");
	s.frames[1].module = -1;
	s.frames[1].function = malloc(2000);
	memset(s.frames[1].function, 'x', 1999);
	s.frames[1].function[1999] = '\0';
	s.frames[2].module = -1;
	s.frames[2].function = malloc(2000);
	/* Multi-byte characters up to the cut: never cut inside one. */
	for (int i = 0; i < 666; i++)
		memcpy(s.frames[2].function + 3 * i, "\xe2\x9c\x93", 3);
	s.frames[2].function[1998] = '\0';

	flame_label(&s, 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "a\\x1b[31m\\xff\xc3\xa9z");
	flame_label(&s, 1, buf, sizeof(buf));
	ck_assert_uint_eq(strlen(buf), FLAME_LABEL_MAX);
	ck_assert_str_eq(buf + FLAME_LABEL_MAX - 3, "...");
	flame_label(&s, 2, buf, sizeof(buf));
	ck_assert_uint_le(strlen(buf), FLAME_LABEL_MAX);
	ck_assert_str_eq(buf + strlen(buf) - 3, "...");
	ck_assert_uint_eq((strlen(buf) - 3) % 3, 0);
	snap_fin(&s);
}
END_TEST

/* ---- native source lines and inlined calls ------------------------------- */

static void add_native(struct snap *s, size_t i, const char *function, uint64_t offset, const char *file,
		       uint32_t line, int inlined)
{
	s->frames[i] = (struct snap_frame){ .module = 0, .offset = offset,
					    .function = function ? strdup(function) : NULL,
					    .file = file ? strdup(file) : NULL, .line = line, .inlined = inlined };
}

/*
 * main (m.c:10) calls make_vector at two sites (v.cc:12 and v.cc:14); at the
 * first, push_back (stl.h:1189) is inlined into it, at the second it is a
 * call of its own. An unnamed frame has a file with a control byte.
 */
static void make_lines_snap(struct snap *s)
{
	static const struct snap_node nodes[] = {
		{ 0, 0 },  /* 0 root */
		{ 0, 0 },  /* 1 main */
		{ 1, 1 },  /* 2 main>make_vector (line 12) */
		{ 2, 2 },  /* 3 main>make_vector>push_back, inlined */
		{ 1, 3 },  /* 4 main>make_vector (line 14): the same node as 2 */
		{ 4, 4 },  /* 5 main>make_vector>push_back, called: the same node as 3 */
		{ 1, 5 },  /* 6 main>prog + 0x50 */
	};
	static const struct snap_stack st[] = {
		{ 3, 'h', 10, 10, 1, 0 },
		{ 5, 'h', 20, 20, 1, 0 },
		{ 6, 'h', 30, 30, 1, 0 },
	};
	snap_init(s);
	s->n_modules = 1;
	s->modules = calloc(1, sizeof(*s->modules));
	s->modules[0].path = strdup("/usr/bin/prog");
	s->n_frames = 6;
	s->frames = calloc(6, sizeof(*s->frames));
	add_native(s, 0, "main", 0x10, "m.c", 10, 0);
	add_native(s, 1, "make_vector", 0x20, "v.cc", 12, 0);
	add_native(s, 2, "push_back", 0x20, "stl.h", 1189, 1);
	add_native(s, 3, "make_vector", 0x30, "v.cc", 14, 0);
	add_native(s, 4, "push_back", 0x40, "stl.h", 1189, 0);
	add_native(s, 5, NULL, 0x50, "x\x1b.c", 3, 0);
	s->n_nodes = sizeof(nodes) / sizeof(nodes[0]);
	s->nodes = malloc(sizeof(nodes));
	memcpy(s->nodes, nodes, sizeof(nodes));
	s->n_stacks = sizeof(st) / sizeof(st[0]);
	s->stacks = malloc(sizeof(st));
	memcpy(s->stacks, st, sizeof(st));
}

START_TEST(test_native_lines_merged)
{
	struct snap s, b;
	struct flame f;
	char buf[FLAME_LABEL_MAX + 1];
	const char *main_[] = { "main", NULL };
	const char *vec[] = { "main", "make_vector", NULL };
	const char *push[] = { "main", "make_vector", "push_back", NULL };
	const char *anon[] = { "main", "prog + 0x50", NULL };
	make_lines_snap(&s);

	/* Labels hold neither the line nor the inlining. */
	flame_label(&s, 2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "push_back");
	flame_label(&s, 5, buf, sizeof(buf));
	ck_assert_str_eq(buf, "prog + 0x50");

	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	ck_assert_uint_eq(f.n_nodes, 5);  /* root main make_vector push_back prog + 0x50 */
	uint32_t m = find(&f, main_), v = find(&f, vec), p = find(&f, push), a = find(&f, anon);
	ck_assert_uint_ne(m, FLAME_NONE);
	ck_assert_uint_ne(v, FLAME_NONE);
	ck_assert_uint_ne(p, FLAME_NONE);
	ck_assert_uint_ne(a, FLAME_NONE);
	ck_assert_str_eq(f.labels[f.nodes[m].file], "m.c");
	ck_assert_uint_eq(f.nodes[m].line, 10);
	ck_assert_int_eq(f.nodes[m].inlined, FLAME_INLINED_NONE);
	/* Two lines of one file: the file alone. */
	ck_assert_str_eq(f.labels[f.nodes[v].file], "v.cc");
	ck_assert_uint_eq(f.nodes[v].line, 0);
	/* Inlined at one site, called at the other. */
	ck_assert_str_eq(f.labels[f.nodes[p].file], "stl.h");
	ck_assert_uint_eq(f.nodes[p].line, 1189);
	ck_assert_int_eq(f.nodes[p].inlined, FLAME_INLINED_SOME);
	ck_assert_uint_eq(f.nodes[p].self_charged[0], 30);
	/* The file is made safe like a label. */
	ck_assert_str_eq(f.labels[f.nodes[a].file], "x\\x1b.c");
	ck_assert_uint_eq(f.nodes[a].line, 3);
	ck_assert_str_eq(f.labels[f.nodes[a].module], "prog");
	flame_fin(&f);

	/* Only the first site: one line, inlined throughout. */
	s.n_stacks = 1;
	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	v = find(&f, vec);
	p = find(&f, push);
	ck_assert_uint_eq(f.nodes[v].line, 12);
	ck_assert_int_eq(f.nodes[p].inlined, FLAME_INLINED_ALL);
	flame_fin(&f);
	s.n_stacks = 3;

	/* A diff across builds: main moved to another line and file, push_back no longer inlined. */
	make_lines_snap(&b);
	free(b.frames[0].file);
	b.frames[0].file = strdup("src/m.c");
	b.frames[1].line = 13;
	b.frames[2].inlined = 0;
	b.stacks[0].charged = 11;
	ck_assert_int_eq(flame_build(&f, &s, &b, FLAME_PEAK), 0);
	ck_assert_uint_eq(f.n_nodes, 5);  /* every stack still matched by name */
	m = find(&f, main_);
	v = find(&f, vec);
	p = find(&f, push);
	ck_assert_uint_eq(f.nodes[m].file, FLAME_NONE);
	ck_assert_uint_eq(f.nodes[m].line, 0);
	ck_assert_str_eq(f.labels[f.nodes[v].file], "v.cc");
	ck_assert_int_eq(f.nodes[p].inlined, FLAME_INLINED_SOME);
	ck_assert_uint_eq(f.nodes[p].self_charged[0], 30);
	ck_assert_uint_eq(f.nodes[p].self_charged[1], 31);
	flame_fin(&f);
	snap_fin(&b);
	snap_fin(&s);
}
END_TEST

/* ---- Python frames ------------------------------------------------------- */

static void add_python(struct snap *s, size_t i, const char *function, const char *file, uint32_t line)
{
	s->frames[i] = (struct snap_frame){ .module = -1, .kind = SNAP_FRAME_PYTHON,
					    .function = function ? strdup(function) : NULL,
					    .file = file ? strdup(file) : NULL, .line = line };
}

START_TEST(test_python_short_file)
{
	static const char *const cases[][2] = {
		/* the standard library reads as its module path */
		{ "/usr/lib/python3.11/json/decoder.py", "json/decoder.py" },
		{ "/usr/local/lib/python3.12/asyncio/base_events.py", "asyncio/base_events.py" },
		{ "/home/u/.pyenv/versions/3.11.4/lib/python3.11/re/_compiler.py", "re/_compiler.py" },
		{ "/usr/lib64/python3.9/os.py", "os.py" },
		{ "/usr/lib/python3.13t/threading.py", "threading.py" },
		/* installed packages, after the last site directory */
		{ "/home/u/venv/lib/python3.11/site-packages/numpy/core/_methods.py", "numpy/core/_methods.py" },
		{ "/usr/lib/python3/dist-packages/apt/cache.py", "apt/cache.py" },
		{ "/opt/site-packages/a/dist-packages/b/c.py", "b/c.py" },
		{ "/x/dist-packages/a/site-packages/b.py", "b.py" },
		/* the rest as the code object names it */
		{ "demo.py", "demo.py" },
		{ "./tools/run.py", "./tools/run.py" },
		{ "/home/u/proj/settings.py", "/home/u/proj/settings.py" },
		{ "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap>" },
		{ "<string>", "<string>" },
		{ "", "" },
		{ "/usr/lib/python3.11/", "/usr/lib/python3.11/" },
		{ "/x/site-packages/", "/x/site-packages/" },
		{ "/usr/lib/python3.x/a.py", "/usr/lib/python3.x/a.py" },
		{ "/usr/lib/python311/a.py", "/usr/lib/python311/a.py" },
		{ "/usr/lib/python2.7/a.py", "/usr/lib/python2.7/a.py" },
		{ "/home/u/mylib/python3.11/a.py", "/home/u/mylib/python3.11/a.py" },
		{ "/home/u/libpython3.11/a.py", "/home/u/libpython3.11/a.py" },
		{ "/home/u/my-site-packages/a.py", "/home/u/my-site-packages/a.py" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(strcmp(flame_python_file(cases[i][0]), cases[i][1]) == 0, "%s: got %s, wanted %s",
			      cases[i][0], flame_python_file(cases[i][0]), cases[i][1]);
}
END_TEST

START_TEST(test_python_labels)
{
	struct snap s;
	char buf[FLAME_LABEL_MAX + 1], small[16];
	snap_init(&s);
	s.n_frames = 9;
	s.frames = calloc(s.n_frames, sizeof(*s.frames));
	add_python(&s, 0, "make_arrays", "demo.py", 12);
	add_python(&s, 1, "Model._grow.<locals>.step", "/home/u/venv/lib/python3.11/site-packages/toolkit/model.py", 0);
	add_python(&s, 2, NULL, "<string>", 1);
	add_python(&s, 3, "", "/usr/lib/python3.11/json/decoder.py", 353);
	add_python(&s, 4, "f", NULL, 3);
	add_python(&s, 5, "evil\x1b[2J\xff;x", "/tmp/a\x07.py", 4294967295u);
	s.frames[6] = (struct snap_frame){ .module = -1, .offset = 0x10, .function = strdup("native") };
	add_python(&s, 7, NULL, NULL, 0);
	/* A long name is cut like any label, with the file after it cut away. */
	char *longname = malloc(2000);
	memset(longname, 'x', 1999);
	longname[1999] = '\0';
	add_python(&s, 8, longname, "demo.py", 1);

	flame_label(&s, 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "make_arrays (demo.py:12)");
	flame_label(&s, 1, buf, sizeof(buf));
	ck_assert_str_eq(buf, "Model._grow.<locals>.step (toolkit/model.py)");
	flame_label(&s, 2, buf, sizeof(buf));
	ck_assert_str_eq(buf, "? (<string>:1)");
	flame_label(&s, 3, buf, sizeof(buf));
	ck_assert_str_eq(buf, "? (json/decoder.py:353)");
	flame_label(&s, 4, buf, sizeof(buf));
	ck_assert_str_eq(buf, "f (?:3)");
	flame_label(&s, 5, buf, sizeof(buf));
	ck_assert_str_eq(buf, "evil\\x1b[2J\\xff;x (/tmp/a\\x07.py:4294967295)");
	flame_label(&s, 6, buf, sizeof(buf));
	ck_assert_str_eq(buf, "native");
	flame_label(&s, 7, buf, sizeof(buf));
	ck_assert_str_eq(buf, "? (?)");
	flame_label(&s, 8, buf, sizeof(buf));
	ck_assert_uint_eq(strlen(buf), FLAME_LABEL_MAX);
	ck_assert_str_eq(buf + FLAME_LABEL_MAX - 3, "...");
	ck_assert_uint_eq(strspn(buf, "x"), FLAME_LABEL_MAX - 3);
	/* A small buffer cuts the whole label, the file and line too. */
	flame_label(&s, 0, small, sizeof(small));
	ck_assert_str_eq(small, "make_arrays ...");

	/* The per-function label leaves the line out; a native frame's is its label. */
	flame_function_label(&s, 0, buf, sizeof(buf));
	ck_assert_str_eq(buf, "make_arrays (demo.py)");
	flame_function_label(&s, 3, buf, sizeof(buf));
	ck_assert_str_eq(buf, "? (json/decoder.py)");
	flame_function_label(&s, 6, buf, sizeof(buf));
	ck_assert_str_eq(buf, "native");
	free(longname);
	snap_fin(&s);
}
END_TEST

/*
 * A Python program: <module> calls make_arrays at two lines of it, each into
 * malloc; walk recurses through two of its lines.
 */
START_TEST(test_python_functions_grouped)
{
	struct snap s;
	struct flame f;
	size_t n = 0;
	snap_init(&s);
	s.n_modules = 1;
	s.modules = calloc(1, sizeof(*s.modules));
	s.modules[0].path = strdup("/usr/lib/x86_64-linux-gnu/libc.so.6");
	s.n_frames = 6;
	s.frames = calloc(s.n_frames, sizeof(*s.frames));
	add_python(&s, 0, "<module>", "demo.py", 30);
	add_python(&s, 1, "make_arrays", "demo.py", 12);
	add_python(&s, 2, "make_arrays", "demo.py", 14);
	s.frames[3] = (struct snap_frame){ .module = 0, .offset = 0xa50a0, .function = strdup("malloc") };
	add_python(&s, 4, "walk", "demo.py", 5);
	add_python(&s, 5, "walk", "demo.py", 7);
	static const struct snap_node nodes[] = {
		{ 0, 0 },  /* 0 root */
		{ 0, 0 },  /* 1 <module>:30 */
		{ 1, 1 },  /* 2 >make_arrays:12 */
		{ 2, 3 },  /* 3 >malloc */
		{ 1, 2 },  /* 4 >make_arrays:14 */
		{ 4, 3 },  /* 5 >malloc */
		{ 1, 4 },  /* 6 >walk:5 */
		{ 6, 5 },  /* 7 >walk:7 */
		{ 7, 4 },  /* 8 >walk:5 (recursion) */
	};
	s.n_nodes = sizeof(nodes) / sizeof(nodes[0]);
	s.nodes = malloc(sizeof(nodes));
	memcpy(s.nodes, nodes, sizeof(nodes));
	static const struct snap_stack st[] = {
		{ 3, 'h', 100, 100, 1, 0 },
		{ 5, 'h', 50, 50, 1, 0 },
		{ 8, 'h', 7, 7, 1, 0 },
		{ 7, 'h', 3, 3, 1, 0 },
	};
	s.n_stacks = sizeof(st) / sizeof(st[0]);
	s.stacks = malloc(sizeof(st));
	memcpy(s.stacks, st, sizeof(st));

	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	const char *line12[] = { "<module> (demo.py:30)", "make_arrays (demo.py:12)", NULL };
	uint32_t m = find(&f, line12);
	ck_assert_uint_ne(m, FLAME_NONE);
	ck_assert_int_eq(f.nodes[m].python, 1);
	ck_assert_uint_eq(f.nodes[m].line, 12);
	ck_assert_str_eq(f.labels[f.nodes[m].file], "demo.py");
	ck_assert_str_eq(f.labels[f.nodes[m].func], "make_arrays (demo.py)");
	ck_assert_uint_eq(f.nodes[m].module, FLAME_NONE);
	const char *malloc12[] = { "<module> (demo.py:30)", "make_arrays (demo.py:12)", "malloc", NULL };
	uint32_t a = find(&f, malloc12);
	ck_assert_int_eq(f.nodes[a].python, 0);
	ck_assert_uint_eq(f.nodes[a].file, FLAME_NONE);
	ck_assert_str_eq(f.labels[f.nodes[a].module], "libc.so.6");
	ck_assert_str_eq(f.labels[f.nodes[a].func], "malloc");

	struct flame_func *fn = flame_functions(&f, &n);
	ck_assert_ptr_nonnull(fn);
	ck_assert_uint_eq(n, 4);  /* <module>, make_arrays, malloc, walk: one row per function, not per line */
	ck_assert_str_eq(f.labels[fn[0].label], "<module> (demo.py)");
	ck_assert_uint_eq(fn[0].inclusive[0], 160);
	/* Equal inclusive bytes: the larger self first. */
	ck_assert_str_eq(f.labels[fn[1].label], "malloc");
	ck_assert_uint_eq(fn[1].inclusive[0], 150);
	ck_assert_uint_eq(fn[1].self[0], 150);
	ck_assert_str_eq(f.labels[fn[2].label], "make_arrays (demo.py)");
	ck_assert_uint_eq(fn[2].inclusive[0], 150);
	ck_assert_uint_eq(fn[2].self[0], 0);
	ck_assert_str_eq(f.labels[fn[3].label], "walk (demo.py)");
	ck_assert_uint_eq(fn[3].inclusive[0], 10);  /* not 17: its recursion, at another line, counts once */
	ck_assert_uint_eq(fn[3].self[0], 10);
	free(fn);
	flame_fin(&f);
	snap_fin(&s);
}
END_TEST

/* A 4096-deep chain: building and walking it must not recurse on the C stack or go quadratic. */
START_TEST(test_deep_chain)
{
	struct snap s;
	struct flame f;
	const uint32_t depth = 4096;
	snap_init(&s);
	s.n_frames = 2;
	s.frames = calloc(2, sizeof(*s.frames));
	s.frames[0].module = s.frames[1].module = -1;
	s.frames[0].function = strdup("f");
	s.frames[1].function = strdup("g");
	s.n_nodes = depth + 1;
	s.nodes = calloc(s.n_nodes, sizeof(*s.nodes));
	for (uint32_t i = 1; i <= depth; i++) {
		s.nodes[i].parent = i - 1;
		s.nodes[i].frame = i & 1;
	}
	s.n_stacks = 1000;
	s.stacks = calloc(s.n_stacks, sizeof(*s.stacks));
	for (size_t i = 0; i < s.n_stacks; i++)
		s.stacks[i] = (struct snap_stack){ depth - (uint32_t)i, 'h', 1, 1, 1, 0 };
	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	ck_assert_uint_eq(f.n_nodes, depth + 1);
	ck_assert_uint_eq(f.max_depth, depth);
	ck_assert_uint_eq(f.nodes[FLAME_ROOT].charged[0], 1000);
	size_t n = 0;
	struct flame_func *fn = flame_functions(&f, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(fn[0].inclusive[0], 1000);
	ck_assert_uint_eq(fn[1].inclusive[0], 1000);
	ck_assert_uint_eq(fn[0].self[0] + fn[1].self[0], 1000);
	free(fn);
	flame_fin(&f);
	snap_fin(&s);
}
END_TEST

/*
 * make_snap with a process tree: 0 the main process (prog), 1 and 2 two
 * workers of one command (/usr/bin/worker, different arguments), 3 a
 * process with no command; each holds stacks at the combined peak.
 */
static void make_tree(struct snap *s)
{
	static const char *cmds[] = { "/usr/bin/prog --jobs 2", "/usr/bin/worker --id 1", "worker --id 2", NULL };
	static const int pids[] = { 100, 101, 102, 103 };
	make_snap(s);
	s->n_procs = 4;
	s->procs = calloc(4, sizeof(*s->procs));
	for (int i = 0; i < 4; i++) {
		s->procs[i].pid = pids[i];
		s->procs[i].ppid = i ? 100 : 0;
		s->procs[i].profiled = 1;
		s->procs[i].command = cmds[i] ? strdup(cmds[i]) : NULL;
	}
	static const struct snap_stack st[] = {
		{ 4, 'h', 300, 300, 3, 1 },   /* worker 101: main>walk>walk>leaf */
		{ 4, 'h', 200, 200, 2, 2 },   /* worker 102: the same stack, merges with 101's */
		{ 2, 'h', 50, 50, 1, 2 },     /* worker 102: main>walk */
		{ 2, 'h', 5, 5, 1, 0 },       /* prog: main>walk, apart from the workers' */
		{ 0, 'b', 9, 9, 1, 0 },       /* prog: no stack */
		{ 7, 'm', 7, 7, 1, 3 },       /* the process with no command */
	};
	s->has_tree = 1;
	s->tree_charged = 571;
	s->n_tree_stacks = sizeof(st) / sizeof(st[0]);
	s->tree_stacks = malloc(sizeof(st));
	memcpy(s->tree_stacks, st, sizeof(st));
}

START_TEST(test_tree_one_root_per_command)
{
	struct snap s;
	struct flame f;
	make_tree(&s);
	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_TREE), 0);
	ck_assert_uint_eq(f.nodes[FLAME_ROOT].charged[0], 571);

	/* The roots: worker (both workers, 550), prog (14), [pid 103] (7), in that order; nothing else. */
	uint32_t c = f.nodes[FLAME_ROOT].first_child;
	ck_assert_str_eq(f.labels[f.nodes[c].label], "worker");
	ck_assert_int_eq(f.nodes[c].process, 1);
	ck_assert_uint_eq(f.nodes[c].charged[0], 550);
	ck_assert_str_eq(f.labels[f.nodes[c].pids], "pids 101, 102");
	c = f.nodes[c].next_sibling;
	ck_assert_str_eq(f.labels[f.nodes[c].label], "prog");
	ck_assert_uint_eq(f.nodes[c].charged[0], 14);
	ck_assert_str_eq(f.labels[f.nodes[c].pids], "pid 100");
	c = f.nodes[c].next_sibling;
	ck_assert_str_eq(f.labels[f.nodes[c].label], "[pid 103]");
	ck_assert_uint_eq(f.nodes[c].charged[0], 7);
	ck_assert_uint_eq(f.nodes[c].next_sibling, 0);

	/* Under each root the process's own frames, merged across the workers. */
	const char *leaf[] = { "worker", "main", "walk", "walk", "leaf", NULL };
	uint32_t n = find(&f, leaf);
	ck_assert_uint_ne(n, FLAME_NONE);
	ck_assert_uint_eq(f.nodes[n].self_charged[0], 500);
	ck_assert_uint_eq(f.nodes[n].depth, 5);
	ck_assert_int_eq(f.nodes[n].process, 0);
	ck_assert_uint_eq(f.nodes[n].pids, FLAME_NONE);
	const char *walk[] = { "worker", "main", "walk", NULL };
	ck_assert_uint_eq(f.nodes[find(&f, walk)].self_charged[0], 50);
	const char *own[] = { "prog", "main", "walk", NULL };
	ck_assert_uint_eq(f.nodes[find(&f, own)].self_charged[0], 5);
	/* A stack with no frame keeps a frame of its own under its process. */
	const char *none[] = { "prog", FLAME_NO_STACK, NULL };
	ck_assert_uint_eq(f.nodes[find(&f, none)].self_charged[0], 9);
	const char *addr[] = { "[pid 103]", "0x7fff0000", NULL };
	ck_assert_uint_eq(f.nodes[find(&f, addr)].self_charged[0], 7);

	/* Per-function totals count the code, not the processes. */
	size_t nf = 0;
	struct flame_func *fn = flame_functions(&f, &nf);
	for (size_t i = 0; i < nf; i++) {
		ck_assert_str_ne(f.labels[fn[i].label], "worker");
		ck_assert_str_ne(f.labels[fn[i].label], "prog");
		if (!strcmp(f.labels[fn[i].label], "main"))
			ck_assert_uint_eq(fn[i].inclusive[0], 555);  /* the workers' and prog's */
	}
	free(fn);
	flame_fin(&f);

	/* The same snapshot's own peak is unchanged by the tree. */
	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	ck_assert_int_eq(f.nodes[f.nodes[FLAME_ROOT].first_child].process, 0);
	flame_fin(&f);
	snap_fin(&s);
}
END_TEST

START_TEST(test_tree_process_labels)
{
	char buf[FLAME_LABEL_MAX + 1];
	struct snap_proc p = { .pid = 7 };
	p.command = "/usr/lib/gcc/x86_64-linux-gnu/12/cc1 -quiet big.c";
	flame_process_label(&p, buf, sizeof(buf));
	ck_assert_str_eq(buf, "cc1");
	p.command = "evil\x1b[31m --x";
	flame_process_label(&p, buf, sizeof(buf));
	ck_assert_str_eq(buf, "evil\\x1b[31m");
	p.command = "";
	flame_process_label(&p, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[pid 7]");
	p.command = "/ x";
	flame_process_label(&p, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[pid 7]");
	char *big = malloc(3 * FLAME_LABEL_MAX);
	memset(big, 'a', 3 * FLAME_LABEL_MAX - 1);
	big[3 * FLAME_LABEL_MAX - 1] = '\0';
	p.command = big;
	flame_process_label(&p, buf, sizeof(buf));
	ck_assert_uint_eq(strlen(buf), FLAME_LABEL_MAX);
	ck_assert_str_eq(buf + FLAME_LABEL_MAX - 3, "...");
	free(big);
}
END_TEST

/* A diff of two followed runs: process nodes match by command across runs. */
START_TEST(test_tree_diff)
{
	struct snap a, b;
	struct flame f;
	make_tree(&a);
	make_tree(&b);
	b.tree_stacks[0].charged = 1300;
	b.procs[1].pid = 201;
	ck_assert_int_eq(flame_build(&f, &a, &b, FLAME_TREE), 0);
	const char *leaf[] = { "worker", "main", "walk", "walk", "leaf", NULL };
	uint32_t n = find(&f, leaf);
	ck_assert_uint_eq(f.nodes[n].self_charged[0], 500);
	ck_assert_uint_eq(f.nodes[n].self_charged[1], 1500);
	/* The node keeps the first run's pids. */
	ck_assert_str_eq(f.labels[f.nodes[f.nodes[FLAME_ROOT].first_child].pids], "pids 101, 102");
	flame_fin(&f);
	snap_fin(&a);
	snap_fin(&b);
}
END_TEST

START_TEST(test_touch_view)
{
	/* Touch stacks merge as any others do, and say their kind; a diff across two views still matches stacks. */
	struct snap a, s;
	struct flame f;
	make_snap(&a);
	make_snap(&s);
	s.view = SNAP_VIEW_TOUCH;
	for (size_t i = 0; i < s.n_stacks; i++)
		s.stacks[i].kind = SNAP_KIND_TOUCH;
	ck_assert_int_eq(flame_build(&f, &s, NULL, FLAME_PEAK), 0);
	const char *walk[] = { "main", "walk", NULL };
	uint32_t w = find(&f, walk);
	ck_assert_uint_eq(f.nodes[w].kinds, FLAME_KIND_TOUCH);
	ck_assert_uint_eq(f.nodes[w].charged[0], 1005 + 100 + 300);
	flame_fin(&f);
	ck_assert_int_eq(flame_build(&f, &a, &s, FLAME_PEAK), 0);
	w = find(&f, walk);
	ck_assert_uint_eq(f.nodes[w].kinds, FLAME_KIND_TOUCH | FLAME_KIND_HEAP | FLAME_KIND_MMAP);
	ck_assert_uint_eq(f.nodes[w].charged[0], f.nodes[w].charged[1]);
	flame_fin(&f);
	ck_assert_str_eq(view_kind_name(SNAP_KIND_TOUCH), "resident");
	ck_assert_str_eq(view_kind_key(SNAP_KIND_TOUCH), "touch");
	ck_assert_str_eq(view_kind_key(SNAP_KIND_MMAP), "mmap");
	ck_assert_str_eq(view_view_name(&s), "touch");
	ck_assert_str_eq(view_view_name(&a), "alloc");

	/* Without the alloc view beside it, a touch snapshot does not know what was reserved. */
	size_t n;
	int known;
	ck_assert_ptr_eq(view_reserving_stacks(&a, &n, &known), a.stacks);
	ck_assert(known && n == a.n_stacks);
	view_reserving_stacks(&s, &n, &known);
	ck_assert(!known && n == 0);
	view_peak_reserved(&s, &known);
	ck_assert(!known);
	s.n_other = 2;
	s.other = calloc(2, sizeof(*s.other));
	s.other[0] = (struct snap_stack){ 6, SNAP_KIND_MMAP, 4096, 128u << 20, 1, 0 };
	s.other[1] = (struct snap_stack){ 4, SNAP_KIND_HEAP, 300, 300, 3, 0 };
	ck_assert_ptr_eq(view_reserving_stacks(&s, &n, &known), s.other);
	ck_assert(known && n == 2);
	ck_assert_uint_eq(view_peak_reserved(&s, &known), (128u << 20) + 300);
	snap_fin(&a);
	snap_fin(&s);
}
END_TEST

START_TEST(test_telling_frame)
{
	/* The frame a one-line link names: past the C library and the allocator, else a Python frame, else the first. */
	struct snap s;
	snap_init(&s);
	s.n_modules = 3;
	s.modules = calloc(3, sizeof(*s.modules));
	s.modules[0].path = strdup("/usr/lib/x86_64-linux-gnu/libc.so.6");
	s.modules[1].path = strdup("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30");
	s.modules[2].path = strdup("/home/u/app");
	s.n_frames = 5;
	s.frames = calloc(5, sizeof(*s.frames));
	s.frames[0] = (struct snap_frame){ .module = 0, .function = strdup("malloc") };
	s.frames[1] = (struct snap_frame){ .module = 1, .function = strdup("operator new(unsigned long)") };
	s.frames[2] = (struct snap_frame){ .module = 2, .function = strdup("make_table") };
	s.frames[3] = (struct snap_frame){ .module = -1, .function = strdup("[new thread]") };
	s.frames[4] = (struct snap_frame){ .module = -1, .kind = SNAP_FRAME_PYTHON, .function = strdup("load"),
					    .file = strdup("demo.py"), .line = 3 };
	uint32_t native[] = { 0, 1, 2 }, runtime[] = { 0, 1, 3 }, python[] = { 0, 2, 4 };
	ck_assert_uint_eq(view_telling_frame(&s, native, 3), 2);
	ck_assert_uint_eq(view_telling_frame(&s, runtime, 3), 0);
	ck_assert_uint_eq(view_telling_frame(&s, python, 3), 2);
	ck_assert_uint_eq(view_telling_frame(&s, native, 0), 0);
	snap_fin(&s);
}
END_TEST

Suite *flame_suite(void)
{
	Suite *s = suite_create("flame");
	TCase *tc = tcase_create("tree");
	tcase_add_test(tc, test_merge_and_sums);
	tcase_add_test(tc, test_functions_count_recursion_once);
	tcase_add_test(tc, test_diff_slots);
	tcase_add_test(tc, test_labels_made_safe);
	tcase_add_test(tc, test_native_lines_merged);
	tcase_add_test(tc, test_deep_chain);
	tcase_add_test(tc, test_python_short_file);
	tcase_add_test(tc, test_python_labels);
	tcase_add_test(tc, test_python_functions_grouped);
	tcase_add_test(tc, test_tree_one_root_per_command);
	tcase_add_test(tc, test_tree_process_labels);
	tcase_add_test(tc, test_tree_diff);
	tcase_add_test(tc, test_touch_view);
	tcase_add_test(tc, test_telling_frame);
	suite_add_tcase(s, tc);
	return s;
}
