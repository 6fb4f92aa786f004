/* Unit tests for the snapshot format: round trip, atomic writes, and a reader that survives hostile files. */
#include "tests/unit/suites.h"
#include "common/snap.h"
#include "common/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- helpers ------------------------------------------------------------- */

static char tmpdir[64];

static void setup(void)
{
	error_set_quiet(1);
	strcpy(tmpdir, "/tmp/check_snap.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_rf(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		chmod(path, 0700);
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char sub[4096];
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			rm_rf(sub);
		}
		if (d)
			closedir(d);
		rmdir(path);
	} else {
		unlink(path);
	}
}

static void teardown(void)
{
	rm_rf(tmpdir);
	error_set_quiet(0);
}

static char *in_tmp(const char *name)
{
	static char buf[4][256];
	static int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

static size_t count_entries(const char *dir)
{
	size_t n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	size_t got;
	while ((got = fread(b + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap)
			b = realloc(b, cap *= 2);
	}
	fclose(f);
	*len = n;
	return b;
}

static void spit(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/* The uncompressed text of a gzip file. */
static char *gunzip(const char *path, size_t *len)
{
	gzFile gz = gzopen(path, "rb");
	ck_assert_ptr_nonnull(gz);
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	int got;
	while ((got = gzread(gz, b + n, (unsigned)(cap - n))) > 0) {
		n += (size_t)got;
		if (n == cap)
			b = realloc(b, cap *= 2);
	}
	ck_assert_int_eq(got, 0);
	gzclose(gz);
	*len = n;
	return b;
}

/* Runs with error() output going to a file, and returns what was printed. */
static int capture_fd = -1, saved_stderr = -1;

static void capture_start(void)
{
	fflush(stderr);
	capture_fd = open(in_tmp("stderr.txt"), O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(capture_fd, 0);
	saved_stderr = dup(2);
	dup2(capture_fd, 2);
	error_set_quiet(0);
}

static char *capture_end(void)
{
	size_t len;
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	close(capture_fd);
	error_set_quiet(1);
	char *text = slurp(in_tmp("stderr.txt"), &len);
	text = realloc(text, len + 1);
	text[len] = '\0';
	return text;
}

static size_t count_lines(const char *text)
{
	size_t n = 0;
	for (; *text; text++)
		n += *text == '\n';
	return n;
}

/* ---- a snapshot exercising every field ----------------------------------- */

static const char *const test_argv[] = {
	"./prog", "hello world", "line\nbreak", "tab\there", "na\xc3\xafve \xe2\x9c\x93",
	"back\\slash", "", "\x01\x7f\x1b[31m", "\xff\xfe invalid utf-8", "s 1", "-",
};
#define TEST_ARGC (sizeof(test_argv) / sizeof(test_argv[0]))

static void build(struct snap *s)
{
	snap_init(s);
	s->version = SNAP_FORMAT_VERSION;
	s->ptfil_version = strdup("0.1.0");
	s->mode = strdup("launch");
	s->argc = TEST_ARGC;
	s->argv = calloc(TEST_ARGC, sizeof(char *));
	for (size_t i = 0; i < TEST_ARGC; i++)
		s->argv[i] = strdup(test_argv[i]);
	s->pid = 4242;
	s->start_time = 1700000000.123456;
	s->duration = 2.5e-3;
	s->exit_status = 139;
	s->vmhwm = 60ull << 20;
	s->page_size = 4096;
	s->peak = (struct snap_peak){ .time = 0.1, .charged = 54ull << 20,
				      .reserved = 562ull << 20, .rss = UINT64_MAX };

	s->n_modules = 3;
	s->modules = calloc(3, sizeof(*s->modules));
	s->modules[0] = (struct snap_module){ strdup("/usr/bin/prog with space"), strdup("0123abcdef"), 0x555555554000ull, 0, 0, NULL };
	s->modules[1] = (struct snap_module){ strdup("/lib/x86_64-linux-gnu/libc.so.6"), NULL, 0x7ffff7c00000ull,
					      .symbols = SNAP_SYMBOLS_FULL, .lines = 1, .package = strdup("libc6") };
	s->modules[0].symbols = SNAP_SYMBOLS_EXPORTS;
	s->modules[2] = (struct snap_module){ strdup("/lib/x86_64-linux-gnu/libc.so.6"), strdup("ffee"), UINT64_MAX, 0, 0, NULL };

	s->n_frames = 10;
	s->frames = calloc(10, sizeof(*s->frames));
	s->frames[0] = (struct snap_frame){ .module = 0, .offset = 0x1234, .function = strdup("main") };
	/* A native frame with its source line, and (3) an inlined call without one. */
	s->frames[1] = (struct snap_frame){ .module = 0, .offset = 0x1300, .function = strdup("make_big"),
					    .file = strdup("/home/u/src/big.c"), .line = 42 };
	s->frames[2] = (struct snap_frame){ .module = 1, .offset = 0x94ac3, .function = strdup("start_thread") };
	s->frames[3] = (struct snap_frame){ .module = 0, .offset = 0x1400, .function = NULL, .inlined = 1 };
	s->frames[4] = (struct snap_frame){ .module = -1, .offset = 0, .function = strdup("[before attach]") };
	s->frames[5] = (struct snap_frame){ .module = -1, .offset = 0xffffffffff600000ull, .function = strdup("main") };
	/* Python frames, with a native one between them: one numbering for both. */
	s->frames[6] = (struct snap_frame){
		.module = -1, .function = strdup("Model.fit"), .kind = SNAP_FRAME_PYTHON,
		.file = strdup("/home/u/venv/lib/python3.11/site-packages/toolkit/model.py"), .line = 88 };
	s->frames[7] = (struct snap_frame){
		.module = -1, .kind = SNAP_FRAME_PYTHON, .file = strdup("<string>") };
	s->frames[8] = (struct snap_frame){ .module = 1, .offset = 0x1f00, .function = strdup("PyEval_EvalCode") };
	s->frames[9] = (struct snap_frame){
		.module = -1, .function = strdup("odd\nname \\ \x01"), .kind = SNAP_FRAME_PYTHON,
		.file = strdup("tab\there.py"), .line = UINT32_MAX };

	/*
	 * root; main; main>make_big; start_thread; start_thread>?; [before attach]; main>make_big>vsyscall;
	 * <string>; <string>>Model.fit; <string>>Model.fit>PyEval_EvalCode; ...>odd name
	 */
	s->n_nodes = 11;
	s->nodes = calloc(11, sizeof(*s->nodes));
	s->nodes[1] = (struct snap_node){ 0, 0 };
	s->nodes[2] = (struct snap_node){ 1, 1 };
	s->nodes[3] = (struct snap_node){ 0, 2 };
	s->nodes[4] = (struct snap_node){ 3, 3 };
	s->nodes[5] = (struct snap_node){ 0, 4 };
	s->nodes[6] = (struct snap_node){ 2, 5 };
	s->nodes[7] = (struct snap_node){ 0, 7 };
	s->nodes[8] = (struct snap_node){ 7, 6 };
	s->nodes[9] = (struct snap_node){ 8, 8 };
	s->nodes[10] = (struct snap_node){ 9, 9 };

	/* The process tree: the main process and a child, with one stack each at the combined peak. */
	s->n_procs = 2;
	s->procs = calloc(2, sizeof(*s->procs));
	s->procs[0] = (struct snap_proc){ .pid = 4242, .ppid = 0, .profiled = 1, .peak = 52428800, .peak_time = 0.75,
					  .at_combined = 1048576, .vmhwm = 62914560, .start = 0, .end = 1.5,
					  .command = strdup("./prog with space"), .file = NULL };
	s->procs[1] = (struct snap_proc){ .pid = 4243, .ppid = 4242, .profiled = 1, .peak = 8192, .peak_time = 1.25,
					  .at_combined = 4096, .vmhwm = 1 << 20, .start = 0.5, .end = -1,
					  .command = NULL, .file = strdup("snap.4243.gz") };
	s->has_tree = 1;
	s->tree_time = 1.0625;
	s->tree_charged = 1052672;
	s->n_tree_stacks = 2;
	s->tree_stacks = calloc(2, sizeof(*s->tree_stacks));
	s->tree_stacks[0] = (struct snap_stack){ .node = 2, .kind = SNAP_KIND_MMAP, .charged = 1048576, .reserved = 2097152, .count = 1, .proc = 0 };
	s->tree_stacks[1] = (struct snap_stack){ .node = 2, .kind = SNAP_KIND_MMAP, .charged = 4096, .reserved = 4096, .count = 1, .proc = 1 };

	s->n_stacks = 5;
	s->stacks = calloc(5, sizeof(*s->stacks));
	s->stacks[0] = (struct snap_stack){ 2, SNAP_KIND_MMAP, 50ull << 20, 50ull << 20, 1, 0 };
	s->stacks[1] = (struct snap_stack){ 4, SNAP_KIND_MMAP, 4ull << 20, 512ull << 20, 4, 0 };
	s->stacks[2] = (struct snap_stack){ 5, SNAP_KIND_PSEUDO, 132 * 1024, 132 * 1024, 1, 0 };
	s->stacks[3] = (struct snap_stack){ 0, SNAP_KIND_BRK, 0, UINT64_MAX, 0, 0 };
	s->stacks[4] = (struct snap_stack){ 10, SNAP_KIND_HEAP, 3000, 3000, 30, 0 };

	s->n_live = 2;
	s->live = calloc(2, sizeof(*s->live));
	s->live[0] = (struct snap_stack){ 4, SNAP_KIND_MMAP, 4ull << 20, 512ull << 20, 4, 0 };
	s->live[1] = (struct snap_stack){ 6, SNAP_KIND_HEAP, 17, 17, 3, 0 };

	s->n_samples = 3;
	s->samples = calloc(3, sizeof(*s->samples));
	s->samples[0] = (struct snap_sample){ 0, 0, 1 << 20 };
	s->samples[1] = (struct snap_sample){ 0.1, 54ull << 20, 57ull << 20 };
	s->samples[2] = (struct snap_sample){ 1.0 / 3.0, 4ull << 20, 8ull << 20 };

	s->n_counters = 2;
	s->counters = calloc(2, sizeof(*s->counters));
	s->counters[0] = (struct snap_counter){ strdup("seccomp"), 1234 };
	s->counters[1] = (struct snap_counter){ strdup("signal \\ \n odd"), 0 };
}

static void assert_str_eq_or_null(const char *a, const char *b)
{
	if (!a || !b)
		ck_assert_ptr_eq(a, b);
	else
		ck_assert_str_eq(a, b);
}

static void assert_stacks_eq(const struct snap_stack *a, const struct snap_stack *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_eq(a[i].node, b[i].node);
		ck_assert_int_eq(a[i].kind, b[i].kind);
		ck_assert_uint_eq(a[i].charged, b[i].charged);
		ck_assert_uint_eq(a[i].reserved, b[i].reserved);
		ck_assert_uint_eq(a[i].count, b[i].count);
	}
}

static void assert_snap_eq(const struct snap *a, const struct snap *b)
{
	size_t i;
	ck_assert_uint_eq(a->version, b->version);
	assert_str_eq_or_null(a->ptfil_version, b->ptfil_version);
	assert_str_eq_or_null(a->mode, b->mode);
	ck_assert_uint_eq(a->argc, b->argc);
	for (i = 0; i < a->argc; i++)
		ck_assert_str_eq(a->argv[i], b->argv[i]);
	ck_assert_int_eq(a->pid, b->pid);
	ck_assert(a->start_time == b->start_time);
	ck_assert(a->duration == b->duration);
	ck_assert_int_eq(a->exit_status, b->exit_status);
	ck_assert_uint_eq(a->vmhwm, b->vmhwm);
	ck_assert_uint_eq(a->page_size, b->page_size);
	ck_assert(a->peak.time == b->peak.time);
	ck_assert_uint_eq(a->peak.charged, b->peak.charged);
	ck_assert_uint_eq(a->peak.reserved, b->peak.reserved);
	ck_assert_uint_eq(a->peak.rss, b->peak.rss);
	ck_assert_uint_eq(a->n_procs, b->n_procs);
	for (i = 0; i < a->n_procs; i++) {
		const struct snap_proc *x = &a->procs[i], *y = &b->procs[i];
		ck_assert(x->pid == y->pid && x->ppid == y->ppid && x->profiled == y->profiled);
		ck_assert(x->peak == y->peak && x->peak_time == y->peak_time && x->at_combined == y->at_combined);
		ck_assert(x->vmhwm == y->vmhwm && x->start == y->start && x->end == y->end);
		assert_str_eq_or_null(x->command, y->command);
		assert_str_eq_or_null(x->file, y->file);
	}
	ck_assert_int_eq(a->has_tree, b->has_tree);
	ck_assert(a->tree_time == b->tree_time);
	ck_assert_uint_eq(a->tree_charged, b->tree_charged);
	ck_assert_uint_eq(a->n_tree_stacks, b->n_tree_stacks);
	for (i = 0; i < a->n_tree_stacks; i++) {
		ck_assert_uint_eq(a->tree_stacks[i].node, b->tree_stacks[i].node);
		ck_assert_int_eq(a->tree_stacks[i].kind, b->tree_stacks[i].kind);
		ck_assert_uint_eq(a->tree_stacks[i].charged, b->tree_stacks[i].charged);
		ck_assert_uint_eq(a->tree_stacks[i].proc, b->tree_stacks[i].proc);
	}
	ck_assert_uint_eq(a->n_modules, b->n_modules);
	for (i = 0; i < a->n_modules; i++) {
		ck_assert_str_eq(a->modules[i].path, b->modules[i].path);
		assert_str_eq_or_null(a->modules[i].build_id, b->modules[i].build_id);
		ck_assert_uint_eq(a->modules[i].base, b->modules[i].base);
		ck_assert_int_eq(a->modules[i].symbols, b->modules[i].symbols);
		ck_assert_int_eq(a->modules[i].lines, b->modules[i].lines);
		assert_str_eq_or_null(a->modules[i].package, b->modules[i].package);
	}
	ck_assert_uint_eq(a->n_frames, b->n_frames);
	for (i = 0; i < a->n_frames; i++) {
		ck_assert_int_eq(a->frames[i].kind, b->frames[i].kind);
		ck_assert_int_eq(a->frames[i].module, b->frames[i].module);
		ck_assert_uint_eq(a->frames[i].offset, b->frames[i].offset);
		assert_str_eq_or_null(a->frames[i].function, b->frames[i].function);
		assert_str_eq_or_null(a->frames[i].file, b->frames[i].file);
		ck_assert_uint_eq(a->frames[i].line, b->frames[i].line);
		ck_assert_int_eq(a->frames[i].inlined, b->frames[i].inlined);
	}
	ck_assert_uint_eq(a->n_nodes, b->n_nodes);
	for (i = 1; i < a->n_nodes; i++) {
		ck_assert_uint_eq(a->nodes[i].parent, b->nodes[i].parent);
		ck_assert_uint_eq(a->nodes[i].frame, b->nodes[i].frame);
	}
	ck_assert_uint_eq(a->n_stacks, b->n_stacks);
	assert_stacks_eq(a->stacks, b->stacks, a->n_stacks);
	ck_assert_uint_eq(a->n_live, b->n_live);
	assert_stacks_eq(a->live, b->live, a->n_live);
	ck_assert_uint_eq(a->n_samples, b->n_samples);
	for (i = 0; i < a->n_samples; i++) {
		ck_assert(a->samples[i].time == b->samples[i].time);
		ck_assert_uint_eq(a->samples[i].charged, b->samples[i].charged);
		ck_assert_uint_eq(a->samples[i].rss, b->samples[i].rss);
	}
	ck_assert_uint_eq(a->n_counters, b->n_counters);
	for (i = 0; i < a->n_counters; i++) {
		ck_assert_str_eq(a->counters[i].name, b->counters[i].name);
		ck_assert_uint_eq(a->counters[i].count, b->counters[i].count);
	}
	ck_assert_int_eq(a->view, b->view);
	ck_assert_uint_eq(a->n_other, b->n_other);
	assert_stacks_eq(a->other, b->other, a->n_other);
	ck_assert_uint_eq(a->n_links, b->n_links);
	for (i = 0; i < a->n_links; i++) {
		ck_assert_uint_eq(a->links[i].touch_node, b->links[i].touch_node);
		ck_assert_uint_eq(a->links[i].alloc_node, b->links[i].alloc_node);
		ck_assert_uint_eq(a->links[i].bytes, b->links[i].bytes);
	}
}

/*
 * The test snapshot as the touch view with the alloc view beside it: touch
 * stacks (kind t: reserved as charged, pages counted), the alloc view's
 * stacks at the same peak (one sparse mapping, one heap block, a pseudo
 * one), and the links between them, largest first as the reader leaves them.
 */
static void build_touch(struct snap *s)
{
	build(s);
	s->view = SNAP_VIEW_TOUCH;
	s->stacks[0] = (struct snap_stack){ 6, SNAP_KIND_TOUCH, 1ull << 20, 1ull << 20, 256, 0 };
	s->stacks[1] = (struct snap_stack){ 10, SNAP_KIND_TOUCH, 3ull << 20, 3ull << 20, 768, 0 };
	s->stacks[4] = (struct snap_stack){ 9, SNAP_KIND_TOUCH, 0, 0, 0, 0 };
	s->live[1] = (struct snap_stack){ 6, SNAP_KIND_TOUCH, 4096, 4096, 1, 0 };
	s->tree_stacks[1].kind = SNAP_KIND_TOUCH;
	s->n_other = 3;
	s->other = calloc(3, sizeof(*s->other));
	s->other[0] = (struct snap_stack){ 2, SNAP_KIND_MMAP, 1ull << 20, 128ull << 20, 1, 0 };
	s->other[1] = (struct snap_stack){ 4, SNAP_KIND_HEAP, 3ull << 20, 3ull << 20, 2, 0 };
	s->other[2] = (struct snap_stack){ 5, SNAP_KIND_PSEUDO, 132 * 1024, 132 * 1024, 1, 0 };
	s->n_links = 4;
	s->links = calloc(4, sizeof(*s->links));
	s->links[0] = (struct snap_link){ 10, 4, 3ull << 20 };
	s->links[1] = (struct snap_link){ 6, 2, 1ull << 20 };
	s->links[2] = (struct snap_link){ 6, 4, 1ull << 20 };
	s->links[3] = (struct snap_link){ 0, 0, 0 };
}

/* Writes the full test snapshot to dir/name and returns its path. */
static const char *write_sample(const char *name)
{
	struct snap s;
	const char *path = in_tmp(name);
	build(&s);
	ck_assert_int_eq(snap_write(&s, path), 0);
	snap_fin(&s);
	return path;
}

/* ---- round trip ---------------------------------------------------------- */

START_TEST(test_round_trip)
{
	struct snap s, back;
	const char *path = in_tmp("peak.ptfil.gz");
	build(&s);
	ck_assert_int_eq(snap_write(&s, path), 0);
	ck_assert_uint_eq(count_entries(tmpdir), 1);  /* no temporary file left */
	ck_assert_int_eq(snap_read(path, &back), 0);
	assert_snap_eq(&s, &back);
	/* Writing again over an existing file replaces it. */
	s.pid = 7;
	ck_assert_int_eq(snap_write(&s, path), 0);
	snap_fin(&back);
	ck_assert_int_eq(snap_read(path, &back), 0);
	ck_assert_int_eq(back.pid, 7);
	ck_assert_uint_eq(count_entries(tmpdir), 1);
	snap_fin(&back);
	snap_fin(&s);
	ck_assert_ptr_null(s.argv);
	ck_assert_uint_eq(s.n_frames, 0);
}
END_TEST

START_TEST(test_round_trip_touch)
{
	struct snap s, back;
	const char *path = in_tmp("touch.gz");
	build_touch(&s);
	ck_assert_int_eq(snap_write(&s, path), 0);
	ck_assert_int_eq(snap_read(path, &back), 0);
	assert_snap_eq(&s, &back);
	snap_fin(&back);
	/* Links in any order read back largest first, then by touch node and alloc node. */
	struct snap_link swap = s.links[0];
	s.links[0] = s.links[3];
	s.links[3] = s.links[2];
	s.links[2] = swap;
	ck_assert_int_eq(snap_write(&s, path), 0);
	ck_assert_int_eq(snap_read(path, &back), 0);
	ck_assert_uint_eq(back.n_links, 4);
	ck_assert_uint_eq(back.links[0].touch_node, 10);
	ck_assert_uint_eq(back.links[1].touch_node, 6);
	ck_assert_uint_eq(back.links[1].alloc_node, 2);
	ck_assert_uint_eq(back.links[2].alloc_node, 4);
	ck_assert_uint_eq(back.links[3].bytes, 0);
	snap_fin(&back);
	/* The alloc view written plainly says so: `v alloc`, read as the alloc view. */
	snap_fin(&s);
	build(&s);
	ck_assert_int_eq(snap_write(&s, path), 0);
	size_t len;
	char *text = gunzip(path, &len);
	ck_assert_ptr_nonnull(strstr(text, "\ns alloc\nv "));
	free(text);
	ck_assert_int_eq(snap_read(path, &back), 0);
	ck_assert_int_eq(back.view, SNAP_VIEW_ALLOC);
	ck_assert_uint_eq(back.n_other + back.n_links, 0);
	snap_fin(&back);
	snap_fin(&s);
}
END_TEST

START_TEST(test_round_trip_minimal)
{
	/* Nothing but the header facts, with NULL strings where a writer may leave them. */
	struct snap s, back;
	const char *path = in_tmp("min.gz");
	snap_init(&s);
	s.exit_status = -1;
	ck_assert_int_eq(snap_write(&s, path), 0);
	ck_assert_int_eq(snap_read(path, &back), 0);
	ck_assert_uint_eq(back.version, SNAP_FORMAT_VERSION);
	ck_assert_str_eq(back.mode, "");
	ck_assert_str_eq(back.ptfil_version, "");
	ck_assert_uint_eq(back.argc, 0);
	ck_assert_uint_eq(back.n_nodes, 1);
	ck_assert_int_eq(back.exit_status, -1);
	snap_fin(&back);
}
END_TEST

START_TEST(test_strings_interned)
{
	/* Paths and names used many times are written once each. */
	size_t len;
	char *text = gunzip(write_sample("s.gz"), &len);
	text = realloc(text, len + 1);
	text[len] = '\0';
	size_t libc = 0, mains = 0;
	for (char *p = text; (p = strstr(p, "\ns ")); p++) {
		libc += !strncmp(p, "\ns /lib/x86_64-linux-gnu/libc.so.6\n", 35);
		mains += !strncmp(p, "\ns main\n", 8);
	}
	ck_assert_uint_eq(libc, 1);
	ck_assert_uint_eq(mains, 1);
	ck_assert(!strncmp(text, "ptfil-snapshot 5\n", 17));
	ck_assert(len >= 3 && !strcmp(text + len - 3, "\ne\n"));
	free(text);
}
END_TEST

START_TEST(test_plain_text_file)
{
	/* An uncompressed snapshot is read too (gzread passes plain files through). */
	size_t len;
	struct snap s, back;
	char *text = gunzip(write_sample("s.gz"), &len);
	spit(in_tmp("plain.txt"), text, len);
	build(&s);
	ck_assert_int_eq(snap_read(in_tmp("plain.txt"), &back), 0);
	assert_snap_eq(&s, &back);
	snap_fin(&s);
	snap_fin(&back);
	free(text);
}
END_TEST

START_TEST(test_python_frames)
{
	/* `f` and `y` share one numbering, in file order; a `y` reads back as written. */
	static const char text[] =
		"ptfil-snapshot 2\n"
		"s 1.0\nV 0\ns launch\no 1\ni 42\nT 1.5\nd 2\nx 0\nw 4096\nz 4096\np 1 10 20 30\n"
		"s /usr/bin/python3.11\nm 2 - 400000\ns malloc\nf 0 1a 3\n"
		"s make_arrays\ns demo.py\ny 12 4 5\n"
		"y 0 - 5\n"
		"f -1 7f00 -\n"
		"n 0 1\nn 1 2\nn 2 3\nn 3 0\nk 4 h 10 10 1\ne\n";
	struct snap s;
	uint32_t out[8];
	ck_assert_int_eq(snap_read_mem(text, sizeof(text) - 1, "py.txt", &s), 0);
	ck_assert_uint_eq(s.version, 2);
	ck_assert_uint_eq(s.n_frames, 4);
	ck_assert_int_eq(s.frames[0].kind, SNAP_FRAME_NATIVE);
	ck_assert_str_eq(s.frames[0].function, "malloc");
	ck_assert_ptr_null(s.frames[0].file);
	ck_assert_uint_eq(s.frames[0].line, 0);
	ck_assert_int_eq(s.frames[1].kind, SNAP_FRAME_PYTHON);
	ck_assert_str_eq(s.frames[1].function, "make_arrays");
	ck_assert_str_eq(s.frames[1].file, "demo.py");
	ck_assert_uint_eq(s.frames[1].line, 12);
	ck_assert_int_eq(s.frames[1].module, -1);
	ck_assert_uint_eq(s.frames[1].offset, 0);
	ck_assert_int_eq(s.frames[2].kind, SNAP_FRAME_PYTHON);
	ck_assert_ptr_null(s.frames[2].function);
	ck_assert_str_eq(s.frames[2].file, "demo.py");
	ck_assert_uint_eq(s.frames[2].line, 0);
	ck_assert_int_eq(s.frames[3].kind, SNAP_FRAME_NATIVE);
	ck_assert_int_eq(s.frames[3].module, -1);
	ck_assert_uint_eq(s.frames[3].offset, 0x7f00);
	ck_assert_uint_eq(snap_stack_frames(&s, 4, out, 8), 4);
	ck_assert_uint_eq(out[0], 0);
	ck_assert_uint_eq(out[1], 3);
	ck_assert_uint_eq(out[2], 2);
	ck_assert_uint_eq(out[3], 1);
	snap_fin(&s);

	/* The writer writes `y` for Python frames, in the order of frames[], each string defined first. */
	size_t len;
	char *w = gunzip(write_sample("py.gz"), &len);
	w = realloc(w, len + 1);
	w[len] = '\0';
	const char *fit = strstr(w, "\ny 88 "), *str = strstr(w, "\ny 0 - ");
	const char *eval = strstr(w, "\nf 1 1f00 "), *odd = strstr(w, "\ny 4294967295 ");
	ck_assert(fit && str && eval && odd);
	ck_assert(fit < str && str < eval && eval < odd);
	ck_assert_ptr_nonnull(strstr(w, "\ns tab\\x09here.py\n"));
	ck_assert_ptr_nonnull(strstr(w, "\ns odd\\nname \\\\ \\x01\n"));
	size_t ys = 0;
	for (const char *p = w; (p = strstr(p, "\ny ")); p++)
		ys++;
	ck_assert_uint_eq(ys, 3);
	free(w);

	/* A Python frame without a file is written with an empty one: what the reader requires. */
	struct snap a, back;
	build(&a);
	free(a.frames[7].file);
	a.frames[7].file = NULL;
	ck_assert_int_eq(snap_write(&a, in_tmp("nofile.gz")), 0);
	ck_assert_int_eq(snap_read(in_tmp("nofile.gz"), &back), 0);
	ck_assert_str_eq(back.frames[7].file, "");
	ck_assert_int_eq(back.frames[7].kind, SNAP_FRAME_PYTHON);
	snap_fin(&a);
	snap_fin(&back);
}
END_TEST

START_TEST(test_stack_frames)
{
	struct snap s;
	uint32_t out[8];
	build(&s);
	ck_assert_uint_eq(snap_stack_frames(&s, 6, out, 8), 3);
	ck_assert_uint_eq(out[0], 5);
	ck_assert_uint_eq(out[1], 1);
	ck_assert_uint_eq(out[2], 0);
	/* The depth is whole even when out is short. */
	memset(out, 0xff, sizeof(out));
	ck_assert_uint_eq(snap_stack_frames(&s, 6, out, 1), 3);
	ck_assert_uint_eq(out[0], 5);
	ck_assert_uint_eq(out[1], UINT32_MAX);
	ck_assert_uint_eq(snap_stack_frames(&s, 0, out, 8), 0);
	ck_assert_uint_eq(snap_stack_frames(&s, 99, out, 8), 0);
	/* Hostile tries: a cycle, a self loop, a frame out of range. */
	s.nodes[1].parent = 2;
	ck_assert_uint_eq(snap_stack_frames(&s, 2, out, 8), 2);
	s.nodes[3].parent = 3;
	ck_assert_uint_eq(snap_stack_frames(&s, 3, out, 8), 1);
	s.nodes[4].frame = 1000;
	ck_assert_uint_eq(snap_stack_frames(&s, 4, out, 8), 0);
	snap_fin(&s);
	ck_assert_uint_eq(snap_stack_frames(&s, 3, out, 8), 0);
}
END_TEST

/* ---- atomic writes ------------------------------------------------------- */

START_TEST(test_write_missing_dir)
{
	struct snap s;
	build(&s);
	capture_start();
	int rc = snap_write(&s, in_tmp("no/such/dir/x.gz"));
	char *msg = capture_end();
	ck_assert_int_eq(rc, -1);
	ck_assert_uint_eq(count_lines(msg), 1);
	ck_assert_ptr_nonnull(strstr(msg, "no/such/dir/x.gz"));
	ck_assert_ptr_nonnull(strstr(msg, strerror(ENOENT)));
	ck_assert_uint_eq(count_entries(tmpdir), 1);  /* stderr.txt only */
	free(msg);
	snap_fin(&s);
}
END_TEST

START_TEST(test_write_rename_fails_cleanly)
{
	/* The target is a non-empty directory: the data is written, the rename fails. */
	struct snap s;
	const char *path = in_tmp("dir.gz");
	ck_assert_int_eq(mkdir(path, 0700), 0);
	spit(in_tmp("dir.gz/keep"), "x", 1);
	build(&s);
	ck_assert_int_eq(snap_write(&s, path), -1);
	ck_assert_uint_eq(count_entries(tmpdir), 1);
	ck_assert_uint_eq(count_entries(path), 1);
	snap_fin(&s);
}
END_TEST

START_TEST(test_write_failure_keeps_old_file)
{
	/* A file-size limit fails the write like a full disk would, even for root. */
	struct snap s;
	struct rlimit old, small;
	const char *path = in_tmp("old.gz");
	size_t before_len, after_len;

	spit(path, "previous snapshot", 17);
	build(&s);
	/* Enough distinct names that the file cannot compress under the limit. */
	s.frames = realloc(s.frames, 4000 * sizeof(*s.frames));
	for (size_t i = s.n_frames; i < 4000; i++) {
		char name[64];
		snprintf(name, sizeof(name), "fn_%zx_%lx", i * 2654435761u, (unsigned long)random());
		s.frames[i] = (struct snap_frame){ .module = -1, .offset = i * 7919, .function = strdup(name) };
	}
	s.n_frames = 4000;
	signal(SIGXFSZ, SIG_IGN);
	getrlimit(RLIMIT_FSIZE, &old);
	/* Only the soft limit: a lowered hard limit could not be raised again. */
	small = (struct rlimit){ 4096, old.rlim_max };
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
	capture_start();
	int rc = snap_write(&s, path);
	char *msg = capture_end();
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	ck_assert_int_eq(rc, -1);
	ck_assert_uint_eq(count_lines(msg), 1);
	ck_assert_ptr_nonnull(strstr(msg, path));
	ck_assert_ptr_nonnull(strstr(msg, strerror(EFBIG)));
	char *after = slurp(path, &after_len);
	before_len = 17;
	ck_assert_uint_eq(after_len, before_len);
	ck_assert_mem_eq(after, "previous snapshot", 17);
	ck_assert_uint_eq(count_entries(tmpdir), 2);  /* old.gz and stderr.txt */
	free(after);
	free(msg);
	snap_fin(&s);
}
END_TEST

START_TEST(test_write_readonly_dir)
{
	struct snap s;
	const char *dir = in_tmp("ro"), *path = in_tmp("ro/x.gz");
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	spit(path, "old", 3);
	ck_assert_int_eq(chmod(dir, 0500), 0);
	if (access(dir, W_OK) == 0)
		return;  /* root ignores the mode; the other failure tests cover this path */
	build(&s);
	ck_assert_int_eq(snap_write(&s, path), -1);
	snap_fin(&s);
	size_t len;
	char *text = slurp(path, &len);
	ck_assert_uint_eq(len, 3);
	free(text);
	ck_assert_uint_eq(count_entries(dir), 1);
}
END_TEST

START_TEST(test_write_refuses_invalid)
{
	/* What the reader would reject is never written. */
	struct snap s;
	const char *path = in_tmp("bad.gz");
	build(&s);
	s.nodes[2].parent = 2;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.nodes[2].parent = 1;
	s.frames[0].module = 3;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.frames[0].module = 0;
	s.stacks[0].kind = 'z';
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.stacks[0].kind = SNAP_KIND_MMAP;
	s.frames[6].kind = 2;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.frames[6].kind = SNAP_FRAME_PYTHON;
	s.live[0].node = (uint32_t)s.n_nodes;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.live[0].node = 4;
	/* Kind t only in the touch view; the other view and links only there, never of kind t. */
	s.stacks[0].kind = SNAP_KIND_TOUCH;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.stacks[0].kind = SNAP_KIND_MMAP;
	snap_fin(&s);
	build_touch(&s);
	s.view = SNAP_VIEW_ALLOC;
	for (size_t i = 0; i < s.n_stacks; i++)
		s.stacks[i].kind = SNAP_KIND_MMAP;
	s.live[1].kind = s.tree_stacks[1].kind = SNAP_KIND_HEAP;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.view = 2;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.view = SNAP_VIEW_TOUCH;
	s.other[1].kind = SNAP_KIND_TOUCH;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.other[1].kind = SNAP_KIND_MMAP;
	s.other[1].node = 2;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.other[1].node = (uint32_t)s.n_nodes;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.other[1].node = 4;
	s.links[2].alloc_node = (uint32_t)s.n_nodes;
	ck_assert_int_eq(snap_write(&s, path), -1);
	s.links[2].alloc_node = 2;
	ck_assert_int_eq(snap_write(&s, path), -1);  /* the same two nodes as links[1] */
	s.links[2].alloc_node = 4;
	ck_assert_uint_eq(count_entries(tmpdir), 0);
	ck_assert_int_eq(snap_write(&s, path), 0);
	snap_fin(&s);
}
END_TEST

/* ---- where the snapshot goes ---------------------------------------------- */

START_TEST(test_write_through_symlink)
{
	/* The link stays a link; the file it names, in another directory, is replaced there. */
	struct snap s, back;
	const char *dir = in_tmp("d"), *real = in_tmp("d/real.gz"), *link = in_tmp("link.gz");
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	spit(real, "old", 3);
	ck_assert_int_eq(symlink("d/real.gz", link), 0);
	build(&s);
	ck_assert_int_eq(snap_output_in_place(link), 0);
	ck_assert_int_eq(snap_output_check(link), 0);
	ck_assert_int_eq(snap_write(&s, link), 0);
	struct stat st;
	ck_assert_int_eq(lstat(link, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(snap_read(real, &back), 0);
	assert_snap_eq(&s, &back);
	snap_fin(&back);
	ck_assert_uint_eq(count_entries(dir), 1);
	/* A link to a name not taken yet: the file is made at the name. */
	const char *dangling = in_tmp("dangling.gz");
	ck_assert_int_eq(symlink("d/new.gz", dangling), 0);
	ck_assert_int_eq(snap_output_check(dangling), 0);
	ck_assert_uint_eq(count_entries(dir), 1);  /* the check leaves nothing behind */
	ck_assert_int_eq(snap_write(&s, dangling), 0);
	ck_assert_int_eq(lstat(dangling, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(snap_read(in_tmp("d/new.gz"), &back), 0);
	snap_fin(&back);
	snap_fin(&s);
}
END_TEST

START_TEST(test_write_fifo_in_place)
{
	/* A reader first; the snapshot is small enough to sit in the pipe until it reads. */
	struct snap s, back;
	const char *fifo = in_tmp("fifo");
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	int rd = open(fifo, O_RDONLY | O_NONBLOCK);
	ck_assert_int_ge(rd, 0);
	ck_assert_int_eq(snap_output_in_place(fifo), 1);
	ck_assert_int_eq(snap_output_check(fifo), 0);
	build(&s);
	ck_assert_int_eq(snap_write(&s, fifo), 0);
	struct stat st;
	ck_assert_int_eq(lstat(fifo, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_uint_eq(count_entries(tmpdir), 1);
	char *data = malloc(1 << 20);
	size_t len = 0;
	ssize_t n;
	while ((n = read(rd, data + len, (1 << 20) - len)) > 0)
		len += (size_t)n;
	ck_assert_int_eq(n, 0);  /* the writer closed: all of it is there */
	close(rd);
	spit(in_tmp("got.gz"), data, len);
	ck_assert_int_eq(snap_read(in_tmp("got.gz"), &back), 0);
	assert_snap_eq(&s, &back);
	snap_fin(&back);
	snap_fin(&s);
	free(data);
}
END_TEST

START_TEST(test_output_check)
{
	static const struct {
		const char *name;     /* in tmpdir */
		const char *expect;   /* in the one line of error */
	} bad[] = {
		{ "no/such/x.gz", "No such file or directory" },
		{ "file/x.gz", "Not a directory" },
		{ "", "it is a directory" },
	};
	spit(in_tmp("file"), "x", 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[300];
		snprintf(path, sizeof(path), "%s/%s", tmpdir, bad[i].name);
		if (!bad[i].name[0])
			snprintf(path, sizeof(path), "%s", tmpdir);
		capture_start();
		int rc = snap_output_check(path);
		char *msg = capture_end();
		char want[400];
		snprintf(want, sizeof(want), "cannot write the snapshot to %s: %s\n", path, bad[i].expect);
		ck_assert_int_eq(rc, -1);
		ck_assert_msg(strstr(msg, want) && count_lines(msg) == 1, "wanted '%s', got '%s'", want, msg);
		free(msg);
	}
	/* The default name: whether the current directory takes a file. */
	char cwd[4096];
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(tmpdir), 0);
	ck_assert_int_eq(snap_output_check(NULL), 0);
	ck_assert_int_eq(chdir("/proc"), 0);
	capture_start();
	int rc = snap_output_check(NULL);
	char *msg = capture_end();
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_int_eq(rc, -1);
	ck_assert_ptr_nonnull(strstr(msg, "cannot write the snapshot in the current directory /proc"));
	free(msg);
	ck_assert_uint_eq(count_entries(tmpdir), 2);  /* file and stderr.txt: no probe left */
}
END_TEST

/* ---- hostile files -------------------------------------------------------- */

START_TEST(test_gzip_truncated_everywhere)
{
	size_t len;
	const char *path = write_sample("full.gz");
	char *full = slurp(path, &len);
	const char *cut = in_tmp("cut.gz");
	struct snap s;
	ck_assert_uint_gt(len, 100);
	for (size_t n = 0; n < len; n++) {
		spit(cut, full, n);
		int rc = snap_read(cut, &s);
		snap_fin(&s);
		ck_assert_msg(rc == -1, "a gzip file cut at %zu of %zu bytes was accepted", n, len);
	}
	spit(cut, full, len);
	ck_assert_int_eq(snap_read(cut, &s), 0);
	snap_fin(&s);
	free(full);
}
END_TEST

START_TEST(test_text_truncated_everywhere)
{
	/* Every prefix, on a line boundary or not, is refused: the end marker sees to it. */
	size_t len;
	struct snap s;
	char *text = gunzip(write_sample("full.gz"), &len);
	for (size_t n = 0; n < len; n++) {
		int rc = snap_read_mem(text, n, "mem", &s);
		snap_fin(&s);
		ck_assert_msg(rc == -1, "text cut at %zu of %zu bytes was accepted", n, len);
	}
	ck_assert_int_eq(snap_read_mem(text, len, "mem", &s), 0);
	snap_fin(&s);
	free(text);
}
END_TEST

START_TEST(test_gzip_flipped_bytes)
{
	/*
	 * A flipped bit either fails the read or changes nothing (a bit in the
	 * gzip header's time stamp, or in the padding of the last deflate byte).
	 */
	size_t len;
	const char *path = write_sample("full.gz");
	char *full = slurp(path, &len);
	const char *bad = in_tmp("flip.gz");
	struct snap ref, s;
	size_t failed = 0;
	build(&ref);
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			full[i] ^= (char)(1 << bit);
			spit(bad, full, len);
			full[i] ^= (char)(1 << bit);
			if (snap_read(bad, &s) == 0)
				assert_snap_eq(&ref, &s);
			else
				failed++;
			snap_fin(&s);
		}
	}
	ck_assert_uint_gt(failed, len);
	snap_fin(&ref);
	free(full);
}
END_TEST

START_TEST(test_text_flipped_bytes)
{
	/* Any byte replaced anywhere in the text: a clean success or a clean error. */
	static const char repl[] = { 'x', '0', '9', ' ', '\n', '\0', '\\', '-', (char)0xff, 'e', 's' };
	size_t len;
	struct snap s;
	char *text = gunzip(write_sample("full.gz"), &len);
	for (size_t i = 0; i < len; i++) {
		char orig = text[i];
		for (size_t k = 0; k < sizeof(repl); k++) {
			text[i] = repl[k];
			snap_read_mem(text, len, "mem", &s);
			snap_fin(&s);
		}
		text[i] = orig;
	}
	free(text);
}
END_TEST

START_TEST(test_binary_garbage)
{
	struct snap s;
	char buf[8192];
	srandom(1);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)random();
	spit(in_tmp("rand"), buf, sizeof(buf));
	ck_assert_int_eq(snap_read(in_tmp("rand"), &s), -1);
	snap_fin(&s);
	/* gzip magic, then garbage. */
	buf[0] = (char)0x1f;
	buf[1] = (char)0x8b;
	buf[2] = 8;
	buf[3] = 0;
	spit(in_tmp("rand"), buf, sizeof(buf));
	ck_assert_int_eq(snap_read(in_tmp("rand"), &s), -1);
	snap_fin(&s);
	/* A megabyte without a newline. */
	char *big = malloc(3 << 20);
	memset(big, 'a', 3 << 20);
	spit(in_tmp("big"), big, 3 << 20);
	ck_assert_int_eq(snap_read(in_tmp("big"), &s), -1);
	snap_fin(&s);
	free(big);
	ck_assert_int_eq(snap_read(tmpdir, &s), -1);
	snap_fin(&s);
}
END_TEST

START_TEST(test_missing_file)
{
	struct snap s;
	capture_start();
	int rc = snap_read(in_tmp("absent.gz"), &s);
	char *msg = capture_end();
	ck_assert_int_eq(rc, -1);
	ck_assert_uint_eq(count_lines(msg), 1);
	ck_assert_ptr_nonnull(strstr(msg, "absent.gz"));
	ck_assert_ptr_nonnull(strstr(msg, strerror(ENOENT)));
	snap_fin(&s);
	free(msg);
}
END_TEST

/* A small valid document; the cases below change one line of it. */
static const char *const base_lines[] = {
	"ptfil-snapshot 1",    /* 1 */
	"s 1.0",               /* 2 */
	"V 0",                 /* 3 */
	"s launch",            /* 4 */
	"o 1",                 /* 5 */
	"i 42",                /* 6 */
	"T 1.5",               /* 7 */
	"d 2",                 /* 8 */
	"x 0",                 /* 9 */
	"w 4096",              /* 10 */
	"z 4096",              /* 11 */
	"p 1 10 20 30",        /* 12 */
	"s /bin/prog",         /* 13 */
	"m 2 - 400000",        /* 14 */
	"f 0 1a 1",            /* 15 */
	"n 0 0",               /* 16 */
	"k 1 m 10 20 1",       /* 17 */
	"# a comment",         /* 18: replaced by the inserted line */
	"e",                   /* 19 */
};
#define BASE_N (sizeof(base_lines) / sizeof(base_lines[0]))

/* The base document with line `at` (1-based) replaced by `line`, or removed if line is NULL. */
static char *doc(size_t at, const char *line, size_t *len)
{
	size_t cap = 64;
	for (size_t i = 0; i < BASE_N; i++)
		cap += strlen(base_lines[i]) + 1;
	if (line)
		cap += strlen(line) + 1;
	char *d = malloc(cap);
	*len = 0;
	for (size_t i = 0; i < BASE_N; i++) {
		const char *l = i + 1 == at ? line : base_lines[i];
		if (!l)
			continue;
		size_t n = strlen(l);
		memcpy(d + *len, l, n);
		d[*len + n] = '\n';
		*len += n + 1;
	}
	d[*len] = '\0';
	return d;
}

struct bad_case {
	size_t at;           /* line replaced */
	const char *line;    /* NULL: removed */
	size_t err_line;     /* line the error names */
	const char *expect;  /* substring of the message */
};

static const struct bad_case bad_cases[] = {
	{ 18, "Q 1", 18, "unknown tag 'Q'" },
	{ 18, "\x01", 18, "unknown tag (byte 0x01)" },
	{ 18, "ss", 18, "unknown tag" },
	{ 18, "f 1 10 -", 18, "module 1 out of range" },
	{ 18, "f -2 10 -", 18, "module -2 out of range" },
	{ 18, "f 0 1A -", 18, "malformed offset" },
	{ 18, "f 0 10000000000000000 -", 18, "offset '10000000000000000' out of range" },
	{ 18, "m 9 - 0", 18, "string 9 refers to nothing" },
	{ 18, "n 2 0", 18, "parent node 2 refers to nothing" },
	{ 18, "n 0 1", 18, "frame 1 refers to nothing" },
	{ 18, "k 2 m 1 1 1", 18, "stack node 2 refers to nothing" },
	{ 18, "l 1 q 1 1 1", 18, "unknown stack kind 'q'" },
	{ 18, "l 1 mm 1 1 1", 18, "unknown stack kind" },
	{ 18, "a 3", 18, "string 3 refers to nothing" },
	{ 18, "a -", 18, "malformed string" },
	{ 18, "t 1 12x 3", 18, "malformed charged bytes '12x'" },
	{ 18, "t 1 -5 3", 18, "malformed charged bytes" },
	{ 18, "t 1 18446744073709551616 0", 18, "charged bytes '18446744073709551616' out of range" },
	{ 18, "t 1 18446744073709551615 0", 0, NULL },
	{ 18, "t nan 1 1", 18, "malformed sample time" },
	{ 18, "t inf 1 1", 18, "malformed sample time" },
	{ 18, "t 1e999 1 1", 18, "malformed sample time" },
	{ 18, "t 0x10 1 1", 18, "malformed sample time" },
	{ 18, "t 1 1", 18, "expected 3 fields, found 2" },
	{ 18, "t 1 1 1 1", 18, "too many fields" },
	{ 18, "t 1  1 1", 18, "empty field" },
	{ 18, "t 1 1 1 ", 18, "empty field" },
	{ 18, "t", 18, "expected 3 fields, found none" },
	{ 18, "i 43", 18, "duplicate 'i' record" },
	{ 18, "p 1 1 1 1", 18, "duplicate 'p' record" },
	{ 18, "s a\\qb", 18, "bad escape" },
	{ 18, "s a\\x0", 18, "bad escape" },
	{ 18, "s \\x00", 18, "bad escape" },
	{ 18, "s trailing\\", 18, "bad escape" },
	{ 18, "s a\tb", 18, "unescaped control byte 0x09" },
	{ 18, "s a\rb", 18, "unescaped control byte 0x0d" },
	{ 18, "s \\x41\\\\\\n\xff", 0, NULL },
	{ 18, "c 0", 18, "expected 2 fields, found 1" },
	{ 18, "", 0, NULL },
	{ 9, "x -2", 9, "exit status -2 out of range" },
	{ 9, "x 2147483648", 9, "exit status 2147483648 out of range" },
	{ 6, "i 99999999999999999999", 6, "pid '99999999999999999999' out of range" },
	{ 1, "ptfil-snapshot 7", 1, "snapshot format 7 is newer than this check_ptfil reads (5); upgrade ptfil" },
	{ 1, "ptfil-snapshot 6", 1, "snapshot format 6 is newer than this check_ptfil reads (5); upgrade ptfil" },
	{ 1, "ptfil-snapshot 5", 0, NULL },
	{ 1, "ptfil-snapshot 4", 0, NULL },
	{ 1, "ptfil-snapshot 3", 0, NULL },
	{ 1, "ptfil-snapshot 2", 0, NULL },
	/* Python frames are format 2: a format-1 file refuses them as a format-1 reader would. */
	{ 18, "y 1 - 2", 18, "unknown tag 'y' in a format 1 snapshot (Python frames are format 2)" },
	{ 18, "y", 18, "unknown tag 'y' in a format 1 snapshot" },
	{ 1, "ptfil-snapshot 0", 1, "unsupported snapshot format 0" },
	{ 1, "ptfil-snapshot x", 1, "malformed format version" },
	{ 1, "ptfil-snapshot 1 ", 1, "malformed format version" },
	{ 1, "heaptrack 1", 1, "not a ptfil snapshot" },
	{ 1, NULL, 1, "not a ptfil snapshot" },
	{ 12, NULL, 18, "end marker before the required 'p' record" },
	{ 3, NULL, 18, "end marker before the required 'V' record" },
	{ 19, "e x", 19, "too many fields (expected 0)" },
	{ 19, NULL, 18, "truncated (no end marker)" },
};

/* The same, in a format-2 document: Python frames (`y`) are known. */
static const struct bad_case bad_cases_v2[] = {
	{ 18, "y 12 1 2", 0, NULL },
	{ 18, "y 0 - 2", 0, NULL },
	{ 18, "y 4294967295 - 2", 0, NULL },
	{ 18, "y 4294967296 - 2", 18, "line number 4294967296 out of range" },
	{ 18, "y 99999999999999999999 - 2", 18, "line number '99999999999999999999' out of range" },
	{ 18, "y -1 - 2", 18, "malformed line number '-1'" },
	{ 18, "y 1a - 2", 18, "malformed line number '1a'" },
	{ 18, "y - - 2", 18, "malformed line number '-'" },
	{ 18, "y 1 - -", 18, "Python frame without a source file ('-')" },
	{ 18, "y 1 9 2", 18, "string 9 refers to nothing" },
	{ 18, "y 1 - 9", 18, "string 9 refers to nothing" },
	{ 18, "y 1 -", 18, "expected 3 fields, found 2" },
	{ 18, "y 1 - 2 0", 18, "too many fields (expected 3)" },
	{ 18, "y 1  - 2", 18, "empty field" },
	{ 18, "y", 18, "expected 3 fields, found none" },
	{ 18, "yy 1 - 2", 18, "unknown tag 'yy'" },
	{ 18, "n 0 1", 18, "frame 1 refers to nothing" },
	/* Native source lines are format 3: a format-2 file refuses them as a format-2 reader would. */
	{ 18, "g 0 10 - 2 7 0", 18, "unknown tag 'g' in a format 2 snapshot (native source lines are format 3)" },
	{ 18, "u 0 f 1 -", 18, "unknown tag 'u' in a format 2 snapshot" },
};

/* The same, in a format-3 document: native frames with source lines (`g`) are known. */
static const struct bad_case bad_cases_v3[] = {
	{ 18, "g 0 10 - 2 7 0", 0, NULL },
	{ 18, "g -1 10 1 - 0 1", 0, NULL },
	{ 18, "g 0 10 - 2 4294967295 1", 0, NULL },
	{ 18, "g 0 10 - 2 4294967296 0", 18, "line number 4294967296 out of range" },
	{ 18, "g 0 10 - 2 7 2", 18, "inlined flag 2 is neither 0 nor 1" },
	{ 18, "g 0 10 - 2 7 -1", 18, "malformed inlined flag '-1'" },
	{ 18, "g 1 10 - 2 7 0", 18, "module 1 out of range" },
	{ 18, "g 0 1A - 2 7 0", 18, "malformed offset" },
	{ 18, "g 0 10 - 9 7 0", 18, "string 9 refers to nothing" },
	{ 18, "g 0 10 - 2 7", 18, "expected 6 fields, found 5" },
	{ 18, "g 0 10 - 2 7 0 0", 18, "too many fields (expected 6)" },
	{ 18, "y 12 1 2", 0, NULL },
	{ 18, "n 0 1", 18, "frame 1 refers to nothing" },
	{ 18, "u 0 f 1 2", 0, NULL },
	{ 18, "u 0 n 0 -", 0, NULL },
	{ 18, "u 1 n 0 -", 18, "module 1 out of range" },
	{ 18, "u 0 x 0 -", 18, "unknown symbol source 'x'" },
	{ 18, "u 0 ff 0 -", 18, "unknown symbol source 'ff'" },
	{ 18, "u 0 f 2 -", 18, "lines flag 2 is neither 0 nor 1" },
	{ 18, "u 0 f 1", 18, "expected 4 fields, found 3" },
	{ 18, "P 7 1 1 10 0.5 10 20 0 -1 - -", 18, "unknown tag 'P' in a format 3 snapshot (process trees are format 4)" },
	{ 18, "r 0.5 10", 18, "unknown tag 'r' in a format 3 snapshot" },
	{ 18, "j 1 m 1 1 1 0", 18, "unknown tag 'j' in a format 3 snapshot" },
};

/* The same, in a format-4 document: the process tree is known. */
static const struct bad_case bad_cases_v4[] = {
	{ 18, "P 7 1 1 10 0.5 10 20 0 -1 - -", 0, NULL },
	{ 18, "P 7 0 0 0 0 0 20 0.25 1.5 2 -", 0, NULL },
	{ 18, "P 0 1 1 10 0.5 10 20 0 -1 - -", 18, "pid 0 out of range" },
	{ 18, "P 7 -1 1 10 0.5 10 20 0 -1 - -", 18, "parent pid -1 out of range" },
	{ 18, "P 7 1 2 10 0.5 10 20 0 -1 - -", 18, "profiled flag 2 is neither 0 nor 1" },
	{ 18, "P 7 1 1 10 nan 10 20 0 -1 - -", 18, "malformed peak time" },
	{ 18, "P 7 1 1 10 0.5 10 20 0 -2x - -", 18, "malformed end time" },
	{ 18, "P 7 1 1 10 0.5 10 20 0 -1 9 -", 18, "string 9 refers to nothing" },
	{ 18, "P 7 1 1 10 0.5 10 20 0 -1 -", 18, "expected 11 fields, found 10" },
	{ 18, "r 0.5 10", 0, NULL },
	{ 18, "r 0.5", 18, "expected 2 fields, found 1" },
	{ 18, "j 1 m 1 1 1 0", 18, "process 0 refers to nothing" },
	{ 18, "u 0 f 1 2", 0, NULL },
	/* The views are format 5: a format-4 file refuses them as a format-4 reader would. */
	{ 18, "v 1", 18, "unknown tag 'v' in a format 4 snapshot (views are format 5)" },
	{ 18, "K 1 m 1 1 1", 18, "unknown tag 'K' in a format 4 snapshot (views are format 5)" },
	{ 18, "X 1 1 1", 18, "unknown tag 'X' in a format 4 snapshot (views are format 5)" },
	{ 18, "k 1 t 1 1 1", 18, "unknown stack kind 't' in a format 4 snapshot (touch stacks are format 5)" },
	{ 18, "l 1 t 1 1 1", 18, "unknown stack kind 't' in a format 4 snapshot" },
	{ 18, "l 1 tt 1 1 1", 18, "unknown stack kind 'tt'" },
};

/*
 * A format-5 document: the touch view, a touch stack, a stack of the alloc
 * view and a link. Each case edits up to three of its lines.
 */
static const char *const base5_lines[] = {
	"ptfil-snapshot 5",    /* 1 */
	"s 1.0",               /* 2 */
	"V 0",                 /* 3 */
	"s launch",            /* 4 */
	"o 1",                 /* 5 */
	"i 42",                /* 6 */
	"T 1.5",               /* 7 */
	"d 2",                 /* 8 */
	"x 0",                 /* 9 */
	"w 4096",              /* 10 */
	"z 4096",              /* 11 */
	"p 1 10 20 30",        /* 12 */
	"s touch",             /* 13: string 2 */
	"v 2",                 /* 14 */
	"s /bin/prog",         /* 15: string 3 */
	"m 3 - 400000",        /* 16 */
	"f 0 1a 1",            /* 17 */
	"n 0 0",               /* 18: node 1 */
	"n 1 0",               /* 19: node 2 */
	"k 2 t 10 10 1",       /* 20 */
	"K 1 m 10 20 1",       /* 21 */
	"X 2 1 10",            /* 22 */
	"# a comment",         /* 23 */
	"e",                   /* 24 */
};
#define BASE5_N (sizeof(base5_lines) / sizeof(base5_lines[0]))

struct edit {
	size_t at;         /* line replaced, 0 for none */
	const char *line;  /* NULL: removed */
};

struct bad_case5 {
	struct edit edits[3];
	size_t err_line;
	const char *expect;
};

static const struct bad_case5 bad_cases_v5[] = {
	{ { { 0, NULL } }, 0, NULL },
	{ { { 23, "k 1 t 5 5 1" } }, 0, NULL },
	{ { { 23, "l 2 t 5 5 1" } }, 0, NULL },
	{ { { 23, "K 2 h 5 5 1" } }, 0, NULL },
	{ { { 23, "K 1 p 5 5 1" } }, 0, NULL },
	{ { { 23, "X 1 2 18446744073709551615" } }, 0, NULL },
	{ { { 23, "X 0 0 0" } }, 0, NULL },
	{ { { 23, "k 2 m 10 10 1" } }, 0, NULL },
	/* The view: alloc or touch, once, before every stack record. */
	{ { { 13, "s alloc" }, { 20, "k 2 m 10 10 1" }, { 21, "# no K" } }, 22,
	  "'X' record in an alloc-view snapshot (only a touch snapshot links two views)" },
	{ { { 13, "s alloc" }, { 20, "k 2 m 10 10 1" } }, 21,
	  "'K' record in an alloc-view snapshot (only a touch snapshot carries the other view)" },
	{ { { 13, "s alloc" } }, 20, "stack kind 't' in an alloc-view snapshot (a touch snapshot says 'v touch' first)" },
	{ { { 14, "# no view" } }, 20, "stack kind 't' in an alloc-view snapshot" },
	{ { { 14, "# no view" }, { 20, "k 2 m 10 10 1" } }, 21, "'K' record in an alloc-view snapshot" },
	{ { { 14, "# no view" }, { 23, "v 2" }, { 20, "# no k" } }, 21, "'K' record in an alloc-view snapshot" },
	{ { { 14, "# later" }, { 20, "# no k" }, { 21, "v 2" } }, 0, NULL },  /* after modules and nodes: still in time */
	{ { { 14, "# later" }, { 23, "v 2" } }, 20, "stack kind 't' in an alloc-view snapshot" },
	{ { { 14, "# later" }, { 20, "k 2 m 10 10 1" }, { 21, "v 2" } }, 21,
	  "the 'v' record comes after stack records (it belongs before every k, l, j, K and X)" },
	{ { { 23, "v 2" } }, 23, "duplicate 'v' record" },
	{ { { 14, "v 0" } }, 14, "unknown view '1.0' (alloc or touch)" },
	{ { { 13, "s Touch" } }, 14, "unknown view 'Touch' (alloc or touch)" },
	{ { { 13, "s touch\\x1b[2J" } }, 14, "unknown view 'touch\\x1b[2J' (alloc or touch)" },
	{ { { 14, "v 9" } }, 14, "string 9 refers to nothing" },
	{ { { 14, "v -" } }, 14, "malformed string '-'" },
	{ { { 14, "v" } }, 14, "expected 1 fields, found none" },
	{ { { 14, "v 2 2" } }, 14, "too many fields (expected 1)" },
	/* K: as k, never kind t, each (node, kind) once. */
	{ { { 23, "K 1 t 5 5 1" } }, 23, "stack kind 't' in a 'K' record: the other view of a touch snapshot is the alloc view" },
	{ { { 23, "K 1 m 5 5 1" } }, 23, "duplicate 'K' record for node 1, kind 'm'" },
	{ { { 23, "K 3 m 5 5 1" } }, 23, "stack node 3 refers to nothing (only 3 defined so far)" },
	{ { { 23, "K 1 q 5 5 1" } }, 23, "unknown stack kind 'q'" },
	{ { { 23, "K 1 h 5 5" } }, 23, "expected 5 fields, found 4" },
	{ { { 23, "K 1 h 5 5 99999999999999999999" } }, 23, "count '99999999999999999999' out of range" },
	{ { { 20, "k 2 t 10 10 1" }, { 23, "k 2 t 1 1 1" } }, 23, "duplicate 'k' record for node 2, kind 't'" },
	/* X: two nodes defined before it, bytes, each pair once. */
	{ { { 23, "X 2 1 5" } }, 23, "duplicate 'X' record for touch node 2, alloc node 1" },
	{ { { 23, "X 3 1 5" } }, 23, "touch node 3 refers to nothing (only 3 defined so far)" },
	{ { { 23, "X 1 3 5" } }, 23, "alloc node 3 refers to nothing" },
	{ { { 23, "X 1 4294967296 5" } }, 23, "alloc node 4294967296 refers to nothing" },
	{ { { 23, "X 1 2 18446744073709551616" } }, 23, "link bytes '18446744073709551616' out of range" },
	{ { { 23, "X 1 2 -1" } }, 23, "malformed link bytes '-1'" },
	{ { { 23, "X 1 2" } }, 23, "expected 3 fields, found 2" },
	{ { { 23, "X 1 2 5 6" } }, 23, "too many fields (expected 3)" },
	{ { { 23, "X" } }, 23, "expected 3 fields, found none" },
	{ { { 23, "XX 1 2 5" } }, 23, "unknown tag 'XX'" },
	{ { { 18, "X 1 1 1" } }, 18, "touch node 1 refers to nothing (only 1 defined so far)" },
};

/* base5_lines with the case's edits. */
static char *doc5(const struct edit *edits, size_t *len)
{
	size_t cap = 64;
	for (size_t i = 0; i < BASE5_N; i++)
		cap += strlen(base5_lines[i]) + 1;
	for (size_t e = 0; e < 3; e++)
		cap += edits[e].line ? strlen(edits[e].line) + 1 : 0;
	char *d = malloc(cap);
	*len = 0;
	for (size_t i = 0; i < BASE5_N; i++) {
		const char *l = base5_lines[i];
		for (size_t e = 0; e < 3; e++)
			if (edits[e].at == i + 1)
				l = edits[e].line;
		if (!l)
			continue;
		size_t n = strlen(l);
		memcpy(d + *len, l, n);
		d[*len + n] = '\n';
		*len += n + 1;
	}
	d[*len] = '\0';
	return d;
}

static void check_case(const struct bad_case *c, int i, unsigned version)
{
	size_t len;
	struct snap s;
	char *d = doc(c->at, c->line, &len);
	if (version >= 2)
		d[strlen("ptfil-snapshot ")] = (char)('0' + version);
	capture_start();
	int rc = snap_read_mem(d, len, "case.txt", &s);
	char *msg = capture_end();
	snap_fin(&s);
	if (!c->expect) {
		ck_assert_msg(rc == 0, "case %d (%s) refused: %s", i, c->line, msg);
	} else {
		char want[600];
		snprintf(want, sizeof(want), "case.txt: line %zu: %s", c->err_line, c->expect);
		ck_assert_msg(rc == -1, "case %d (%s) accepted", i, c->line);
		ck_assert_msg(count_lines(msg) == 1, "case %d: not one line: %s", i, msg);
		ck_assert_msg(strstr(msg, want), "case %d: wanted '%s', got '%s'", i, want, msg);
	}
	free(msg);
	free(d);
}

START_TEST(test_bad_records)
{
	check_case(&bad_cases[_i], _i, 1);
}
END_TEST

START_TEST(test_bad_records_v2)
{
	check_case(&bad_cases_v2[_i], _i, 2);
}
END_TEST

START_TEST(test_bad_records_v3)
{
	check_case(&bad_cases_v3[_i], _i, 3);
}
END_TEST

START_TEST(test_bad_records_v4)
{
	check_case(&bad_cases_v4[_i], _i, 4);
}
END_TEST

START_TEST(test_bad_records_v5)
{
	const struct bad_case5 *c = &bad_cases_v5[_i];
	size_t len;
	struct snap s;
	char *d = doc5(c->edits, &len);
	capture_start();
	int rc = snap_read_mem(d, len, "case.txt", &s);
	char *msg = capture_end();
	if (!c->expect) {
		ck_assert_msg(rc == 0, "case %d refused: %s", _i, msg);
		/* What a touch snapshot promises (snap.h): its view, and kind t nowhere in the other view. */
		ck_assert_int_eq(s.view, SNAP_VIEW_TOUCH);
		for (size_t i = 0; i < s.n_other; i++)
			ck_assert_int_ne(s.other[i].kind, SNAP_KIND_TOUCH);
		for (size_t i = 1; i < s.n_links; i++)
			ck_assert(s.links[i - 1].bytes >= s.links[i].bytes);
	} else {
		char want[600];
		snprintf(want, sizeof(want), "case.txt: line %zu: %s", c->err_line, c->expect);
		ck_assert_msg(rc == -1, "case %d accepted", _i);
		ck_assert_msg(count_lines(msg) == 1, "case %d: not one line: %s", _i, msg);
		ck_assert_msg(strstr(msg, want), "case %d: wanted '%s', got '%s'", _i, want, msg);
	}
	snap_fin(&s);
	free(msg);
	free(d);
}
END_TEST

START_TEST(test_after_end_and_long_lines)
{
	size_t len;
	struct snap s;
	char *d = doc(0, NULL, &len);
	/* Anything after the end marker, even a comment. */
	char *more = malloc(len + 16);
	memcpy(more, d, len);
	memcpy(more + len, "# more\n", 7);
	capture_start();
	ck_assert_int_eq(snap_read_mem(more, len + 7, "x", &s), -1);
	char *msg = capture_end();
	ck_assert_ptr_nonnull(strstr(msg, "x: line 20: data after the end marker"));
	snap_fin(&s);
	free(msg);
	free(more);

	/* A string line of exactly the limit is read; one byte more is refused. */
	size_t limit = 1 << 20;
	char *big = malloc(len + limit + 16);
	memcpy(big, "ptfil-snapshot 1\ns ", 19);
	memset(big + 19, 'a', limit - 2);
	size_t n = 19 + limit - 2;
	big[n++] = '\n';
	memcpy(big + n, d + 17, len - 17);
	n += len - 17;
	ck_assert_int_eq(snap_read_mem(big, n, "big", &s), 0);
	snap_fin(&s);
	memmove(big + 20, big + 19, n - 19);
	big[19] = 'a';
	capture_start();
	ck_assert_int_eq(snap_read_mem(big, n + 1, "big", &s), -1);
	msg = capture_end();
	ck_assert_ptr_nonnull(strstr(msg, "big: line 2: line longer than"));
	snap_fin(&s);
	free(msg);
	free(big);
	free(d);
}
END_TEST

START_TEST(test_blank_lines_limited)
{
	/* 1 MiB of blank lines and comments in all is read; one byte more is refused, at once. */
	size_t len, limit = 1 << 20, comment = strlen("# a comment\n");
	struct snap s;
	char *d = doc(0, NULL, &len);
	size_t fill = limit - comment;
	char *big = malloc(len + fill + 2);
	memcpy(big, d, 17);
	memset(big + 17, '\n', fill);
	memcpy(big + 17 + fill, d + 17, len - 17);
	ck_assert_int_eq(snap_read_mem(big, len + fill, "big.txt", &s), 0);
	snap_fin(&s);
	memset(big + 17 + fill, '\n', 1);
	memcpy(big + 18 + fill, d + 17, len - 17);
	capture_start();
	ck_assert_int_eq(snap_read_mem(big, len + fill + 1, "big.txt", &s), -1);
	char *msg = capture_end();
	char want[200];
	snprintf(want, sizeof(want), "big.txt: line %zu: more than 1 MiB of blank lines and comments: "
		 "not a ptfil snapshot, or corrupted", 18 + fill + 1);
	ck_assert_msg(strstr(msg, want), "wanted '%s', got '%s'", want, msg);
	ck_assert_uint_eq(count_lines(msg), 1);
	snap_fin(&s);
	free(msg);
	free(big);
	free(d);
}
END_TEST

/*
 * Writes the base document as gzip, with n string lines of 1 MiB after its
 * first line: of one repeated byte (compressing a thousand times), or of
 * random hexadecimal (twice, as real text does).
 */
static const char *write_long_strings(const char *name, size_t n, int random_text)
{
	size_t len, line = 1 << 20;
	char *d = doc(0, NULL, &len), *text = malloc(line + 1);
	const char *path = in_tmp(name);
	gzFile gz = gzopen(path, random_text ? "wb1" : "wb9");
	ck_assert_ptr_nonnull(gz);
	ck_assert_int_eq(gzwrite(gz, d, 17), 17);
	memcpy(text, "s ", 2);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 2; j < line; j++)
			text[j] = random_text ? "0123456789abcdef"[random() & 15] : 'a';
		text[line] = '\n';
		ck_assert_int_eq(gzwrite(gz, text, (unsigned)line + 1), (int)line + 1);
	}
	ck_assert_int_eq(gzwrite(gz, d + 17, (unsigned)(len - 17)), (int)(len - 17));
	ck_assert_int_eq(gzclose(gz), Z_OK);
	free(text);
	free(d);
	return path;
}

START_TEST(test_gzip_expansion_limited)
{
	struct snap s;
	/* Under 16 MiB, any expansion; 20 MiB of text that compresses as text does, too. */
	ck_assert_int_eq(snap_read(write_long_strings("15.gz", 15, 0), &s), 0);
	snap_fin(&s);
	ck_assert_int_eq(snap_read(write_long_strings("text.gz", 20, 1), &s), 0);
	snap_fin(&s);
	/* 20 MiB from some 20 KiB is refused before the end. */
	const char *path = write_long_strings("bomb.gz", 20, 0);
	capture_start();
	ck_assert_int_eq(snap_read(path, &s), -1);
	char *msg = capture_end();
	ck_assert_msg(strstr(msg, "bomb.gz: line ") && strstr(msg, ": decompresses to more than ") &&
		      strstr(msg, " MiB, over 64 times its size as no snapshot does: not a ptfil snapshot, or corrupted"),
		      "got '%s'", msg);
	ck_assert_uint_eq(count_lines(msg), 1);
	snap_fin(&s);
	free(msg);
}
END_TEST

START_TEST(test_gzip_error_messages)
{
	/* The error names the file and says what is wrong with it. */
	size_t len;
	const char *path = write_sample("full.gz");
	char *full = slurp(path, &len);
	struct snap s;

	spit(in_tmp("cut.gz"), full, len - 4);
	capture_start();
	ck_assert_int_eq(snap_read(in_tmp("cut.gz"), &s), -1);
	char *msg = capture_end();
	snap_fin(&s);
	ck_assert_uint_eq(count_lines(msg), 1);
	ck_assert_ptr_nonnull(strstr(msg, "cut.gz: line "));
	ck_assert_ptr_nonnull(strstr(msg, "truncated"));
	free(msg);

	full[len - 6] ^= 0x10;  /* in the CRC */
	spit(in_tmp("crc.gz"), full, len);
	capture_start();
	ck_assert_int_eq(snap_read(in_tmp("crc.gz"), &s), -1);
	msg = capture_end();
	snap_fin(&s);
	ck_assert_uint_eq(count_lines(msg), 1);
	ck_assert_ptr_nonnull(strstr(msg, "crc.gz: line "));
	ck_assert_ptr_nonnull(strstr(msg, "corrupt gzip data"));
	free(msg);
	free(full);
}
END_TEST

Suite *snap_suite(void)
{
	Suite *su = suite_create("snap");
	TCase *tc = tcase_create("format");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_round_trip_touch);
	tcase_add_test(tc, test_round_trip_minimal);
	tcase_add_test(tc, test_strings_interned);
	tcase_add_test(tc, test_plain_text_file);
	tcase_add_test(tc, test_python_frames);
	tcase_add_test(tc, test_stack_frames);
	tcase_add_test(tc, test_write_missing_dir);
	tcase_add_test(tc, test_write_rename_fails_cleanly);
	tcase_add_test(tc, test_write_failure_keeps_old_file);
	tcase_add_test(tc, test_write_readonly_dir);
	tcase_add_test(tc, test_write_refuses_invalid);
	tcase_add_test(tc, test_write_through_symlink);
	tcase_add_test(tc, test_write_fifo_in_place);
	tcase_add_test(tc, test_output_check);
	tcase_add_test(tc, test_gzip_truncated_everywhere);
	tcase_add_test(tc, test_text_truncated_everywhere);
	tcase_add_test(tc, test_gzip_flipped_bytes);
	tcase_add_test(tc, test_text_flipped_bytes);
	tcase_add_test(tc, test_binary_garbage);
	tcase_add_test(tc, test_missing_file);
	tcase_add_loop_test(tc, test_bad_records, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_loop_test(tc, test_bad_records_v2, 0, (int)(sizeof(bad_cases_v2) / sizeof(bad_cases_v2[0])));
	tcase_add_loop_test(tc, test_bad_records_v3, 0, (int)(sizeof(bad_cases_v3) / sizeof(bad_cases_v3[0])));
	tcase_add_loop_test(tc, test_bad_records_v4, 0, (int)(sizeof(bad_cases_v4) / sizeof(bad_cases_v4[0])));
	tcase_add_loop_test(tc, test_bad_records_v5, 0, (int)(sizeof(bad_cases_v5) / sizeof(bad_cases_v5[0])));
	tcase_add_test(tc, test_after_end_and_long_lines);
	tcase_add_test(tc, test_gzip_error_messages);
	tcase_add_test(tc, test_blank_lines_limited);
	tcase_add_test(tc, test_gzip_expansion_limited);
	suite_add_tcase(su, tc);
	return su;
}
