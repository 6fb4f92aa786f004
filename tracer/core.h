/*
 * The tracing session: options, the process and thread tables, the shared
 * stack trie, module registry and unwinder, stop counters. Every tracer/ file
 * that handles stops includes this, and the headers of the modules it calls.
 */
#ifndef PTFIL_CORE_H
#define PTFIL_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tracer/kheap.h"
#include "tracer/proc.h"
#include "tracer/pystack.h"
#include "tracer/stacks.h"
#include "tracer/tracee.h"
#include "tracer/tracer.h"
#include "tracer/tree.h"
#include "tracer/unwind.h"

#define TRACER_SPIN_US 50 /* default of PTFIL_SPIN_US: loop_wait */


#define TRACER_HASH 256
#define TRACER_RETIRED 1024

struct tracer {
	struct tracer_opts opts;
	struct proc *procs;
	struct tracee *threads[TRACER_HASH];
	size_t n_threads;
	struct stacks stacks;
	struct modreg reg;
	struct unwind unw;
	struct pynames pynames; /* the Python frames' names, for every process */
	struct pystats pystats;
	int no_python;          /* PTFIL_NO_PYTHON set: native stacks only, to measure what Python frames cost */
	double spin;            /* seconds to poll for the next stop after a hooked call's stop (PTFIL_SPIN_US) */
	int spin_next;          /* the stop just handled was a hooked call's: poll before sleeping */
	pid_t main_pid;
	int main_status;       /* shell-style, -1 until the main process exits */
	int attach;            /* attach mode: never kill, leave every process as it was */
	const char *output;    /* the main snapshot's path */
	unsigned live_written; /* SIGUSR1 snapshots so far */
	double t0;             /* monotonic seconds at start */
	double start_time;     /* unix time at start */
	double deadline;       /* --duration: when to leave, 0 for never */
	uint64_t stops[STOP__COUNT];   /* the whole run's; each process counts its own (proc_counts) */
	struct tree tree;               /* the process tree and its combined peak (tracer/tree.h) */
	uint64_t refreshes;
	uint64_t reconciled;      /* mappings found by proc_reconcile */
	uint64_t nested_calls;    /* hooked calls made inside the allocator, not counted */
	uint64_t usable_blocks;   /* blocks charged at their usable size (seen at a return: tracer/hooks.h) */
	uint64_t unsized_blocks;  /* blocks seen at a return whose chunk header made no sense: not charged */
	struct kheap *kh;         /* the kernel path for heap events (tracer/kheap.h); NULL: ptrace breakpoints */
	struct kheap_stats kstats;
	struct capture {        /* the capture begun (capture_begin) */
		pid_t tid;
		uint32_t native;    /* its native stack, or STACKS_PENDING: still to unwind */
		int py;             /* its process's Python frames were readable: time it for the counters */
		int copied;         /* from a stack copy the kernel took (capture_copied): no Python frames */
		double begin_s;     /* seconds spent in capture_begin */
	} capture;
	int live_on;               /* --live: the view is up (tracer/live.c) */
	int live_leave;            /* q pressed under attach */
	double live_at;            /* when the last model was made */
	unsigned live_seq;
	char **live_names; size_t n_live_names;  /* frame texts for the view, by frame id */
	struct proc *unw_owner;    /* whose unwinds the unwinder's counters count now (capture_account) */
	struct proc_counts unw_seen; /* the unwinder's counters when unw_owner took over */
	struct srcmemo *src;       /* source lines of stack frame i, resolved when written (export.c) */
	size_t n_src;
	uint64_t src_lookups;      /* frames looked up in DWARF, for the counters */
	double src_seconds;        /* time spent resolving them and fetching debug files */
	uint64_t src_fetched;      /* debug files fetched from debuginfod */
	uint32_t main_stack_node;
	uint32_t new_thread_frame; /* the "[new thread]" pseudo frame, STACKS_FAILED until made */
	uint32_t py_cut_frame;     /* the frame standing for Python frames cut off (PY_MAX_FRAMES), STACKS_FAILED until made */
	/*
	 * Threads ptfil has seen go (exited, released): a creator's clone or fork
	 * event that reports one late must not bring it back as a thread to wait
	 * for. A ring of the last TRACER_RETIRED.
	 */
	pid_t retired[TRACER_RETIRED];
	unsigned retired_next;
};

/* A stop of thread t (NULL when it is not known), counted for the run and for its process. */
static inline void tracer_count_stop(struct tracer *T, struct tracee *t, enum stop_kind k)
{
	T->stops[k]++;
	if (t)
		t->p->counts.stops[k]++;
}

#endif
