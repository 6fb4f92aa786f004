/* The stop classifier (tracer/event.c) over waitpid statuses as the kernel encodes them. */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "tests/unit/suites.h"
#include "tracer/event.h"

/* A stop status: signal sig, ptrace event ev (0 for none), as waitpid reports it. */
static int stopped(int sig, int ev)
{
	return (ev << 16) | (sig << 8) | 0x7f;
}

START_TEST(test_gone)
{
	ck_assert_int_eq(event_decode(0), EVENT_GONE);            /* exit(0) */
	ck_assert_int_eq(event_decode(3 << 8), EVENT_GONE);       /* exit(3) */
	ck_assert_int_eq(event_decode(SIGKILL), EVENT_GONE);      /* killed */
	ck_assert_int_eq(event_decode(SIGSEGV | 0x80), EVENT_GONE); /* killed, core dumped */
	ck_assert(WIFEXITED(3 << 8) && WIFSIGNALED(SIGKILL));
}
END_TEST

START_TEST(test_ptrace_events)
{
	ck_assert_int_eq(event_decode(stopped(SIGTRAP | 0x80, 0)), EVENT_SYSCALL_EXIT);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_SECCOMP)), EVENT_SECCOMP);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_CLONE)), EVENT_CLONE);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_FORK)), EVENT_FORK);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_VFORK)), EVENT_VFORK);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_VFORK_DONE)), EVENT_VFORK_DONE);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_EXEC)), EVENT_EXEC);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_EXIT)), EVENT_EXIT);
}
END_TEST

START_TEST(test_event_stop)
{
	/* PTRACE_EVENT_STOP carries the stop signal for a group-stop, SIGTRAP for an interrupt or a new task. */
	ck_assert_int_eq(event_decode(stopped(SIGSTOP, PTRACE_EVENT_STOP)), EVENT_GROUP_STOP);
	ck_assert_int_eq(event_decode(stopped(SIGTSTP, PTRACE_EVENT_STOP)), EVENT_GROUP_STOP);
	ck_assert_int_eq(event_decode(stopped(SIGTTIN, PTRACE_EVENT_STOP)), EVENT_GROUP_STOP);
	ck_assert_int_eq(event_decode(stopped(SIGTTOU, PTRACE_EVENT_STOP)), EVENT_GROUP_STOP);
	ck_assert_int_eq(event_decode(stopped(SIGTRAP, PTRACE_EVENT_STOP)), EVENT_INTERRUPT);
}
END_TEST

START_TEST(test_signals)
{
	/* Signal-delivery-stops: the program's signal, passed on when the thread is let go. */
	int sigs[] = { SIGSEGV, SIGINT, SIGUSR1, SIGALRM, SIGSTOP, SIGTRAP, SIGCHLD, SIGRTMIN + 2 };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		int st = stopped(sigs[i], 0);
		ck_assert_int_eq(event_decode(st), EVENT_SIGNAL);
		ck_assert_int_eq(event_pending_signal(EVENT_SIGNAL, st), sigs[i]);
	}
	/* Every other stop is ptrace's own: nothing to pass on, whatever signal number it carries. */
	ck_assert_int_eq(event_pending_signal(EVENT_GROUP_STOP, stopped(SIGSTOP, PTRACE_EVENT_STOP)), 0);
	ck_assert_int_eq(event_pending_signal(EVENT_SYSCALL_EXIT, stopped(SIGTRAP | 0x80, 0)), 0);
	ck_assert_int_eq(event_pending_signal(EVENT_EXEC, stopped(SIGTRAP, PTRACE_EVENT_EXEC)), 0);
	/* An int3 of ours (EVENT_TRAP) is never delivered; nor is a trap just past one. */
	ck_assert_int_eq(event_pending_signal(EVENT_TRAP, stopped(SIGTRAP, 0)), 0);
	ck_assert_int_eq(event_pending_signal(EVENT_PAST_TRAP, stopped(SIGTRAP, PTRACE_EVENT_STOP)), 0);
}
END_TEST

START_TEST(test_names)
{
	for (int i = 0; i < EVENT__COUNT; i++) {
		ck_assert_str_ne(event_name((enum event)i), "?");
		for (int j = 0; j < i; j++)
			ck_assert_str_ne(event_name((enum event)i), event_name((enum event)j));
	}
	ck_assert_str_eq(event_name(EVENT__COUNT), "?");
}
END_TEST

Suite *event_suite(void)
{
	Suite *s = suite_create("event");
	TCase *tc = tcase_create("decode");
	tcase_add_test(tc, test_gone);
	tcase_add_test(tc, test_ptrace_events);
	tcase_add_test(tc, test_event_stop);
	tcase_add_test(tc, test_signals);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);
	return s;
}
