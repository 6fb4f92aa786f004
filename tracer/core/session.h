/*
 * The tracing session: the process and thread tables, what each process and
 * thread is in the stop protocol, stop counters. Every module's own state
 * hangs off these as a block declared in that module's header.
 */
#ifndef PTFIL_SESSION_H
#define PTFIL_SESSION_H


#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/u64map.h"
#include "tracer/memory/heap.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/memory/ledger.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/pystack.h"
#include "tracer/memory/resid.h"

struct tracer;
struct tracee;

#define TRACER_MAX_SAMPLES 4096
#define TRACER_SPIN_US 50 /* default of PTFIL_SPIN_US: loop_wait */

struct sample { double time; uint64_t charged, rss; };

/* Why ptfil stopped the target, counted for the snapshot (DESIGN's stop budget). */
enum stop_kind {
	STOP_SECCOMP, STOP_SYSCALL_EXIT, STOP_SIGNAL, STOP_GROUP, STOP_NEW_TASK,
	STOP_CLONE, STOP_EXEC, STOP_EXIT, STOP_BP_ENTRY, STOP_BP_RETURN, STOP_DL_DEBUG,
	STOP_OTHER, STOP_BACKPRESSURE, STOP_BP_WRAPPER, STOP__COUNT
};

/* What tracing one process cost: its own stops and unwinds, for its snapshot's counters. */
struct proc_counts {
	uint64_t stops[STOP__COUNT];
	uint64_t unwinds, remote_reads, stack_copies, memo_hits, splices, spliced_frames;
	uint64_t nested_calls, usable_blocks, unsized_blocks;  /* as the tracer's own (core.h) */
};

struct proc {
	pid_t pid;
	int profiled;          /* charged into a ledger; other processes are only kept running */
	int ready;             /* the first exec has happened: the ledger and files are set up */
	int fresh;             /* a new child not looked at yet: followed or cleaned at its first stop */
	int shares_vm;         /* a vfork child: its text is its parent's until it execs */
	int wrappers;          /* no seccomp filter (attach): the libc mapping calls are hooked instead */
	pid_t parent;          /* the traced process that forked it, 0 for the main one */
	int nthreads;
	char **argv;           /* the command line, NULL-terminated (from /proc for all but a launched program) */
	int status;            /* shell-style exit status, -1 while it runs */
	double started;        /* when ptfil first saw it (tracer_now) */
	double end_time;       /* when it exited, 0 while it runs */
	uint64_t vmhwm;
	double snap_written_at;/* when its peak snapshot was last written */
	double snap_peak_time; /* the peak time that snapshot holds */
	struct sample *samples; size_t n_samples;  /* the timeline, bounded */
	double reconciled_at;  /* attach: when the maps were last compared with the ledger */
	struct u64map seen;    /* attach: starts of mappings already looked at by proc_reconcile */
	unsigned sample_stride, sample_skip;
	struct resid resid;
	struct ledger ledger;
	struct modmap mm;
	double maps_loaded_at;
	int maps_dirty;        /* objects may have been mapped or unmapped since maps were read */
	uint64_t brk_cur;      /* page-aligned end of the brk heap, 0 until known */
	uint64_t last_faults;  /* fault count at the last full residency refresh */
	double faults_checked_at;
	struct hooks hooks;    /* breakpoints in this process's text */
	struct heap heap;      /* live malloc-family blocks */
	struct pyproc py;      /* its CPython, when it runs one: where to read Python frames */
	int *klinks; size_t n_klinks, cap_klinks;  /* the kernel path: its uprobe links' fds (tracer/kheap.c) */
	int kpath_checked;     /* the kernel path: whether it runs Python was looked at */
	int kpath_used;        /* the kernel probes some of its malloc family (in its current image) */
	int kleave;            /* it is to leave the kernel path at its next stop (kheap_leave_pending) */
	uint64_t krecords;     /* the kernel path's records of this process, applied */
	struct proc_counts counts;
	/*
	 * The process tree (--follow-forks, tracer/tree.c): its charge by stack at
	 * the combined peak, copied when that peak was tree_gen; an older
	 * tree_gen means it held nothing then (it had not started, or had gone).
	 */
	struct ledger_charge *at_tree; size_t n_at_tree;
	uint64_t tree_charged;
	unsigned tree_gen;
	int inherited;         /* has ranges forked from its parent, charged as they become its own */
	double inherited_at;   /* when they were last measured (tree_check_peak) */
	struct proc *next;
};


struct tracee *tracer_find(struct tracer *T, pid_t tid);
/* Adds thread tid, finding (or creating) its process from /proc/TID/status. NULL after error(). */
struct tracee *tracer_add_thread(struct tracer *T, pid_t tid);
/* Forgets thread t (gone, or let go): it is retired, never waited for again. */
void tracer_remove_thread(struct tracer *T, struct tracee *t);
/* True when tid was removed lately (tracer_remove_thread) and has not been added since. */
int tracer_retired(const struct tracer *T, pid_t tid);
struct proc *tracer_proc(struct tracer *T, pid_t pid);
/* Frees a process and all it owns (not its threads). */
void proc_fin(struct proc *p);
/* Unlinks process p from the table and frees it. */
void tracer_drop_proc(struct tracer *T, struct proc *p);
double tracer_now(const struct tracer *T);




#include "tracer/stacks/unwind.h"

struct proc;

#define TRACEE_MEMOS 4

struct tracee {
	pid_t tid;
	struct proc *p;
	int in_syscall;        /* resumed with PTRACE_SYSCALL: the next stop is this syscall's exit */
	long sc_nr;
	uint64_t sc_args[6];
	int sc_heap;           /* the syscall is the allocator's own (sysc_begin): its blocks are charged instead */
	/* The outermost malloc-family call in progress, whose return address points at the trampoline. */
	int in_alloc;
	struct {
		enum hook_fn fn;
		uint64_t args[3];
		uint32_t stack;
		uint64_t ret;      /* the real return address */
		uint64_t rsp;      /* at entry */
		uint64_t stored;   /* posix_memalign's block as the kernel read it at the return (the kernel path) */
		int stored_known;
	} call;
	/* The kernel path: an allocating call entered (t->call) whose return has not been read yet. */
	int kin_call;
	/* The last unwinds of this thread, to skip unwinding a stack seen just before. */
	struct unwind_memo memo[TRACEE_MEMOS];
	unsigned memo_next;
	uint32_t sc_stack;     /* stack of a wrapped mapping call, taken at its entry; STACKS_FAILED when none */
	/*
	 * The stack of the call that started this thread (its creator's at the
	 * clone), put outward of every stack of its own under a "[new thread]"
	 * frame; STACKS_ROOT when not known (the main thread, threads there
	 * before an attach). origin_in/out: the last stack so extended.
	 */
	uint32_t origin, origin_in, origin_out;
	int parked;            /* held stopped (attaching, leaving), to be let go with park_sig */
	int park_sig;
	int group_stop;        /* parked in a group-stop (SIGSTOP): it stays stopped when let go */
	int exiting;           /* past its exit event, or a zombie: it never stops again, it is only reaped */
	int rescue;            /* its slot in the crash rescue's table (tracer/rescue.h) */
	struct tracee *hnext;
};




#include "tracer/kernel/kheap.h"
#include "tracer/stacks/stacks.h"
#include "tracer/tracer.h"
#include "tracer/memory/tree.h"



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
