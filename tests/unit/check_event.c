/* The stop classifier (tracer/core/event.c) over waitpid statuses: as the kernel encodes them, and recorded from a traced child. */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "tests/unit/suites.h"
#include "tracer/core/event.h"

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

/*
 * Statuses recorded from a real traced child, in the order it makes them:
 * a signal, a group-stop, a fork and its child's SIGCHLD, an exec,
 * its exit event and its end. Each must decode as the kernel meant it.
 */
static void child_script(void)
{
	raise(SIGUSR1);       /* ignored: a signal-delivery-stop all the same */
	raise(SIGSTOP);       /* a group-stop */
	pid_t c = fork();     /* PTRACE_EVENT_FORK */
	if (c == 0)
		_exit(0);
	waitpid(c, NULL, 0);
	execl("/bin/true", "true", (char *)NULL); /* PTRACE_EVENT_EXEC, then exit 0: EXIT, GONE */
	_exit(9);
}

/* The next status of pid (not of its own child, which ptfil's options also trace). */
static int next_status(pid_t pid)
{
	int status;
	pid_t got;
	while ((got = waitpid(-1, &status, __WALL)) > 0 && got != pid) {
		/* the forked grandchild: let it run to its end */
		if (WIFSTOPPED(status))
			ptrace(PTRACE_CONT, got, 0, 0);
	}
	ck_assert_int_eq(got, pid);
	return status;
}

START_TEST(test_recorded_from_a_traced_child)
{
	alarm(20); /* never hang the suite */
	signal(SIGUSR1, SIG_IGN);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		raise(SIGSTOP); /* wait to be seized */
		child_script();
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
	long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC |
		    PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL;
	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)opts)) {
		kill(pid, SIGKILL);
		return; /* ptrace refused here: nothing to record (the e2e tests say so honestly) */
	}
	kill(pid, SIGCONT);
	enum event want[] = { EVENT_SIGNAL /* SIGUSR1 */, EVENT_SIGNAL /* SIGSTOP */, EVENT_GROUP_STOP,
			      EVENT_FORK, EVENT_SIGNAL /* SIGCHLD of the forked child */, EVENT_EXEC, EVENT_EXIT,
			      EVENT_GONE };
	size_t k = 0;
	int started = 0;
	for (;;) {
		status = next_status(pid);
		enum event e = event_decode(status);
		int sig = event_pending_signal(e, status);
		if (!started) {
			/* Waking up from the stop it was seized in: that group-stop, the SIGCONT, an interrupt. */
			started = e == EVENT_SIGNAL && sig == SIGUSR1;
			if (!started) {
				ck_assert_msg(e == EVENT_GROUP_STOP || e == EVENT_INTERRUPT || (e == EVENT_SIGNAL && sig == SIGCONT),
					      "before the script: %s (status %#x)", event_name(e), status);
				ck_assert_int_eq(ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig), 0);
				continue;
			}
		}
		ck_assert_msg(k < sizeof(want) / sizeof(want[0]), "more stops than expected: %s", event_name(e));
		ck_assert_msg(e == want[k], "stop %zu: %s (status %#x), expected %s", k, event_name(e), status,
			      event_name(want[k]));
		if (e == EVENT_GONE)
			break;
		if (e == EVENT_SIGNAL)
			ck_assert_int_eq(sig, k == 0 ? SIGUSR1 : k == 1 ? SIGSTOP : SIGCHLD);
		k++;
		/* A group-stop is let go here (PTRACE_LISTEN would keep it stopped until SIGCONT, as untraced). */
		ck_assert_int_eq(ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig), 0);
	}
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	alarm(0);
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
	tcase_add_test(tc, test_recorded_from_a_traced_child);
	suite_add_tcase(s, tc);
	return s;
}
