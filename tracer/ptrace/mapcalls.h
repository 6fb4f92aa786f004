/*
 * The mapping calls (mmap, munmap, mremap, brk, madvise, execve) as ptrace
 * sees them: at a seccomp stop and the syscall's exit stop under launch, at
 * a hooked libc wrapper under attach. Before memory goes it is measured (the
 * peak policy, memory/peak.h); what came is charged to the stack that asked.
 */
#ifndef PTFIL_MAPCALLS_H
#define PTFIL_MAPCALLS_H

#include <stdint.h>
#include <sys/user.h>

struct tracer;
struct tracee;

/* The mapping call a thread is in (struct tracee's sc). */
struct sc_call {
	long nr;
	uint64_t args[6];
	int heap;              /* the allocator's own call (inside a malloc-family call): its blocks are charged instead */
	uint32_t stack;        /* a wrapped call's stack, taken at its entry; STACKS_FAILED when none */
	int moving;            /* an mremap between its entry and exit stops (the touch view's pages may be moving) */
	uint64_t epoch;        /* the ledger's epoch at the entry: what the call can release (ledger_remove_older) */
	int unmapping;         /* a munmap between its entry and exit stops whose pages the touch view has yet to release */
	/*
	 * Attach on the kernel path (ptrace/breakpoints.h, bp_kernel_call): a
	 * call whose probe record was read and whose stop is still to come
	 * (kfn, kregs as at its entry), and a call begun whose result is to come
	 * from the kernel's record of its system call's return.
	 */
	int kpending;
	int kfn;               /* enum hook_fn */
	struct user_regs_struct kregs;
	int kawait;
};

/* At a seccomp stop of thread t: returns the ptrace request to restart it with. */
int sysc_entry(struct tracer *T, struct tracee *t);
/* At the exit stop of the call sysc_entry asked to see. */
void sysc_exit(struct tracer *T, struct tracee *t);
/*
 * The same for a call seen some other way (a hooked libc wrapper in attach
 * mode): sysc_begin at its entry returns 1 when its result must be seen, and
 * sysc_end takes that result (a raw syscall's, -errno on failure) and the
 * registers then. t->sc->stack, when set, is the stack the call is charged to.
 */
int sysc_begin(struct tracer *T, struct tracee *t, long nr, const uint64_t args[6],
	       const struct user_regs_struct *regs);
void sysc_end(struct tracer *T, struct tracee *t, uint64_t ret, const struct user_regs_struct *regs);
/* Whether a thread of p is inside an mremap whose entry was seen and whose exit was not yet. */
int sysc_moving(const struct tracer *T, const struct proc *p);

#endif
