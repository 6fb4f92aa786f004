/* Unit tests for tracer/refuse: every refusal decided on made-up facts, and facts gathered from /proc about ourselves, a missing pid and a zombie. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "tests/unit/suites.h"
#include "tracer/refuse.h"

#define ALL_CAPS 0x000001ffffffffffULL
#define CAP_SYS_PTRACE_MASK (1ULL << 19)

/* A user's process that nothing stands in the way of: sleep 4242, traced by no one, ptfil run by the same user. */
static struct refuse_facts plain(void)
{
	struct refuse_facts f;
	memset(&f, 0, sizeof(f));
	f.pid = 4242;
	f.exists = 1;
	f.state = 'S';
	strcpy(f.comm, "sleep");
	f.uid[0] = f.uid[1] = f.uid[2] = 1000;
	f.cap_prm = 0;
	f.tracer = 0;
	f.descendant = 0;
	f.self = 100;
	f.parent = 99;
	f.self_uid = 1000;
	f.self_cap_prm = f.self_cap_eff = 0;
	f.yama = -1;
	return f;
}

/* Checks a decision: its status, a message of one line, and every word given (NULL-terminated) in it. */
static void expect_(int line, int got, int want, const char *msg, ...)
{
	ck_assert_msg(got == want, "line %d: status %d, expected %d (%s)", line, got, want, msg);
	if (!want)
		return;
	ck_assert_msg(msg[0] && !strchr(msg, '\n'), "line %d: not one line: '%s'", line, msg);
	va_list ap;
	va_start(ap, msg);
	for (const char *w; (w = va_arg(ap, const char *));)
		ck_assert_msg(strstr(msg, w), "line %d: '%s' not in '%s'", line, w, msg);
	va_end(ap);
}
#define expect(...) expect_(__LINE__, __VA_ARGS__, (const char *)NULL)

static char msg[512];

static int before(const struct refuse_facts *f)
{
	msg[0] = 0;
	return refuse_before(f, msg, sizeof(msg));
}

static int after(const struct refuse_facts *f, int err)
{
	msg[0] = 0;
	return refuse_after(f, err, msg, sizeof(msg));
}

START_TEST(test_nothing_in_the_way)
{
	struct refuse_facts f = plain();
	expect(before(&f), 0, msg);
	/* A stopped process can be attached to: the attach code deals with it. */
	f.state = 'T';
	expect(before(&f), 0, msg);
	/* Yama 1 and 2 have exceptions (PR_SET_PTRACER) only the kernel knows: never refused before. */
	for (int scope = 0; scope <= 2; scope++) {
		f.yama = scope;
		expect(before(&f), 0, msg);
	}
	/* Another user's process, with CAP_SYS_PTRACE. */
	f = plain();
	f.uid[0] = f.uid[1] = f.uid[2] = 0;
	f.self_cap_eff = f.self_cap_prm = CAP_SYS_PTRACE_MASK;
	expect(before(&f), 0, msg);
}
END_TEST

START_TEST(test_gone)
{
	struct refuse_facts f = plain();
	f.exists = 0;
	f.comm[0] = 0;
	expect(before(&f), REFUSE_GONE, msg, "no process 4242", "ps");
	expect(after(&f, ESRCH), REFUSE_GONE, msg, "no process 4242");
	/* Exited between the check and the seize. */
	f = plain();
	expect(after(&f, ESRCH), REFUSE_GONE, msg, "4242", "exited");
}
END_TEST

START_TEST(test_zombie)
{
	struct refuse_facts f = plain();
	f.state = 'Z';
	expect(before(&f), REFUSE_GONE, msg, "process 4242 (sleep)", "zombie", "reap", "nothing to profile");
	/* The kernel answers EPERM for a zombie. */
	expect(after(&f, EPERM), REFUSE_GONE, msg, "zombie");
	f.state = 'X';
	expect(before(&f), REFUSE_GONE, msg, "4242", "exited");
	/* The main thread called pthread_exit: a zombie leader, but the process runs on. */
	f = plain();
	f.state = 'Z';
	f.threads = 3;
	expect(before(&f), 0, msg);
	expect(after(&f, EPERM), REFUSE_DENIED, msg, "process 4242 (sleep)", "main thread has exited",
	       "ptfil launch");
}
END_TEST

