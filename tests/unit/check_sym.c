/* Unit tests for symbols/sym: every expectation comes from a second route (the running fixture, nm, readelf), never from hard-coded numbers. */
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/suites.h"
#include "tests/unit/testutil.h"
#include "common/error.h"
#include "symbols/debugfile.h"
#include "symbols/maps.h"
#include "symbols/srcline.h"
#include "symbols/sym.h"

static const char *const fixtures[] = { "symfix_pie", "symfix_nopie" };
static const char *const fixture_fns[] = { "symfix_alpha", "symfix_beta", "symfix_static_gamma", "main" };
#define NFNS (sizeof(fixture_fns) / sizeof(fixture_fns[0]))

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static char *fixture_path(const char *name)
{
	const char *dir = getenv("PTFIL_BUILDDIR");
	char *p;

	ck_assert(asprintf(&p, "%s/tests/fixtures/%s", dir && *dir ? dir : ".", name) > 0);
	ck_assert_msg(access(p, X_OK) == 0, "fixture %s is missing: build it, or set PTFIL_BUILDDIR", p);
	return p;
}


/* What the fixture saw of itself at run time. */
struct fix_run {
	char *text;
	struct maps m;
	uint64_t fn[NFNS];
	unsigned char code[16];
	uint64_t bss, bss_size, eh, eh_size;
	const char *exe;        /* the program's path as the kernel printed it (points into m) */
	uint64_t base;          /* where the program's file offset 0 was mapped */
};

static void fix_run(const char *path, struct fix_run *r)
{
	char *cmd, *line, *save = NULL;

	memset(r, 0, sizeof(*r));
	ck_assert(asprintf(&cmd, "'%s' maps", path) > 0);
	r->text = test_run_command(cmd);
	free(cmd);
	char *maps_text = strstr(r->text, "\nmaps\n");
	ck_assert(maps_text != NULL);
	maps_text[1] = '\0';
	maps_text += 6;
	ck_assert_int_eq(maps_parse(maps_text, strlen(maps_text), &r->m), 0);
	for (line = strtok_r(r->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[64], hex[64];
		unsigned long a, b;
		if (sscanf(line, "fn %63s %lx", name, &a) == 2) {
			for (size_t i = 0; i < NFNS; i++)
				if (strcmp(name, fixture_fns[i]) == 0)
					r->fn[i] = a;
		} else if (sscanf(line, "code symfix_alpha %63s", hex) == 1) {
			ck_assert_uint_eq(strlen(hex), 2 * sizeof(r->code));
			for (size_t i = 0; i < sizeof(r->code); i++)
				ck_assert(sscanf(hex + 2 * i, "%2hhx", &r->code[i]) == 1);
		} else if (sscanf(line, "bss %lx %lu", &a, &b) == 2) {
			r->bss = a;
			r->bss_size = b;
		} else if (sscanf(line, "eh_frame_hdr %lx %lu", &a, &b) == 2) {
			r->eh = a;
			r->eh_size = b;
		}
	}
	for (size_t i = 0; i < NFNS; i++)
		ck_assert_msg(r->fn[i] != 0, "fixture did not print %s", fixture_fns[i]);
	const struct maps_entry *e = maps_find(&r->m, r->fn[0]);
	ck_assert(e != NULL && e->path != NULL);
	ck_assert_int_eq(maps_module_base(&r->m, e, &r->base), 0);
	r->exe = e->path;
}

static void fix_done(struct fix_run *r)
{
	maps_fin(&r->m);
	free(r->text);
}

/* A defined symbol's value and size as nm prints them (dynamic: from .dynsym). */
static int nm_symbol(const char *path, const char *name, int dynamic, uint64_t *value, uint64_t *size)
{
	char *cmd, *out, *line, *save = NULL;
	int found = 0;

	ck_assert(asprintf(&cmd, "nm -S --defined-only %s '%s'", dynamic ? "-D" : "", path) > 0);
	out = test_run_command(cmd);
	free(cmd);
	for (line = strtok_r(out, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		unsigned long v, s;
		char type, sym[256];
		if (sscanf(line, "%lx %lx %c %255s", &v, &s, &type, sym) != 4)
			continue;
		char *at = strchr(sym, '@');
		if (at)
			*at = '\0';
		if (strcmp(sym, name) == 0 && strchr("TtWiI", type)) {
			*value = v;
			*size = s;
			found = 1;
		}
	}
	free(out);
	return found;
}

/* p_vaddr - p_offset of the lowest-offset PT_LOAD, read by readelf rather than libelf. */
static uint64_t readelf_bias(const char *path)
{
	char *cmd, *out, *line, *save = NULL;
	uint64_t best_off = UINT64_MAX, bias = 0;

	ck_assert(asprintf(&cmd, "readelf -lW '%s'", path) > 0);
	out = test_run_command(cmd);
	free(cmd);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long off, vaddr;
		if (sscanf(line, " LOAD %lx %lx", &off, &vaddr) == 2 && off < best_off) {
			best_off = off;
			bias = (vaddr & ~0xfffUL) - (off & ~0xfffUL);
		}
	}
	free(out);
	ck_assert(best_off != UINT64_MAX);
	return bias;
}

/* The build id readelf -n prints, or NULL; the caller frees it. */
static char *readelf_build_id(const char *path)
{
	char *cmd, *out, *id = NULL;

	ck_assert(asprintf(&cmd, "readelf -n '%s'", path) > 0);
	out = test_run_command(cmd);
	free(cmd);
	char *p = strstr(out, "Build ID: ");
	if (p) {
		p += strlen("Build ID: ");
		id = strndup(p, strspn(p, "0123456789abcdef"));
	}
	free(out);
	return id;
}

/* Offsets from the running program (address minus where the kernel mapped file offset 0). */
START_TEST(test_lookup_runtime)
{
	char *path = fixture_path(fixtures[_i]);
	struct fix_run r;
	uint64_t delta;

	fix_run(path, &r);
	struct sym_file *f = sym_open(r.exe);
	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < NFNS; i++) {
		uint64_t off = r.fn[i] - r.base;
		const char *name = sym_lookup(f, off, &delta);
		ck_assert_ptr_nonnull(name);
		ck_assert_str_eq(name, fixture_fns[i]);
		ck_assert_uint_eq(delta, 0);
		name = sym_lookup(f, off + 1, &delta);
		ck_assert_ptr_nonnull(name);
		ck_assert_str_eq(name, fixture_fns[i]);
		ck_assert_uint_eq(delta, 1);
	}
	/* Offset 0 is the ELF header: no function is there. */
	ck_assert_ptr_null(sym_lookup(f, 0, NULL));
	sym_close(f);
	fix_done(&r);
	free(path);
}
END_TEST

