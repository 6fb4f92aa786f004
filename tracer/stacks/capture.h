/*
 * Taking a stopped thread's call stack: its native frames (tracer/unwind.c),
 * its Python frames (tracer/pystack.c) merged in, and the stack that started
 * the thread put outward of it; interned as one stack id.
 */
#ifndef PTFIL_CAPTURE_H
#define PTFIL_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

struct tracer;
struct tracee;
struct proc;

/* Unwinds the stopped thread (regs as at the stop) and interns its stack; STACKS_ROOT when nothing could be read. */
uint32_t capture_stack(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs);
/*
 * capture_stack in two halves, so that the thread can run on between them:
 * capture_begin takes what must be taken while it is stopped (its registers,
 * which must stay valid until capture_finish, and a copy of its stack);
 * capture_finish unwinds from that copy. Valid only while the thread cannot
 * change the frames above its stack pointer at the stop (it is inside a call
 * whose return stops it), and with no other capture in between.
 */
void capture_begin(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs);
uint32_t capture_finish(struct tracer *T, struct tracee *t);
/*
 * The stack of an event the kernel recorded (the kernel path): regs and len
 * bytes of stack from regs->rsp up, as they were at the event; the thread
 * has run on since.
 */
uint32_t capture_copied(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs,
			const void *stack, size_t len);
/*
 * Whether the stopped thread (regs as at the stop) is inside a function its
 * process hooks at its returns (tracer/hooks.h): one of its frames is there.
 */
int capture_in_exit_fn(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs);
/* At a clone event of thread t: the new thread child of the same process records t's stack as its origin. */
void capture_thread_origin(struct tracer *T, struct tracee *t, struct tracee *child);

/*
 * The unwinder counts for the run; this charges what it counted since the
 * last call to the process it was unwinding for, and makes next (or NULL)
 * that process from now on. Called before each process's unwinds, before a
 * snapshot's counters are read, and before a process is freed.
 */
void capture_account(struct tracer *T, struct proc *next);

#endif
