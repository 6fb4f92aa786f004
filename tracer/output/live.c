/*
 * --live: the model the terminal view draws (tracer/output/live.h), built from the
 * tracer's tables between events, about once a second. Its cost is the top
 * stacks' selection and their frames' names, which are made once per frame
 * and kept (no DWARF: ELF names and Python lines only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fold.h"
#include "common/snap.h"
#include "symbols/sym.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/resid.h"
#include "tracer/memory/tree.h"
#include "tracer/output/export.h"
#include "tracer/output/live.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/pystack.h"
#include "tracer/stacks/stacks.h"

#define LIVE_TOP 50          /* stacks in each list */
#define LIVE_DEPTH 64        /* frames kept per stack */
#define LIVE_PERIOD 1.0      /* seconds between models */

void live_model_free(struct live_model *m)
{
	if (!m)
		return;
	struct live_stack *lists[2] = { m->now_stacks, m->peak_stacks };
	size_t ns[2] = { m->n_now, m->n_peak };
	for (int k = 0; k < 2; k++) {
		for (size_t i = 0; i < ns[k]; i++) {
			for (size_t j = 0; j < lists[k][i].n_frames; j++)
				free(lists[k][i].frames[j]);
			free(lists[k][i].frames);
			free(lists[k][i].summary);
		}
		free(lists[k]);
	}
	free(m->samples);
	free(m->command);
	free(m);
}

void live_fin(struct tracer *T)
{
	for (size_t i = 0; i < T->live->n_names; i++)
		free(T->live->names[i]);
	free(T->live->names);
	free(T->live->kinds);
	T->live->names = NULL;
	T->live->kinds = NULL;
	T->live->n_names = 0;
}

/* Frame fi's text, made once and kept. Owned by T; NULL when out of memory. */
static const char *name_of(struct tracer *T, uint32_t fi)
{
	if (fi >= T->live->n_names) {
		size_t n = T->stacks->n_frames;
		char **v = realloc(T->live->names, n * sizeof(*v));
		if (!v)
			return NULL;
		memset(v + T->live->n_names, 0, (n - T->live->n_names) * sizeof(*v));
		T->live->names = v;
		unsigned char *k = realloc(T->live->kinds, n);
		if (!k)
			return NULL;
		memset(k + T->live->n_names, 0, n - T->live->n_names);
		T->live->kinds = k;
		T->live->n_names = n;
	}
	if (!T->live->names[fi]) {
		char buf[512];
		export_frame_text(T, fi, 0, buf, sizeof(buf));
		T->live->names[fi] = strdup(buf);
	}
	return T->live->names[fi];
}

/* What a frame is, for the anchor and the folds (common/fold.h). */
enum {
	FK_KNOWN = 1,        /* the others are set */
	FK_PYTHON = 2,       /* a Python frame */
	FK_IMPORT = 4,       /* of Python's import system */
	FK_OWN = 8,          /* the user's own code, in a stack without Python frames */
	FK_OWN_PY = 16,      /* the same in a stack with them (the interpreter is not) */
	FK_MODULE_BODY = 32, /* a Python module's body ("<module>") */
};

/* Frame fi's kind bits, found once and kept (name_of made room for it). */
static unsigned kind_of(struct tracer *T, uint32_t fi)
{
	if (fi >= T->live->n_names || T->live->kinds[fi])
		return fi < T->live->n_names ? T->live->kinds[fi] : 0;
	const struct stacks_frame *f = &T->stacks->frames[fi];
	unsigned k = FK_KNOWN;
	if (f->module == STACKS_PY_MODULE) {
		const struct pyname *py = &T->cap->pynames.v[f->offset >> 32];
		k |= FK_PYTHON;
		if (fold_import_file(py->file))
			k |= FK_IMPORT;
		if (fold_own_python(T->opts.own, py->file))
			k |= FK_OWN | FK_OWN_PY;
		if (py->function && !strcmp(py->function, "<module>"))
			k |= FK_MODULE_BODY;
	} else if (f->module != STACKS_NO_MODULE && f->module < T->reg->n) {
		const struct modreg_entry *e = &T->reg->v[f->module];
		const char *name = f->name ? f->name : e->sym ? sym_lookup(e->sym, f->offset, NULL) : NULL;
		char *dm = sym_demangle(name);
		if (fold_own_native(T->opts.own, e->path, NULL, dm ? dm : name, 0))
			k |= FK_OWN;
		if (fold_own_native(T->opts.own, e->path, NULL, dm ? dm : name, 1))
			k |= FK_OWN_PY;
		free(dm);
	}
	T->live->kinds[fi] = (unsigned char)k;
	return k;
}

