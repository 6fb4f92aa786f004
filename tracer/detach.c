/*
 * Leaving a traced process tree as it was: every thread stopped where it is,
 * the final peak measured, every breakpoint's byte put back, every hijacked
 * return address restored, then every thread detached with the signal it was
 * about to receive. A thread that was in a group-stop (SIGSTOP) stays stopped.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include "common/error.h"
#include "tracer/core/session.h"
#include "tracer/detach.h"
#include "tracer/kernel/kheap.h"
#include "tracer/follow.h"
#include "tracer/loop.h"
#include "tracer/core/remote.h"
#include "tracer/core/rescue.h"
#include "tracer/ptrace/mapcalls.h"

#define LEAVE_ROUNDS 4
#define LEAVE_TIMEOUT_S 5.0     /* for every thread to stop */
#define LEAVE_STRAGGLERS_S 0.03 /* for a late first stop after the rest was let go */

/* A hooked call still in progress returns where it would have without ptfil. */
static void restore_return(struct tracee *t)
{
	if (!t->in_alloc)
		return;
	t->in_alloc = 0;
	rescue_return_done(t->rescue);
	uint64_t slot = 0;
	if (remote_read(t->tid, t->call.rsp, &slot, 8) || slot != t->p->hooks.trampoline)
		return; /* already returned (a longjmp, or the frame reused) */
	if (remote_write(t->tid, t->call.rsp, &t->call.ret, 8))
		error_errno("thread %d: cannot restore a return address", (int)t->tid);
}

/* Every parked thread's state undone and its process's breakpoints out; then each parked thread let go. */
static void undo_and_detach(struct tracer *T)
{
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->nthreads)
			continue;
		pid_t tid = 0;
		for (size_t h = 0; h < TRACER_HASH; h++)
			for (struct tracee *t = T->threads[h]; t; t = t->hnext)
				if (t->p == p && t->parked) {
					if (!t->exiting)
						tid = t->tid;
					restore_return(t);
				}
		if (!tid)
			continue;
		/* Everything stands still: the last look at the peak. */
		if (p->profiled && p->ready) {
			sysc_before_release(T, p, 0, 0);
			uint64_t hwm = resid_vmhwm(p->pid);
			if (hwm > p->vmhwm)
				p->vmhwm = hwm;
		}
		/* A vfork child's text is its parent's, cleaned with it. */
		if (!proc_shares_vm(p) && hooks_remove(&p->hooks, tid))
			error("process %d: some breakpoints could not be removed", (int)p->pid);
	}

	for (size_t h = 0; h < TRACER_HASH; h++) {
		struct tracee *t = T->threads[h];
		while (t) {
			struct tracee *next = t->hnext;
			/* Unparked (a vfork child before its exec): the kernel lets it go when ptfil exits. */
			if (t->parked) {
				int sig = t->group_stop ? 0 : t->park_sig;
				if (ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)sig) && errno != ESRCH)
					error_errno("cannot detach from thread %d", (int)t->tid);
				tracer_remove_thread(T, t);
			}
			t = next;
		}
	}
}

void tracer_leave(struct tracer *T)
{
	/*
	 * A few rounds at most: a thread or child created while ptfil parked may
	 * report its first stop only after the others were let go.
	 */
	for (int round = 0; round < LEAVE_ROUNDS && T->n_threads; round++) {
		loop_park_all(T, LEAVE_TIMEOUT_S);
		/* The kernel path: probes out, and no back-pressure signal left queued to stop the program later. */
		if (kheap_leave(T))
			loop_park_all(T, LEAVE_TIMEOUT_S);
		undo_and_detach(T);
		if (!loop_stragglers(T, LEAVE_STRAGGLERS_S))
			break;
	}
}
