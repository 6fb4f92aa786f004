/*
 * The malloc family and the load hook as seen at their breakpoints (calls.c).
 */
#ifndef PTFIL_CALLS_H
#define PTFIL_CALLS_H

#include <sys/user.h>

#include <stdint.h>

struct tracer;
struct tracee;
struct proc;

/*
 * calls_owns: true when thread t, stopped with
 * regs, is just past one of ptfil's int3s (a hook, or the trampoline while a
 * hooked call of t is in flight).
 */
int calls_owns(const struct tracee *t, const struct user_regs_struct *regs);
/* Handles the SIGTRAP of an int3 that calls_owns: the call is noted and the thread restarted. */
void calls_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs);
/*
 * Leaving: the same SIGTRAP, but the thread stays stopped, undone so that it
 * can run without ptfil (rip back on a breakpoint whose byte goes back; a
 * hijacked return completed).
 */
void calls_park_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs);

/* A block about to lose its memory: measure and check the peak first. */
void calls_before_free(struct tracer *T, struct proc *p, uint64_t ptr);
/*
 * The allocating call in t->call (its function, arguments and stack) returned
 * result: the ledger gains its block (and loses the old one of a realloc).
 */
void calls_record(struct tracer *T, struct proc *p, struct tracee *t, uint64_t result);

#endif