/* What binutils' addr2line (BFD's own DWARF reader, not libdw) says of vaddr in path: the line, or 0. */
static unsigned addr2line_line(const char *path, uint64_t vaddr)
{
	char *cmd, out[1024] = "";
	ck_assert(asprintf(&cmd, "addr2line -e '%s' 0x%llx", path, (unsigned long long)vaddr) > 0);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	if (!fgets(out, sizeof(out), p))
		out[0] = '\0';
	pclose(p);
	free(cmd);
	char *colon = strrchr(out, ':');
	ck_assert_msg(colon && strstr(out, "symfix.c"), "addr2line: %s", out);
	return (unsigned)strtoul(colon + 1, NULL, 10);
}

/* Each fixture function's entry, by its source line from DWARF (-g), against what binutils' addr2line reads there. */
START_TEST(test_source_lines)
{
	char *path = fixture_path(fixtures[_i]);
	struct fix_run r;

	fix_run(path, &r);
	struct sym_file *f = sym_open(r.exe);
	ck_assert_ptr_nonnull(f);
	ck_assert(sym_has_lines(f));
	for (size_t i = 0; i < NFNS; i++) {
		struct sym_srcframe v[SRCLINE_MAX];
		int n = sym_source(f, r.fn[i] - r.base, v);
		ck_assert_int_eq(n, 1);  /* -fno-inline: no inlined calls */
		ck_assert_str_eq(v[0].function, fixture_fns[i]);
		ck_assert_int_eq(v[0].inlined, 0);
		ck_assert_ptr_nonnull(v[0].file);
		ck_assert_msg(strlen(v[0].file) >= 8 && !strcmp(v[0].file + strlen(v[0].file) - 8, "symfix.c"),
			      "file %s", v[0].file);
		ck_assert_uint_eq(v[0].line, addr2line_line(r.exe, r.fn[i] - r.base + readelf_bias(r.exe)));
		srcline_free(v, (size_t)n);
	}
	/* The ELF header is no code: no source. */
	struct sym_srcframe v[SRCLINE_MAX];
	ck_assert_int_eq(sym_source(f, 0, v), 0);
	sym_close(f);
	fix_done(&r);
	free(path);
}
END_TEST

