/* From the tracer's tables to a struct snap, symbolized so the file reads anywhere, then written. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/snap.h"
#include "symbols/sym.h"
#include "tracer/core.h"
#include "tracer/export.h"

static const char *stop_names[STOP__COUNT] = {
	[STOP_SECCOMP] = "stops.seccomp",
	[STOP_SYSCALL_EXIT] = "stops.syscall_exit",
	[STOP_SIGNAL] = "stops.signal",
	[STOP_GROUP] = "stops.group_stop",
	[STOP_NEW_TASK] = "stops.new_task",
	[STOP_CLONE] = "stops.clone",
	[STOP_EXEC] = "stops.exec",
	[STOP_EXIT] = "stops.exit",
	[STOP_BP_ENTRY] = "stops.bp_entry",
	[STOP_BP_RETURN] = "stops.bp_return",
	[STOP_DL_DEBUG] = "stops.dl_debug",
	[STOP_OTHER] = "stops.other",
	[STOP_BACKPRESSURE] = "stops.backpressure",
	[STOP_BP_WRAPPER] = "stops.bp_wrapper",
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* Per-stack charges with something in them, as snapshot stacks. */
static int fill_stacks(const struct ledger *l, const struct ledger_charge *c, size_t n,
		       struct snap_stack **out, size_t *n_out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += c[i].count || c[i].charged;
	*out = calloc(k ? k : 1, sizeof(**out));
	if (!*out)
		return -1;
	k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!c[i].count && !c[i].charged)
			continue;
		struct snap_stack *s = &(*out)[k++];
		s->node = (uint32_t)i;
		s->kind = l->kind[i] ? l->kind[i] : SNAP_KIND_MMAP;
		s->charged = c[i].charged;
		s->reserved = c[i].reserved;
		s->count = c[i].count;
	}
	*n_out = k;
	return 0;
}

static int counter(struct snap *s, size_t *k, const char *name, uint64_t v)
{
	s->counters[*k].name = strdup(name);
	s->counters[*k].count = v;
	return s->counters[(*k)++].name ? 0 : -1;
}

