/* The text report of ptfil-view: what a person needs from a snapshot, on one screen. */
#include "tools/view.h"
#include "common/error.h"
#include "common/units.h"
#include "common/grow.h"
#include "tools/flame.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A stack is flagged when it reserves 4x what is resident and at least 1 MiB unused. */
#define SPARSE_RATIO 4
#define SPARSE_MIN_UNUSED (1ull << 20)

/* With --depth unset, about this many frame lines are shared among the shown stacks. */
#define FRAME_BUDGET 30
#define DEPTH_MAX 12
#define DEPTH_MIN 3

/* Names longer than this are cut: a hostile or templated symbol must not flood the screen. */
#define MAX_SHOWN 200

int view_is_sparse(const struct snap_stack *st)
{
	if (st->reserved <= st->charged || st->reserved - st->charged < SPARSE_MIN_UNUSED)
		return 0;
	return st->charged <= st->reserved / SPARSE_RATIO;
}

const char *view_kind_name(char kind)
{
	switch (kind) {
	case SNAP_KIND_MMAP: return "mmap";
	case SNAP_KIND_BRK: return "brk";
	case SNAP_KIND_HEAP: return "heap";
	case SNAP_KIND_PSEUDO: return "pseudo";
	case SNAP_KIND_TOUCH: return "resident";
	default: return "unknown";
	}
}

const char *view_kind_key(char kind)
{
	return kind == SNAP_KIND_TOUCH ? "touch" : view_kind_name(kind);
}

const char *view_view_name(const struct snap *s)
{
	return s->view == SNAP_VIEW_TOUCH ? "touch" : "alloc";
}

const char *view_view_meaning(const struct snap *s)
{
	return s->view == SNAP_VIEW_TOUCH ? "memory charged to the code that made it resident (its first write to each page)"
					  : "memory charged to the code that allocated it";
}