START_TEST(test_srcline_tidy)
{
	static const char *const cases[][2] = {
		{ "./malloc/./malloc.c", "malloc/malloc.c" },
		{ "/usr/include/c++/12/bits/./stl_vector.h", "/usr/include/c++/12/bits/stl_vector.h" },
		{ "../sysdeps/nptl/libc_start_call_main.h", "../sysdeps/nptl/libc_start_call_main.h" },
		{ "//a//b/", "/a/b" },
		{ "a.c", "a.c" },
		{ ".", "." },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = srcline_tidy(cases[i][0]);
		ck_assert_ptr_nonnull(t);
		ck_assert_str_eq(t, cases[i][1]);
		free(t);
	}
	ck_assert_ptr_null(srcline_tidy(NULL));
}
END_TEST

/* The same functions through nm and readelf: start, last byte, and the byte just past the end. */
START_TEST(test_lookup_nm)
{
	char *path = fixture_path(fixtures[_i]);
	uint64_t bias = readelf_bias(path), delta;
	struct sym_file *f = sym_open(path);

	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < NFNS; i++) {
		uint64_t value, size;
		ck_assert_msg(nm_symbol(path, fixture_fns[i], 0, &value, &size), "nm lacks %s", fixture_fns[i]);
		ck_assert_uint_gt(size, 1);
		uint64_t off = value - bias;
		const char *name = sym_lookup(f, off + size - 1, &delta);
		ck_assert_ptr_nonnull(name);
		ck_assert_str_eq(name, fixture_fns[i]);
		ck_assert_uint_eq(delta, size - 1);
		name = sym_lookup(f, off + size, NULL);
		ck_assert(name == NULL || strcmp(name, fixture_fns[i]) != 0);
	}
	sym_close(f);
	free(path);
}
END_TEST

/* sym_read must give what the process had in memory and what the file holds where the kernel mapped it. */
START_TEST(test_read_bytes)
{
	char *path = fixture_path(fixtures[_i]);
	struct fix_run r;
	unsigned char got[16], file[16];

	fix_run(path, &r);
	struct sym_file *f = sym_open(r.exe);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(sym_read(f, r.fn[0] - r.base, got, sizeof(got)), 0);
	ck_assert_mem_eq(got, r.code, sizeof(got));

	const struct maps_entry *e = maps_find(&r.m, r.fn[1]);
	ck_assert_ptr_nonnull(e);
	int fd = open(r.exe, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, file, sizeof(file), (off_t)(r.fn[1] - e->start + e->offset)), (int)sizeof(file));
	close(fd);
	ck_assert_int_eq(sym_read(f, r.fn[1] - r.base, got, sizeof(got)), 0);
	ck_assert_mem_eq(got, file, sizeof(file));
	/* Back from the file offset the mapping gives: the function's module offset. */
	uint64_t off = 0;
	ck_assert_int_eq(sym_file_offset_to_module(f, r.fn[1] - e->start + e->offset, &off), 0);
	ck_assert_uint_eq(off, r.fn[1] - r.base);
	ck_assert_int_eq(sym_file_offset_to_module(f, UINT64_MAX / 2, &off), -1);

	/* The start of the image is the ELF header, in every executable mapping layout. */
	ck_assert_int_eq(sym_read(f, 0, got, 4), 0);
	ck_assert_mem_eq(got, "\177ELF", 4);
	sym_close(f);
	fix_done(&r);
	free(path);
}
END_TEST