START_TEST(test_self_and_parent)
{
	struct refuse_facts f = plain();
	f.pid = f.self;
	expect(before(&f), REFUSE_USAGE, msg, "100", "ptfil itself");
	f = plain();
	f.pid = f.parent;
	strcpy(f.comm, "bash");
	expect(before(&f), REFUSE_USAGE, msg, "process 99 (bash)", "parent", "ptfil launch");
	expect(after(&f, EPERM), REFUSE_USAGE, msg, "parent");
	f = plain();
	f.pid = 0;
	expect(before(&f), REFUSE_USAGE, msg, "0 is not a process id");
	f.pid = -5;
	expect(before(&f), REFUSE_USAGE, msg, "-5");
}
END_TEST

START_TEST(test_kernel_thread)
{
	struct refuse_facts f = plain();
	f.pid = 2;
	strcpy(f.comm, "kthreadd");
	f.kthread = 1;
	expect(before(&f), REFUSE_USAGE, msg, "process 2 (kthreadd)", "kernel thread");
}
END_TEST

START_TEST(test_already_traced)
{
	struct refuse_facts f = plain();
	f.tracer = 456;
	strcpy(f.tracer_comm, "gdb");
	expect(before(&f), REFUSE_BUSY, msg, "process 4242 (sleep)", "already traced by process 456 (gdb)",
	       "detach the debugger");
	/* Traced between the check and the seize: the kernel says EPERM. */
	expect(after(&f, EPERM), REFUSE_BUSY, msg, "456 (gdb)");
	/* The tracer exited while we looked. */
	f.tracer_comm[0] = 0;
	expect(before(&f), REFUSE_BUSY, msg, "by process 456;");
	/* Unknown (status unreadable) is not traced. */
	f = plain();
	f.tracer = -1;
	expect(before(&f), 0, msg);
}
END_TEST

START_TEST(test_other_user)
{
	struct refuse_facts f = plain();
	f.uid[0] = f.uid[1] = f.uid[2] = 0;
	strcpy(f.user, "root");
	expect(before(&f), REFUSE_DENIED, msg, "process 4242 (sleep) belongs to user root (uid 0)",
	       "run ptfil as that user or as root");
	expect(after(&f, EPERM), REFUSE_DENIED, msg, "user root (uid 0)");
	/* A set-uid program: only the effective and saved uids differ. */
	f = plain();
	f.uid[1] = f.uid[2] = 33;
	strcpy(f.user, "www-data");
	expect(before(&f), REFUSE_DENIED, msg, "user www-data (uid 33)");
	/* No name for the uid. */
	f.user[0] = 0;
	expect(before(&f), REFUSE_DENIED, msg, "belongs to uid 33;");
	/* Root without CAP_SYS_PTRACE (a container): running as that user is not the advice. */
	f = plain();
	f.self_uid = 0;
	f.self_cap_prm = f.self_cap_eff = ALL_CAPS & ~CAP_SYS_PTRACE_MASK;
	strcpy(f.user, "alice");
	expect(before(&f), REFUSE_DENIED, msg, "user alice (uid 1000)", "CAP_SYS_PTRACE", "--cap-add=SYS_PTRACE");
	ck_assert_msg(!strstr(msg, "as that user"), "%s", msg);
	/* Unknown uids decide nothing. */
	f = plain();
	f.uid[0] = f.uid[1] = f.uid[2] = REFUSE_NO_UID;
	expect(before(&f), 0, msg);
}
END_TEST

START_TEST(test_missing_cap)
{
	/* Root in a container without CAP_SYS_PTRACE, and a root target holding every capability. */
	struct refuse_facts f = plain();
	f.uid[0] = f.uid[1] = f.uid[2] = 0;
	f.self_uid = 0;
	f.cap_prm = ALL_CAPS;
	f.self_cap_prm = f.self_cap_eff = ALL_CAPS & ~CAP_SYS_PTRACE_MASK;
	expect(before(&f), 0, msg);
	expect(after(&f, EPERM), REFUSE_DENIED, msg, "process 4242 (sleep)", "lacks CAP_SYS_PTRACE",
	       "in a container, run it with --cap-add=SYS_PTRACE");
	/* A user's program with file capabilities, and ptfil run by that user. */
	f = plain();
	f.cap_prm = 1ULL << 10;
	expect(after(&f, EPERM), REFUSE_DENIED, msg, "CAP_SYS_PTRACE", "run ptfil as root");
}
END_TEST

