/*
 * The peak policy (peak.c): when a process's charge is measured and compared
 * with its peak. The charge falls only at a release, so the peak is checked
 * just before each one (DESIGN.md, "When the peak happens"), with residency
 * brought up to date first where pages may have faulted in since; and on the
 * timer, for the timeline.
 */
#ifndef PTFIL_PEAK_H
#define PTFIL_PEAK_H

#include <stddef.h>
#include <stdint.h>

struct tracer;
struct proc;

#define PEAK_MAX_SAMPLES 4096

struct sample { double time; uint64_t charged, rss; };

/* A process's part (struct proc's pk). Storage is the process's; peak_proc_fin frees the timeline. */
struct proc_peak {
	uint64_t last_faults;       /* fault count at the last full residency refresh */
	double faults_checked_at;   /* when that count was last read */
	uint64_t rss_at_refresh;    /* the RSS read with the last full refresh */
	struct sample *samples; size_t n_samples;  /* the timeline, bounded (PEAK_MAX_SAMPLES) */
	unsigned sample_stride, sample_skip;
	double snap_written_at;     /* when its peak snapshot was last written (output/snapshot.h) */
	double snap_peak_time;      /* the peak time that snapshot holds */
};

void peak_proc_fin(struct proc_peak *pk);

/* Before [start, end) of p loses its memory: its residency measured exactly, then the peak checked. */
void peak_before_release(struct tracer *T, struct proc *p, uint64_t start, uint64_t end);
/* Before a small block is freed: a peak check whose residency refresh is bounded in rate. */
void peak_before_small_release(struct tracer *T, struct proc *p);
/* Before an exec drops p's whole image: every range measured, the peak checked. */
void peak_before_exec(struct tracer *T, struct proc *p);
/*
 * The last look at p while it stands still (its exit event, leaving under
 * attach): residency up to date, the peak checked.
 */
void peak_last_look(struct tracer *T, struct proc *p);
/* The charge as it is now, against p's peak and the tree's combined peak: no measuring. */
void peak_check(struct tracer *T, struct proc *p);
/* The timer's work: refresh when faults moved, the peak, one timeline sample. */
void peak_poll(struct tracer *T, struct proc *p);

/* Brings every range of p up to date when p faulted in pages since the last time it was measured. */
void peak_refresh_if_faulted(struct tracer *T, struct proc *p);
/*
 * The ranges every process but except inherited at a fork (ledger_add_inherited)
 * are measured again: a relative wrote to pages they shared, execed or exited.
 */
void peak_refresh_inherited(struct tracer *T, struct proc *except);

#endif