const char *view_view_short(const struct snap *s)
{
	return s->view == SNAP_VIEW_TOUCH ? "charged to the code that made it resident" : "charged to the code that allocated it";
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

const struct snap_stack *view_reserving_stacks(const struct snap *s, size_t *n, int *known)
{
	if (s->view != SNAP_VIEW_TOUCH) {
		*n = s->n_stacks;
		*known = 1;
		return s->stacks;
	}
	*n = s->n_other;
	*known = s->n_other != 0;
	return s->other;
}

uint64_t view_peak_reserved(const struct snap *s, int *known)
{
	uint64_t sum = 0;
	*known = 1;
	if (s->view != SNAP_VIEW_TOUCH)
		return s->peak.reserved;
	for (size_t i = 0; i < s->n_other; i++)
		sum = sat_add(sum, s->other[i].reserved);
	*known = s->n_other != 0;
	return sum;
}

/* Whether a module is the C library, the dynamic linker, the C++ runtime or a malloc library, by its file name. */
static int runtime_module(const char *path)
{
	static const char *const prefixes[] = {
		"libc.so", "libc-", "ld-linux", "ld-", "libpthread", "libstdc++", "libjemalloc", "libtcmalloc",
		"libmimalloc",
	};
	const char *base = view_basename(path ? path : "");
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
			return 1;
	return 0;
}

size_t view_telling_frame(const struct snap *s, const uint32_t *frames, size_t n)
{
	size_t py = view_python_frame(s, frames, 0, n);
	if (py < n)
		return py;
	for (size_t k = 0; k < n; k++) {
		const struct snap_frame *f = &s->frames[frames[k]];
		if (f->module >= 0 && (size_t)f->module < s->n_modules && runtime_module(s->modules[f->module].path))
			continue;
		if (f->module < 0 && f->function && f->function[0] == '[')
			continue;
		return k;
	}
	return 0;
}

int view_mappings_only(const struct snap *s)
{
	for (size_t i = 0; i < s->n_counters; i++)
		if (s->counters[i].name && strcmp(s->counters[i].name, "options.mappings_only") == 0)
			return s->counters[i].count != 0;
	return 0;
}

int view_module_unnamed(const struct snap_module *m)
{
	return m->symbols == SNAP_SYMBOLS_NONE || m->symbols == SNAP_SYMBOLS_EXPORTS;
}

/* Adds each stack's charged bytes (plus one, so that empty stacks count) to every module it passes through, once. */
static void weigh_modules(const struct snap *s, const struct snap_stack *st, size_t n, uint64_t *weight, size_t *seen)
{
	uint32_t frames[64];
	for (size_t i = 0; i < n; i++) {
		size_t depth = snap_stack_frames(s, st[i].node, frames, 64);
		/* Deeper stacks: their innermost 64 frames, where the allocating code is. */
		for (size_t k = 0; k < depth && k < 64; k++) {
			const struct snap_frame *f = &s->frames[frames[k]];
			if (f->kind != SNAP_FRAME_NATIVE || f->module < 0 || (size_t)f->module >= s->n_modules ||
			    seen[f->module] == i + 1)
				continue;
			seen[f->module] = i + 1;
			uint64_t w = st[i].charged + 1;
			weight[f->module] = weight[f->module] + w < w ? UINT64_MAX : weight[f->module] + w;
		}
	}
}

static const uint64_t *sort_weight;
static int by_weight(const void *pa, const void *pb)
{
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	if (sort_weight[a] != sort_weight[b])
		return sort_weight[a] > sort_weight[b] ? -1 : 1;
	return a < b ? -1 : a > b;
}

size_t *view_debug_missing(const struct snap *s, size_t *n)
{
	size_t nm = s->n_modules ? s->n_modules : 1;
	uint64_t *weight = calloc(nm, sizeof(*weight));
	size_t *seen = calloc(nm, sizeof(*seen));
	size_t *v = calloc(nm, sizeof(*v));
	*n = 0;
	if (!weight || !seen || !v) {
		free(weight);
		free(seen);
		free(v);
		error("out of memory");
		return NULL;
	}
	weigh_modules(s, s->stacks, s->n_stacks, weight, seen);
	memset(seen, 0, nm * sizeof(*seen));
	weigh_modules(s, s->live, s->n_live, weight, seen);
	memset(seen, 0, nm * sizeof(*seen));
	weigh_modules(s, s->tree_stacks, s->n_tree_stacks, weight, seen);
	memset(seen, 0, nm * sizeof(*seen));
	weigh_modules(s, s->other, s->n_other, weight, seen);
	for (size_t i = 0; i < s->n_modules; i++) {
		const struct snap_module *m = &s->modules[i];
		if (weight[i] && m->symbols && (view_module_unnamed(m) || !m->lines))
			v[(*n)++] = i;
	}
	/* The modules that hold the most memory's stacks first: those are the ones worth naming. */
	sort_weight = weight;
	qsort(v, *n, sizeof(*v), by_weight);
	sort_weight = NULL;
	free(weight);
	free(seen);
	return v;
}

const char *view_basename(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash && slash[1] ? slash + 1 : path;
}

/* ---- the process tree -------------------------------------------------------- */

struct pid_index {
	int pid;
	uint32_t index;
};

static int cmp_pid_index(const void *pa, const void *pb)
{
	const struct pid_index *a = pa, *b = pb;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return (a->index > b->index) - (a->index < b->index);
}

/* The parent of procs[i] by v (sorted by pid, then index): the latest process with pid ppid before i, else the first after. */
static uint32_t find_parent(const struct snap *s, const struct pid_index *v, size_t i)
{
	size_t n = s->n_procs, lo = 0, hi = n;
	int ppid = s->procs[i].ppid;
	if (i == 0 || ppid <= 0)
		return UINT32_MAX;
	/* The first entry not below (ppid, i). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].pid < ppid || (v[mid].pid == ppid && v[mid].index < i))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && v[lo - 1].pid == ppid)
		return v[lo - 1].index;
	while (lo < n && v[lo].pid == ppid && v[lo].index == i)
		lo++;
	return lo < n && v[lo].pid == ppid ? v[lo].index : UINT32_MAX;
}

int view_proc_tree(const struct snap *s, uint32_t *order, uint32_t *depth)
{
	size_t n = s->n_procs, k = 0, top = 0;
	struct pid_index *v = malloc((n ? n : 1) * sizeof(*v));
	uint32_t *first = malloc((n ? n : 1) * sizeof(*first));
	uint32_t *next = malloc((n ? n : 1) * sizeof(*next));
	uint32_t *parent = malloc((n ? n : 1) * sizeof(*parent));
	uint32_t *stack = malloc((n ? n : 1) * sizeof(*stack));
	unsigned char *seen = calloc(n ? n : 1, 1);
	if (!v || !first || !next || !parent || !stack || !seen) {
		free(v), free(first), free(next), free(parent), free(stack), free(seen);
		return error("out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		v[i].pid = s->procs[i].pid;
		v[i].index = (uint32_t)i;
		first[i] = next[i] = UINT32_MAX;
	}
	qsort(v, n, sizeof(*v), cmp_pid_index);
	for (size_t i = 0; i < n; i++)
		parent[i] = find_parent(s, v, i);
	/* Children lists, last child first: popped from the stack in file order. */
	for (size_t i = 0; i < n; i++) {
		if (parent[i] == UINT32_MAX)
			continue;
		next[i] = first[parent[i]];
		first[parent[i]] = (uint32_t)i;
	}
	/* Roots in file order: the processes without a parent, then any left in a cycle. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t r = 0; r < n; r++) {
			if (seen[r] || (pass == 0 && parent[r] != UINT32_MAX))
				continue;
			seen[r] = 1;
			depth[r] = 0;
			stack[top++] = (uint32_t)r;
			while (top) {
				uint32_t p = stack[--top];
				order[k++] = p;
				for (uint32_t c = first[p]; c != UINT32_MAX; c = next[c]) {
					if (seen[c])
						continue;
					seen[c] = 1;
					depth[c] = depth[p] + 1;
					stack[top++] = c;
				}
			}
		}
	}
	free(v), free(first), free(next), free(parent), free(stack), free(seen);
	return 0;
}

size_t view_unprofiled(const struct snap *s, const struct snap_proc **largest)
{
	size_t n = 0;
	*largest = NULL;
	for (size_t i = 1; i < s->n_procs; i++) {
		const struct snap_proc *p = &s->procs[i];
		if (p->profiled)
			continue;
		n++;
		if (!*largest || p->vmhwm > (*largest)->vmhwm)
			*largest = p;
	}
	return n;
}

void view_format_double(char *buf, size_t size, double v)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

size_t view_utf8_len(const unsigned char *p, size_t n)
{
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;  /* allowed range of the second byte */

	if (n == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2)
		return 0;         /* continuation byte, or an overlong 2-byte form */
	if (p[0] < 0xe0) {
		len = 2;
	} else if (p[0] < 0xf0) {
		len = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;    /* overlong */
		else if (p[0] == 0xed)
			hi = 0x9f;    /* UTF-16 surrogates */
	} else if (p[0] < 0xf5) {
		len = 4;
		if (p[0] == 0xf0)
			lo = 0x90;    /* overlong */
		else if (p[0] == 0xf4)
			hi = 0x8f;    /* beyond U+10FFFF */
	} else {
		return 0;
	}
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

static int cmp_stacks(const void *a, const void *b)
{
	const struct snap_stack *x = *(const struct snap_stack *const *)a;
	const struct snap_stack *y = *(const struct snap_stack *const *)b;
	if (x->charged != y->charged)
		return x->charged > y->charged ? -1 : 1;
	if (x->reserved != y->reserved)
		return x->reserved > y->reserved ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->kind > y->kind) - (x->kind < y->kind);
}

const struct snap_stack **view_sort_stacks(const struct snap_stack *st, size_t n)
{
	const struct snap_stack **v = malloc((n ? n : 1) * sizeof(*v));
	if (!v) {
		error("out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = &st[i];
	qsort(v, n, sizeof(*v), cmp_stacks);
	return v;
}

/* ---- formatting ------------------------------------------------------------ */

void view_format_size(char *buf, size_t size, uint64_t bytes)
{
	units_size(buf, size, bytes);
}

void view_format_time(char *buf, size_t size, double t)
{
	double mag = t < 0 ? -t : t;  /* no fabs: ptfil-view does not link libm */
	if (mag < 1)
		snprintf(buf, size, "%.1f ms", t * 1000);
	else if (mag < 100)
		snprintf(buf, size, "%.2f s", t);
	else
		snprintf(buf, size, "%.0f s", t);
}

static void fmt_share(char *buf, size_t size, uint64_t part, uint64_t whole)
{
	if (whole == 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.1f%%", 100.0 * (double)part / (double)whole);
}

/*
 * Prints s for a terminal: control bytes and invalid UTF-8 as \xHH (a file
 * must not be able to send escape sequences), at most max bytes then "...".
 */
void view_put_safe(FILE *out, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s), shown = 0;
	while (left) {
		size_t n = view_utf8_len(p, left);
		if (shown >= max) {
			fputs("...", out);
			return;
		}
		if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
			fprintf(out, "\\x%02x", *p);
			n = 1;
		} else {
			fwrite(p, 1, n, out);
		}
		p += n;
		left -= n;
		shown += n;
	}
}

/* One argument, quoted as a shell would need it when it is not plain. */
static void put_arg(FILE *out, const char *a)
{
	if (*a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == strlen(a)) {
		view_put_safe(out, a, MAX_SHOWN);
		return;
	}
	fputc('\'', out);
	for (const char *q = a; *q; q++) {
		if (q - a >= MAX_SHOWN) {
			fputs("...", out);
			break;
		}
		if (*q == '\'') {
			fputs("'\\''", out);
		} else {
			char one[2] = { *q, 0 };
			/* Multi-byte characters go through byte by byte only when invalid. */
			size_t n = view_utf8_len((const unsigned char *)q, strlen(q));
			if (n > 1) {
				fwrite(q, 1, n, out);
				q += n - 1;
			} else {
				view_put_safe(out, one, 1);
			}
		}
	}
	fputc('\'', out);
}

/*
 * A frame in a listed stack. A native frame: its function, then in
 * parentheses its source file and line when known and its module and offset,
 * "make_vector (/src/vec.cc:12, app + 0x1234)"; a call the compiler inlined
 * has the address of the frame after it, so it shows its line alone and a
 * mark, "push_back (/usr/include/c++/12/bits/stl_vector.h:1189) [inlined]"
 * (as gdb's backtrace leaves inlined frames' addresses out); a frame with no
 * name reads "libfoo.so + 0x1234". A Python frame: its whole file name and
 * line, "make_arrays (/home/u/demo.py:12)".
 */
static void put_frame(FILE *out, const struct snap *s, uint32_t fi)
{
	const struct snap_frame *f = &s->frames[fi];
	const struct snap_module *m = NULL;
	const char *sep = " (";
	if (f->kind == SNAP_FRAME_PYTHON) {
		view_put_safe(out, f->function && *f->function ? f->function : "?", MAX_SHOWN);
		fputs(" (", out);
		view_put_safe(out, f->file && *f->file ? f->file : "?", MAX_SHOWN);
		if (f->line)
			fprintf(out, ":%u", (unsigned)f->line);
		fputc(')', out);
		return;
	}
	if (f->module >= 0 && (size_t)f->module < s->n_modules)
		m = &s->modules[f->module];
	int named = f->function && *f->function;
	if (named) {
		view_put_safe(out, f->function, MAX_SHOWN);
	} else if (m) {
		view_put_safe(out, view_basename(m->path), MAX_SHOWN);
		fprintf(out, " + 0x%llx", (unsigned long long)f->offset);
	} else {
		fprintf(out, "0x%llx", (unsigned long long)f->offset);
	}
	if (f->file && *f->file) {
		fputs(sep, out);
		view_put_safe(out, f->file, MAX_SHOWN);
		if (f->line)
			fprintf(out, ":%u", (unsigned)f->line);
		sep = ", ";
	}
	if (named && !f->inlined && m && f->function[0] != '[') {
		fputs(sep, out);
		view_put_safe(out, view_basename(m->path), MAX_SHOWN);
		fprintf(out, " + 0x%llx", (unsigned long long)f->offset);
		sep = ", ";
	} else if (named && !f->inlined && f->offset) {
		fputs(sep, out);
		fprintf(out, "0x%llx", (unsigned long long)f->offset);
		sep = ", ";
	}
	if (*sep == ',')
		fputc(')', out);
	if (f->inlined)
		fputs(" [inlined]", out);
}

/* ---- the report ------------------------------------------------------------ */

static void put_header(FILE *out, const struct snap *s)
{
	char dur[32];
	fputs("command  ", out);
	if (s->argc == 0)
		fputs("(unknown)", out);
	for (size_t i = 0; i < s->argc; i++) {
		if (i)
			fputc(' ', out);
		if (i >= 32) {
			fprintf(out, "... (%zu more arguments)", s->argc - i);
			break;
		}
		put_arg(out, s->argv[i]);
	}
	view_format_time(dur, sizeof(dur), s->duration);
	fprintf(out, "\nprocess  pid %d, ", s->pid);
	view_put_safe(out, s->mode && *s->mode ? s->mode : "unknown mode", 32);
	if (view_mappings_only(s))
		fputs(", mappings only (malloc calls not followed)", out);
	fprintf(out, ", ran %s, ", dur);
	if (s->exit_status < 0)
		fputs("had not exited", out);
	else
		fprintf(out, "exit status %d", s->exit_status);
	fprintf(out, "\nview     %s: %s", view_view_name(s), view_view_meaning(s));
	if (s->view == SNAP_VIEW_TOUCH && (s->n_other || s->n_links))
		fputs(", with the alloc view", out);
	fputc('\n', out);
}

static void put_peak(FILE *out, const struct snap *s)
{
	char charged[32], reserved[32], rss[32], hwm[32], when[32];
	int known;
	uint64_t res = view_peak_reserved(s, &known);
	view_format_size(charged, sizeof(charged), s->peak.charged);
	view_format_size(reserved, sizeof(reserved), res);
	view_format_size(rss, sizeof(rss), s->peak.rss);
	view_format_size(hwm, sizeof(hwm), s->vmhwm);
	view_format_time(when, sizeof(when), s->peak.time);
	/* A touch stack reserves nothing: what was reserved is the alloc view's, when the snapshot has it. */
	if (!known)
		fprintf(out, "peak     %s charged at %s\n", charged, when);
	else if (s->view == SNAP_VIEW_TOUCH)
		fprintf(out, "peak     %s charged at %s, %s reserved (alloc view)\n", charged, when, reserved);
	else
		fprintf(out, "peak     %s charged at %s, %s reserved\n", charged, when, reserved);
	fprintf(out, "RSS      %s at the peak, VmHWM %s\n", rss, hwm);
}

static void put_brief_frame(FILE *out, const struct snap *s, uint32_t fi);

/* Sparse stacks listed under the sparse line. */
#define SPARSE_SHOWN 5

/* What a reservation is, for the reservers every Python or C++ user meets: NULL when none of them. */
static const char *reserver_label(const struct snap *s, const uint32_t *frames, size_t n, char kind)
{
	for (size_t k = 0; k < n; k++) {
		const struct snap_frame *f = &s->frames[frames[k]];
		const char *fn = f->function ? f->function : "";
		const char *mod = f->module >= 0 && (size_t)f->module < s->n_modules ? view_basename(s->modules[f->module].path) : "";
		if (!strcmp(fn, "allocate_stack") || !strncmp(fn, "pthread_create", 14))
			return "a thread's stack";
		if (!strcmp(fn, "new_heap") || !strcmp(fn, "alloc_new_heap") || !strcmp(fn, "_int_new_arena") ||
		    !strcmp(fn, "arena_get2"))
			return "a glibc malloc arena (one per thread that mallocs, up to 8 per core)";
		if (strstr(fn, "blas_memory_alloc") || !strncmp(mod, "libopenblas", 11))
			return "an OpenBLAS buffer (one per thread, written only as far as a matrix needs it)";
		if (!strncmp(mod, "libmkl", 6))
			return "an MKL buffer";
	}
	return kind == SNAP_KIND_BRK ? "the brk heap" : NULL;
}

static const struct snap_stack *unused_sort;
static int by_unused(const void *pa, const void *pb)
{
	const struct snap_stack *a = &unused_sort[*(const size_t *)pa], *b = &unused_sort[*(const size_t *)pb];
	uint64_t ua = a->reserved - (a->charged < a->reserved ? a->charged : a->reserved);
	uint64_t ub = b->reserved - (b->charged < b->reserved ? b->charged : b->reserved);
	if (ua != ub)
		return ua > ub ? -1 : 1;
	return a->node < b->node ? -1 : a->node > b->node;
}

static int put_sparse_summary(FILE *out, const struct snap *s, const struct view_options *o)
{
	uint64_t reserved = 0, charged = 0;
	size_t n = 0, n_st;
	int known;
	const struct snap_stack *stacks = view_reserving_stacks(s, &n_st, &known);
	if (!known) {
		fputs("sparse   not known: touch stacks reserve nothing, and this snapshot has no alloc view beside them\n", out);
		return 0;
	}
	size_t *v = malloc((n_st ? n_st : 1) * sizeof(*v));
	if (!v)
		return error("out of memory");
	for (size_t i = 0; i < n_st; i++) {
		const struct snap_stack *st = &stacks[i];
		if (!view_is_sparse(st))
			continue;
		v[n++] = i;
		reserved = sat_add(reserved, st->reserved);
		charged = sat_add(charged, st->charged);
	}
	if (n == 0) {
		fputs("sparse   none: no stack reserves much more than is resident\n", out);
		free(v);
		return 0;
	}
	char unused[32], res[32], chg[32];
	view_format_size(unused, sizeof(unused), reserved - (charged < reserved ? charged : reserved));
	view_format_size(res, sizeof(res), reserved);
	view_format_size(chg, sizeof(chg), charged);
	fprintf(out, "sparse   %s reserved but not resident, in %zu stack%s%s (reserved %s, resident %s):\n",
		unused, n, n == 1 ? "" : "s", s->view == SNAP_VIEW_TOUCH ? " of the alloc view" : "", res, chg);
	unused_sort = stacks;
	qsort(v, n, sizeof(*v), by_unused);
	uint32_t *frames = NULL;
	size_t cap = 0, shown = n < SPARSE_SHOWN ? n : SPARSE_SHOWN;
	for (size_t i = 0; i < shown; i++) {
		const struct snap_stack *st = &stacks[v[i]];
		size_t depth = snap_stack_frames(s, st->node, NULL, 0);
		if (grow_array(&frames, &cap, depth, sizeof(*frames), 64)) {
			free(frames);
			free(v);
			return error("out of memory");
		}
		snap_stack_frames(s, st->node, frames, depth);
		view_format_size(res, sizeof(res), st->reserved);
		view_format_size(chg, sizeof(chg), st->charged);
		fprintf(out, "  %10s reserved, %s resident", res, chg);
		const char *label = reserver_label(s, frames, depth, st->kind);
		size_t anchor = fold_anchor(s, o->own, frames, depth);
		size_t telling = depth ? view_telling_frame(s, frames, depth) : 0;
		if (label)
			fprintf(out, ": %s", label);
		else if (depth && telling != anchor) {
			fputs(", by ", out);
			put_brief_frame(out, s, frames[telling]);
		}
		if (anchor < depth) {
			fputs("; your code: ", out);
			put_brief_frame(out, s, frames[anchor]);
		}
		fputc('\n', out);
	}
	if (shown < n)
		fprintf(out, "  ... %zu more sparse stack%s\n", n - shown, n - shown == 1 ? "" : "s");
	free(frames);
	free(v);
	return 0;
}

static size_t choose_depth(const struct view_options *o, size_t shown)
{
	if (o->depth)
		return o->depth;
	size_t d = shown ? FRAME_BUDGET / shown : DEPTH_MAX;
	return d > DEPTH_MAX ? DEPTH_MAX : d < DEPTH_MIN ? DEPTH_MIN : d;
}

/* The first Python frame among frames[from..n), or n when there is none. */
static size_t next_python(const struct snap *s, const uint32_t *frames, size_t from, size_t n)
{
	for (; from < n; from++)
		if (s->frames[frames[from]].kind == SNAP_FRAME_PYTHON)
			break;
	return from;
}

int view_frozen_file(const char *file)
{
	return file && strncmp(file, "<frozen ", 8) == 0;
}

size_t view_python_frame(const struct snap *s, const uint32_t *frames, size_t from, size_t n)
{
	size_t first = next_python(s, frames, from, n);
	for (size_t k = first; k < n; k = next_python(s, frames, k + 1, n))
		if (!view_frozen_file(s->frames[frames[k]].file))
			return k;
	return first;
}

/* The pseudo frame ptfil puts between a thread's own frames and the stack that started it. */
static int is_new_thread(const struct snap *s, uint32_t fi)
{
	const struct snap_frame *f = &s->frames[fi];
	return f->kind == SNAP_FRAME_NATIVE && f->module < 0 && f->function && !strcmp(f->function, "[new thread]");
}

/* Own frames a stack listing shows past its depth: the user's code is never what is left out. */
#define OWN_SHOWN 12

/*
 * The frames of a stack, innermost first. Shown: the innermost frame (the
 * allocating call, or the write that made pages resident), the user's own
 * frames (fold.h; up to OWN_SHOWN), the library call the innermost of them
 * made, and a thread's "[new thread]" frame; then, up to depth frames in
 * all, a Python stack's Python frames from the innermost outwards
 * (view_python_frame), or a native stack's frames from the innermost
 * outwards. What is left out is counted: "... N more". A stack with an
 * own frame is headed by it: "your code: summarize (/home/u/seed.py:29)".
 * Returns 0, or -1 after error() when out of memory.
 */
static int put_stack_frames(FILE *out, const struct snap *s, const struct view_options *o, const uint32_t *frames,
			    size_t total, size_t depth)
{
	if (total == 0) {
		fputs("      (no call stack)\n", out);
		return 0;
	}
	char *show = calloc(total, 1);
	if (!show)
		return error("out of memory");
	int python = fold_has_python(s, frames, total);
	size_t anchor = fold_anchor(s, o->own, frames, total), used = 0, own = 0;
	show[0] = 1;
	for (size_t k = anchor; k < total && own < OWN_SHOWN; k++)
		if (fold_stack_own(s, o->own, frames, total, k, python)) {
			show[k] = 1;
			own++;
		}
	if (anchor < total && anchor > 0)
		show[anchor - 1] = 1;
	for (size_t k = 0; k < total; k++)
		if (is_new_thread(s, frames[k]))
			show[k] = 1;
	for (size_t k = 0; k < total; k++)
		used += show[k] != 0;
	size_t py = view_python_frame(s, frames, 0, total);
	for (size_t k = py; k < total && used < depth; k++)
		if (!show[k]) {
			show[k] = 1;
			used++;
		}
	for (size_t k = 1; k < total && used < depth; k++)
		if (!show[k]) {
			show[k] = 1;
			used++;
		}
	if (anchor < total) {
		fputs("      your code: ", out);
		put_brief_frame(out, s, frames[anchor]);
		fputc('\n', out);
	}
	size_t gap = 0;
	for (size_t k = 0; k < total; k++) {
		if (!show[k]) {
			gap++;
			continue;
		}
		if (gap)
			fprintf(out, "      ... %zu more\n", gap);
		gap = 0;
		/* The innermost frame is the function that made the mapping. */
		fputs(k == 0 ? "    \xe2\x86\x92 " : "      ", out);
		put_frame(out, s, frames[k]);
		fputc('\n', out);
	}
	if (gap)
		fprintf(out, "      ... %zu more\n", gap);
	free(show);
	return 0;
}

/* ---- links between the two views ---------------------------------------------- */

/*
 * The links of a touch snapshot from one side: indexes in s->links sorted by
 * the node of that side (alloc: the other view's stacks, "made resident by";
 * else the touch stacks, "reserved by"), then in the order of s->links,
 * largest first.
 */
struct link_index {
	const struct snap *s;
	uint32_t *v;
	size_t n;
	int alloc;
};

static const struct link_index *sort_links;

static uint32_t link_node(const struct link_index *x, uint32_t i)
{
	return x->alloc ? x->s->links[i].alloc_node : x->s->links[i].touch_node;
}

static int cmp_link_index(const void *pa, const void *pb)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	uint32_t na = link_node(sort_links, a), nb = link_node(sort_links, b);
	if (na != nb)
		return na < nb ? -1 : 1;
	return (a > b) - (a < b);
}

static int link_index_build(struct link_index *x, const struct snap *s, int alloc)
{
	x->s = s;
	x->alloc = alloc;
	x->n = s->n_links;
	x->v = malloc((x->n ? x->n : 1) * sizeof(*x->v));
	if (!x->v)
		return error("out of memory");
	for (size_t i = 0; i < x->n; i++)
		x->v[i] = (uint32_t)i;
	sort_links = x;
	qsort(x->v, x->n, sizeof(*x->v), cmp_link_index);
	sort_links = NULL;
	return 0;
}

/* One frame in a line of its own words: "fill_rows (/src/table.c:16)", "libfoo.so + 0x12", "make (demo.py:3)". */
static void put_brief_frame(FILE *out, const struct snap *s, uint32_t fi)
{
	const struct snap_frame *f = &s->frames[fi];
	const struct snap_module *m = f->module >= 0 && (size_t)f->module < s->n_modules ? &s->modules[f->module] : NULL;
	if (f->kind == SNAP_FRAME_PYTHON) {
		view_put_safe(out, f->function && *f->function ? f->function : "?", MAX_SHOWN);
	} else if (f->function && *f->function) {
		view_put_safe(out, f->function, MAX_SHOWN);
	} else if (m) {
		view_put_safe(out, view_basename(m->path), MAX_SHOWN);
		fprintf(out, " + 0x%llx", (unsigned long long)f->offset);
		return;
	} else {
		fprintf(out, "0x%llx", (unsigned long long)f->offset);
		return;
	}
	if (f->file && *f->file) {
		fputs(" (", out);
		view_put_safe(out, f->file, MAX_SHOWN);
		if (f->line)
			fprintf(out, ":%u", (unsigned)f->line);
		fputc(')', out);
	} else if (f->kind == SNAP_FRAME_PYTHON) {
		fputs(" (?)", out);
	} else if (m && f->function[0] != '[') {
		fputs(" (", out);
		view_put_safe(out, view_basename(m->path), MAX_SHOWN);
		fputc(')', out);
	}
}

/* Links shown under one stack: the largest. */
#define LINKS_SHOWN 2

/*
 * Under a stack of one side, its largest links: the stack of the other side
 * each names, by its telling frame, and the bytes. frames and cap are the
 * caller's buffer. Returns 0, or -1 after error() when out of memory.
 */
static int put_links(FILE *out, const struct link_index *x, uint32_t node, uint32_t **frames, size_t *cap)
{
	const struct snap *s = x->s;
	size_t lo = 0, hi = x->n, shown = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (link_node(x, x->v[mid]) < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k < x->n && shown < LINKS_SHOWN && link_node(x, x->v[k]) == node; k++, shown++) {
		const struct snap_link *ln = &s->links[x->v[k]];
		uint32_t other = x->alloc ? ln->touch_node : ln->alloc_node;
		size_t depth = snap_stack_frames(s, other, NULL, 0);
		if (grow_array(frames, cap, depth, sizeof(**frames), depth))
			return error("out of memory");
		snap_stack_frames(s, other, *frames, depth);
		char size[32];
		view_format_size(size, sizeof(size), ln->bytes);
		fputs(x->alloc ? "      made resident by: " : "      reserved by: ", out);
		if (depth)
			put_brief_frame(out, s, (*frames)[view_telling_frame(s, *frames, depth)]);
		else
			fputs("(no call stack)", out);
		fprintf(out, " %s\n", size);
	}
	return 0;
}

/* A process as the outermost frame of its stacks at the combined peak: "[pid 1234: cc1 -quiet big.c]". */
static void put_process_frame(FILE *out, const struct snap *s, uint32_t proc)
{
	fputs("      [", out);
	if (proc < s->n_procs) {
		fprintf(out, "pid %d", s->procs[proc].pid);
		if (s->procs[proc].command) {
			fputs(": ", out);
			view_put_safe(out, s->procs[proc].command, 60);
		}
	} else {
		fputs("unknown process", out);
	}
	fputs("]\n", out);
}

/*
 * Lists the largest of n stacks: `what` names the set ("at the peak"), whole
 * is the total for shares; tree: the stacks of the combined peak, each ending
 * in its process; links: the links of these stacks' side to show under
 * each, or NULL.
 */
static int put_stacks(FILE *out, const struct snap *s, const struct view_options *o,
		      const struct snap_stack *stacks, size_t n, const char *what, uint64_t whole, int tree,
		      const struct link_index *links)
{
	const struct snap_stack **v = view_sort_stacks(stacks, n);
	if (!v)
		return -1;
	size_t shown = o->top && o->top < n ? o->top : n;
	size_t depth = choose_depth(o, shown);
	uint32_t *frames = NULL;
	size_t cap = 0;

	if (n == 0)
		fprintf(out, "\nno stack holds memory %s\n", what);
	else if (shown == n)
		fprintf(out, "\n%zu stack%s %s, by charged bytes:\n", shown, shown == 1 ? "" : "s", what);
	else
		fprintf(out, "\ntop %zu of %zu stacks %s, by charged bytes:\n", shown, n, what);

	for (size_t i = 0; i < shown; i++) {
		const struct snap_stack *st = v[i];
		char charged[32], reserved[32], share[16];
		view_format_size(charged, sizeof(charged), st->charged);
		view_format_size(reserved, sizeof(reserved), st->reserved);
		fmt_share(share, sizeof(share), st->charged, whole);
		/* A touch stack reserves nothing of its own, and counts pages. */
		if (st->kind == SNAP_KIND_TOUCH)
			fprintf(out, "#%-2zu %10s %6s  %s, %llu page%s\n", i + 1, charged, share, view_kind_name(st->kind),
				(unsigned long long)st->count, st->count == 1 ? "" : "s");
		else
			fprintf(out, "#%-2zu %10s %6s  reserved %s  %s, %llu live\n", i + 1, charged, share,
				reserved, view_kind_name(st->kind), (unsigned long long)st->count);
		if (view_is_sparse(st))
			fprintf(out, "      sparse: reserved %s, resident %s\n", reserved, charged);
		if (links && put_links(out, links, st->node, &frames, &cap) < 0) {
			free(frames);
			free(v);
			return -1;
		}
		size_t total = snap_stack_frames(s, st->node, NULL, 0);
		/* Exactly total (a minimum of total leaves nothing to double). */
		if (grow_array(&frames, &cap, total, sizeof(*frames), total)) {
			free(frames);
			free(v);
			return error("out of memory");
		}
		snap_stack_frames(s, st->node, frames, total);
		if (put_stack_frames(out, s, o, frames, total, depth) < 0) {
			free(frames);
			free(v);
			return -1;
		}
		if (tree)
			put_process_frame(out, s, st->proc);
	}
	if (shown < n) {
		uint64_t rest = 0;
		for (size_t i = shown; i < n; i++)
			rest = rest + v[i]->charged < rest ? UINT64_MAX : rest + v[i]->charged;
		char size[32], share[16];
		view_format_size(size, sizeof(size), rest);
		fmt_share(share, sizeof(share), rest, whole);
		fprintf(out, "... %zu more stack%s: %s (%s)\n", n - shown,
			n - shown == 1 ? "" : "s", size, share);
	}
	free(frames);
	free(v);
	return 0;
}

/* Lines of "your lines at the peak" shown without --top. */
#define YOUR_LINES_SHOWN 10

/*
 * "your lines at the peak": the peak's charge summed by the frame of the
 * user's own code each stack is anchored on (fold_lines), largest first.
 */
static int put_your_lines(FILE *out, const struct snap *s, const struct view_options *o, const struct snap_stack *st,
			  size_t n_st, uint64_t whole, const char *what)
{
	size_t n = 0;
	struct fold_line *v = fold_lines(s, o->own, st, n_st, &n);
	if (!v)
		return -1;
	size_t shown = o->top_set ? (o->top && o->top < n ? o->top : n) : n < YOUR_LINES_SHOWN ? n : YOUR_LINES_SHOWN;
	fprintf(out, "\nyour lines %s (the innermost frame of your own code in each stack; %s):\n", what,
		o->own && o->own->n ? "your code is what --own names"
				    : "your code is what is not Python's library, site-packages or the system's");
	for (size_t i = 0; i < shown; i++) {
		char size[32], share[16];
		view_format_size(size, sizeof(size), v[i].charged);
		fmt_share(share, sizeof(share), v[i].charged, whole);
		fprintf(out, "  %10s %6s  ", size, share);
		if (v[i].frame == UINT32_MAX)
			fprintf(out, "(in no frame of your code: %zu stack%s)", v[i].stacks, v[i].stacks == 1 ? "" : "s");
		else
			put_brief_frame(out, s, v[i].frame);
		fputc('\n', out);
	}
	if (shown < n) {
		uint64_t rest = 0;
		for (size_t i = shown; i < n; i++)
			rest = sat_add(rest, v[i].charged);
		char size[32], share[16];
		view_format_size(size, sizeof(size), rest);
		fmt_share(share, sizeof(share), rest, whole);
		fprintf(out, "  ... %zu more line%s: %s (%s)\n", n - shown, n - shown == 1 ? "" : "s", size, share);
	}
	free(v);
	return 0;
}

/*
 * Per-function totals at the peak, as heaptrack_print gives them: inclusive
 * (the stacks a function is on, counted once even when it recurses) and self
 * (the stacks it is the innermost frame of).
 */
static int put_functions(FILE *out, const struct snap *s, const struct view_options *o)
{
	struct flame f;
	size_t n = 0;
	if (flame_build(&f, s, NULL, FLAME_PEAK) < 0)
		return -1;
	struct flame_func *fn = flame_functions(&f, &n);
	if (!fn) {
		flame_fin(&f);
		return -1;
	}
	size_t shown = o->top && o->top < n ? o->top : n;
	if (n) {
		if (shown == n)
			fprintf(out, "\n%zu function%s at the peak, by inclusive bytes:\n", n, n == 1 ? "" : "s");
		else
			fprintf(out, "\ntop %zu of %zu functions at the peak, by inclusive bytes:\n", shown, n);
		fprintf(out, "%10s %6s %10s %6s  %s\n", "inclusive", "share", "self", "share", "function");
	}
	for (size_t i = 0; i < shown; i++) {
		char inc[32], self[32], si[16], ss[16];
		view_format_size(inc, sizeof(inc), fn[i].inclusive[0]);
		view_format_size(self, sizeof(self), fn[i].self[0]);
		fmt_share(si, sizeof(si), fn[i].inclusive[0], s->peak.charged);
		fmt_share(ss, sizeof(ss), fn[i].self[0], s->peak.charged);
		fprintf(out, "%10s %6s %10s %6s  ", inc, si, self, ss);
		view_put_safe(out, f.labels[fn[i].label], MAX_SHOWN);
		fputc('\n', out);
	}
	free(fn);
	flame_fin(&f);
	return 0;
}

static void put_timeline(FILE *out, const struct snap *s)
{
	char a[32], b[32], c[32], d[32];
	if (s->n_samples) {
		uint64_t max_charged = 0, max_rss = 0;
		double at = 0;
		for (size_t i = 0; i < s->n_samples; i++) {
			if (s->samples[i].charged > max_charged || i == 0) {
				max_charged = s->samples[i].charged;
				at = s->samples[i].time;
			}
			if (s->samples[i].rss > max_rss)
				max_rss = s->samples[i].rss;
		}
		view_format_time(a, sizeof(a), s->samples[s->n_samples - 1].time - s->samples[0].time);
		view_format_size(b, sizeof(b), max_charged);
		view_format_time(c, sizeof(c), at);
		view_format_size(d, sizeof(d), max_rss);
		fprintf(out, "timeline %zu sample%s over %s: charged at most %s (at %s), RSS at most %s\n",
			s->n_samples, s->n_samples == 1 ? "" : "s", a, b, c, d);
	}
}

/*
 * What was still live when the snapshot was written: at the program's exit,
 * memory never released (leak candidates, as heaptrack_print calls them).
 */
static int put_live(FILE *out, const struct snap *s, const struct view_options *o)
{
	uint64_t charged = 0, reserved = 0;
	for (size_t i = 0; i < s->n_live; i++) {
		charged = charged + s->live[i].charged < charged ? UINT64_MAX : charged + s->live[i].charged;
		reserved = reserved + s->live[i].reserved < reserved ? UINT64_MAX : reserved + s->live[i].reserved;
	}
	char a[32], b[32];
	view_format_size(a, sizeof(a), charged);
	view_format_size(b, sizeof(b), reserved);
	const char *when = s->exit_status >= 0 ? "at exit" : "when written";
	/* Touch stacks reserve nothing of their own. */
	fprintf(out, "\nstill live %s: %s charged%s%s%s, in %zu stack%s%s\n", when, a,
		s->view == SNAP_VIEW_TOUCH ? "" : ", ", s->view == SNAP_VIEW_TOUCH ? "" : b,
		s->view == SNAP_VIEW_TOUCH ? "" : " reserved", s->n_live, s->n_live == 1 ? "" : "s",
		s->exit_status >= 0 && s->n_live ? " (leak candidates)" : "");
	if (s->n_live == 0)
		return 0;
	/* A shorter list than at the peak unless --top says otherwise: the report should fit a screen or two. */
	struct view_options lo = *o;
	if (!o->top_set)
		lo.top = VIEW_DEFAULT_LIVE_TOP;
	return put_stacks(out, s, &lo, s->live, s->n_live, s->exit_status >= 0 ? "live at exit" : "live when written", charged, 0,
			  NULL);
}

/*
 * A touch snapshot's other view: the alloc view's stacks at the same peak,
 * each with what made its memory resident. A shorter list than at the peak
 * unless --top says otherwise, as for what was live at the end.
 */
static int put_other(FILE *out, const struct snap *s, const struct view_options *o, const struct link_index *links)
{
	if (s->view != SNAP_VIEW_TOUCH || (!s->n_other && !s->n_links))
		return 0;
	uint64_t charged = 0;
	for (size_t i = 0; i < s->n_other; i++)
		charged = sat_add(charged, s->other[i].charged);
	struct view_options lo = *o;
	if (!o->top_set)
		lo.top = VIEW_DEFAULT_LIVE_TOP;
	return put_stacks(out, s, &lo, s->other, s->n_other,
			  "in the alloc view at the same peak (memory charged to the code that allocated it)", charged, 0,
			  links);
}

/* The modules of v[0..n) whose symbols are `want`, "a (pkg), b" (at most 4, then "and N more"); how many. */
static size_t put_module_list(FILE *out, const struct snap *s, const size_t *v, size_t n, char want, const char *lead)
{
	size_t shown = 0, total = 0;
	for (size_t i = 0; i < n; i++) {
		const struct snap_module *m = &s->modules[v[i]];
		if (want ? m->symbols != want : view_module_unnamed(m))
			continue;
		if (total++ >= 4)
			continue;
		fputs(shown++ ? ", " : lead, out);
		view_put_safe(out, view_basename(m->path), MAX_SHOWN);
		if (m->package) {
			fputs(" (", out);
			view_put_safe(out, m->package, MAX_SHOWN);
			fputc(')', out);
		}
	}
	if (total > shown)
		fprintf(out, " and %zu more", total - shown);
	return total;
}

/*
 * Once, under the header: which modules in the stacks (those under the most
 * memory first) had no symbols or no lines, from which package, and what
 * would name them.
 */
static int put_debug_missing(FILE *out, const struct snap *s)
{
	size_t n;
	size_t *v = view_debug_missing(s, &n);
	if (!v)
		return -1;
	const char *lead = "symbols  ";
	if (put_module_list(out, s, v, n, SNAP_SYMBOLS_NONE, "symbols  no symbols in ")) {
		fputs(": their frames read module + offset\n", out);
		lead = "         ";
	}
	char text[64];
	snprintf(text, sizeof(text), "%sexported names only in ", lead);
	if (put_module_list(out, s, v, n, SNAP_SYMBOLS_EXPORTS, text)) {
		fputs(": their other frames read module + offset\n", out);
		lead = "         ";
	}
	snprintf(text, sizeof(text), "%sno source lines for ", lead);
	if (put_module_list(out, s, v, n, 0, text))
		fputc('\n', out);
	if (n) {
		int pkg = 0;
		for (size_t i = 0; i < n; i++)
			pkg |= s->modules[v[i]].package != NULL;
		fprintf(out, "         to name them: %sset DEBUGINFOD_URLS to a debuginfod server (fetched by build id)\n",
			pkg ? "install each package's debug symbols (Debian: PACKAGE-dbgsym from the debug archive), or " : "");
	}
	free(v);
	return 0;
}

/* Processes listed in the tree without --top: a build's hundreds would bury the report. */
#define PROCS_SHOWN 20

/* The size by which a process is among the largest: its own peak, or its peak RSS when not profiled. */
static uint64_t proc_weight(const struct snap_proc *p)
{
	uint64_t w = p->profiled ? p->peak : p->vmhwm;
	return p->at_combined > w ? p->at_combined : w;
}

static const struct snap *weigh_snap;
static int by_proc_weight(const void *pa, const void *pb)
{
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	uint64_t wa = proc_weight(&weigh_snap->procs[a]), wb = proc_weight(&weigh_snap->procs[b]);
	if (wa != wb)
		return wa > wb ? -1 : 1;
	return (a > b) - (a < b);
}

/* One process's line in the tree: pid, own peak and when, its charge at the combined peak, its command indented. */
static void put_proc_line(FILE *out, const struct snap *s, const struct snap_proc *p, uint32_t depth)
{
	char peak[32], when[32], at[32], share[16];
	if (p->profiled) {
		view_format_size(peak, sizeof(peak), p->peak);
		view_format_time(when, sizeof(when), p->peak_time);
		view_format_size(at, sizeof(at), p->at_combined);
		fmt_share(share, sizeof(share), p->at_combined, s->tree_charged);
	} else {
		snprintf(peak, sizeof(peak), "-");
		snprintf(when, sizeof(when), "-");
		snprintf(at, sizeof(at), "-");
		snprintf(share, sizeof(share), "-");
	}
	fprintf(out, "%8d %10s %9s  %10s %6s  ", p->pid, peak, when, at, share);
	for (uint32_t d = 0; d < depth && d < 16; d++)
		fputs("  ", out);
	view_put_safe(out, p->command ? p->command : "(unknown command)", 100);
	if (!p->profiled) {
		char hwm[32];
		view_format_size(hwm, sizeof(hwm), p->vmhwm);
		fprintf(out, " (not profiled, peak RSS %s)", hwm);
	}
	fputc('\n', out);
}

/*
 * The process tree of a followed run: its processes indented under the one
 * that started each, the combined peak against the sum of their own peaks,
 * and the stacks of every process at the combined peak.
 */
static int put_tree(FILE *out, const struct snap *s, const struct view_options *o)
{
	size_t n = s->n_procs, profiled = 0;
	uint32_t *order = malloc((n ? n : 1) * sizeof(*order));
	uint32_t *depth = malloc((n ? n : 1) * sizeof(*depth));
	unsigned char *shown = calloc(n ? n : 1, 1);
	uint64_t sum = 0;
	if (!order || !depth || !shown || view_proc_tree(s, order, depth) < 0) {
		free(order), free(depth), free(shown);
		return error("out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		if (!s->procs[i].profiled)
			continue;
		profiled++;
		sum = sum + s->procs[i].peak < sum ? UINT64_MAX : sum + s->procs[i].peak;
	}
	/* The largest processes when there are too many to list: sorted by weight in `depth`'s stead. */
	size_t limit = o->top_set ? o->top : PROCS_SHOWN, listed = n;
	if (limit && limit < n) {
		uint32_t *w = malloc(n * sizeof(*w));
		if (!w) {
			free(order), free(depth), free(shown);
			return error("out of memory");
		}
		for (size_t i = 0; i < n; i++)
			w[i] = (uint32_t)i;
		weigh_snap = s;
		qsort(w, n, sizeof(*w), by_proc_weight);
		weigh_snap = NULL;
		for (size_t i = 0; i < limit; i++)
			shown[w[i]] = 1;
		free(w);
		listed = limit;
	} else {
		memset(shown, 1, n);
	}

	fprintf(out, "\n%zu process%s, %zu profiled", n, n == 1 ? "" : "es", profiled);
	if (listed < n)
		fprintf(out, "; the %zu largest, each under the one that started it:\n", listed);
	else
		fputs(", each under the one that started it:\n", out);
	fprintf(out, "%8s %10s %9s  %17s  %s\n", "pid", "own peak", "at", "at combined peak", "command");
	uint64_t rest = 0;
	for (size_t k = 0; k < n; k++) {
		const struct snap_proc *p = &s->procs[order[k]];
		if (shown[order[k]])
			put_proc_line(out, s, p, depth[order[k]]);
		else if (proc_weight(p) > rest)
			rest = proc_weight(p);
	}
	if (listed < n) {
		char r[32];
		view_format_size(r, sizeof(r), rest);
		fprintf(out, "... %zu more process%s, each at most %s\n", n - listed, n - listed == 1 ? "" : "es", r);
	}
	free(order), free(depth), free(shown);

	char peak[32], when[32], sums[32];
	view_format_size(peak, sizeof(peak), s->tree_charged);
	view_format_time(when, sizeof(when), s->tree_time);
	view_format_size(sums, sizeof(sums), sum);
	fprintf(out, "combined peak %s at %s (sum of the processes' own peaks %s)\n", peak, when, sums);
	if (put_your_lines(out, s, o, s->tree_stacks, s->n_tree_stacks, s->tree_charged, "at the combined peak") < 0 ||
	    put_stacks(out, s, o, s->tree_stacks, s->n_tree_stacks, "at the combined peak", s->tree_charged, 1, NULL) < 0)
		return -1;
	fprintf(out, "\nthe main process alone (pid %d; ptfil-view --pid PID shows any one):\n", s->pid);
	return 0;
}

/* Without --follow-forks: the children seen but not profiled, in one line. */
static void put_unprofiled(FILE *out, const struct snap *s)
{
	const struct snap_proc *big;
	size_t n = view_unprofiled(s, &big);
	if (!n)
		return;
	char hwm[32];
	view_format_size(hwm, sizeof(hwm), big->vmhwm);
	fprintf(out, "children %zu process%s not profiled, the largest peak RSS %s (", n, n == 1 ? "" : "es", hwm);
	view_put_safe(out, big->command ? big->command : "unknown command", 60);
	fputs("); --follow-forks profiles them\n", out);
}

int view_text(FILE *out, const struct snap *s, const struct view_options *o)
{
	put_header(out, s);
	if (s->has_tree && !o->one_process) {
		if (put_tree(out, s, o) < 0)
			return -1;
	} else {
		put_unprofiled(out, s);
	}
	put_peak(out, s);
	if (put_sparse_summary(out, s, o) < 0)
		return -1;
	put_timeline(out, s);
	if (put_debug_missing(out, s) < 0)
		return -1;
	struct link_index by_touch = { 0 }, by_alloc = { 0 };
	int linked = s->view == SNAP_VIEW_TOUCH && s->n_links;
	int rc = -1;
	if (linked && (link_index_build(&by_touch, s, 0) < 0 || link_index_build(&by_alloc, s, 1) < 0))
		goto out;
	if (put_your_lines(out, s, o, s->stacks, s->n_stacks, s->peak.charged, "at the peak") < 0 ||
	    put_stacks(out, s, o, s->stacks, s->n_stacks, "at the peak", s->peak.charged, 0, linked ? &by_touch : NULL) < 0 ||
	    put_functions(out, s, o) < 0 || put_other(out, s, o, linked ? &by_alloc : NULL) < 0)
		goto out;
	rc = put_live(out, s, o);
out:
	free(by_touch.v);
	free(by_alloc.v);
	return rc;
}