/* .bss and addresses outside the image are not file bytes. */
START_TEST(test_read_unbacked)
{
	char *path = fixture_path(fixtures[_i]);
	struct fix_run r;
	unsigned char buf[16];

	fix_run(path, &r);
	struct sym_file *f = sym_open(r.exe);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_gt(r.bss_size, 4096);
	ck_assert_int_eq(sym_read(f, r.bss - r.base + r.bss_size / 2, buf, 1), -1);
	ck_assert_int_eq(sym_read(f, (uint64_t)1 << 40, buf, 1), -1);
	ck_assert_int_eq(sym_read(f, UINT64_MAX - 4, buf, 8), -1);
	/* A read starting in code but far too long for any segment. */
	static unsigned char big[1 << 22];
	ck_assert_int_eq(sym_read(f, r.fn[0] - r.base, big, sizeof(big)), -1);
	sym_close(f);
	fix_done(&r);
	free(path);
}
END_TEST

/* PT_GNU_EH_FRAME as the dynamic loader reported it to the program, and a version 1 header there. */
START_TEST(test_eh_frame_hdr)
{
	char *path = fixture_path(fixtures[_i]);
	struct fix_run r;
	uint64_t off, size;
	unsigned char version;

	fix_run(path, &r);
	ck_assert_uint_ne(r.eh, 0);
	struct sym_file *f = sym_open(r.exe);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(sym_eh_frame_hdr(f, &off, &size), 0);
	ck_assert_uint_eq(off, r.eh - r.base);
	ck_assert_uint_eq(size, r.eh_size);
	ck_assert_int_eq(sym_read(f, off, &version, 1), 0);
	ck_assert_uint_eq(version, 1);
	sym_close(f);
	fix_done(&r);
	free(path);
}
END_TEST

START_TEST(test_build_id)
{
	const char *paths[3];
	char *fix[2];

	fix[0] = fixture_path(fixtures[0]);
	fix[1] = fixture_path(fixtures[1]);
	paths[0] = fix[0];
	paths[1] = fix[1];
	paths[2] = LIBC;
	for (size_t i = 0; i < 3; i++) {
		char *want = readelf_build_id(paths[i]);
		struct sym_file *f = sym_open(paths[i]);
		ck_assert_ptr_nonnull(f);
		if (want) {
			ck_assert_ptr_nonnull(sym_build_id(f));
			ck_assert_str_eq(sym_build_id(f), want);
		} else {
			ck_assert_ptr_null(sym_build_id(f));
		}
		free(want);
		sym_close(f);
	}
	free(fix[0]);
	free(fix[1]);
}
END_TEST

/* libc is stripped: names come from .dynsym (and from its debug file when one is installed). */
START_TEST(test_libc_malloc)
{
	uint64_t value, size, delta;
	uint64_t bias = readelf_bias(LIBC);
	struct sym_file *f = sym_open(LIBC);

	ck_assert_ptr_nonnull(f);
	ck_assert_msg(nm_symbol(LIBC, "malloc", 1, &value, &size), "nm -D finds no malloc in " LIBC);
	const char *name = sym_lookup(f, value - bias, &delta);
	ck_assert_ptr_nonnull(name);
	ck_assert_str_eq(name, "malloc");
	ck_assert_uint_eq(delta, 0);
	name = sym_lookup(f, value - bias + size / 2, &delta);
	ck_assert_ptr_nonnull(name);
	ck_assert_str_eq(name, "malloc");
	ck_assert_uint_eq(delta, size / 2);
	/* glibc's libc is told apart from other objects (libm: glibc's too, but no malloc of its own). */
	ck_assert(sym_is_glibc(f));
	sym_close(f);
	struct sym_file *m = sym_open("/lib/x86_64-linux-gnu/libm.so.6");
	ck_assert_ptr_nonnull(m);
	ck_assert(!sym_is_glibc(m));
	ck_assert(!sym_is_glibc(NULL));
	sym_close(m);
}
END_TEST

