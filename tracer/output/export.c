/* From the tracer's tables to a struct snap, symbolized so the file reads anywhere, then written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/snap.h"
#include "symbols/debugfile.h"
#include "symbols/srcline.h"
#include "symbols/sym.h"
#include "tracer/core/session.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/heap.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/resid.h"
#include "tracer/memory/tree.h"
#include "tracer/output/export.h"
#include "tracer/output/summary.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/pystack.h"
#include "tracer/stacks/stacks.h"
#include "tracer/stacks/unwind.h"

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

/* The stops by kind, then at most this many named counters (build_counters). */
#define COUNTERS_MAX (STOP__COUNT + 96)

static int counter(struct snap *s, size_t *k, const char *name, uint64_t v)
{
	if (*k >= COUNTERS_MAX) {
		/* A bug of ptfil's, not a reason to lose the snapshot: the counter is left out. */
		warning("more counters than the snapshot's table holds (%d): %s left out", COUNTERS_MAX, name);
		return 0;
	}
	s->counters[*k].name = strdup(name);
	s->counters[*k].count = v;
	return s->counters[(*k)++].name ? 0 : -1;
}

/* How stack frames and nodes became snapshot frames and nodes (build's scratch, freed by its caller). */
struct remap {
	uint32_t *first;  /* first snapshot frame of stack frame i; first[n_frames] is their number */
	uint32_t *node;   /* snapshot node of stack node m: the innermost of its chain */
};

/* The source lines of one stack frame, resolved once per run. */
struct srcmemo {
	int done;
	int n;                    /* entries in v: 0 when the frame has none */
	struct sym_srcframe *v;   /* innermost first (sym_source) */
};

void export_fin(struct tracer *T)
{
	for (size_t i = 0; i < T->exp->n_src; i++) {
		srcline_free(T->exp->src[i].v, (size_t)T->exp->src[i].n);
		free(T->exp->src[i].v);
	}
	free(T->exp->src);
	T->exp->src = NULL;
	T->exp->n_src = 0;
	free(T->exp->where);
	free(T->exp->where_tree);
	free(T->exp->where_top);
	T->exp->where = T->exp->where_tree = T->exp->where_top = NULL;
	debugfile_fin();
}

/* The source of stack frame i (a native frame in a module with DWARF): its entries, 0 when none. */
static int frame_source(struct tracer *T, uint32_t i, struct sym_srcframe **v)
{
	*v = NULL;
	if (i >= T->exp->n_src) {
		size_t n = T->stacks->n_frames;
		struct srcmemo *m = realloc(T->exp->src, n * sizeof(*m));
		if (!m)
			return 0;  /* without lines, not without a snapshot */
		memset(m + T->exp->n_src, 0, (n - T->exp->n_src) * sizeof(*m));
		T->exp->src = m;
		T->exp->n_src = n;
	}
	struct srcmemo *m = &T->exp->src[i];
	if (!m->done) {
		m->done = 1;
		const struct stacks_frame *f = &T->stacks->frames[i];
		struct sym_file *sym = f->module < T->reg->n && !f->name ? T->reg->v[f->module].sym : NULL;
		struct sym_srcframe tmp[SRCLINE_MAX];
		int n = sym ? sym_source(sym, f->offset, tmp) : 0;
		T->exp->src_lookups += sym != NULL;
		if (n > 0 && (m->v = malloc((size_t)n * sizeof(*m->v))) != NULL) {
			memcpy(m->v, tmp, (size_t)n * sizeof(*m->v));
			m->n = n;
		} else if (n > 0) {
			srcline_free(tmp, (size_t)n);
		}
	}
	*v = m->v;
	return m->n;
}

/* Modules used by some frame: mark[g] = 1. NULL when memory runs out. */
static char *used_modules(struct tracer *T)
{
	char *used = calloc(T->reg->n ? T->reg->n : 1, 1);
	for (size_t i = 0; used && i < T->stacks->n_frames; i++) {
		const struct stacks_frame *f = &T->stacks->frames[i];
		if (!f->name && f->module < T->reg->n)
			used[f->module] = 1;
	}
	return used;
}

/*
 * With DEBUGINFOD_URLS set, the debug files of the modules in the stacks
 * that have no DWARF here: asked once per file, by build id.
 */
