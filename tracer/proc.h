/*
 * A traced process: its address space's ledger, heap, hooks, modules and
 * residency files; and the tables of processes and threads (proc.c).
 */
#ifndef PTFIL_PROC_H
#define PTFIL_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/u64map.h"
#include "tracer/heap.h"
#include "tracer/hooks.h"
#include "tracer/ledger.h"
#include "tracer/modules.h"
#include "tracer/pystack.h"
#include "tracer/resid.h"

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

#endif