static int build(struct tracer *T, struct proc *p, int live, struct snap *s)
{
	s->version = SNAP_FORMAT_VERSION;
	s->ptfil_version = strdup(PTFIL_VERSION);
	s->mode = strdup(T->attach ? "attach" : "launch");
	char *none[] = { NULL };
	char **argv = p->argv ? p->argv : p->pid == T->main_pid && T->opts.argv ? T->opts.argv : none;
	for (char **a = argv; *a; a++)
		s->argc++;
	s->argv = calloc(s->argc + 1, sizeof(*s->argv));
	if (!s->ptfil_version || !s->mode || !s->argv)
		return -1;
	for (size_t i = 0; i < s->argc; i++)
		if (!(s->argv[i] = strdup(argv[i])))
			return -1;
	s->pid = p->pid;
	/* Times in the snapshot count from when this process was first seen. */
	double t0 = p->pid == T->main_pid ? 0 : p->started;
	s->start_time = T->start_time + t0;
	s->duration = (p->end_time ? p->end_time : tracer_now(T)) - t0;
	s->exit_status = p->status;
	if (p->nthreads) {
		uint64_t hwm = resid_vmhwm(p->pid);
		if (hwm > p->vmhwm)
			p->vmhwm = hwm;
	}
	s->vmhwm = p->vmhwm;
	s->page_size = (uint64_t)sysconf(_SC_PAGESIZE);

	s->modules = calloc(T->reg.n ? T->reg.n : 1, sizeof(*s->modules));
	if (!s->modules)
		return -1;
	s->n_modules = T->reg.n;
	for (size_t i = 0; i < T->reg.n; i++) {
		const struct modreg_entry *e = &T->reg.v[i];
		s->modules[i].path = strdup(e->path);
		s->modules[i].build_id = dup_or_null(e->build_id); /* as mapped: the file may be gone or replaced */
		s->modules[i].base = e->base;
		if (!s->modules[i].path)
			return -1;
	}
	s->frames = calloc(T->stacks.n_frames ? T->stacks.n_frames : 1, sizeof(*s->frames));
	if (!s->frames)
		return -1;
	s->n_frames = T->stacks.n_frames;
	for (size_t i = 0; i < T->stacks.n_frames; i++) {
		const struct stacks_frame *f = &T->stacks.frames[i];
		struct snap_frame *o = &s->frames[i];
		o->offset = f->offset;
		if (f->module == STACKS_PY_MODULE) {
			const struct pyname *py = &T->pynames.v[f->offset >> 32];
			o->kind = SNAP_FRAME_PYTHON;
			o->module = -1;
			o->offset = 0;
			o->line = (uint32_t)f->offset;
			o->function = strdup(py->function);
			o->file = strdup(py->file);
			if (!o->function || !o->file)
				return -1;
		} else if (f->name) {
			o->module = -1;
			o->function = strdup(f->name);
		} else if (f->module == STACKS_NO_MODULE) {
			o->module = -1;
		} else {
			o->module = (int32_t)f->module;
			const struct modreg_entry *e = &T->reg.v[f->module];
			const char *name = e->sym ? sym_lookup(e->sym, f->offset, NULL) : NULL;
			/* C++ names are written demangled: the snapshot is read by people. */
			o->function = sym_demangle(name);
			if (!o->function)
				o->function = dup_or_null(name);
		}
	}
	s->nodes = calloc(T->stacks.n_nodes, sizeof(*s->nodes));
	if (!s->nodes)
		return -1;
	s->n_nodes = T->stacks.n_nodes;
	for (size_t i = 0; i < T->stacks.n_nodes; i++) {
		s->nodes[i].parent = T->stacks.nodes[i].parent;
		s->nodes[i].frame = T->stacks.nodes[i].frame;
	}
	const struct ledger *l = &p->ledger;
	if (live) {
		/* What is live now stands in for the peak: a snapshot of the present, for leak hunting. */
		s->peak.time = tracer_now(T) - t0;
		s->peak.charged = l->charged;
		s->peak.reserved = l->reserved;
		s->peak.rss = p->nthreads ? resid_rss(&p->resid) : 0;
		if (fill_stacks(l, l->by_stack, l->n_stacks, &s->stacks, &s->n_stacks))
			return -1;
	} else {
		s->peak.time = l->peak.time - t0;
		s->peak.charged = l->peak.charged;
		s->peak.reserved = l->peak.reserved;
		s->peak.rss = l->peak.rss;
		if (fill_stacks(l, l->at_peak, l->n_at_peak, &s->stacks, &s->n_stacks))
			return -1;
	}
	if (fill_stacks(l, l->by_stack, l->n_stacks, &s->live, &s->n_live))
		return -1;
	s->samples = calloc(p->n_samples ? p->n_samples : 1, sizeof(*s->samples));
	if (!s->samples)
		return -1;
	s->n_samples = p->n_samples;
	for (size_t i = 0; i < p->n_samples; i++) {
		s->samples[i].time = p->samples[i].time - t0;
		s->samples[i].charged = p->samples[i].charged;
		s->samples[i].rss = p->samples[i].rss;
	}
	s->counters = calloc(STOP__COUNT + 64, sizeof(*s->counters)); /* stops, then the named counters below */
	if (!s->counters)
		return -1;
	size_t k = 0;
	uint64_t total = 0;
	for (int i = 0; i < STOP__COUNT; i++) {
		total += T->stops[i];
		if (counter(s, &k, stop_names[i], T->stops[i]))
			return -1;
	}
	if (counter(s, &k, "stops.total", total) || counter(s, &k, "unwinds", T->unw.unwinds) ||
	    counter(s, &k, "unwind.remote_reads", T->unw.remote_reads) ||
	    counter(s, &k, "unwind.stack_copies", T->unw.stack_copies) ||
	    counter(s, &k, "unwind.memo_hits", T->unw.memo_hits) ||
	    counter(s, &k, "unwind.splices", T->unw.splices) ||
	    counter(s, &k, "unwind.spliced_frames", T->unw.spliced_frames) ||
	    (T->unw.verify && counter(s, &k, "unwind.splice_mismatches", T->unw.splice_mismatches)) ||
	    counter(s, &k, "residency.refreshes", T->refreshes) ||
	    counter(s, &k, "attach.unhooked_mappings", T->reconciled) ||
	    counter(s, &k, "residency.measures", p->ledger.measures) ||
	    counter(s, &k, "heap.allocs", p->heap.allocs) ||
	    counter(s, &k, "heap.frees", p->heap.frees + p->heap.unknown_frees) ||
	    counter(s, &k, "heap.unknown_frees", p->heap.unknown_frees) ||
	    counter(s, &k, "heap.nested", T->nested_calls) ||
	    counter(s, &k, "heap.usable_size_blocks", T->usable_blocks) ||
	    (T->unsized_blocks && counter(s, &k, "heap.unsized_blocks", T->unsized_blocks)) ||
	    counter(s, &k, "tracer.vmhwm_bytes", resid_vmhwm(getpid())) ||
	    counter(s, &k, "tracer.live_blocks", p->heap.n) ||
	    counter(s, &k, "tracer.stack_nodes", T->stacks.n_nodes) ||
	    (T->opts.no_heap && counter(s, &k, "options.mappings_only", 1)) ||
	    (T->opts.exact_sizes && counter(s, &k, "options.exact_sizes", 1)) ||
	    (T->opts.native_frames && counter(s, &k, "options.native_frames", 1)))
		return -1;
	/* Which path saw the malloc family, and what the kernel path did (tracer/kheap.h). */
	kheap_refresh_stats(T);
	const struct kheap_stats *ks = &T->kstats;
	if (!T->opts.no_heap && counter(s, &k, p->kpath_used ? "heap_events.uprobe" : "heap_events.ptrace", 1))
		return -1;
	if (p->kpath_used &&
	    (counter(s, &k, "kernel.records", p->krecords) || counter(s, &k, "kernel.lost", ks->lost) ||
	     counter(s, &k, "kernel.backpressure", T->stops[STOP_BACKPRESSURE]) ||
	     counter(s, &k, "kernel.waits", ks->waits) || counter(s, &k, "kernel.late_copies", ks->late_copies) ||
	     counter(s, &k, "kernel.short_stacks", ks->short_stacks) ||
	     counter(s, &k, "kernel.unknown_threads", ks->unknown_thread)))
		return -1;
	const struct pystats *ps = &T->pystats;
	if (p->py.state == PY_READY &&
	    (counter(s, &k, "python.minor_version", p->py.l->minor) ||
	     counter(s, &k, "python.stacks", ps->stacks) || counter(s, &k, "python.frames", ps->frames) ||
	     counter(s, &k, "python.reads", ps->reads) || counter(s, &k, "python.code_decodes", ps->code_decodes) ||
	     counter(s, &k, "python.code_hits", ps->code_hits) || counter(s, &k, "python.thread_scans", ps->thread_scans) ||
	     counter(s, &k, "python.no_thread_state", p->py.no_thread) || counter(s, &k, "python.cut", ps->cut) ||
	     counter(s, &k, "python.group_mismatches", ps->group_mismatch) ||
	     counter(s, &k, "python.native_stacks", ps->native_stacks) ||
	     counter(s, &k, "python.native_us", ps->native_us) || counter(s, &k, "python.python_us", ps->python_us)))
		return -1;
	s->n_counters = k;
	return 0;
}

int tracer_write_snapshot(struct tracer *T, struct proc *p, int live, const char *path)
{
	struct snap s;
	snap_init(&s);
	int rc = build(T, p, live, &s);
	if (rc)
		error("out of memory building the snapshot");
	else
		rc = snap_write(&s, path);
	snap_fin(&s);
	return rc;
}
