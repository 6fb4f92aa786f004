/* Decoding a waitpid status into the one enum of ptrace stops (tracer/core/event.h). */
#include "tracer/core/event.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

static int is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

enum event event_decode(int status)
{
	if (WIFEXITED(status) || WIFSIGNALED(status))
		return EVENT_GONE;
	if (!WIFSTOPPED(status))
		return EVENT_INTERRUPT; /* WIFCONTINUED is never asked for; treat as nothing happened */
	int sig = WSTOPSIG(status);
	if (sig == (SIGTRAP | 0x80))
		return EVENT_SYSCALL_EXIT;
	switch ((unsigned)status >> 16) {
	case 0:
		return EVENT_SIGNAL;
	case PTRACE_EVENT_SECCOMP:
		return EVENT_SECCOMP;
	case PTRACE_EVENT_CLONE:
		return EVENT_CLONE;
	case PTRACE_EVENT_FORK:
		return EVENT_FORK;
	case PTRACE_EVENT_VFORK:
		return EVENT_VFORK;
	case PTRACE_EVENT_VFORK_DONE:
		return EVENT_VFORK_DONE;
	case PTRACE_EVENT_EXEC:
		return EVENT_EXEC;
	case PTRACE_EVENT_EXIT:
		return EVENT_EXIT;
	case PTRACE_EVENT_STOP:
		return is_stop_signal(sig) ? EVENT_GROUP_STOP : EVENT_INTERRUPT;
	default:
		return EVENT_INTERRUPT;
	}
}

int event_pending_signal(enum event e, int status)
{
	/* Only a signal-delivery-stop holds a signal; every other stop is ptrace's own. */
	return e == EVENT_SIGNAL ? WSTOPSIG(status) : 0;
}

const char *event_name(enum event e)
{
	static const char *const names[EVENT__COUNT] = {
		[EVENT_GONE] = "gone", [EVENT_SYSCALL_EXIT] = "syscall-exit", [EVENT_SECCOMP] = "seccomp",
		[EVENT_CLONE] = "clone", [EVENT_FORK] = "fork", [EVENT_VFORK] = "vfork",
		[EVENT_VFORK_DONE] = "vfork-done", [EVENT_EXEC] = "exec", [EVENT_EXIT] = "exit",
		[EVENT_GROUP_STOP] = "group-stop", [EVENT_INTERRUPT] = "interrupt", [EVENT_PAST_TRAP] = "past-trap",
		[EVENT_TRAP] = "trap", [EVENT_SIGNAL] = "signal", [EVENT_BACKPRESSURE] = "backpressure",
	};
	return (unsigned)e < EVENT__COUNT ? names[e] : "?";
}
