/*
 * The tracing session: the process and thread tables, where each thread is in
 * the stop protocol, and what tracing cost. Every module's own state hangs
 * off these as a block declared in that module's header (the folder named
 * beside each pointer); core/ knows the blocks by name only.
 */
#ifndef PTFIL_SESSION_H
#define PTFIL_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tracer/core/options.h"

struct tracer;
struct tracee;

/* Why ptfil stopped the target, counted for the snapshot (DESIGN's stop budget). */
enum stop_kind {
	STOP_SECCOMP, STOP_SYSCALL_EXIT, STOP_SIGNAL, STOP_GROUP, STOP_NEW_TASK,
	STOP_CLONE, STOP_EXEC, STOP_EXIT, STOP_BP_ENTRY, STOP_BP_RETURN, STOP_DL_DEBUG,
	STOP_OTHER, STOP_BACKPRESSURE, STOP_BP_WRAPPER, STOP__COUNT
};

/* What tracing cost, for a snapshot's counters: each process's own, and the run's (struct tracer). */
struct proc_counts {
	uint64_t stops[STOP__COUNT];
	uint64_t unwinds, remote_reads, stack_copies, memo_hits, splices, spliced_frames;
	uint64_t nested_calls;    /* hooked calls made inside the allocator, not counted (memory/alloc.h) */
	uint64_t usable_blocks;   /* blocks charged at their usable size (memory/alloc.h: every path) */
	uint64_t one_stop_blocks; /* of those, seen whole at a return of a function hooked there (ptrace/hooks.h) */
	uint64_t unsized_blocks;  /* blocks seen at a return whose chunk header made no sense: not charged */
	uint64_t refreshes;       /* full residency refreshes (memory/peak.h) */
	uint64_t reconciled;      /* attach: mappings no hooked call made, found in the maps (follow.h) */
};

#define KPY_DESCRIBED_FAULTS 1   /* the fault path's (faults.c) */
#define KPY_DESCRIBED_KHEAP 2    /* the kernel path's (kheap.c) */
struct proc {
	pid_t pid;
	pid_t parent;          /* the traced process that forked it, 0 for the main one */
	int profiled;          /* charged into a ledger; other processes are only kept running */
	int ready;             /* the first exec has happened: the ledger and files are set up */
	int fresh;             /* a new child not looked at yet: followed or cleaned at its first stop */
	int shares_vm;         /* a vfork child: its text is its parent's until it execs */
	int wrappers;          /* no seccomp filter (attach): the libc mapping calls are hooked instead */
	int nthreads;
	char **argv;           /* the command line, NULL-terminated (from /proc for all but a launched program) */
	int status;            /* shell-style exit status, -1 while it runs */
	double started;        /* when ptfil first saw it (tracer_now) */
	double end_time;       /* when it exited, 0 while it runs */
	uint64_t vmhwm;
	uint64_t brk_cur;      /* page-aligned end of the brk heap, 0 until known */
	struct proc_counts counts;
	/* Each module's state of this process, owned by the process (lifecycle.c makes and frees them). */
	struct modmap *mm;         /* stacks/modules.h: the objects it maps, and when they were read */
	struct pyproc *py;         /* stacks/pystack.h: its CPython, when it runs one */
	struct resid *resid;       /* memory/resid.h: its /proc residency files */
	struct ledger *ledger;     /* memory/ledger.h: its charged ranges and stacks, its peak */
	struct heap *heap;         /* memory/heap.h: its live malloc-family blocks */
	struct proc_peak *pk;      /* memory/peak.h: when residency was refreshed, its timeline, its checkpoints */
	struct tree_share *tree;   /* memory/tree.h: its part of the tree's combined peak, its inherited pages */
	struct touch *touch;       /* memory/alloc.h: the touch view's pages and charge; NULL: the alloc view only */
	struct hooks *hooks;       /* ptrace/hooks.h: breakpoints in its text */
	int kpy_described;         /* KPY_DESCRIBED_*: the kernel's Python readers it was described to (kernel/pyread.h) */
	struct kproc *kp;          /* kernel/kheap.h: its uprobes */
	struct reconcile *rec;     /* follow.h: attach, mappings no hooked call made */
	struct proc *next;
};

