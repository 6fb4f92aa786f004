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

#include "common/error.h"
#include "tracer/core/session.h"
#include "tracer/detach.h"
#include "tracer/follow.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/lifecycle.h"
#include "tracer/loop.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/resid.h"
#include "tracer/ptrace/breakpoints.h"
#include "tracer/ptrace/hooks.h"

#define LEAVE_ROUNDS 4
#define LEAVE_TIMEOUT_S 5.0     /* for every thread to stop */
#define LEAVE_STRAGGLERS_S 0.03 /* for a late first stop after the rest was let go */

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
					bp_restore_return(t);
				}
		if (!tid)
			continue;
		/* Everything stands still: the last look at the peak. */
		if (p->profiled && p->ready) {
			peak_last_look(T, p);
			uint64_t hwm = resid_vmhwm(p->pid);
			if (hwm > p->vmhwm)
				p->vmhwm = hwm;
		}
		/* A vfork child's text is its parent's, cleaned with it. */
		if (!proc_shares_vm(p) && hooks_remove(p->hooks, tid))
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
				lifecycle_remove_thread(T, t);
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
		if (kheap_leave(T) + faults_leave(T))
			loop_park_all(T, LEAVE_TIMEOUT_S);
		undo_and_detach(T);
		if (!loop_stragglers(T, LEAVE_STRAGGLERS_S))
			break;
	}
}
