/*
 * A traced thread: its tid, where it is in the stop protocol (a syscall, a
 * hooked call in flight, parked), its unwind memos and a back pointer to its
 * process. Internal to tracer/.
 */
#ifndef PTFIL_TRACEE_H
#define PTFIL_TRACEE_H

#include <stdint.h>
#include <sys/types.h>

#include "tracer/hooks.h"
#include "tracer/unwind.h"

struct proc;

#define TRACEE_MEMOS 4

struct tracee {
	pid_t tid;
	struct proc *p;
	int in_syscall;        /* resumed with PTRACE_SYSCALL: the next stop is this syscall's exit */
	long sc_nr;
	uint64_t sc_args[6];
	int sc_heap;           /* the syscall is the allocator's own (sysc_begin): its blocks are charged instead */
	/* The outermost malloc-family call in progress, whose return address points at the trampoline. */
	int in_alloc;
	struct {
		enum hook_fn fn;
		uint64_t args[3];
		uint32_t stack;
		uint64_t ret;      /* the real return address */
		uint64_t rsp;      /* at entry */
		uint64_t stored;   /* posix_memalign's block as the kernel read it at the return (the kernel path) */
		int stored_known;
	} call;
	/* The kernel path: an allocating call entered (t->call) whose return has not been read yet. */
	int kin_call;
	/* The last unwinds of this thread, to skip unwinding a stack seen just before. */
	struct unwind_memo memo[TRACEE_MEMOS];
	unsigned memo_next;
	uint32_t sc_stack;     /* stack of a wrapped mapping call, taken at its entry; STACKS_FAILED when none */
	/*
	 * The stack of the call that started this thread (its creator's at the
	 * clone), put outward of every stack of its own under a "[new thread]"
	 * frame; STACKS_ROOT when not known (the main thread, threads there
	 * before an attach). origin_in/out: the last stack so extended.
	 */
	uint32_t origin, origin_in, origin_out;
	int parked;            /* held stopped (attaching, leaving), to be let go with park_sig */
	int park_sig;
	int group_stop;        /* parked in a group-stop (SIGSTOP): it stays stopped when let go */
	int exiting;           /* past its exit event, or a zombie: it never stops again, it is only reaped */
	int rescue;            /* its slot in the crash rescue's table (tracer/rescue.h) */
	struct tracee *hnext;
};

#endif
