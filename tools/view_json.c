/* The JSON output of ptfil-view: one document with a stable schema (docs/json-output.md). */
#include "tools/view.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/u64map.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Bumped only when a field changes meaning or disappears; new fields do not bump it. */
#define VIEW_JSON_FORMAT_VERSION 1

/*
 * A small emitter that keeps commas and indentation right. A container
 * opened "inline" keeps its members on one line (frames, samples), so the
 * document stays readable without being one value per line.
 */
#define JSON_MAX_DEPTH 16

struct json {
	FILE *out;
	int depth;
	int count[JSON_MAX_DEPTH];   /* members written so far at each level */
	int inline_[JSON_MAX_DEPTH];
};

static void j_string(struct json *j, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	FILE *out = j->out;
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s);

	fputc('"', out);
	while (left) {
		size_t n = view_utf8_len(p, left);
		if (n == 0) {
			/* Invalid UTF-8 cannot be carried in JSON text: replace each bad byte. */
			fputs("\\ufffd", out);
			n = 1;
		} else if (n > 1) {
			fwrite(p, 1, n, out);
		} else if (*p == '"' || *p == '\\') {
			fputc('\\', out);
			fputc(*p, out);
		} else if (*p == '\n') {
			fputs("\\n", out);
		} else if (*p == '\t') {
			fputs("\\t", out);
		} else if (*p == '\r') {
			fputs("\\r", out);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(out, "\\u00%c%c", hex[*p >> 4], hex[*p & 15]);
		} else {
			fputc(*p, out);
		}
		p += n;
		left -= n;
	}
	fputc('"', out);
}

/* Starts a member (key given) or an array element (key NULL). */
static void j_member(struct json *j, const char *key)
{
	int d = j->depth;
	if (j->count[d]++)
		fputc(',', j->out);
	if (j->inline_[d]) {
		if (j->count[d] > 1)
			fputc(' ', j->out);
	} else {
		fputc('\n', j->out);
		for (int i = 0; i <= d; i++)
			fputs("  ", j->out);
	}
	if (key) {
		j_string(j, key);
		fputs(": ", j->out);
	}
}

static void j_open(struct json *j, const char *key, char brace, int inline_)
{
	if (j->depth >= 0)
		j_member(j, key);
	fputc(brace, j->out);
	j->depth++;
	/* The emitter's nesting is fixed by this file, well under the limit. */
	j->count[j->depth] = 0;
	j->inline_[j->depth] = inline_ || (j->depth > 0 && j->inline_[j->depth - 1]);
}

static void j_close(struct json *j, char brace)
{
	int d = j->depth--;
	if (j->count[d] && !j->inline_[d]) {
		fputc('\n', j->out);
		for (int i = 0; i <= j->depth; i++)
			fputs("  ", j->out);
	}
	fputc(brace, j->out);
}

static void j_str(struct json *j, const char *key, const char *v)
{
	j_member(j, key);
	if (v)
		j_string(j, v);
	else
		fputs("null", j->out);
}

static void j_u64(struct json *j, const char *key, uint64_t v)
{
	j_member(j, key);
	fprintf(j->out, "%llu", (unsigned long long)v);
}

static void j_int(struct json *j, const char *key, long long v)
{
	j_member(j, key);
	fprintf(j->out, "%lld", v);
}

static void j_double(struct json *j, const char *key, double v)
{
	char buf[64];
	j_member(j, key);
	if (!isfinite(v)) {
		fputs("null", j->out);
		return;
	}
	view_format_double(buf, sizeof(buf), v);
	fputs(buf, j->out);
}

static void j_bool(struct json *j, const char *key, int v)
{
	j_member(j, key);
	fputs(v ? "true" : "false", j->out);
}

static void j_null(struct json *j, const char *key)
{
	j_member(j, key);
	fputs("null", j->out);
}

/* A frame's line: null when unknown (0). */
static void j_line(struct json *j, uint32_t line)
{
	if (line)
		j_u64(j, "line", line);
	else
		j_null(j, "line");
}

/* ---- the document ---------------------------------------------------------- */