static void fetch_debug_files(struct tracer *T)
{
	if (!debugfile_have_servers())
		return;
	char *used = used_modules(T);
	for (size_t g = 0; used && g < T->reg->n; g++) {
		struct sym_file *sym = T->reg->v[g].sym;
		const char *why;
		if (used[g] && sym && !sym_has_lines(sym) && sym_build_id(sym) && sym_fetch_debug(sym, &why) == 0)
			T->exp->src_fetched++;
	}
	free(used);
}

static char symbols_kind(enum sym_names n)
{
	switch (n) {
	case SYM_NAMES_NONE: return SNAP_SYMBOLS_NONE;
	case SYM_NAMES_EXPORTS: return SNAP_SYMBOLS_EXPORTS;
	case SYM_NAMES_MINI: return SNAP_SYMBOLS_MINI;
	case SYM_NAMES_FULL: return SNAP_SYMBOLS_FULL;
	}
	return SNAP_SYMBOLS_UNKNOWN;
}

/*
 * The package that installed each module in the stacks (used) that lacks
 * names or lines, looked up once per module and for all of them in one
 * reading of dpkg's lists (a reading per module cost a NumPy run 0.3 s).
 */
static void name_packages(struct modreg *reg, const char *used)
{
	size_t n = 0;
	const char **path = calloc(reg->n ? reg->n : 1, sizeof(*path));
	size_t *which = calloc(reg->n ? reg->n : 1, sizeof(*which));
	char **pkg = calloc(reg->n ? reg->n : 1, sizeof(*pkg));
	for (size_t i = 0; path && which && pkg && i < reg->n; i++) {
		struct modreg_entry *e = &reg->v[i];
		if (!e->sym || !used[i] || e->package_done ||
		    (sym_has_lines(e->sym) && symbols_kind(sym_names(e->sym)) == SNAP_SYMBOLS_FULL))
			continue;
		e->package_done = 1;
		path[n] = e->path;
		which[n++] = i;
	}
	if (n)
		debugfile_packages(path, n, pkg);
	for (size_t k = 0; k < n; k++)
		reg->v[which[k]].package = pkg[k];
	free(path);
	free(which);
	free(pkg);
}

/*
 * The modules, with what debug information each had; for those in the
 * stacks that lacked names or lines, the package that installed them, which
 * the report names (its -dbgsym package would give them).
 */
static int fill_modules(struct tracer *T, struct snap *s)
{
	s->modules = calloc(T->reg->n ? T->reg->n : 1, sizeof(*s->modules));
	char *used = used_modules(T);
	if (!s->modules || !used) {
		free(used);
		return -1;
	}
	s->n_modules = T->reg->n;
	name_packages(T->reg, used);
	for (size_t i = 0; i < T->reg->n; i++) {
		struct modreg_entry *e = &T->reg->v[i];
		struct snap_module *m = &s->modules[i];
		m->path = strdup(e->path);
		m->build_id = dup_or_null(e->build_id); /* as mapped: the file may be gone or replaced */
		m->base = e->base;
		if (!m->path) {
			free(used);
			return -1;
		}
		if (!e->sym)
			continue;
		m->symbols = symbols_kind(sym_names(e->sym));
		m->lines = sym_has_lines(e->sym);
		m->package = dup_or_null(e->package);
	}
	free(used);
	return 0;
}

/* Times in a snapshot count from when its process was first seen (the main one: the start). */
static double time_origin(struct tracer *T, const struct proc *p)
{
	return p->pid == T->main_pid ? 0 : p->started;
}

/* The snapshot's header: versions, the command line, the process's times and VmHWM. */
static int build_header(struct tracer *T, struct proc *p, struct snap *s)
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
	double t0 = time_origin(T, p);
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
	return 0;
}

/*
 * Frames: each stack frame, preceded by the calls the compiler inlined at its
 * address (innermost first), named and with its source line; then the modules.
 */
