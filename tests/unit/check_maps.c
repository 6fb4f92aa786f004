/* Unit tests for symbols/maps: the maps text a kernel prints, including its odd corners, and what is refused. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/suites.h"
#include "tests/unit/testutil.h"
#include "common/error.h"
#include "symbols/maps.h"
#include "tracer/stacks/modules.h"

/* Shaped like a real process: padded path column, a library in five mappings plus its bss, a gap, pseudo paths. */
static const char sample[] =
	"55d0c1a00000-55d0c1a02000 r--p 00000000 08:01 1048602                    /usr/bin/my prog\n"
	"55d0c1a02000-55d0c1a07000 r-xp 00002000 08:01 1048602                    /usr/bin/my prog\n"
	"55d0c1a07000-55d0c1a09000 r--p 00007000 08:01 1048602                    /usr/bin/my prog\n"
	"55d0c1a0a000-55d0c1a0b000 rw-p 00009000 08:01 1048602                    /usr/bin/my prog\n"
	"55d0c2b6e000-55d0c2b8f000 rw-p 00000000 00:00 0                          [heap]\n"
	"7f3a40000000-7f3a40021000 rw-p 00000000 00:00 0 \n"
	"7f3a40021000-7f3a44000000 ---p 00000000 00:00 0 \n"
	"7f3a45e00000-7f3a45e10000 rw-s 00000000 00:01 4242                       /dev/zero (deleted)\n"
	"7f3a45e10000-7f3a45e20000 rw-p 00000000 00:00 0                          [anon:glibc malloc]\n"
	"7f3a45e20000-7f3a45e21000 rw-s 00000000 00:05 77                         /memfd:ring buffer (deleted)\n"
	"7f3a46000000-7f3a46026000 r--p 00000000 08:01 2621553                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f3a46026000-7f3a4617c000 r-xp 00026000 08:01 2621553                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f3a4617c000-7f3a461cf000 r--p 0017c000 08:01 2621553                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f3a461cf000-7f3a461d3000 r--p 001cf000 08:01 2621553                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f3a461d3000-7f3a461d5000 rw-p 001d3000 08:01 2621553                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
	"7f3a461d5000-7f3a461e2000 rw-p 00000000 00:00 0 \n"
	"7f3a461f0000-7f3a461f1000 r--p 00000000 08:01 3000001                    /opt/app/libold.so (deleted)\n"
	"7f3a461f1000-7f3a461f2000 r-xp 00001000 08:01 3000001                    /opt/app/libold.so (deleted)\n"
	"7f3a461f2000-7f3a461f3000 r-xp 00002000 08:01 3000099                    /opt/app/libpartial.so\n"
	"7ffc1e5d0000-7ffc1e5f1000 rw-p 00000000 00:00 0                          [stack]\n"
	"7ffc1e5f1000-7ffc1e5f2000 rw-p 00000000 00:00 0                          [stack:4243]\n"
	"7ffc1e5fa000-7ffc1e5fe000 r--p 00000000 00:00 0                          [vvar]\n"
	"7ffc1e5fe000-7ffc1e600000 r-xp 00000000 00:00 0                          [vdso]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

enum { S_PROG0, S_PROG1, S_PROG2, S_PROG3, S_HEAP, S_ANON, S_GUARD, S_SHZERO, S_ANONNAME, S_MEMFD,
       S_LIBC0, S_LIBC1, S_LIBC2, S_LIBC3, S_LIBC4, S_LIBCBSS, S_OLD0, S_OLD1, S_PARTIAL,
       S_STACK, S_TSTACK, S_VVAR, S_VDSO, S_VSYSCALL, S_COUNT };

static void parse_sample(struct maps *m)
{
	ck_assert_int_eq(maps_parse(sample, sizeof(sample) - 1, m), 0);
	ck_assert_uint_eq(m->n, S_COUNT);
}