/* libc's separate debug file (libc6-dbg), by its build id: malloc'd, or NULL when it is not installed. */
static char *libc_debug_file(void)
{
	char *id = readelf_build_id(LIBC), *dpath;
	ck_assert_ptr_nonnull(id);
	ck_assert(asprintf(&dpath, "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2) > 0);
	free(id);
	if (access(dpath, R_OK) == 0)
		return dpath;
	free(dpath);
	return NULL;
}

/* With libc's debug file installed, static functions such as _int_malloc get their names too. */
START_TEST(test_libc_debug_file)
{
	char *dpath = libc_debug_file();
	uint64_t value, size;

	if (dpath) {
		struct sym_file *f = sym_open(LIBC);
		ck_assert_ptr_nonnull(f);
		ck_assert(nm_symbol(dpath, "_int_malloc", 0, &value, &size));
		const char *name = sym_lookup(f, value - readelf_bias(LIBC) + 1, NULL);
		ck_assert_ptr_nonnull(name);
		ck_assert_str_eq(name, "_int_malloc");
		sym_close(f);
	}
	free(dpath);
}
END_TEST

/*
 * With libc's debug file installed: its source lines opened in the
 * background (sym_prepare_lines) are the very ones opened in place, for
 * _int_malloc's entry; and a file closed with its open queued or under way
 * is closed cleanly (the worker's copy freed: AddressSanitizer checks it).
 */
START_TEST(test_libc_lines_prepared)
{
	char *dpath = libc_debug_file();
	uint64_t value, size;

	if (dpath) {
		ck_assert(nm_symbol(dpath, "_int_malloc", 0, &value, &size));
		uint64_t off = value - readelf_bias(LIBC);
		struct sym_srcframe want[SRCLINE_MAX], got[SRCLINE_MAX];
		struct sym_file *a = sym_open(LIBC), *b = sym_open(LIBC);
		ck_assert_ptr_nonnull(a);
		ck_assert_ptr_nonnull(b);
		sym_prepare_lines(b);
		sym_prepare_lines(b); /* once per file */
		int n = sym_source(a, off, want);
		ck_assert_int_ge(n, 1);
		ck_assert_int_eq(sym_source(b, off, got), n);
		for (int i = 0; i < n; i++) {
			ck_assert_str_eq(got[i].function, want[i].function);
			ck_assert_str_eq(got[i].file, want[i].file);
			ck_assert_uint_eq(got[i].line, want[i].line);
			ck_assert_int_eq(got[i].inlined, want[i].inlined);
		}
		ck_assert_str_eq(got[n - 1].function, "_int_malloc");
		srcline_free(want, (size_t)n);
		srcline_free(got, (size_t)n);
		sym_close(a);
		sym_close(b);
		for (int k = 0; k < 3; k++) {
			struct sym_file *c = sym_open(LIBC), *d = sym_open(LIBC);
			sym_prepare_lines(c);
			sym_prepare_lines(d);
			if (k)
				usleep(20000 * (useconds_t)k);
			sym_close(d);
			sym_close(c);
		}
	}
	free(dpath);
}
END_TEST

/*
 * The Debian packages of several files from one reading of dpkg's lists: libc and zlib (ptfil links
 * both), under the names dpkg lists them by, a file of no package and a relative path (none).
 */
START_TEST(test_packages)
{
	if (access("/var/lib/dpkg/info/libc6:amd64.list", R_OK) || access("/var/lib/dpkg/info/zlib1g:amd64.list", R_OK))
		return; /* not Debian on x86-64 */
	const char *paths[] = { LIBC, "/nonexistent/libnothing.so", "/usr/lib/x86_64-linux-gnu/libz.so.1", "libc.so.6" };
	char *pkg[4];
	debugfile_packages(paths, 4, pkg);
	ck_assert_ptr_nonnull(pkg[0]);
	ck_assert_str_eq(pkg[0], "libc6");
	ck_assert_ptr_null(pkg[1]);
	/* Listed as /lib/...: found through the merged /usr's other name. */
	ck_assert_ptr_nonnull(pkg[2]);
	ck_assert_str_eq(pkg[2], "zlib1g");
	ck_assert_ptr_null(pkg[3]);
	char *one = debugfile_package(LIBC);
	ck_assert_ptr_nonnull(one);
	ck_assert_str_eq(one, "libc6");
	free(one);
	for (int i = 0; i < 4; i++)
		free(pkg[i]);
}
END_TEST

static void open_expect_null(void *arg)
{
	ck_assert_ptr_null(sym_open(arg));
}

/* Each bad input is refused with a message, never a crash. */
START_TEST(test_bad_files)
{
	char dir[] = "/tmp/check_sym.XXXXXX", *junk, *empty, *msg;
	FILE *fp;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert(asprintf(&junk, "%s/junk", dir) > 0);
	ck_assert(asprintf(&empty, "%s/empty", dir) > 0);
	fp = fopen(junk, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("\177ELF but not really an ELF file, only text that starts like one\n", fp);
	fclose(fp);
	fp = fopen(empty, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);

	const char *bad[] = { junk, empty, "/nonexistent/ptfil/libnothing.so", "/", "/dev/null" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg = test_capture_stderr(open_expect_null, (void *)bad[i]);
		ck_assert_msg(strstr(msg, bad[i]) != NULL, "no message naming %s: \"%s\"", bad[i], msg);
		free(msg);
	}
	unlink(junk);
	unlink(empty);
	rmdir(dir);
	free(junk);
	free(empty);
}
END_TEST

/* A copy of file src at dst (a new inode), optionally without its build id note (objcopy). */
static void copy_file(const char *src, const char *dst, int strip_id)
{
	char *cmd, *out;

	if (strip_id)
		ck_assert(asprintf(&cmd, "objcopy --remove-section .note.gnu.build-id '%s' '%s' && echo ok", src, dst) > 0);
	else
		ck_assert(asprintf(&cmd, "cp '%s' '%s' && echo ok", src, dst) > 0);
	out = test_run_command(cmd);
	free(out);
	free(cmd);
}

static struct sym_file *open_stat(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, st), 0);
	struct sym_file *f = sym_open_fd(fd, path);
	close(fd);
	ck_assert_ptr_nonnull(f);
	return f;
}

/* Files are cached by build id (or by the file itself when it has none), never by path. */
START_TEST(test_cache)
{
	struct sym_cache *c = sym_cache_new();
	char *pie = fixture_path(fixtures[0]), *nopie = fixture_path(fixtures[1]);
	char dir[] = "/tmp/check_sym.XXXXXX", *at, *copy, *noid, *noid2;
	struct stat st, st2;

	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert(asprintf(&at, "%s/lib.so", dir) > 0);
	ck_assert(asprintf(&copy, "%s/copy", dir) > 0);
	ck_assert(asprintf(&noid, "%s/noid", dir) > 0);
	ck_assert(asprintf(&noid2, "%s/noid2", dir) > 0);

	struct sym_file *a = sym_cache_add(c, sym_open(pie));
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(sym_build_id(a));
	ck_assert_ptr_eq(sym_cache_find(c, sym_build_id(a)), a);
	ck_assert_ptr_null(sym_cache_find(c, NULL));
	/* The same build opened again, or found at another path: one index. */
	ck_assert_ptr_eq(sym_cache_add(c, sym_open(pie)), a);
	copy_file(pie, copy, 0);
	ck_assert_ptr_eq(sym_cache_add(c, sym_open(copy)), a);

	/* Two different files at one path (a library replaced on disk): two indexes. */
	copy_file(pie, at, 0);
	struct sym_file *old = sym_cache_add(c, sym_open(at));
	copy_file(nopie, copy, 0);
	ck_assert_int_eq(rename(copy, at), 0);
	struct sym_file *b = sym_cache_add(c, sym_open(at));
	ck_assert_ptr_eq(old, a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(a, b);
	ck_assert_str_ne(sym_build_id(a), sym_build_id(b));
	ck_assert_ptr_eq(sym_cache_find(c, sym_build_id(b)), b);
	ck_assert_ptr_eq(sym_cache_find(c, sym_build_id(a)), a);

	/* Without a build id, a file is its inode and its contents' size and time, not its path. */
	copy_file(pie, noid, 1);
	struct sym_file *n1 = open_stat(noid, &st);
	ck_assert_ptr_null(sym_build_id(n1));
	ck_assert_ptr_null(sym_cache_find_file(c, &st));
	ck_assert_ptr_eq(sym_cache_add(c, n1), n1);
	ck_assert_ptr_eq(sym_cache_find_file(c, &st), n1);
	copy_file(pie, noid2, 1);
	ck_assert_int_eq(rename(noid2, noid), 0);
	struct sym_file *n2 = open_stat(noid, &st2);
	ck_assert_ptr_null(sym_cache_find_file(c, &st2));
	ck_assert_ptr_eq(sym_cache_add(c, n2), n2);
	ck_assert_ptr_ne(n1, n2);

	/* Enough distinct files to make the table grow; earlier entries must survive it. */
	for (int i = 0; i < 40; i++) {
		copy_file(noid, noid2, 0);
		ck_assert_int_eq(rename(noid2, noid), 0);
		struct sym_file *f = open_stat(noid, &st2);
		ck_assert_ptr_eq(sym_cache_add(c, f), f);
	}
	ck_assert_ptr_eq(sym_cache_find(c, sym_build_id(a)), a);
	ck_assert_ptr_eq(sym_cache_find(c, sym_build_id(b)), b);
	ck_assert_ptr_eq(sym_cache_find_file(c, &st), n1);
	sym_cache_free(c);
	unlink(at);
	unlink(noid);
	rmdir(dir);
	free(at);
	free(copy);
	free(noid);
	free(noid2);
	free(pie);
	free(nopie);
}
END_TEST

/* A loaded image as sym_read sees the file's segments: what the kernel maps. */
static int read_file_image(void *ctx, uint64_t off, void *buf, size_t len)
{
	return sym_read(ctx, off, buf, len);
}

/* An image in this process's own memory, from module offset 0 at base. */
static int read_own_memory(void *ctx, uint64_t off, void *buf, size_t len)
{
	memcpy(buf, (const char *)ctx + off, len);
	return 0;
}

static int read_nothing(void *ctx, uint64_t off, void *buf, size_t len)
{
	(void)ctx; (void)off; (void)len;
	memset(buf, 0, len);
	return 0;
}

static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_offset == 0) {
			*(uintptr_t *)data = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
			return 1;
		}
	}
	return 1;
}