static int build_frames(struct tracer *T, struct snap *s, struct remap *rm)
{
	/* Frames first[i] .. first[i + 1] - 1 stand for stack frame i, itself the last of them. */
	double t_src = tracer_now(T);
	fetch_debug_files(T);
	size_t nf = T->stacks->n_frames;
	if (!(rm->first = calloc(nf + 1, sizeof(*rm->first))))
		return -1;
	size_t n_out = 0;
	for (size_t i = 0; i < nf; i++) {
		struct sym_srcframe *v;
		int n = frame_source(T, (uint32_t)i, &v);
		rm->first[i] = (uint32_t)n_out;
		n_out += n > 1 ? (size_t)n : 1;
	}
	rm->first[nf] = (uint32_t)n_out;
	if (n_out > UINT32_MAX - 1 || !(s->frames = calloc(n_out ? n_out : 1, sizeof(*s->frames))))
		return -1;
	s->n_frames = n_out;
	for (size_t i = 0; i < nf; i++) {
		const struct stacks_frame *f = &T->stacks->frames[i];
		struct snap_frame *o = &s->frames[rm->first[i + 1] - 1];
		o->offset = f->offset;
		if (f->module == STACKS_PY_MODULE) {
			const struct pyname *py = &T->cap->pynames.v[f->offset >> 32];
			o->kind = SNAP_FRAME_PYTHON;
			o->module = -1;
			o->offset = 0;
			o->line = (uint32_t)f->offset;
			o->function = strdup(py->function);
			o->file = strdup(py->file);
			if (!o->function || !o->file)
				return -1;
			continue;
		}
		if (f->name) {
			o->module = -1;
			o->function = strdup(f->name);
			continue;
		}
		if (f->module == STACKS_NO_MODULE) {
			o->module = -1;
			continue;
		}
		o->module = (int32_t)f->module;
		const struct modreg_entry *e = &T->reg->v[f->module];
		const char *name = e->sym ? sym_lookup(e->sym, f->offset, NULL) : NULL;
		/* C++ names are written demangled: the snapshot is read by people. */
		o->function = sym_demangle(name);
		if (!o->function)
			o->function = dup_or_null(name);
		struct sym_srcframe *v;
		int n = frame_source(T, (uint32_t)i, &v);
		if (n <= 0)
			continue;
		/* The function that holds the address: its symbol's name, the DWARF's when it has none. */
		const struct sym_srcframe *fn = &v[n - 1];
		if (!o->function)
			o->function = dup_or_null(fn->function);
		o->file = dup_or_null(fn->file);
		o->line = fn->line;
		if ((fn->function && !o->function) || (fn->file && !o->file))
			return -1;
		for (int j = 0; j < n - 1; j++) {
			struct snap_frame *q = &s->frames[rm->first[i] + (uint32_t)j];
			q->module = o->module;
			q->offset = o->offset;
			q->function = dup_or_null(v[j].function);
			q->file = dup_or_null(v[j].file);
			q->line = v[j].line;
			q->inlined = 1;
			if ((v[j].function && !q->function) || (v[j].file && !q->file))
				return -1;
		}
	}
	T->exp->src_seconds += tracer_now(T) - t_src;
	return fill_modules(T, s);
}

static int build_nodes(struct tracer *T, struct snap *s, struct remap *rm)
{
	/* Nodes: stack node m becomes a chain, its frame's inlined calls below it; rm->node[m] is the chain's innermost. */
	size_t nn = T->stacks->n_nodes, total_nodes = 1;
	for (size_t m = 1; m < nn; m++) {
		uint32_t fi = T->stacks->nodes[m].frame;
		total_nodes += rm->first[fi + 1] - rm->first[fi];
	}
	if (total_nodes > UINT32_MAX || !(rm->node = calloc(nn ? nn : 1, sizeof(*rm->node))) ||
	    !(s->nodes = calloc(total_nodes, sizeof(*s->nodes))))
		return -1;
	s->n_nodes = total_nodes;
	size_t k_node = 1;
	for (size_t m = 1; m < nn; m++) {
		uint32_t fi = T->stacks->nodes[m].frame;
		uint32_t parent = rm->node[T->stacks->nodes[m].parent];
		for (uint32_t j = rm->first[fi + 1]; j-- > rm->first[fi];) {
			s->nodes[k_node] = (struct snap_node){ parent, j };
			parent = (uint32_t)k_node++;
		}
		rm->node[m] = parent;
	}
	return 0;
}

