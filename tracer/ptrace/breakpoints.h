/*
 * The stops at ptfil's own int3s (breakpoints.c): the malloc family's entries
 * and returns, the mapping calls' libc wrappers under attach, and the
 * dynamic linker's load hook. What each means goes to the heap-event sink
 * (memory/alloc.h) or to the mapping calls (ptrace/mapcalls.h).
 */
#ifndef PTFIL_BREAKPOINTS_H
#define PTFIL_BREAKPOINTS_H

#include <stdint.h>
#include <sys/user.h>

#include "tracer/ptrace/hooks.h"

struct tracer;
struct tracee;

/*
 * A return of ours that a thread is to take (struct tracee's ret): the call's
 * return address was pointed at the trampoline. At most one per thread.
 */
struct bp_return {
	int armed;
	enum hook_fn fn;       /* the call: an allocating one (the sink's call in flight), or a mapping call's wrapper */
	uint64_t ret;          /* the real return address */
	uint64_t rsp;          /* the stack pointer at the call's entry: where the return address is */
};

/*
 * True when thread t, stopped with regs, is just past one of ptfil's int3s
 * (a hook, or the trampoline while a return of t's is armed).
 */
int bp_owns(const struct tracee *t, const struct user_regs_struct *regs);
/* Handles the SIGTRAP of an int3 that bp_owns: the call is noted and the thread restarted. */
void bp_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs);
/*
 * Leaving: the same SIGTRAP, but the thread stays stopped, undone so that it
 * can run without ptfil (rip back on a breakpoint whose byte goes back; a
 * hijacked return completed).
 */
void bp_park_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs);
/* Leaving, thread t parked: a return of ours still armed goes back to where it was (its frame still there). */
void bp_restore_return(struct tracee *t);

/*
 * The same calls seen by kernel probes on the kernel path (kernel/kheap.c),
 * with nothing written into the target: thread t, stopped
 * by its probe's signal just past the first instruction of hooked function
 * fn (a mapping call's wrapper, sigaltstack, the loader's load hook), with
 * entry as its registers were at the probe. The caller restarts it. A
 * wrapper whose result matters sets t->sc->kawait; bp_kernel_return takes
 * that result (the system call's, from the kernel's record of its return)
 * while the thread runs on; a call whose stop has not come yet (t->sc's
 * kpending: the stop signal blocked) is begun there, unmeasured. Returns
 * the stop kind to count.
 */
int bp_kernel_call(struct tracer *T, struct tracee *t, int fn, struct user_regs_struct *entry);
void bp_kernel_return(struct tracer *T, struct tracee *t, uint64_t ret);

#endif