/* The build id read from a loaded image (as the tracer reads it from a target's memory) is the file's. */
START_TEST(test_image_build_id)
{
	char *pie = fixture_path(fixtures[0]), *nopie = fixture_path(fixtures[1]);
	char dir[] = "/tmp/check_sym.XXXXXX", *noid, *id;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert(asprintf(&noid, "%s/noid", dir) > 0);
	copy_file(pie, noid, 1);
	const char *paths[] = { pie, nopie, LIBC, noid };
	for (size_t i = 0; i < 4; i++) {
		char *want = readelf_build_id(paths[i]);
		struct sym_file *f = sym_open(paths[i]);
		ck_assert_ptr_nonnull(f);
		struct sym_image im = { read_file_image, f };
		ck_assert_int_eq(sym_image_build_id(&im, &id), 0);
		if (want) {
			ck_assert_ptr_nonnull(id);
			ck_assert_str_eq(id, want);
		} else {
			ck_assert_ptr_null(id);
		}
		ck_assert_int_eq(sym_image_same_headers(f, &im), 1);
		free(id);
		free(want);
		sym_close(f);
	}
	/* Another build's headers are not these. */
	struct sym_file *p = sym_open(pie), *q = sym_open(nopie), *r = sym_open(noid);
	struct sym_image qi = { read_file_image, q }, ri = { read_file_image, r };
	ck_assert_int_eq(sym_image_same_headers(p, &qi), 0);
	/* A build id note taken out changes the program headers too. */
	ck_assert_int_eq(sym_image_same_headers(p, &ri), 0);
	sym_close(p);
	sym_close(q);
	sym_close(r);

	/* This very process, in memory. */
	uintptr_t base = 0;
	dl_iterate_phdr(first_object, &base);
	ck_assert_uint_ne(base, 0);
	struct sym_image self = { read_own_memory, (void *)base };
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ck_assert_int_gt(len, 0);
	exe[len] = '\0';
	char *want = readelf_build_id(exe); /* by name: in readelf's shell, /proc/self is readelf */
	ck_assert_int_eq(sym_image_build_id(&self, &id), 0);
	ck_assert_ptr_nonnull(want);
	ck_assert_ptr_nonnull(id);
	ck_assert_str_eq(id, want);
	free(id);
	free(want);

	/* Not an ELF image at all. */
	struct sym_image none = { read_nothing, NULL };
	ck_assert_int_eq(sym_image_build_id(&none, &id), -1);
	ck_assert_ptr_null(id);
	unlink(noid);
	rmdir(dir);
	free(noid);
	free(pie);
	free(nopie);
}
END_TEST

