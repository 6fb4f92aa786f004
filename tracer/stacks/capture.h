/*
 * Taking a stopped thread's call stack: its native frames (tracer/stacks/unwind.c),
 * its Python frames (tracer/stacks/pystack.c) merged in, and the stack that started
 * the thread put outward of it; interned as one stack id.
 */
#ifndef PTFIL_CAPTURE_H
#define PTFIL_CAPTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "tracer/core/session.h"
#include "tracer/stacks/pystack.h"
#include "tracer/stacks/unwind.h"

#define TRACEE_MEMOS 4

/* The run's part (struct tracer's cap). Storage is the session's: capture_init, capture_fin. */
struct capture {
	struct capture_cur {       /* the capture begun (capture_begin) */
		pid_t tid;
		uint32_t native;       /* its native stack, or STACKS_PENDING: still to unwind */
		int py;                /* its process's Python frames were readable: time it for the counters */
		int copied;            /* from a stack copy the kernel took (capture_copied): Python frames only from kpy */
		int kpy;               /* ... with the thread's Python frames the kernel read at the event (capture_keep_python) */
		double begin_s;        /* seconds spent in capture_begin */
	} cur;
	struct proc *unw_owner;    /* whose unwinds the unwinder's counters count now (capture_account) */
	struct proc_counts unw_seen; /* the unwinder's counters when unw_owner took over */
	uint32_t new_thread_frame; /* the "[new thread]" pseudo frame, STACKS_FAILED until made */
	uint32_t py_cut_frame;     /* the frame standing for Python frames cut off (PY_MAX_FRAMES), STACKS_FAILED until made */
	uint32_t py_failed_frame;  /* ... for the outer frames of a kernel read that failed, STACKS_FAILED until made */
	int no_python;             /* PTFIL_NO_PYTHON set: native stacks only, to measure what Python frames cost */
	struct pynames pynames;    /* the Python frames' names, for every process */
	struct pystats pystats;
};

/* A thread's part (struct tracee's st): zeroed storage is a valid one. */
struct thread_stacks {
	/* The last unwinds of this thread, to skip unwinding a stack seen just before. */
	struct unwind_memo memo[TRACEE_MEMOS];
	unsigned memo_next;
	/*
	 * The stack of the call that started this thread (its creator's at the
	 * clone), put outward of every stack of its own under a "[new thread]"
	 * frame; STACKS_ROOT when not known (the main thread, threads there
	 * before an attach). origin_in/out: the last stack so extended.
	 */
	uint32_t origin, origin_in, origin_out;
	uint32_t fault_stack;      /* the stack of its last fault record with a stack (kernel/faults.c), STACKS_FAILED */
	/*
	 * The Python frames the kernel read at its next event (tracer/kernel/pyread.c),
	 * kept from their record until the event's own record takes them
	 * (capture_copied with python): kpy[0..n_kpy), PY_MAX_FRAMES of room,
	 * owned; kpy_flags: CAPTURE_PY_*.
	 */
	struct pyraw *kpy;
	uint32_t n_kpy, kpy_flags;
	int kpy_kept;
};

#define CAPTURE_PY_CUT 0x1        /* more frames than were read: the outer ones are not */
#define CAPTURE_PY_FAILED 0x2     /* a read failed: the frames before it are good, the outer ones missing */
#define CAPTURE_PY_NO_THREAD 0x4  /* no thread state named the thread */

void capture_init(struct capture *c);
void capture_fin(struct capture *c);

/*
 * Reads p's maps into its module map again (objects were mapped or
 * unmapped), and forgets what the unwinder cached of the old one. Returns 0,
 * or -1 when the maps cannot be read (the map is left as it was).
 */
int capture_load_maps(struct tracer *T, struct proc *p);

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
 * has run on since. python: the event's record says the kernel read the
 * thread's Python frames too (kept by capture_keep_python); they are merged
 * in as the ptrace path merges the frames it reads live. Without them a
 * copied stack has native frames only.
 */
uint32_t capture_copied(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs,
			const void *stack, size_t len, int python);
/*
 * Keeps raw[0..n) (innermost first) and flags (CAPTURE_PY_*), the Python
 * frames the kernel read for thread t's next event, until that event's record
 * comes. Returns 0, or -1 out of memory (the event then shows native frames).
 */
int capture_keep_python(struct tracee *t, const struct pyraw *raw, size_t n, unsigned flags);
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