START_TEST(test_other_eperm)
{
	/* Same user, no capabilities in the way: set-gid, non-dumpable or a security module. */
	struct refuse_facts f = plain();
	expect(after(&f, EPERM), REFUSE_DENIED, msg, "kernel refused", "process 4242 (sleep)", "set-uid",
	       "non-dumpable", "run ptfil as root");
	ck_assert_msg(!strstr(msg, "ptrace_scope"), "%s", msg);
	/* Root with every capability can only have met a security module. */
	f.self_uid = 0;
	f.self_cap_prm = f.self_cap_eff = ALL_CAPS;
	expect(after(&f, EPERM), REFUSE_DENIED, msg, "kernel refused", "dmesg");
}
END_TEST

START_TEST(test_other_errno)
{
	struct refuse_facts f = plain();
	expect(after(&f, EIO), REFUSE_DENIED, msg, "cannot attach to process 4242 (sleep)", strerror(EIO));
	expect(after(&f, ENOMEM), REFUSE_DENIED, msg, strerror(ENOMEM));
}
END_TEST

/* Yama after an EPERM, every scope with and without CAP_SYS_PTRACE, the target a descendant of ptfil or not. */
START_TEST(test_yama)
{
	for (int scope = -1; scope <= 3; scope++) {
		for (int cap = 0; cap <= 1; cap++) {
			for (int desc = -1; desc <= 1; desc++) {
				struct refuse_facts f = plain();
				f.yama = scope;
				f.descendant = desc;
				if (cap)
					f.self_cap_prm = f.self_cap_eff = ALL_CAPS;
				int rb = before(&f);
				if (scope == 3) {
					expect(rb, REFUSE_DENIED, msg, "4242", "ptrace_scope is 3", "reboot");
				} else {
					ck_assert_msg(rb == 0, "scope %d cap %d desc %d: %s", scope, cap, desc, msg);
				}
				int ra = after(&f, EPERM);
				if (scope == 3)
					expect(ra, REFUSE_DENIED, msg, "ptrace_scope is 3", "reboot");
				else if (scope == 2 && !cap)
					expect(ra, REFUSE_DENIED, msg, "process 4242 (sleep)", "ptrace_scope is 2",
					       "CAP_SYS_PTRACE", "run ptfil as root");
				else if (scope == 1 && !cap && desc != 1)
					expect(ra, REFUSE_DENIED, msg, "process 4242 (sleep)", "ptrace_scope is 1",
					       "descendants", "run ptfil as root", "sysctl kernel.yama.ptrace_scope=0",
					       "ptfil launch");
				else {
					/* Yama let it through: the EPERM came from elsewhere. */
					expect(ra, REFUSE_DENIED, msg, "kernel refused");
					ck_assert_msg(!strstr(msg, "ptrace_scope"), "scope %d cap %d desc %d: %s",
						      scope, cap, desc, msg);
				}
			}
		}
	}
	/* Scope 2 and root without the capability: the container advice. */
	struct refuse_facts f = plain();
	f.yama = 2;
	f.self_uid = 0;
	f.uid[0] = f.uid[1] = f.uid[2] = 0;
	expect(after(&f, EPERM), REFUSE_DENIED, msg, "ptrace_scope is 2", "--cap-add=SYS_PTRACE");
}
END_TEST

