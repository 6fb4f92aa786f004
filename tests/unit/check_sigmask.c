/*
 * stacks/sigmask.c: ptfil's sigprocmask does nothing while the calling
 * thread is in libunwind, for that thread alone; and the crash rescue still
 * dies of the signal that crashed it (so the system can dump core), even
 * when the crash came from inside libunwind.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/suites.h"
#include "tracer/core/rescue.h"
#include "tracer/stacks/sigmask.h"

static int blocked(int sig)
{
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	return sigismember(&cur, sig);
}

static sigset_t one(int sig)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, sig);
	return s;
}

START_TEST(test_unwinding_masks_nothing)
{
	sigset_t s = one(SIGUSR2), old;
	sigmask_unwinding(1);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &s, &old), 0);
	ck_assert(!sigismember(&old, SIGUSR2));
	ck_assert(!blocked(SIGUSR2));
	sigmask_unwinding(0);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &s, NULL), 0);
	ck_assert(blocked(SIGUSR2));
	ck_assert_int_eq(sigprocmask(SIG_UNBLOCK, &s, NULL), 0);
	ck_assert(!blocked(SIGUSR2));
}
END_TEST

static void *other_thread(void *arg)
{
	(void)arg;
	sigset_t s = one(SIGUSR2);
	/* The main thread is "in libunwind": this one's calls are real. */
	if (sigprocmask(SIG_BLOCK, &s, NULL) != 0)
		return (void *)1;
	return (void *)(long)(blocked(SIGUSR2) ? 0 : 2);
}

START_TEST(test_flag_is_per_thread)
{
	sigmask_unwinding(1);
	pthread_t th;
	void *rc = (void *)99;
	ck_assert_int_eq(pthread_create(&th, NULL, other_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(th, &rc), 0);
	sigmask_unwinding(0);
	ck_assert_ptr_eq(rc, NULL);
	ck_assert(!blocked(SIGUSR2));
}
END_TEST

START_TEST(test_crash_in_libunwind_dies_of_its_signal)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		alarm(10);
		/* No core file from the test itself; the status says whether one would be made. */
		signal(SIGSEGV, SIG_DFL);
		rescue_install();
		sigmask_unwinding(1);
		raise(SIGSEGV);
		_exit(3);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	/* Killed by SIGSEGV itself, not an exit status of 128 + 11. */
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status %#x", status);
}
END_TEST

Suite *sigmask_suite(void)
{
	Suite *s = suite_create("sigmask");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_unwinding_masks_nothing);
	tcase_add_test(tc, test_flag_is_per_thread);
	tcase_add_test(tc, test_crash_in_libunwind_dies_of_its_signal);
	suite_add_tcase(s, tc);
	return s;
}