START_TEST(test_parse_fields)
{
	struct maps m;

	parse_sample(&m);
	const struct maps_entry *e = &m.v[S_LIBC1];
	ck_assert_uint_eq(e->start, 0x7f3a46026000);
	ck_assert_uint_eq(e->end, 0x7f3a4617c000);
	ck_assert_uint_eq(e->offset, 0x26000);
	ck_assert_uint_eq(e->perms, MAPS_R | MAPS_X);
	ck_assert_uint_eq(e->dev_major, 8);
	ck_assert_uint_eq(e->dev_minor, 1);
	ck_assert_uint_eq(e->inode, 2621553);
	ck_assert_str_eq(e->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	ck_assert_int_eq(e->deleted, 0);

	ck_assert_uint_eq(m.v[S_PROG3].perms, MAPS_R | MAPS_W);
	ck_assert_uint_eq(m.v[S_GUARD].perms, 0);
	ck_assert_uint_eq(m.v[S_SHZERO].perms, MAPS_R | MAPS_W | MAPS_SHARED);
	ck_assert_uint_eq(m.v[S_VSYSCALL].perms, MAPS_X);
	ck_assert_uint_eq(m.v[S_VSYSCALL].start, 0xffffffffff600000);
	ck_assert_uint_eq(m.v[S_VSYSCALL].end, 0xffffffffff601000);
	for (size_t i = 1; i < m.n; i++)
		ck_assert_uint_le(m.v[i - 1].end, m.v[i].start);
	maps_fin(&m);
	ck_assert_ptr_null(m.v);
	ck_assert_uint_eq(m.n, 0);
}
END_TEST

START_TEST(test_parse_paths)
{
	struct maps m;

	parse_sample(&m);
	/* Inner spaces belong to the path; the padding before it does not. */
	ck_assert_str_eq(m.v[S_PROG0].path, "/usr/bin/my prog");
	ck_assert_ptr_null(m.v[S_ANON].path);
	ck_assert_ptr_null(m.v[S_GUARD].path);
	ck_assert_str_eq(m.v[S_HEAP].path, "[heap]");
	ck_assert_str_eq(m.v[S_STACK].path, "[stack]");
	ck_assert_str_eq(m.v[S_TSTACK].path, "[stack:4243]");
	ck_assert_str_eq(m.v[S_VVAR].path, "[vvar]");
	ck_assert_str_eq(m.v[S_VDSO].path, "[vdso]");
	ck_assert_str_eq(m.v[S_VSYSCALL].path, "[vsyscall]");
	ck_assert_str_eq(m.v[S_ANONNAME].path, "[anon:glibc malloc]");
	ck_assert_str_eq(m.v[S_OLD0].path, "/opt/app/libold.so");
	ck_assert_int_eq(m.v[S_OLD0].deleted, 1);
	ck_assert_str_eq(m.v[S_MEMFD].path, "/memfd:ring buffer");
	ck_assert_int_eq(m.v[S_MEMFD].deleted, 1);
	ck_assert_str_eq(m.v[S_SHZERO].path, "/dev/zero");
	ck_assert_int_eq(m.v[S_SHZERO].deleted, 1);
	ck_assert_int_eq(m.v[S_LIBC0].deleted, 0);
	ck_assert_int_eq(m.v[S_HEAP].deleted, 0);
	maps_fin(&m);
}
END_TEST

START_TEST(test_parse_short_forms)
{
	/* No padding, no trailing newline, no space after an anonymous inode, and bytes past len that must be ignored. */
	static const char text[] =
		"1000-2000 r-xp 00000000 fd:00 12 /a b\n"
		"3000-4000 rw-p 00000000 00:00 0\n"
		"5000-6000 r--p 00000000 103:02 7 /c (deleted)"
		"GARBAGE that is not part of the text";
	struct maps m;

	ck_assert_int_eq(maps_parse(text, strlen(text) - strlen("GARBAGE that is not part of the text"), &m), 0);
	ck_assert_uint_eq(m.n, 3);
	ck_assert_str_eq(m.v[0].path, "/a b");
	ck_assert_ptr_null(m.v[1].path);
	ck_assert_str_eq(m.v[2].path, "/c");
	ck_assert_int_eq(m.v[2].deleted, 1);
	ck_assert_uint_eq(m.v[2].dev_major, 0x103);
	ck_assert_uint_eq(m.v[2].dev_minor, 2);
	maps_fin(&m);

	/* " (deleted)" alone is a (strange) path, not an empty deleted one. */
	static const char odd[] = "1000-2000 r--p 00000000 00:00 0     (deleted)\n";
	ck_assert_int_eq(maps_parse(odd, sizeof(odd) - 1, &m), 0);
	ck_assert_uint_eq(m.n, 1);
	ck_assert_str_eq(m.v[0].path, "(deleted)");
	ck_assert_int_eq(m.v[0].deleted, 0);
	maps_fin(&m);

	ck_assert_int_eq(maps_parse("", 0, &m), 0);
	ck_assert_uint_eq(m.n, 0);
	maps_fin(&m);
}
END_TEST

/* What maps_parse of one text says: its result and its message (the caller frees the message). */
struct parse_run { const char *text; struct maps *m; int rc; };

static void run_parse(void *arg)
{
	struct parse_run *r = arg;
	r->rc = maps_parse(r->text, strlen(r->text), r->m);
}

static char *parse_error(const char *text, struct maps *m, int *rc)
{
	struct parse_run r = { text, m, 0 };
	char *out = test_capture_stderr(run_parse, &r);
	*rc = r.rc;
	return out;
}

static const char *const bad_lines[] = {
	"hello world",
	"",
	"1000 2000 r-xp 00000000 08:01 12 /x",
	"1000-2000 rwzp 00000000 08:01 12 /x",
	"1000-2000 r-x 00000000 08:01 12 /x",
	"1000-2000 r-xq 00000000 08:01 12 /x",
	"2000-1000 r-xp 00000000 08:01 12 /x",
	"1000-1000 r-xp 00000000 08:01 12 /x",
	"1000-2000 r-xp 0000zz00 08:01 12 /x",
	"1000-2000 r-xp 00000000 0801 12 /x",
	"1000-2000 r-xp 00000000 08:01",
	"1000-2000 r-xp 00000000 08:01 12x /x",
	"1000-2000 r-xp 00000000 08:01 99999999999999999999999 /x",
	"10000000000000000-10000000000001000 r-xp 00000000 08:01 12 /x",
	"g000-2000 r-xp 00000000 08:01 12 /x",
	/* Before the previous line's end: the text was not printed by the kernel in one piece. */
	"5000-9000 r-xp 00000000 08:01 12 /x",
};

/* Each bad line is put third, so the message must say line 3, and nothing is left in m. */
START_TEST(test_parse_malformed)
{
	char *text, *msg;
	struct maps m;
	int rc;

	ck_assert(asprintf(&text, "1000-2000 r--p 00000000 08:01 12 /x\n"
				  "7000-8000 r--p 00000000 08:01 12 /x\n"
				  "%s\n"
				  "a000-b000 r--p 00000000 08:01 12 /x\n", bad_lines[_i]) > 0);
	msg = parse_error(text, &m, &rc);
	ck_assert_msg(rc == -1, "accepted: \"%s\"", bad_lines[_i]);
	ck_assert_uint_eq(m.n, 0);
	ck_assert_ptr_null(m.v);
	ck_assert_msg(strstr(msg, "cannot parse maps line 3") != NULL, "message for \"%s\": %s", bad_lines[_i], msg);
	maps_fin(&m);
	free(msg);
	free(text);
}
END_TEST

START_TEST(test_parse_nul)
{
	static const char text[] = "1000-2000 r--p 00000000 08:01 12 /x\n2000-3000 r--p 00000000 08:01 12 /y\0z\n";
	struct maps m;

	error_set_quiet(1);
	ck_assert_int_eq(maps_parse(text, sizeof(text) - 1, &m), -1);
	error_set_quiet(0);
	ck_assert_uint_eq(m.n, 0);
	maps_fin(&m);
}
END_TEST

START_TEST(test_find)
{
	struct maps m;

	parse_sample(&m);
	/* Every entry by its first and last byte, and never by its end. */
	for (size_t i = 0; i < m.n; i++) {
		ck_assert_ptr_eq(maps_find(&m, m.v[i].start), &m.v[i]);
		ck_assert_ptr_eq(maps_find(&m, m.v[i].end - 1), &m.v[i]);
		const struct maps_entry *next = maps_find(&m, m.v[i].end);
		ck_assert(next == NULL || next == &m.v[i + 1]);
	}
	ck_assert_ptr_null(maps_find(&m, 0));
	ck_assert_ptr_null(maps_find(&m, m.v[0].start - 1));
	/* The hole between the program's read-only data and its data. */
	ck_assert_ptr_null(maps_find(&m, m.v[S_PROG2].end));
	ck_assert_ptr_null(maps_find(&m, m.v[S_PROG3].start - 1));
	ck_assert_ptr_eq(maps_find(&m, 0x7f3a46100000), &m.v[S_LIBC1]);
	ck_assert_ptr_eq(maps_find(&m, UINT64_MAX - 1), NULL);
	ck_assert_ptr_eq(maps_find(&m, 0xffffffffff600fff), &m.v[S_VSYSCALL]);
	maps_fin(&m);

	struct maps empty = { 0 };
	ck_assert_ptr_null(maps_find(&empty, 0x1000));
}
END_TEST

START_TEST(test_module_base)
{
	struct maps m;
	uint64_t base;

	parse_sample(&m);
	for (int i = S_LIBC0; i <= S_LIBC4; i++) {
		base = 0;
		ck_assert_int_eq(maps_module_base(&m, &m.v[i], &base), 0);
		ck_assert_uint_eq(base, m.v[S_LIBC0].start);
	}
	/* The program's data comes after a hole, and is still the program. */
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_PROG3], &base), 0);
	ck_assert_uint_eq(base, m.v[S_PROG0].start);
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_OLD1], &base), 0);
	ck_assert_uint_eq(base, m.v[S_OLD0].start);
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_VDSO], &base), 0);
	ck_assert_uint_eq(base, m.v[S_VDSO].start);

	/* Anonymous memory, and a file whose offset 0 is not mapped, have no base. */
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_LIBCBSS], &base), -1);
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_ANON], &base), -1);
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_HEAP], &base), -1);
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_STACK], &base), -1);
	ck_assert_int_eq(maps_module_base(&m, &m.v[S_PARTIAL], &base), -1);
	maps_fin(&m);
}
END_TEST

