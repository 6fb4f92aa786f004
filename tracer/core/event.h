/*
 * The one classifier of ptrace stops: every waitpid result becomes one value
 * of enum event, each written with the rule for restarting the thread. The
 * running loop and the leaving (parking) loop are two tables over it
 * (tracer/loop.c), so no stop is understood one way while tracing and another
 * while leaving.
 */
#ifndef PTFIL_EVENT_H
#define PTFIL_EVENT_H

#include <sys/types.h>

enum event {
	/* Exited or killed (WIFEXITED, WIFSIGNALED): forgotten, never waited for again. No restart. */
	EVENT_GONE,
	/* The exit of a mapping syscall ptfil asked to see (SIGTRAP|0x80): PTRACE_CONT. */
	EVENT_SYSCALL_EXIT,
	/* A mapping syscall's entry (seccomp filter): PTRACE_SYSCALL when its exit must be seen, else PTRACE_CONT. */
	EVENT_SECCOMP,
	/* The thread made a thread; the new one is traced already and reports its own first stop: PTRACE_CONT. */
	EVENT_CLONE,
	/* The thread forked (fork, or clone without CLONE_VM): PTRACE_CONT. */
	EVENT_FORK,
	/* The thread vforked: PTRACE_CONT. */
	EVENT_VFORK,
	/* A vfork child let its parent go (exec or exit): PTRACE_CONT. */
	EVENT_VFORK_DONE,
	/* A new image: the old one's breakpoints are gone with it; PTRACE_CONT. */
	EVENT_EXEC,
	/* The thread is exiting with its memory still mapped: PTRACE_CONT; it never stops again, only goes. */
	EVENT_EXIT,
	/* A group-stop (SIGSTOP, SIGTSTP...): PTRACE_LISTEN, so it stays stopped until SIGCONT as untraced. */
	EVENT_GROUP_STOP,
	/* PTRACE_EVENT_STOP that is no group-stop: a new thread's first stop, ptfil's PTRACE_INTERRUPT, the end of a listen: PTRACE_CONT. */
	EVENT_INTERRUPT,
	/*
	 * An interrupt or group stop taken just past one of ptfil's int3s, with
	 * the int3's SIGTRAP still queued: PTRACE_CONT with no signal; the SIGTRAP
	 * is reported next, as EVENT_TRAP. (Found by loop.c, not by event_decode.)
	 */
	EVENT_PAST_TRAP,
	/* Signal-delivery of a SIGTRAP that ptfil's int3 raised: handled by calls.c, which restarts it; never delivered. */
	EVENT_TRAP,
	/* Signal-delivery-stop of any other signal, the program's own: PTRACE_CONT with that signal. */
	EVENT_SIGNAL,
	/*
	 * Signal-delivery-stop of the signal a kernel-path probe sent because
	 * the ring passed its mark (tracer/kernel/kheap.h): PTRACE_CONT with no signal,
	 * once the ring is drained; never delivered. (Found by loop.c.)
	 */
	EVENT_BACKPRESSURE,
	EVENT__COUNT
};

/*
 * What the kernel says a waitpid status is, before ptfil looks at the thread
 * (a SIGTRAP signal-delivery decodes as EVENT_SIGNAL; loop.c asks calls.c
 * whether the int3 was ours). Pure, for tests over recorded statuses.
 */
enum event event_decode(int status);

/* The signal to pass on when a thread stopped with status is let go (detached or restarted), 0 for none. */
int event_pending_signal(enum event e, int status);

/* A short name ("seccomp", "past-trap"...), for messages and tests. */
const char *event_name(enum event e);

#endif