/* Built from .eh_frame, the table is the one the linker wrote into .eh_frame_hdr. */
START_TEST(test_eh_frame_table)
{
	const char *paths[] = { NULL, NULL, LIBC };
	char *fix[2] = { fixture_path(fixtures[0]), fixture_path(fixtures[1]) };
	paths[0] = fix[0];
	paths[1] = fix[1];
	for (size_t i = 0; i < 3; i++) {
		struct sym_file *f = sym_open(paths[i]);
		uint64_t off, size;
		uint8_t h[4];
		uint32_t count;
		struct sym_fde *t;
		size_t n;
		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(sym_eh_frame_hdr(f, &off, &size), 0);
		ck_assert_int_eq(sym_read(f, off, h, 4), 0);
		ck_assert_uint_eq(h[1], 0x1b); /* eh_frame_ptr: pc-relative sdata4, as every linker writes */
		ck_assert_uint_eq(h[3], 0x3b); /* the table: data-relative sdata4 */
		ck_assert_int_eq(sym_read(f, off + 8, &count, 4), 0);
		ck_assert_int_eq(sym_eh_frame_table(f, &t, &n), 0);
		ck_assert_uint_eq(n, count);
		for (size_t k = 0; k < n; k++) {
			int32_t row[2];
			ck_assert_int_eq(sym_read(f, off + 12 + 8 * k, row, sizeof(row)), 0);
			ck_assert_int_eq((int64_t)off + row[0], t[k].pc);
			ck_assert_int_eq((int64_t)off + row[1], t[k].fde);
		}
		free(t);
		sym_close(f);
	}
	free(fix[0]);
	free(fix[1]);
}
END_TEST