/* A pid that surely names no process: a child of ours, reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

START_TEST(test_gather_self_and_missing)
{
	struct refuse_facts f;
	refuse_gather(getpid(), &f);
	ck_assert_int_eq(f.self, getpid());
	ck_assert_int_eq(f.parent, getppid());
	ck_assert_int_eq(f.exists, 1);
	ck_assert_int_eq(f.state, 'R');
	ck_assert_int_eq(f.kthread, 0);
	char comm[16] = "";
	prctl(PR_GET_NAME, comm);
	ck_assert_str_eq(f.comm, comm);
	/* A debugger (CK_FORK=no under gdb) would be our tracer. */
	ck_assert_int_ge(f.tracer, 0);
	ck_assert_int_eq(f.uid[0], getuid());
	ck_assert_int_eq(f.uid[1], geteuid());
	ck_assert_int_eq(f.self_uid, getuid());
	ck_assert_int_eq(f.descendant, 0);
	ck_assert_int_eq(f.yama >= 0, access("/proc/sys/kernel/yama/ptrace_scope", F_OK) == 0);
	/* What we may do we hold: our permitted set is the target's. */
	ck_assert(f.cap_prm == f.self_cap_prm);
	expect(before(&f), REFUSE_USAGE, msg, "ptfil itself");

	pid_t gone = dead_pid();
	refuse_gather(gone, &f);
	ck_assert_int_eq(f.pid, gone);
	ck_assert_int_eq(f.exists, 0);
	ck_assert_int_eq(f.state, 0);
	ck_assert_str_eq(f.comm, "");
	ck_assert_int_eq(f.tracer, -1);
	ck_assert(f.uid[0] == REFUSE_NO_UID);
	expect(before(&f), REFUSE_GONE, msg, "no process");

	/* The convenience wrappers give the same statuses (their message goes to error(), kept quiet here). */
	error_set_quiet(1);
	ck_assert_int_eq(refuse_check(getpid()), REFUSE_USAGE);
	ck_assert_int_eq(refuse_check(gone), REFUSE_GONE);
	ck_assert_int_eq(refuse_explain(gone, ESRCH), REFUSE_GONE);
	error_set_quiet(0);
}
END_TEST

/* Waits (5 s at most) until /proc shows pid in state; returns the last state seen. */
static char wait_state(pid_t pid, char state)
{
	struct refuse_facts f;
	for (int i = 0; i < 5000; i++) {
		refuse_gather(pid, &f);
		if (f.state == state)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	return f.state;
}

START_TEST(test_gather_zombie)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	/* Not reaped yet: a zombie until waitpid. */
	ck_assert_int_eq(wait_state(pid, 'Z'), 'Z');
	struct refuse_facts f;
	refuse_gather(pid, &f);
	ck_assert_int_eq(f.exists, 1);
	ck_assert_int_eq(f.descendant, 1);
	char comm[16] = "";
	prctl(PR_GET_NAME, comm);
	expect(before(&f), REFUSE_GONE, msg, "zombie", comm);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	refuse_gather(pid, &f);
	ck_assert_int_eq(f.exists, 0);
}
END_TEST

START_TEST(test_gather_stopped_child)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		raise(SIGSTOP);
		_exit(0);
	}
	char st = wait_state(pid, 'T');
	struct refuse_facts f;
	refuse_gather(pid, &f);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(st, 'T');
	ck_assert_int_eq(f.descendant, 1);
	ck_assert_int_eq(f.tracer, 0);
	expect(before(&f), 0, msg);
}
END_TEST

Suite *refuse_suite(void)
{
	Suite *s = suite_create("refuse");
	TCase *tc = tcase_create("decide");
	tcase_add_test(tc, test_nothing_in_the_way);
	tcase_add_test(tc, test_gone);
	tcase_add_test(tc, test_zombie);
	tcase_add_test(tc, test_self_and_parent);
	tcase_add_test(tc, test_kernel_thread);
	tcase_add_test(tc, test_already_traced);
	tcase_add_test(tc, test_other_user);
	tcase_add_test(tc, test_missing_cap);
	tcase_add_test(tc, test_other_eperm);
	tcase_add_test(tc, test_other_errno);
	tcase_add_test(tc, test_yama);
	suite_add_tcase(s, tc);
	tc = tcase_create("gather");
	tcase_add_test(tc, test_gather_self_and_missing);
	tcase_add_test(tc, test_gather_zombie);
	tcase_add_test(tc, test_gather_stopped_child);
	suite_add_tcase(s, tc);
	return s;
}
