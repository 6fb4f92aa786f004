/*
 * Heap events through the kernel (docs/heap-events.md): the malloc family of
 * a traced process is probed by kernel uprobes whose BPF programs write one
 * ordered stream of records (kernel/uprobes.c); ptfil drains it between
 * ptrace stops and gives each record to the heap-event sink
 * (memory/alloc.h), as ptrace/breakpoints.c gives it a breakpoint's stop.
 * ptrace keeps everything else: launch and attach, the mapping calls (under
 * attach they stop at kernel probes too, so that nothing is written into
 * the target), threads, forks, exec, signals, leaving, and back-pressure (a thread the BPF
 * program stopped with SIGSTOP while ptfil catches up).
 */
#ifndef PTFIL_KHEAP_H
#define PTFIL_KHEAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


struct tracer;
struct tracee;
struct proc;

/* --heap-events */
enum heap_events { HEAP_EVENTS_AUTO, HEAP_EVENTS_UPROBE, HEAP_EVENTS_PTRACE };

/* "auto", "uprobe" or "ptrace" into *out. Returns 0, or -1 for anything else. */
int kheap_parse(const char *s, enum heap_events *out);

/* What the kernel path did, for the snapshot's counters. */
struct kheap_stats {
	uint64_t unknown_thread;   /* records of threads ptfil does not trace (a child not followed) */
	uint64_t lost;             /* records that did not fit in the ring (0 unless the ring is too small) */
	uint64_t waits;            /* records found half written, waited for */
	uint64_t late_copies;      /* unwinds that read past the stack copied at the event */
	uint64_t short_stacks;     /* stack copies shorter than a full one (the stack ended) */
	uint64_t retries;          /* reservations the ring refused with room, tried again (kernel/ring.bpf.h) */
	uint64_t python_stops;     /* threads stopped to name a code object first seen (kernel/pyread.bpf.h) */
};

/* A process's part (struct proc's kp). Storage is the process's; kheap_proc_release closes its links. */
struct kproc {
	int *links; size_t n_links, cap_links;  /* its uprobe links' fds */
	int checked;          /* whether it runs Python was looked at */
	int used;             /* the kernel probes some of its malloc family (in its current image) */
	int leave;            /* it is to leave the kernel path at its next stop (kheap_leave_pending) */
	uint64_t records;     /* its records applied */
};

/*
 * Chooses the path before any program is started or attached: for auto or
 * uprobe (T->opts.heap_events) the BPF programs are loaded and tested. auto
 * falls back to ptrace with one line saying why (not under --quiet). Returns
 * 0, or -1 after error() when uprobe was asked for and cannot be had.
 */
int kheap_choose(struct tracer *T);
/* Once the program's first thread is traced: ptfil starts listening to the ring (blocks SIGCHLD for a signalfd). */
int kheap_start(struct tracer *T);
/* The end: every record applied, counters kept, probes and programs gone (the kernel removes the probes). */
void kheap_end(struct tracer *T);
/* True when the kernel path is running. */
int kheap_on(const struct tracer *T);
/* What it did, kept after kheap_end (all zero when it never ran). */
const struct kheap_stats *kheap_stats(const struct tracer *T);
/* kheap_end, then what kheap_choose made is freed (the session's end). */
void kheap_free(struct tracer *T);

/* Reads the programs' own counters (lost records, short stacks) into kheap_stats. */
void kheap_refresh_stats(struct tracer *T);

/*
 * Leaving (attach), with every thread parked: applies every record, takes
 * the probes out, and restarts each parked thread that has the back-pressure
 * signal still queued, so that it is reported (and suppressed) before ptfil
 * lets it go. Returns how many were restarted: park them again.
 */
int kheap_leave(struct tracer *T);

/* Applies every record written so far, in the order written. */
void kheap_drain(struct tracer *T);

/*
 * Whether the signal-delivery-stop of SIGSTOP that thread t reports (status)
 * is the BPF program's back-pressure (from the kernel, not from a kill): it
 * is then suppressed, once the ring is drained.
 */
int kheap_owns_stop(struct tracer *T, struct tracee *t, int status);
/*
 * At such a stop of thread t, the ring drained: when it is the stop of a
 * probed call (the loader's load hook; under attach a mapping call's
 * wrapper or sigaltstack), the call is handled (ptrace/breakpoints.h, bp_kernel_call).
 * Returns the stop kind to count: STOP_BACKPRESSURE when it was none.
 */
int kheap_call_stop(struct tracer *T, struct tracee *t);

/*
 * Process p's malloc family goes to the kernel path when there is one (its
 * hooks' probe is set). Call when p is about to have its modules scanned:
 * after exec, at attach, and for a followed child.
 */
void kheap_proc_setup(struct tracer *T, struct proc *p);
/* p's Python, if described to the kernel path's Python reader, is forgotten there (p ended). */
void kheap_python_forget(struct tracer *T, struct proc *p);
/*
 * At thread t's sigaltstack(ss) system call (sp: its stack pointer): a
 * signal stack placed above the thread's stack makes the kernel drop the
 * return probes of calls a handler on it interrupts (and the program then
 * dies of SIGILL when they return): the process goes to the ptrace path first.
 */
void kheap_sigaltstack(struct tracer *T, struct tracee *t, uint64_t ss, uint64_t sp);
/*
 * The same found by the probes themselves: an allocating call entered by a
 * thread whose signal stack lies above its stack (one installed before
 * ptfil attached, say) marks its process, and stops the thread. At a stop of
 * thread t (stopped), t's process leaves the kernel path if it was marked.
 */
void kheap_leave_pending(struct tracer *T, struct tracee *t);
/*
 * At the PTRACE_EVENT_EXIT stop of thread t: a main thread that calls
 * pthread_exit while others run on takes its process off the kernel path
 * under launch (the kernel would drop the process's probes whenever another
 * consumer of the same code goes); under attach it stays, with a warning
 * that says so. Anything else is left alone.
 */
void kheap_leader_exit(struct tracer *T, struct tracee *t);
/* The probes of p's current image go (exec, exit, leaving): its links are closed. */
void kheap_proc_release(struct proc *p);
/* kheap_proc_release, then the links' table freed. */
void kheap_proc_fin(struct proc *p);

#endif