/*
 * A frame. Native: kind, function, file and line (from the debug
 * information, or null), module, build_id, offset, inlined. Python: kind,
 * function (the qualified name), file, line, the native keys as null and
 * inlined false, so that one schema reads both.
 */
static void put_frame(struct json *j, const struct snap *s, uint32_t fi)
{
	const struct snap_frame *f = &s->frames[fi];
	const struct snap_module *m = NULL;
	if (f->kind == SNAP_FRAME_PYTHON) {
		j_open(j, NULL, '{', 1);
		j_str(j, "kind", "python");
		j_str(j, "function", f->function);
		j_str(j, "file", f->file ? f->file : "");
		j_line(j, f->line);
		j_str(j, "module", NULL);
		j_str(j, "build_id", NULL);
		j_null(j, "offset");
		j_bool(j, "inlined", 0);
		j_close(j, '}');
		return;
	}
	if (f->module >= 0 && (size_t)f->module < s->n_modules)
		m = &s->modules[f->module];
	j_open(j, NULL, '{', 1);
	j_str(j, "kind", "native");
	j_str(j, "function", f->function);
	j_str(j, "file", f->file && *f->file ? f->file : NULL);
	j_line(j, f->file && *f->file ? f->line : 0);
	j_str(j, "module", m ? m->path : NULL);
	j_str(j, "build_id", m ? m->build_id : NULL);
	j_u64(j, "offset", f->offset);
	j_bool(j, "inlined", f->inlined);
	j_close(j, '}');
}

/*
 * The stacks st[0..n), largest first, at most limit (0: all); tree: each with
 * the pid of its process. index, when given, gets each listed stack's node
 * mapped to its place in the list (the first, for a node listed twice).
 */
static int put_stacks(struct json *j, const struct snap *s, const char *key,
		      const struct snap_stack *st, size_t n, size_t limit, int tree, struct u64map *index)
{
	const struct snap_stack **v = view_sort_stacks(st, n);
	if (!v)
		return -1;
	size_t shown = limit && limit < n ? limit : n;
	uint32_t *frames = NULL;
	size_t cap = 0;

	j_open(j, key, '[', 0);
	for (size_t i = 0; i < shown; i++) {
		size_t depth = snap_stack_frames(s, v[i]->node, NULL, 0);
		/* Exactly depth (a minimum of depth leaves nothing to double). */
		if (grow_array(&frames, &cap, depth, sizeof(*frames), depth)) {
			free(frames);
			free(v);
			return error("out of memory");
		}
		snap_stack_frames(s, v[i]->node, frames, depth);
		if (index && u64map_get(index, v[i]->node) == U64MAP_NONE && u64map_put(index, v[i]->node, (uint32_t)i) < 0) {
			free(frames);
			free(v);
			return error("out of memory");
		}
		j_open(j, NULL, '{', 0);
		if (tree) {
			if (v[i]->proc < s->n_procs)
				j_int(j, "pid", s->procs[v[i]->proc].pid);
			else
				j_null(j, "pid");
		}
		j_u64(j, "charged_bytes", v[i]->charged);
		j_u64(j, "reserved_bytes", v[i]->reserved);
		j_u64(j, "count", v[i]->count);
		j_str(j, "kind", view_kind_key(v[i]->kind));
		j_bool(j, "sparse", view_is_sparse(v[i]));
		j_open(j, "frames", '[', 0);
		for (size_t k = 0; k < depth; k++)
			put_frame(j, s, frames[k]);
		j_close(j, ']');
		j_close(j, '}');
	}
	j_close(j, ']');
	free(frames);
	free(v);
	return 0;
}