/* Whether a frame only carries the allocation out (the allocator, the system call's wrapper): not meaningful. */
static int plumbing(const char *text)
{
	static const char *const names[] = {
		"malloc", "calloc", "realloc", "free", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
		"valloc", "pvalloc", "mmap", "mmap64", "__mmap", "__mmap64", "__GI___mmap64", "mremap", "__mremap",
		"brk", "__brk", "sbrk", "__sbrk", "_int_malloc", "_int_realloc", "sysmalloc", "operator new",
		"operator new[]", "__libc_malloc", "__libc_calloc", "__libc_realloc", "tcache_init", "ptmalloc_init",
		"_PyObject_ArenaMmap", "_PyMem_RawMalloc", "PyMem_RawMalloc", "PyMem_Malloc", "PyObject_Malloc",
		"_PyObject_Malloc", "_PyMem_RawCalloc", "PyMem_RawCalloc", "PyObject_Calloc",
	};
	size_t len = strcspn(text, " (");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == len && !strncmp(text, names[i], len))
			return 1;
	return !strncmp(text, "operator new", 12);
}

/* One charge of one process, while choosing the top. */
struct pick {
	uint64_t charged, reserved, count;
	uint32_t node;
	char kind;
	pid_t pid;
};

/* Keeps the LIVE_TOP largest in a min-heap top[0..*n). */
static void offer(struct pick *top, size_t *n, const struct pick *x)
{
	size_t i;
	if (*n < LIVE_TOP) {
		i = (*n)++;
	} else if (x->charged > top[0].charged) {
		/* Replace the smallest, and sift it down. */
		i = 0;
		for (;;) {
			size_t c = 2 * i + 1;
			if (c >= *n)
				break;
			if (c + 1 < *n && top[c + 1].charged < top[c].charged)
				c++;
			if (top[c].charged >= x->charged)
				break;
			top[i] = top[c];
			i = c;
		}
		top[i] = *x;
		return;
	} else {
		return;
	}
	while (i > 0 && top[(i - 1) / 2].charged > x->charged) {
		top[i] = top[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	top[i] = *x;
}

static void offer_all(struct tracer *T, struct pick *top, size_t *n, const struct ledger_charge *c, size_t nc,
		      const struct ledger *l, pid_t pid)
{
	for (size_t i = 0; i < nc && i < T->stacks->n_nodes; i++) {
		if (!c[i].charged)
			continue;
		struct pick x = { c[i].charged, c[i].reserved, c[i].count, (uint32_t)i,
				  i < l->n_stacks && l->kind[i] ? l->kind[i] : SNAP_KIND_MMAP, pid };
		offer(top, n, &x);
	}
}

static int by_charge(const void *pa, const void *pb)
{
	const struct pick *a = pa, *b = pb;
	return a->charged > b->charged ? -1 : a->charged < b->charged;
}

/* The chosen stacks as the view lists them, largest first. */
static int fill(struct tracer *T, struct pick *top, size_t n, struct live_stack **out, size_t *n_out)
{
	qsort(top, n, sizeof(*top), by_charge);
	*out = calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		return -1;
	*n_out = n;
	for (size_t i = 0; i < n; i++) {
		struct live_stack *st = &(*out)[i];
		st->charged = top[i].charged;
		st->reserved = top[i].reserved;
		st->count = top[i].count;
		st->kind = top[i].kind;
		st->pid = top[i].pid;
		st->frames = calloc(LIVE_DEPTH, sizeof(*st->frames));
		if (!st->frames)
			return -1;
		/* The frames as ids first: folds and the anchor need the whole stack. */
		uint32_t ids[LIVE_DEPTH * 4];
		size_t n_ids = 0;
		int has_python = 0;
		for (uint32_t node = top[i].node; node != STACKS_ROOT && n_ids < LIVE_DEPTH * 4;
		     node = T->stacks->nodes[node].parent) {
			ids[n_ids] = T->stacks->nodes[node].frame;
			if (!name_of(T, ids[n_ids]))
				return -1;
			has_python |= (kind_of(T, ids[n_ids]) & FK_PYTHON) != 0;
			n_ids++;
		}
		const char *meaningful = NULL, *python = NULL, *anchor = NULL, *called = NULL;
		unsigned own_bit = has_python ? FK_OWN_PY : FK_OWN;
		for (size_t k = 0; k < n_ids && st->n_frames < LIVE_DEPTH;) {
			uint32_t fi = ids[k];
			unsigned kind = kind_of(T, fi);
			char fold[300];
			const char *text = name_of(T, fi);
			size_t next = k + 1;
			if (kind & FK_IMPORT) {
				/* One frame for the run, named by the module whose body runs inside it. */
				while (next < n_ids && (kind_of(T, ids[next]) & FK_IMPORT))
					next++;
				char mod[256] = "";
				if (k > 0 && (kind_of(T, ids[k - 1]) & FK_MODULE_BODY)) {
					const struct stacks_frame *in = &T->stacks->frames[ids[k - 1]];
					fold_module_name(T->cap->pynames.v[in->offset >> 32].file, mod, sizeof(mod));
				}
				snprintf(fold, sizeof(fold), mod[0] ? "[import %s]" : "[import]", mod);
				text = fold;
			}
			if (!(st->frames[st->n_frames] = strdup(text)))
				return -1;
			text = st->frames[st->n_frames++];
			if (!anchor && (kind & own_bit))
				anchor = text;
			else if (!anchor)
				called = text;
			if (!meaningful && !plumbing(text) && text[0] != '[')
				meaningful = text;
			if (!python && (kind & FK_PYTHON) && !(kind & FK_IMPORT))
				python = text;
			k = next;
		}
		char buf[1024];
		/* The user's line, and the library call it made (what it imported). */
		if (anchor && called && !strncmp(called, "[import", 7))
			snprintf(buf, sizeof(buf), "%s %s", anchor, called);
		else if (anchor && called && !plumbing(called) && called[0] != '[')
			snprintf(buf, sizeof(buf), "%s -> %s", anchor, called);
		else if (anchor)
			snprintf(buf, sizeof(buf), "%s", anchor);
		else if (python && meaningful && python != meaningful)
			snprintf(buf, sizeof(buf), "%s, in %s", meaningful, python);
		else
			snprintf(buf, sizeof(buf), "%s", meaningful ? meaningful : st->n_frames ? st->frames[0] : "(no stack)");
		if (!(st->summary = strdup(buf)))
			return -1;
	}
	return 0;
}

static int build(struct tracer *T, struct live_model *m)
{
	struct proc *main_p = tracer_proc(T, T->main_pid);
	char *const *argv = main_p && main_p->argv ? main_p->argv : T->opts.argv;
	m->seq = ++T->live->seq;
	m->command = tree_command(argv);
	m->pid = T->main_pid;
	m->attach = T->attach;
	m->touch = main_p && main_p->touch != NULL;
	m->now = tracer_now(T);
	struct pick top[LIVE_TOP];
	size_t n = 0;
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled || !p->ready || !p->nthreads)
			continue;
		m->processes++;
		const struct ledger *l = alloc_view_ledger(p);
		m->charged += l->charged;
		m->reserved += l->reserved;
		m->rss += resid_rss(p->resid);
		offer_all(T, top, &n, l->by_stack, l->n_stacks, l, p->pid);
	}
	if (fill(T, top, n, &m->now_stacks, &m->n_now))
		return -1;
	n = 0;
	if (T->opts.follow_forks && T->tree->has_peak) {
		tree_settle(T);
		m->peak_charged = T->tree->charged;
		m->peak_time = T->tree->time;
		for (struct proc *p = T->procs; p; p = p->next)
			if (p->profiled && p->tree->gen == T->tree->gen)
				offer_all(T, top, &n, p->tree->at_tree, p->tree->n_at_tree, alloc_view_ledger(p), p->pid);
	} else if (main_p && alloc_view_ledger(main_p)->has_peak) {
		alloc_touch_settle(main_p);
		const struct ledger *l = alloc_view_ledger(main_p);
		m->peak_charged = l->peak.charged;
		m->peak_time = l->peak.time;
		m->peak_rss = l->peak.rss;
		offer_all(T, top, &n, l->at_peak, l->n_at_peak, l, main_p->pid);
	}
	if (fill(T, top, n, &m->peak_stacks, &m->n_peak))
		return -1;
	if (main_p && main_p->pk->n_samples) {
		if (!(m->samples = calloc(main_p->pk->n_samples, sizeof(*m->samples))))
			return -1;
		for (size_t i = 0; i < main_p->pk->n_samples; i++)
			m->samples[i] = (struct live_sample){ main_p->pk->samples[i].time, main_p->pk->samples[i].charged,
							      main_p->pk->samples[i].rss };
		m->n_samples = main_p->pk->n_samples;
	}
	return 0;
}

void live_end(struct tracer *T)
{
	if (T->live->on && T->opts.live)
		T->opts.live->stop();
	T->live->on = 0;
}

void live_tick(struct tracer *T)
{
	if (!T->live->on)
		return;
	const struct live_ui *ui = T->opts.live;
	if (ui->quit()) {
		T->live->on = 0;
		ui->stop();
		if (T->attach) {
			/* q under attach: leave as Ctrl-C does, cleanly, and write the snapshot. */
			T->live->leave = 1;
		} else {
			/* A launched program cannot be let go (its seccomp filter needs a tracer): it is traced to its end. */
			notice("live view closed; tracing %s to its end",
			       T->opts.argv && T->opts.argv[0] ? T->opts.argv[0] : "the program");
		}
		return;
	}
	double now = tracer_now(T);
	if (T->live->at && now - T->live->at < LIVE_PERIOD)
		return;
	T->live->at = now;
	struct live_model *m = calloc(1, sizeof(*m));
	if (!m || build(T, m)) {
		live_model_free(m);
		return;
	}
	ui->publish(m);
}
