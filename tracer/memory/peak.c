/* The peak policy (memory/peak.h): measure what is about to go, then compare with the peak. */
#include <stdlib.h>

#include "common/error.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/resid.h"
#include "tracer/memory/tree.h"

void peak_proc_fin(struct proc_peak *pk)
{
	free(pk->samples);
	pk->samples = NULL;
	pk->n_samples = 0;
}

static void sample(struct proc *p, double now)
{
	struct proc_peak *pk = p->pk;
	if (pk->sample_skip) {
		pk->sample_skip--;
		return;
	}
	if (!pk->samples && !(pk->samples = malloc(PEAK_MAX_SAMPLES * sizeof(*pk->samples))))
		return;
	if (pk->n_samples == PEAK_MAX_SAMPLES) {
		/* Keep the timeline bounded: halve its resolution and sample half as often. */
		for (size_t i = 0; i < PEAK_MAX_SAMPLES / 2; i++)
			pk->samples[i] = pk->samples[2 * i];
		pk->n_samples = PEAK_MAX_SAMPLES / 2;
		pk->sample_stride = pk->sample_stride ? pk->sample_stride * 2 : 2;
	}
	pk->samples[pk->n_samples].time = now;
	pk->samples[pk->n_samples].charged = alloc_view_ledger(p)->charged;
	pk->samples[pk->n_samples].rss = resid_rss(p->resid);
	pk->n_samples++;
	pk->sample_skip = pk->sample_stride ? pk->sample_stride - 1 : 0;
}

void peak_refresh_if_faulted(struct tracer *T, struct proc *p)
{
	p->pk->faults_checked_at = tracer_now(T);
	uint64_t faults = resid_faults(p->resid);
	if (faults != p->pk->last_faults) {
		/* Faults are read first so that pages faulted during the refresh are seen next time. */
		p->pk->last_faults = faults;
		p->pk->rss_at_refresh = resid_rss(p->resid);
		ledger_refresh_all(p->ledger);
		T->counts.refreshes++;
	}
}

void peak_refresh_inherited(struct tracer *T, struct proc *except)
{
	for (struct proc *q = T->procs; q; q = q->next)
		if (q != except && q->tree->inherited && q->ready && q->nthreads)
			ledger_refresh_inherited(q->ledger);
}

void peak_check(struct tracer *T, struct proc *p)
{
	/* The tree's sum may peak at a moment that is no process's own peak; a release follows. */
	tree_check_peak(T);
	tree_settle(T);
	if (p->ledger->has_peak && p->ledger->charged <= p->ledger->peak.charged)
		return;
	if (ledger_check_peak(p->ledger, tracer_now(T), resid_rss(p->resid)) < 0)
		warning("out of memory copying the peak");
}

void peak_before_release(struct tracer *T, struct proc *p, uint64_t start, uint64_t end)
{
	if (!p->ready)
		return;
	/* Exact residency of what is about to go, while its pages are still there. */
	ledger_refresh(p->ledger, start, end);
	peak_refresh_if_faulted(T, p);
	/* The touch view's peak, with the alloc view as it is at that moment, before any of it goes. */
	alloc_touch_settle(p);
	peak_check(T, p);
}

void peak_before_exec(struct tracer *T, struct proc *p)
{
	peak_before_release(T, p, 0, UINT64_MAX);
}

void peak_last_look(struct tracer *T, struct proc *p)
{
	if (!p->ready)
		return;
	peak_refresh_if_faulted(T, p);
	peak_check(T, p);
}

void peak_before_small_release(struct tracer *T, struct proc *p)
{
	if (!p->ready)
		return;
	/*
	 * A small block's charge is exact; only ranges' residency can be stale, and
	 * only by what became resident since they were measured, which the process's
	 * RSS shows too (statm, the cheapest counter: a fraction of a microsecond).
	 * When even that much more could not make a new peak, the refresh waits (at
	 * most a millisecond); otherwise it happens now, so that a peak reached just
	 * before a small free is not missed for residency read a moment too early.
	 */
	const struct ledger *l = p->ledger;
	uint64_t rss = resid_rss(p->resid);
	uint64_t grown = rss > p->pk->rss_at_refresh ? rss - p->pk->rss_at_refresh : 0;
	if (!l->has_peak || l->charged + grown > l->peak.charged || tracer_now(T) - p->pk->faults_checked_at > 0.001)
		peak_refresh_if_faulted(T, p);
	alloc_touch_settle(p);
	peak_check(T, p);
}

void peak_poll(struct tracer *T, struct proc *p)
{
	if (!p->ready || !p->nthreads)
		return;
	peak_refresh_if_faulted(T, p);
	peak_check(T, p);
	sample(p, tracer_now(T));
}