struct tracee {
	pid_t tid;
	struct proc *p;
	int in_syscall;        /* resumed with PTRACE_SYSCALL: the next stop is this syscall's exit */
	int parked;            /* held stopped (attaching, leaving), to be let go with park_sig */
	int park_sig;
	int group_stop;        /* parked in a group-stop (SIGSTOP): it stays stopped when let go */
	int exiting;           /* past its exit event, or a zombie: it never stops again, it is only reaped */
	int origin_unknown;    /* a new thread seen before its creator's clone event: where it was started is not known yet */
	double held_since;     /* > 0: held at its first stop until that event comes (loop.c, hold_for_origin) */
	int rescue;            /* its slot in the crash rescue's table (core/rescue.h) */
	/* Each module's state of this thread, owned by the thread (lifecycle.c). */
	struct alloc_call *call;   /* memory/alloc.h: the allocating call in flight */
	struct bp_return *ret;     /* ptrace/breakpoints.h: a return of ours it is to take */
	struct sc_call *sc;        /* ptrace/mapcalls.h: the mapping call it is in */
	struct thread_stacks *st;  /* stacks/capture.h: its last unwinds, the stack that started it */
	struct tracee *hnext;
};

#define TRACER_HASH 256
#define TRACER_RETIRED 1024
#define TRACER_SPIN_US 50 /* default of PTFIL_SPIN_US: loop_wait */

struct tracer {
	struct tracer_opts opts;
	pid_t main_pid;
	int main_status;       /* shell-style, -1 until the main process exits */
	int attach;            /* attach mode: never kill, leave every process as it was */
	const char *output;    /* the main snapshot's path */
	double t0;             /* monotonic seconds at start */
	double start_time;     /* unix time at start */
	double deadline;       /* --duration: when to leave, 0 for never */
	double spin;           /* seconds to poll for the next stop after a hooked call's stop (PTFIL_SPIN_US) */
	int spin_next;         /* the stop just handled was a hooked call's: poll before sleeping */
	struct proc *procs;
	struct tracee *threads[TRACER_HASH];
	size_t n_threads;
	/*
	 * Threads ptfil has seen go (exited, released): a creator's clone or fork
	 * event that reports one late must not bring it back as a thread to wait
	 * for. A ring of the last TRACER_RETIRED.
	 */
	pid_t retired[TRACER_RETIRED];
	unsigned retired_next;
	struct proc_counts counts;   /* the whole run's; each process counts its own */
	/*
	 * A kernel-path policy told of a thread's sigaltstack(ss) call (sp: its
	 * stack pointer) by the stop that saw it (kernel/kheap.h); NULL for none.
	 */
	void (*on_sigaltstack)(struct tracer *T, struct tracee *t, uint64_t ss, uint64_t sp);
	/* The fault path's drain (kernel/faults.c), for the mapping calls' stops that need the faults before them applied (ptrace/mapcalls.c). */
	void (*apply_faults)(struct tracer *T);
	/* Each module's state of the run, owned by the session (session.c makes and frees them). */
	struct stacks *stacks;       /* stacks/stacks.h: the stack trie */
	struct modreg *reg;          /* stacks/modules.h: every object file seen */
	struct unwind *unw;          /* stacks/unwind.h: the unwinder */
	struct capture *cap;         /* stacks/capture.h: the capture in progress, Python names */
	struct tree *tree;           /* memory/tree.h: the process tree and its combined peak */
	struct kheap *kh;            /* kernel/kheap.h: the kernel path; NULL: ptrace breakpoints */
	struct faults *kf;           /* kernel/faults.h: the fault path (the touch view); NULL: none */
	struct export *exp;          /* output/export.h: source lines resolved, snapshots written */
	struct live *live;           /* output/live.h: the --live view's state */
};

/* A stop of thread t (NULL when it is not known), counted for the run and for its process. */
static inline void tracer_count_stop(struct tracer *T, struct tracee *t, enum stop_kind k)
{
	T->counts.stops[k]++;
	if (t)
		t->p->counts.stops[k]++;
}

/* Seconds since the session began (CLOCK_MONOTONIC). */
double tracer_now(const struct tracer *T);
/* The thread tid, or NULL. */
struct tracee *tracer_find(struct tracer *T, pid_t tid);
/* The process pid, or NULL. */
struct proc *tracer_proc(struct tracer *T, pid_t pid);
/* True when tid was removed lately (tables_unlink_thread) and has not been added since. */
int tracer_retired(const struct tracer *T, pid_t tid);

/* Puts thread t, made by the caller, in the table (its tid no longer retired). */
void tables_link_thread(struct tracer *T, struct tracee *t);
/* Takes thread t out of the table and retires its tid: never waited for again. The caller frees it. */
void tables_unlink_thread(struct tracer *T, struct tracee *t);
/* Puts process p, made by the caller, at the head of the list. */
void tables_link_proc(struct tracer *T, struct proc *p);
/* Takes process p out of the list. The caller frees it. */
void tables_unlink_proc(struct tracer *T, struct proc *p);

#endif