/* C++ names are shown demangled; C names and what is not a valid mangling stay as they are. */
START_TEST(test_demangle)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "_Znwm", "operator new(unsigned long)" },
		{ "_ZdlPvm", "operator delete(void*, unsigned long)" },
		{ "_ZNSt6vectorIiSaIiEE9push_backERKi",
		  "std::vector<int, std::allocator<int> >::push_back(int const&)" },
		{ "_ZL5fill2v.isra.0", "fill2() [clone .isra.0]" },
		{ "malloc", NULL },
		{ "_start", NULL },
		{ "_Z", NULL },
		{ "_Zbogus(", NULL },
		{ "", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = sym_demangle(cases[i].in);
		if (cases[i].out)
			ck_assert_msg(d && strcmp(d, cases[i].out) == 0, "%s -> %s", cases[i].in, d ? d : "(null)");
		else
			ck_assert_msg(d == NULL, "%s -> %s, not NULL", cases[i].in, d);
		free(d);
	}
	ck_assert_ptr_null(sym_demangle(NULL));
}
END_TEST

Suite *sym_suite(void)
{
	Suite *s = suite_create("sym");
	TCase *tc = tcase_create("fixtures");
	int nfix = (int)(sizeof(fixtures) / sizeof(fixtures[0]));

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_lookup_runtime, 0, nfix);
	tcase_add_loop_test(tc, test_lookup_nm, 0, nfix);
	tcase_add_loop_test(tc, test_read_bytes, 0, nfix);
	tcase_add_loop_test(tc, test_read_unbacked, 0, nfix);
	tcase_add_loop_test(tc, test_eh_frame_hdr, 0, nfix);
	tcase_add_loop_test(tc, test_source_lines, 0, nfix);
	tcase_add_test(tc, test_srcline_tidy);
	tcase_add_test(tc, test_build_id);
	tcase_add_test(tc, test_cache);
	tcase_add_test(tc, test_image_build_id);
	tcase_add_test(tc, test_eh_frame_table);
	tcase_add_test(tc, test_demangle);
	suite_add_tcase(s, tc);

	tc = tcase_create("system");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_libc_malloc);
	tcase_add_test(tc, test_libc_debug_file);
	tcase_add_test(tc, test_libc_lines_prepared);
	tcase_add_test(tc, test_bad_files);
	tcase_add_test(tc, test_packages);
	suite_add_tcase(s, tc);
	return s;
}