/*
 * Part of a program mapped a second time apart from it, after another
 * library (V8 maps node's builtins so): no base of its own, and never the
 * program's, whose offset-0 mapping lies further down past another file.
 */
START_TEST(test_module_base_copy_apart)
{
	static const char text[] =
		"55d0c1a00000-55d0c1a02000 r--p 00000000 08:01 12 /usr/bin/node\n"
		"55d0c1a02000-55d0c1a07000 r-xp 00002000 08:01 12 /usr/bin/node\n"
		"55d0c1a07000-55d0c1a08000 rw-p 00000000 00:00 0\n"
		"7f3a46000000-7f3a46026000 r--p 00000000 08:01 13 /usr/lib/libc.so.6\n"
		"7f3a46026000-7f3a4617c000 r-xp 00026000 08:01 13 /usr/lib/libc.so.6\n"
		"7f3a47000000-7f3a47003000 r-xp 00003000 08:01 12 /usr/bin/node\n";
	struct maps m;
	uint64_t base = 0;
	ck_assert_int_eq(maps_parse(text, sizeof(text) - 1, &m), 0);
	ck_assert_int_eq(maps_module_base(&m, &m.v[1], &base), 0);
	ck_assert_uint_eq(base, m.v[0].start);
	ck_assert_int_eq(maps_module_base(&m, &m.v[4], &base), 0);
	ck_assert_uint_eq(base, m.v[3].start);
	ck_assert_int_eq(maps_module_base(&m, &m.v[5], &base), -1);
	maps_fin(&m);
}
END_TEST

