/*
 * The mapping syscalls (mmap, munmap, mremap, brk, madvise, execve) as seen
 * at a seccomp stop or a hooked libc wrapper: measure before memory goes,
 * record what came, and the residency polls and peak checks around them.
 */
#ifndef PTFIL_SYSC_H
#define PTFIL_SYSC_H

#include <stdint.h>
#include <sys/user.h>

struct tracer;
struct tracee;
struct proc;

/* sysc_entry returns the ptrace request to restart the thread with. */
int sysc_entry(struct tracer *T, struct tracee *t);
void sysc_exit(struct tracer *T, struct tracee *t);
/*
 * The same for a call seen some other way (a hooked libc wrapper in attach
 * mode): sysc_begin at its entry returns 1 when its result must be seen, and
 * sysc_end takes that result (a raw syscall's, -errno on failure) and the
 * registers then. t->sc_stack, when set, is the stack the call is charged to.
 */
int sysc_begin(struct tracer *T, struct tracee *t, long nr, const uint64_t args[6],
	       const struct user_regs_struct *regs);
void sysc_end(struct tracer *T, struct tracee *t, uint64_t ret, const struct user_regs_struct *regs);
/* Sets up a profiled process after exec: files, modules, an empty ledger. */
int sysc_exec(struct tracer *T, struct proc *p);
/* Measures what must be measured before memory is released, and records a peak. */
void sysc_before_release(struct tracer *T, struct proc *p, uint64_t start, uint64_t end);
/* The timer's work: refresh when faults moved, peak, one timeline sample. */
void sysc_poll(struct tracer *T, struct proc *p);

/* Before a small block is freed: a peak check whose residency refresh is bounded in rate. */
void sysc_before_small_release(struct tracer *T, struct proc *p);

/*
 * The ranges every process but except inherited at a fork (ledger_add_inherited)
 * are measured again: a relative wrote to pages they shared, execed or exited.
 */
void sysc_refresh_inherited(struct tracer *T, struct proc *except);

/* Brings every range of p up to date when p faulted in pages since the last time it was measured. */
void sysc_refresh_if_faulted(struct tracer *T, struct proc *p);

#endif