/* The charge by stack at the peak (with live, now), what is live at the end, the timeline. */
static int build_charges(struct tracer *T, struct proc *p, int live, struct snap *s, const struct remap *rm)
{
	/* The touch view's peak is copied at the first release after it (memory/ledger.h): now, if not yet. */
	alloc_touch_settle(p);
	const struct ledger *l = alloc_view_ledger(p);
	double t0 = time_origin(T, p);
	if (p->touch) {
		/* The alloc view beside it, at the same moment: the mappings that reserved what was made resident. */
		const struct touch *tv = p->touch;
		s->view = SNAP_VIEW_TOUCH;
		if (fill_stacks(p->ledger, live ? p->ledger->by_stack : tv->other,
				live ? p->ledger->n_stacks : tv->n_other, &s->other, &s->n_other))
			return -1;
		for (size_t i = 0; i < s->n_other; i++)
			s->other[i].node = rm->node[s->other[i].node];
		if (!live && tv->n_links) {
			if (!(s->links = calloc(tv->n_links, sizeof(*s->links))))
				return -1;
			for (size_t i = 0; i < tv->n_links; i++)
				s->links[i] = (struct snap_link){ rm->node[tv->links[i].touch], rm->node[tv->links[i].alloc],
								  tv->links[i].bytes };
			s->n_links = tv->n_links;
		}
	}
	if (live) {
		/* What is live now stands in for the peak: a snapshot of the present, for leak hunting. */
		s->peak.time = tracer_now(T) - t0;
		s->peak.charged = l->charged;
		s->peak.reserved = l->reserved;
		s->peak.rss = p->nthreads ? resid_rss(p->resid) : 0;
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
	/* The stacks named stack nodes: they name snapshot nodes, inlined calls included. */
	for (size_t i = 0; i < s->n_stacks; i++)
		s->stacks[i].node = rm->node[s->stacks[i].node];
	for (size_t i = 0; i < s->n_live; i++)
		s->live[i].node = rm->node[s->live[i].node];
	s->samples = calloc(p->pk->n_samples ? p->pk->n_samples : 1, sizeof(*s->samples));
	if (!s->samples)
		return -1;
	s->n_samples = p->pk->n_samples;
	for (size_t i = 0; i < p->pk->n_samples; i++) {
		s->samples[i].time = p->pk->samples[i].time - t0;
		s->samples[i].charged = p->pk->samples[i].charged;
		s->samples[i].rss = p->pk->samples[i].rss;
	}
	return 0;
}

/* The counters: what tracing this process cost, and how (the table holds COUNTERS_MAX at most). */
static int build_counters(struct tracer *T, struct proc *p, struct snap *s)
{
	s->counters = calloc(COUNTERS_MAX, sizeof(*s->counters));
	if (!s->counters)
		return -1;
	size_t k = 0;
	uint64_t total = 0, run_total = 0;
	/* This process's own stops and unwinds; with --follow-forks, the whole run's beside them. */
	capture_account(T, T->cap->unw_owner);
	const struct proc_counts *pc = &p->counts;
	for (int i = 0; i < STOP__COUNT; i++) {
		total += pc->stops[i];
		run_total += T->counts.stops[i];
		if (counter(s, &k, stop_names[i], pc->stops[i]))
			return -1;
	}
	if (counter(s, &k, "stops.total", total) || counter(s, &k, "unwinds", pc->unwinds) ||
	    counter(s, &k, "unwind.remote_reads", pc->remote_reads) ||
	    counter(s, &k, "unwind.stack_copies", pc->stack_copies) ||
	    counter(s, &k, "unwind.memo_hits", pc->memo_hits) ||
	    counter(s, &k, "unwind.splices", pc->splices) ||
	    counter(s, &k, "unwind.spliced_frames", pc->spliced_frames) ||
	    (T->opts.follow_forks && (counter(s, &k, "run.stops.total", run_total) ||
				      counter(s, &k, "run.unwinds", T->unw->unwinds))) ||
	    (T->tree->unprofiled && (counter(s, &k, "children.unprofiled", T->tree->unprofiled) ||
				    counter(s, &k, "children.unprofiled_max_vmhwm_bytes", T->tree->unprofiled_hwm))) ||
	    (T->unw->verify && counter(s, &k, "unwind.splice_mismatches", T->unw->splice_mismatches)) ||
	    counter(s, &k, "residency.refreshes", T->counts.refreshes) ||
	    counter(s, &k, "symbols.lookups", T->exp->src_lookups) ||
	    counter(s, &k, "symbols.us", (uint64_t)(T->exp->src_seconds * 1e6)) ||
	    counter(s, &k, "symbols.fetched", T->exp->src_fetched) ||
	    counter(s, &k, "attach.unhooked_mappings", T->counts.reconciled) ||
	    counter(s, &k, "residency.measures", p->ledger->measures) ||
	    counter(s, &k, "heap.allocs", p->heap->allocs) ||
	    counter(s, &k, "heap.frees", p->heap->frees + p->heap->unknown_frees) ||
	    counter(s, &k, "heap.unknown_frees", p->heap->unknown_frees) ||
	    counter(s, &k, "heap.nested", pc->nested_calls) ||
	    counter(s, &k, "heap.usable_size_blocks", pc->usable_blocks) ||
	    counter(s, &k, "heap.one_stop_blocks", pc->one_stop_blocks) ||
	    (pc->unsized_blocks && counter(s, &k, "heap.unsized_blocks", pc->unsized_blocks)) ||
	    counter(s, &k, "tracer.vmhwm_bytes", resid_vmhwm(getpid())) ||
	    counter(s, &k, "tracer.live_blocks", p->heap->n) ||
	    counter(s, &k, "tracer.stack_nodes", T->stacks->n_nodes) ||
	    (T->opts.no_heap && counter(s, &k, "options.mappings_only", 1)) ||
	    (T->opts.exact_sizes && counter(s, &k, "options.exact_sizes", 1)) ||
	    (T->opts.native_frames && counter(s, &k, "options.native_frames", 1)))
		return -1;
	/* Which path saw the malloc family, and what the kernel path did (tracer/kernel/kheap.h). */
	kheap_refresh_stats(T);
	const struct kheap_stats *ks = kheap_stats(T);
	if (!T->opts.no_heap && counter(s, &k, p->kp->used ? "heap_events.uprobe" : "heap_events.ptrace", 1))
		return -1;
	if (p->kp->used &&
	    (counter(s, &k, "kernel.records", p->kp->records) || counter(s, &k, "kernel.lost", ks->lost) ||
	     counter(s, &k, "kernel.backpressure", T->counts.stops[STOP_BACKPRESSURE]) ||
	     counter(s, &k, "kernel.waits", ks->waits) || counter(s, &k, "kernel.late_copies", ks->late_copies) ||
	     counter(s, &k, "kernel.short_stacks", ks->short_stacks) || counter(s, &k, "kernel.ring_retries", ks->retries) ||
	     counter(s, &k, "kernel.python_stops", ks->python_stops) ||
	     counter(s, &k, "kernel.unknown_threads", ks->unknown_thread)))
		return -1;
	/* The fault path (tracer/kernel/faults.h), for a process with the touch view. */
	const struct faults_stats *fs = faults_stats(T);
	if (p->touch &&
	    (counter(s, &k, "touch.records", fs->records) || counter(s, &k, "touch.faults", fs->faults) ||
	     counter(s, &k, "touch.copy_on_write", fs->cows) || counter(s, &k, "touch.grows", fs->grows) ||
	     counter(s, &k, "touch.shrinks", fs->shrinks) || counter(s, &k, "touch.moves", fs->moves) ||
	     counter(s, &k, "touch.lost", fs->lost) || counter(s, &k, "touch.ring_retries", fs->retries) ||
	     counter(s, &k, "touch.python_stops", fs->python_stops) ||
	     counter(s, &k, "touch.backpressure", fs->stops) || counter(s, &k, "touch.read_faults", fs->reads) ||
	     counter(s, &k, "touch.stack_copies_failed", fs->stack_fails) ||
	     counter(s, &k, "touch.stacks_repeated", fs->same_stacks) || counter(s, &k, "touch.stale_faults", fs->stale) ||
	     counter(s, &k, "touch.unknown_records", fs->unknown) || counter(s, &k, "touch.scans", fs->scans) ||
	     counter(s, &k, "touch.scan_added_bytes", fs->scan_added) ||
	     counter(s, &k, "touch.first_fault_extra_bytes", fs->first_extent) ||
	     counter(s, &k, "touch.scan_released_bytes", fs->scan_released) ||
	     counter(s, &k, "touch.pages_touched", p->touch->pages.touched) ||
	     counter(s, &k, "touch.pages_released", p->touch->pages.released)))
		return -1;
	const struct pystats *ps = &T->cap->pystats;
	if (p->py->state == PY_READY &&
	    (counter(s, &k, "python.minor_version", p->py->l->minor) ||
	     counter(s, &k, "python.layout_debug_offsets", (uint64_t)p->py->l->debug_offsets) ||
	     counter(s, &k, "python.stacks", ps->stacks) || counter(s, &k, "python.frames", ps->frames) ||
	     counter(s, &k, "python.reads", ps->reads) || counter(s, &k, "python.code_decodes", ps->code_decodes) ||
	     counter(s, &k, "python.code_hits", ps->code_hits) || counter(s, &k, "python.thread_scans", ps->thread_scans) ||
	     counter(s, &k, "python.no_thread_state", p->py->no_thread) || counter(s, &k, "python.cut", ps->cut) ||
	     counter(s, &k, "python.group_mismatches", ps->group_mismatch) ||
	     counter(s, &k, "python.native_stacks", ps->native_stacks) ||
	     counter(s, &k, "python.native_us", ps->native_us) || counter(s, &k, "python.python_us", ps->python_us) ||
	     counter(s, &k, "python.kernel_stacks", ps->kernel_stacks) ||
	     counter(s, &k, "python.kernel_failed", ps->kernel_failed) ||
	     counter(s, &k, "python.kernel_freed_frames", ps->kernel_freed)))
		return -1;
	s->n_counters = k;
	return 0;
}

static int build(struct tracer *T, struct proc *p, int live, struct snap *s, struct remap *rm)
{
	if (build_header(T, p, s) || build_frames(T, s, rm) || build_nodes(T, s, rm) ||
	    build_charges(T, p, live, s, rm) || build_counters(T, p, s))
		return -1;
	/* The main process's snapshot carries the tree: every process, and the combined peak. */
	if (p->pid == T->main_pid && !live && tree_export(T, s, rm->node))
		return -1;
	return 0;
}

void export_frame_text(struct tracer *T, uint32_t fi, int lines, char *buf, size_t size)
{
	const struct stacks_frame *f = &T->stacks->frames[fi];
	if (f->module == STACKS_PY_MODULE) {
		const struct pyname *py = &T->cap->pynames.v[f->offset >> 32];
		const char *slash = strrchr(py->file, '/');
		snprintf(buf, size, "%s (%s:%u)", py->function, slash ? slash + 1 : py->file, (unsigned)f->offset);
		return;
	}
	if (f->name || f->module == STACKS_NO_MODULE || f->module >= T->reg->n) {
		if (f->name)
			snprintf(buf, size, "%s", f->name);
		else
			snprintf(buf, size, "0x%llx", (unsigned long long)f->offset);
		return;
	}
	const struct modreg_entry *e = &T->reg->v[f->module];
	const char *name = e->sym ? sym_lookup(e->sym, f->offset, NULL) : NULL;
	char *dm = sym_demangle(name);
	struct sym_srcframe *v = NULL;
	int n = lines ? frame_source(T, fi, &v) : 0;
	const char *fn = dm ? dm : name ? name : n > 0 ? v[n - 1].function : NULL;
	const char *mod = strrchr(e->path, '/');
	mod = mod ? mod + 1 : e->path;
	if (!fn)
		snprintf(buf, size, "%s + 0x%llx", mod, (unsigned long long)f->offset);
	else if (n > 0 && v[n - 1].file) {
		const char *slash = strrchr(v[n - 1].file, '/');
		snprintf(buf, size, "%s (%s:%u)", fn, slash ? slash + 1 : v[n - 1].file, (unsigned)v[n - 1].line);
	} else {
		snprintf(buf, size, "%s (%s)", fn, mod);
	}
	free(dm);
}

char *export_stack_text(struct tracer *T, uint32_t node, size_t max)
{
	char buf[2048], one[512];
	size_t k = 0, shown = 0;
	buf[0] = '\0';
	for (uint32_t n = node; n != STACKS_ROOT && n < T->stacks->n_nodes && shown < max; n = T->stacks->nodes[n].parent) {
		export_frame_text(T, T->stacks->nodes[n].frame, 1, one, sizeof(one));
		int w = snprintf(buf + k, sizeof(buf) - k, "%s%s", shown++ ? " <- " : "", one);
		if (w < 0 || (size_t)w >= sizeof(buf) - k)
			break;
		k += (size_t)w;
	}
	return strdup(shown ? buf : "(no stack)");
}

int tracer_write_snapshot(struct tracer *T, struct proc *p, int live, const char *path)
{
	struct snap s;
	struct remap rm = { NULL, NULL };
	snap_init(&s);
	int rc = build(T, p, live, &s, &rm);
	free(rm.first);
	free(rm.node);
	if (rc)
		error("out of memory building the snapshot");
	else
		rc = snap_write(&s, path);
	if (rc == 0 && !live && p->pid == T->main_pid)
		summary_keep(T, &s);
	snap_fin(&s);
	return rc;
}