/* Two copies of one library (dlmopen) and a replaced file under the same path. */
START_TEST(test_module_base_repeats)
{
	static const char text[] =
		"10000-11000 r--p 00000000 08:01 50 /lib/libz.so\n"
		"11000-12000 r-xp 00001000 08:01 50 /lib/libz.so\n"
		"20000-21000 r--p 00000000 08:01 50 /lib/libz.so\n"
		"21000-22000 r-xp 00001000 08:01 50 /lib/libz.so\n"
		"30000-31000 r--p 00000000 08:01 51 /lib/libz.so\n"
		"31000-32000 r-xp 00001000 08:01 50 /lib/libz.so\n";
	struct maps m;
	uint64_t base;

	ck_assert_int_eq(maps_parse(text, sizeof(text) - 1, &m), 0);
	ck_assert_int_eq(maps_module_base(&m, &m.v[1], &base), 0);
	ck_assert_uint_eq(base, 0x10000);
	ck_assert_int_eq(maps_module_base(&m, &m.v[3], &base), 0);
	ck_assert_uint_eq(base, 0x20000);
	/*
	 * The nearest offset-0 entry has another inode: it is another file, and
	 * the copy further down is a placement of its own. No base (modules.c
	 * takes such a mapping as a part of the object mapped apart).
	 */
	ck_assert_int_eq(maps_module_base(&m, &m.v[5], &base), -1);
	ck_assert_int_eq(maps_module_base(&m, &m.v[4], &base), 0);
	ck_assert_uint_eq(base, 0x30000);
	maps_fin(&m);
}
END_TEST

