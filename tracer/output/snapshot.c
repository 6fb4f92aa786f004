/*
 * Snapshot files: their names, writing one (at the end, at a new peak, on
 * SIGUSR1), and rewriting growing peaks at a bounded rate so that a killed
 * ptfil leaves a recent one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/snap.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/output/export.h"
#include "tracer/output/snapshot.h"

/* How often at most a growing peak is written again, so that a killed ptfil leaves a recent one. */
#define CHECKPOINT_SECONDS 1.0

char *snapshot_path(struct tracer *T, struct proc *p, unsigned live)
{
	const char *out = T->output;
	size_t stem = strlen(out);
	if (stem > 3 && !strcmp(out + stem - 3, ".gz"))
		stem -= 3;
	size_t n = stem + 64;
	char *s = malloc(n);
	if (!s)
		return NULL;
	int len = snprintf(s, n, "%.*s", (int)stem, out);
	if (p->pid != T->main_pid)
		len += snprintf(s + len, n - (size_t)len, ".%d", (int)p->pid);
	if (live)
		len += snprintf(s + len, n - (size_t)len, ".live-%u", live);
	if (p->pid != T->main_pid || live || stem != strlen(out))
		snprintf(s + len, n - (size_t)len, ".gz");
	return s;
}

int snapshot_write(struct tracer *T, struct proc *p, int live)
{
	char *path = snapshot_path(T, p, live ? ++T->exp->live_written : 0);
	if (!path)
		return error("out of memory");
	int rc = tracer_write_snapshot(T, p, live, path);
	if (rc == 0 && !live) {
		p->pk->snap_written_at = tracer_now(T);
		p->pk->snap_peak_time = alloc_view_ledger(p)->peak.time;
	}
	if (rc == 0 && live)
		notice("live state of process %d written to %s", (int)p->pid, path);
	free(path);
	return rc;
}

void snapshot_checkpoint(struct tracer *T)
{
	/* Reported once: the same error at every tick would bury the run; the end reports it for good. */
	static int failed;
	double now = tracer_now(T);
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled || !p->ready || !alloc_view_ledger(p)->has_peak ||
		    alloc_view_ledger(p)->peak.time == p->pk->snap_peak_time)
			continue;
		if (p->pk->snap_written_at && now - p->pk->snap_written_at < CHECKPOINT_SECONDS)
			continue;
		/* A device or a FIFO (-o /dev/stdout) takes the last snapshot only: a rewrite would follow the first. */
		char *path = snapshot_path(T, p, 0);
		int in_place = path && snap_output_in_place(path);
		free(path);
		if (in_place)
			continue;
		error_set_quiet(failed);
		if (snapshot_write(T, p, 0)) {
			failed = 1;
			p->pk->snap_written_at = now;  /* tried again a second later, not at every tick */
		}
		error_set_quiet(0);
	}
}


char *snapshot_file_name(struct tracer *T, struct proc *p)
{
	if (!p->profiled || !p->ready || !T->output)
		return NULL;
	char *path = snapshot_path(T, p, 0);
	if (!path)
		return NULL;
	const char *slash = strrchr(path, '/');
	char *name = strdup(slash ? slash + 1 : path);
	free(path);
	return name;
}
