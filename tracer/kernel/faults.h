/*
 * The fault path (docs/fault-path.md): the kernel's page-fault and
 * page-count tracepoints record, for each traced process, every page (or
 * huge page) that becomes resident, with the thread's registers and stack;
 * ptfil drains the ring between ptrace stops and gives each page to the
 * heap-event sink (memory/alloc.h: alloc_resident), which charges it to the
 * stack that made it resident: the touch view. Releases come from the
 * mapping calls' stops (ptrace/mapcalls.c); what goes without one (reclaim,
 * swap-out, MADV_FREE) and what comes without a fault of the process's own
 * (MAP_POPULATE, mlock, another process's write, khugepaged) is found by
 * comparing the ledger with the pages' residency when the count says so.
 */
#ifndef PTFIL_FAULTS_H
#define PTFIL_FAULTS_H

#include <stdint.h>

struct tracer;
struct tracee;
struct proc;

/* What the fault path did, for the snapshot's counters. */
struct faults_stats {
	uint64_t records, faults, cows, grows, shrinks, moves;
	uint64_t lost, stops, reads, stack_fails, same_stacks, stale;
	uint64_t retries;        /* records the ring refused with room, tried again (kernel/ring.bpf.h) */
	uint64_t python_stops;   /* threads stopped to name a code object first seen (kernel/pyread.bpf.h) */
	uint64_t unknown;        /* records of processes not traced any more */
	uint64_t scans;          /* residency scans (grows and shrinks no fault explained) */
	uint64_t scan_added, scan_released;   /* bytes they charged and released */
	uint64_t first_extent;   /* bytes past its first page a first fault made resident (faults.c, KF_FIRST) */
};

/*
 * Chooses the view before any program is started or attached, from
 * --charge: for touch, both and auto the programs are loaded and attached.
 * auto falls back to alloc with one line saying why. Returns 0, or -1 after
 * error() when touch or both was asked for and cannot be had.
 */
int faults_choose(struct tracer *T);
/* True when the fault path runs. */
int faults_on(const struct tracer *T);
/* Once the program's first thread is traced: ptfil listens to the ring. 0 or -1 after error(). */
int faults_start(struct tracer *T);

/*
 * The view process p gets (enum charge_view: CHARGE_TOUCH, CHARGE_ALLOC or
 * CHARGE_BOTH), decided when its image is known (after exec, at attach, for
 * a followed child): alloc without the fault path, and under auto for a
 * process that runs a Python whose frames the kernel cannot read (they are
 * then read live, at each call), with one line saying so.
 */
int faults_view(struct tracer *T, struct proc *p);
/*
 * When p runs a CPython ptfil reads (pystack_detect) not yet described to
 * the fault path's Python reader, describes it: its faults carry Python
 * frames from now on. Called at each view and before each stack (a
 * libpython loaded later). Returns -1 when p's Python cannot be read by the
 * kernel (said in one line unless the view is auto's to choose), else 0.
 */
int faults_python(struct tracer *T, struct proc *p);
/* ... and forgotten there (p ended). */
void faults_python_forget(struct tracer *T, struct proc *p);
/* p's faults are recorded from now on (p->touch set up). Returns 0 or -1. */
int faults_track(struct tracer *T, struct proc *p);
/* Every resident page of p the ledger has not is charged to stack: what was there at attach ([before attach]). */
void faults_charge_resident(struct tracer *T, struct proc *p, uint32_t stack);
/* ... no more (exit, exec into an alloc-view image, leaving). */
void faults_untrack(struct tracer *T, struct proc *p);

/* The timer's check of process p: pages its ledger charges that the kernel no longer counts are looked for. */
void faults_poll(struct tracer *T, struct proc *p);
/* Applies every record written so far, in the order written, and the residency scans they asked for. */
void faults_drain(struct tracer *T);
/*
 * The same between stops, where order does not oblige: it ends early when a
 * ptrace stop is waiting (the thread waits for ptfil), and the next drain
 * goes on from there.
 */
void faults_drain_between(struct tracer *T);
/* Whether thread t's stop (status) is the fault programs' back-pressure: suppressed once drained. */
int faults_owns_stop(struct tracer *T, struct tracee *t, int status);
/*
 * Leaving (attach), every thread parked: every process untracked, every
 * record applied, and each parked thread with the stop signal still queued
 * restarted so that it is reported and suppressed. Returns how many: park them again.
 */
int faults_leave(struct tracer *T);
/* The end: every record applied, no process followed any more, the counters kept; the programs stay loaded until faults_free. */
void faults_end(struct tracer *T);
/* faults_end, then everything freed (the session's end). */
void faults_free(struct tracer *T);
/* The counters, kept after faults_end (all zero when it never ran). */
const struct faults_stats *faults_stats(struct tracer *T);

#endif