START_TEST(test_is_anon)
{
	struct maps m;

	parse_sample(&m);
	static const int anon[] = { S_HEAP, S_ANON, S_GUARD, S_SHZERO, S_ANONNAME, S_LIBCBSS, S_STACK, S_TSTACK };
	static const int file[] = { S_PROG0, S_MEMFD, S_LIBC0, S_LIBC4, S_OLD0, S_VVAR, S_VDSO, S_VSYSCALL };
	for (size_t i = 0; i < sizeof(anon) / sizeof(anon[0]); i++)
		ck_assert_msg(maps_entry_is_anon(&m.v[anon[i]]), "entry %d should be anonymous", anon[i]);
	for (size_t i = 0; i < sizeof(file) / sizeof(file[0]); i++)
		ck_assert_msg(!maps_entry_is_anon(&m.v[file[i]]), "entry %d should not be anonymous", file[i]);
	maps_fin(&m);
}
END_TEST

static void *wait_for_ever(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* The size of what /proc/PID/maps reads, or -1 when it cannot be opened. */
static long maps_bytes(pid_t pid)
{
	char path[64], buf[4096];
	long n = 0;
	size_t got;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
		n += (long)got;
	fclose(f);
	return n;
}

/*
 * A process whose main thread called pthread_exit while another thread runs:
 * its leader is a zombie whose /proc/PID/maps reads empty, and the maps are
 * read through the live thread instead.
 */
START_TEST(test_proc_maps_leader_exited)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, wait_for_ever, NULL))
			_exit(3);
		pthread_exit(NULL);
	}
	long bytes = -1;
	for (int i = 0; i < 2000 && bytes != 0; i++) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		bytes = maps_bytes(pid);
	}
	struct maps m;
	int rc = proc_maps_read(pid, &m);
	size_t n = m.n;
	int has_stack = 0;
	for (size_t i = 0; i < m.n; i++)
		has_stack |= m.v[i].path && strcmp(m.v[i].path, "[stack]") == 0;
	maps_fin(&m);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_msg(bytes == 0, "the exited leader's maps never read empty (%ld bytes)", bytes);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_gt(n, 5);
	ck_assert(has_stack);
}
END_TEST

Suite *maps_suite(void)
{
	Suite *s = suite_create("maps");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_parse_fields);
	tcase_add_test(tc, test_parse_paths);
	tcase_add_test(tc, test_parse_short_forms);
	tcase_add_loop_test(tc, test_parse_malformed, 0, (int)(sizeof(bad_lines) / sizeof(bad_lines[0])));
	tcase_add_test(tc, test_parse_nul);
	suite_add_tcase(s, tc);

	tc = tcase_create("lookup");
	tcase_add_test(tc, test_find);
	tcase_add_test(tc, test_module_base);
	tcase_add_test(tc, test_module_base_copy_apart);
	tcase_add_test(tc, test_module_base_repeats);
	tcase_add_test(tc, test_is_anon);
	suite_add_tcase(s, tc);

	tc = tcase_create("proc");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_proc_maps_leader_exited);
	suite_add_tcase(s, tc);
	return s;
}