static int cmp_counter(const void *a, const void *b)
{
	const struct snap_counter *x = *(const struct snap_counter *const *)a;
	const struct snap_counter *y = *(const struct snap_counter *const *)b;
	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

/* Counters by name, in name order; a name written twice is summed, as JSON keys must be unique. */
static int put_counters(struct json *j, const struct snap *s)
{
	const struct snap_counter **v = malloc((s->n_counters ? s->n_counters : 1) * sizeof(*v));
	if (!v)
		return error("out of memory");
	for (size_t i = 0; i < s->n_counters; i++)
		v[i] = &s->counters[i];
	qsort(v, s->n_counters, sizeof(*v), cmp_counter);
	j_open(j, "counters", '{', 0);
	for (size_t i = 0; i < s->n_counters;) {
		uint64_t sum = 0;
		size_t k = i;
		for (; k < s->n_counters && cmp_counter(&v[i], &v[k]) == 0; k++)
			sum = sum + v[k]->count < sum ? UINT64_MAX : sum + v[k]->count;
		j_u64(j, v[i]->name ? v[i]->name : "", sum);
		i = k;
	}
	j_close(j, '}');
	free(v);
	return 0;
}

/* The modules in the stacks that had no symbols or no lines (view_debug_missing), with their package. */
static int put_debug_missing(struct json *j, const struct snap *s)
{
	size_t n;
	size_t *v = view_debug_missing(s, &n);
	if (!v)
		return -1;
	j_open(j, "debug_info_missing", '[', 0);
	for (size_t i = 0; i < n; i++) {
		const struct snap_module *m = &s->modules[v[i]];
		const char *kind = m->symbols == SNAP_SYMBOLS_NONE ? "none" : m->symbols == SNAP_SYMBOLS_EXPORTS ? "exports"
				 : m->symbols == SNAP_SYMBOLS_MINI ? "minidebuginfo" : "full";
		j_open(j, NULL, '{', 1);
		j_str(j, "module", m->path);
		j_str(j, "build_id", m->build_id);
		j_str(j, "symbols", kind);
		j_bool(j, "lines", m->lines);
		j_str(j, "package", m->package);
		j_close(j, '}');
	}
	j_close(j, ']');
	free(v);
	return 0;
}

/*
 * The process tree (format 4): every process in file order (the main one
 * first), and the combined peak with its stacks when the run followed forks;
 * null where a value is unknown (not profiled, no combined peak, running).
 */
static int put_tree(struct json *j, const struct snap *s, size_t limit)
{
	j_open(j, "tree", '{', 0);
	if (s->has_tree) {
		j_u64(j, "combined_peak_bytes", s->tree_charged);
		j_double(j, "time_s", s->tree_time);
	} else {
		j_null(j, "combined_peak_bytes");
		j_null(j, "time_s");
	}
	j_open(j, "processes", '[', 0);
	for (size_t i = 0; i < s->n_procs; i++) {
		const struct snap_proc *p = &s->procs[i];
		j_open(j, NULL, '{', 1);
		j_int(j, "pid", p->pid);
		j_int(j, "ppid", p->ppid);
		j_str(j, "command", p->command);
		j_bool(j, "profiled", p->profiled);
		if (p->profiled) {
			j_u64(j, "peak_bytes", p->peak);
			j_double(j, "peak_time_s", p->peak_time);
		} else {
			j_null(j, "peak_bytes");
			j_null(j, "peak_time_s");
		}
		if (p->profiled && s->has_tree)
			j_u64(j, "at_combined_peak_bytes", p->at_combined);
		else
			j_null(j, "at_combined_peak_bytes");
		j_u64(j, "vmhwm_bytes", p->vmhwm);
		j_double(j, "start_s", p->start);
		if (p->end < 0)
			j_null(j, "end_s");
		else
			j_double(j, "end_s", p->end);
		j_str(j, "file", p->file);
		j_close(j, '}');
	}
	j_close(j, ']');
	j_close(j, '}');
	j_u64(j, "combined_peak_stacks_total", s->n_tree_stacks);
	return put_stacks(j, s, "combined_peak_stacks", s->tree_stacks, s->n_tree_stacks, limit, 1, NULL);
}

/*
 * A touch snapshot's alloc view at the same peak, and the links between the
 * two: each by the places of its two stacks in `stacks` and
 * `other_view_stacks`, listed when both are (--top may leave one out).
 */
static int put_other(struct json *j, const struct snap *s, size_t limit, const struct u64map *main_index)
{
	struct u64map other_index;
	u64map_init(&other_index);
	j_u64(j, "other_view_stacks_total", s->n_other);
	int rc = put_stacks(j, s, "other_view_stacks", s->other, s->n_other, limit, 0, &other_index);
	if (rc == 0) {
		j_u64(j, "links_total", s->n_links);
		j_open(j, "links", '[', 0);
		for (size_t i = 0; i < s->n_links; i++) {
			uint32_t a = u64map_get(main_index, s->links[i].touch_node);
			uint32_t b = u64map_get(&other_index, s->links[i].alloc_node);
			if (a == U64MAP_NONE || b == U64MAP_NONE)
				continue;
			j_open(j, NULL, '{', 1);
			j_u64(j, "bytes", s->links[i].bytes);
			j_u64(j, "stack", a);
			j_u64(j, "other_view_stack", b);
			j_close(j, '}');
		}
		j_close(j, ']');
	}
	u64map_fin(&other_index);
	return rc;
}

int view_json(FILE *out, const struct snap *s, const struct view_options *o)
{
	struct json j = { .out = out, .depth = -1 };
	size_t limit = o->top_set ? o->top : 0;

	j_open(&j, NULL, '{', 0);
	j_int(&j, "format_version", VIEW_JSON_FORMAT_VERSION);
	j_int(&j, "snapshot_format_version", s->version);
	j_str(&j, "ptfil_version", s->ptfil_version);
	j_str(&j, "view", view_view_name(s));

	j_open(&j, "process", '{', 0);
	j_int(&j, "pid", s->pid);
	j_open(&j, "command", '[', 1);
	for (size_t i = 0; i < s->argc; i++)
		j_str(&j, NULL, s->argv[i]);
	j_close(&j, ']');
	j_str(&j, "mode", s->mode);
	j_double(&j, "start_time", s->start_time);
	j_double(&j, "duration_s", s->duration);
	if (s->exit_status < 0)
		j_str(&j, "exit_status", NULL);
	else
		j_int(&j, "exit_status", s->exit_status);
	j_u64(&j, "vmhwm_bytes", s->vmhwm);
	j_u64(&j, "page_size", s->page_size);
	j_close(&j, '}');

	j_open(&j, "peak", '{', 0);
	j_double(&j, "time_s", s->peak.time);
	j_u64(&j, "charged_bytes", s->peak.charged);
	int known;
	uint64_t reserved = view_peak_reserved(s, &known);
	if (known)
		j_u64(&j, "reserved_bytes", reserved);
	else
		j_null(&j, "reserved_bytes");
	j_u64(&j, "rss_bytes", s->peak.rss);
	j_close(&j, '}');

	int other = s->view == SNAP_VIEW_TOUCH && (s->n_other || s->n_links);
	struct u64map main_index;
	u64map_init(&main_index);
	j_u64(&j, "stacks_total", s->n_stacks);
	int rc = put_stacks(&j, s, "stacks", s->stacks, s->n_stacks, limit, 0, other ? &main_index : NULL);
	if (rc == 0) {
		j_u64(&j, "live_at_end_total", s->n_live);
		rc = put_stacks(&j, s, "live_at_end", s->live, s->n_live, limit, 0, NULL);
	}
	if (rc == 0 && other)
		rc = put_other(&j, s, limit, &main_index);
	u64map_fin(&main_index);
	if (rc < 0)
		return -1;

	if (s->n_procs && !o->one_process && put_tree(&j, s, limit) < 0)
		return -1;

	j_open(&j, "timeline", '[', 0);
	for (size_t i = 0; i < s->n_samples; i++) {
		j_open(&j, NULL, '{', 1);
		j_double(&j, "time_s", s->samples[i].time);
		j_u64(&j, "charged_bytes", s->samples[i].charged);
		j_u64(&j, "rss_bytes", s->samples[i].rss);
		j_close(&j, '}');
	}
	j_close(&j, ']');
	if (put_debug_missing(&j, s) < 0 || put_counters(&j, s) < 0)
		return -1;
	j_close(&j, '}');
	fputc('\n', out);
	return 0;
}

/* ---- the diff document --------------------------------------------------------- */

static void put_run(struct json *j, const char *key, const char *name, const struct snap *s)
{
	j_open(j, key, '{', 0);
	j_str(j, "file", name);
	j_str(j, "view", view_view_name(s));
	j_int(j, "pid", s->pid);
	j_open(j, "command", '[', 1);
	for (size_t i = 0; i < s->argc; i++)
		j_str(j, NULL, s->argv[i]);
	j_close(j, ']');
	j_double(j, "duration_s", s->duration);
	j_open(j, "peak", '{', 1);
	j_double(j, "time_s", s->peak.time);
	j_u64(j, "charged_bytes", s->peak.charged);
	j_u64(j, "reserved_bytes", s->peak.reserved);
	j_u64(j, "rss_bytes", s->peak.rss);
	j_close(j, '}');
	j_close(j, '}');
}

int view_diff_json(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		   const struct view_options *o)
{
	struct json j = { .out = out, .depth = -1 };
	size_t n, grew, shrank;
	uint32_t *v = view_diff_changes(f, &n, &grew, &shrank);
	if (!v)
		return -1;
	size_t shown = o->top_set && o->top && o->top < n ? o->top : n;
	const struct flame_node *root = &f->nodes[FLAME_ROOT];

	j_open(&j, NULL, '{', 0);
	j_int(&j, "format_version", VIEW_JSON_FORMAT_VERSION);
	j_str(&j, "diff_of", o->set == FLAME_LIVE ? "live_at_end" : o->set == FLAME_TREE ? "combined_peak" : "peak");
	put_run(&j, "before", o->name_a, a);
	put_run(&j, "after", o->name_b, b);
	j_u64(&j, "before_charged_bytes", root->charged[0]);
	j_u64(&j, "after_charged_bytes", root->charged[1]);
	j_u64(&j, "stacks_grown", grew);
	j_u64(&j, "stacks_shrunk", shrank);
	j_u64(&j, "changes_total", n);
	j_open(&j, "changes", '[', 0);
	for (size_t i = 0; i < shown; i++) {
		const struct flame_node *nd = &f->nodes[v[i]];
		j_open(&j, NULL, '{', 0);
		j_u64(&j, "before_bytes", nd->self_charged[0]);
		j_u64(&j, "after_bytes", nd->self_charged[1]);
		j_u64(&j, "before_reserved_bytes", nd->self_reserved[0]);
		j_u64(&j, "after_reserved_bytes", nd->self_reserved[1]);
		j_u64(&j, "before_count", nd->self_count[0]);
		j_u64(&j, "after_count", nd->self_count[1]);
		j_open(&j, "frames", '[', 0);
		for (uint32_t x = v[i]; x != FLAME_ROOT; x = f->nodes[x].parent) {
			const struct flame_node *fr = &f->nodes[x];
			j_open(&j, NULL, '{', 1);
			j_str(&j, "kind", fr->python ? "python" : "native");
			j_str(&j, "function", f->labels[fr->label]);
			if (fr->python) {
				j_str(&j, "file", fr->file == FLAME_NONE ? "" : f->labels[fr->file]);
				j_line(&j, fr->line);
			} else {
				/* Where the frames merged here agree (flame.h); null otherwise. */
				j_str(&j, "file", fr->file == FLAME_NONE ? NULL : f->labels[fr->file]);
				j_line(&j, fr->file == FLAME_NONE ? 0 : fr->line);
			}
			j_str(&j, "module", fr->module == FLAME_NONE ? NULL : f->labels[fr->module]);
			if (fr->inlined == FLAME_INLINED_SOME)
				j_null(&j, "inlined");
			else
				j_bool(&j, "inlined", fr->inlined == FLAME_INLINED_ALL);
			j_close(&j, '}');
		}
		j_close(&j, ']');
		j_close(&j, '}');
	}
	j_close(&j, ']');
	j_close(&j, '}');
	fputc('\n', out);
	free(v);
	return 0;
}
