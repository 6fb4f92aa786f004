/*
 * sigprocmask for the whole binary (stacks/sigmask.h). libunwind's masks
 * guard against a signal handler unwinding its own thread, which ptfil never
 * does, so while a thread is in libunwind its calls do nothing. The flag is
 * the thread's own: the --live view's thread, or any other, keeps the C
 * library's behaviour even while the tracing thread unwinds. Every call from
 * outside libunwind goes to pthread_sigmask (the C library's own internal
 * calls never come here), and code that must not depend on this override
 * (the crash rescue, core/rescue.c) calls pthread_sigmask itself.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "tracer/stacks/sigmask.h"

static _Thread_local int unwinding;

void sigmask_unwinding(int on)
{
	unwinding = on;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	if (unwinding) {
		if (old)
			sigemptyset(old);
		return 0;
	}
	int rc = pthread_sigmask(how, set, old);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}
