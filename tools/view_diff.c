/*
 * ptfil-view --diff: which stacks grew or shrank between two snapshots. Stacks
 * are matched by their frame labels (flame.h), not by address, so two runs of
 * the same program compare even when its libraries load elsewhere.
 */
#include "tools/view.h"
#include "common/error.h"

#include <stdlib.h>
#include <string.h>

static int64_t clamp_delta(uint64_t before, uint64_t after)
{
	if (after >= before)
		return after - before > INT64_MAX ? INT64_MAX : (int64_t)(after - before);
	return before - after > INT64_MAX ? -INT64_MAX : -(int64_t)(before - after);
}

static uint64_t magnitude(int64_t d)
{
	return d < 0 ? (uint64_t)-d : (uint64_t)d;
}

static const struct flame *sort_tree;

static int cmp_change(const void *pa, const void *pb)
{
	const struct flame_node *a = &sort_tree->nodes[*(const uint32_t *)pa];
	const struct flame_node *b = &sort_tree->nodes[*(const uint32_t *)pb];
	uint64_t ma = magnitude(clamp_delta(a->self_charged[0], a->self_charged[1]));
	uint64_t mb = magnitude(clamp_delta(b->self_charged[0], b->self_charged[1]));
	if (ma != mb)
		return ma > mb ? -1 : 1;
	/* Then in tree order (node numbers are stable for a given pair of files). */
	return (*(const uint32_t *)pa > *(const uint32_t *)pb) - (*(const uint32_t *)pa < *(const uint32_t *)pb);
}

uint32_t *view_diff_changes(const struct flame *f, size_t *n, size_t *grew, size_t *shrank)
{
	uint32_t *v = malloc((f->n_nodes ? f->n_nodes : 1) * sizeof(*v));
	size_t k = 0;
	*grew = *shrank = 0;
	if (!v) {
		error("out of memory");
		return NULL;
	}
	for (size_t i = 1; i < f->n_nodes; i++) {
		const struct flame_node *nd = &f->nodes[i];
		if (nd->self_charged[0] == nd->self_charged[1])
			continue;
		if (nd->self_charged[1] > nd->self_charged[0])
			(*grew)++;
		else
			(*shrank)++;
		v[k++] = (uint32_t)i;
	}
	sort_tree = f;
	qsort(v, k, sizeof(*v), cmp_change);
	sort_tree = NULL;
	*n = k;
	return v;
}

uint32_t view_python_node(const struct flame *f, uint32_t node)
{
	uint32_t first = FLAME_ROOT;
	for (; node != FLAME_ROOT && node < f->n_nodes; node = f->nodes[node].parent) {
		const struct flame_node *n = &f->nodes[node];
		if (!n->python)
			continue;
		if (n->file == FLAME_NONE || !view_frozen_file(f->labels[n->file]))
			return node;
		if (first == FLAME_ROOT)
			first = node;
	}
	return first;
}

/* "+4.0 MiB", "-512 B", "0 B" */
static void fmt_delta(char *buf, size_t size, int64_t d)
{
	char mag[32];
	view_format_size(mag, sizeof(mag), magnitude(d));
	snprintf(buf, size, "%s%s", d > 0 ? "+" : d < 0 ? "-" : "", mag);
}

static void fmt_change_share(char *buf, size_t size, uint64_t before, uint64_t after)
{
	if (before == 0)
		snprintf(buf, size, "new");
	else if (after == 0)
		snprintf(buf, size, "gone");
	else
		snprintf(buf, size, "%+.1f%%", 100.0 * ((double)after - (double)before) / (double)before);
}

static void put_run(FILE *out, const char *what, const char *name, const struct snap *s,
		    enum flame_set set)
{
	char charged[32], reserved[32], when[32];
	fprintf(out, "%-7s  ", what);
	view_put_safe(out, name, 200);
	fprintf(out, ": pid %d, ", s->pid);
	view_put_safe(out, s->argc ? view_basename(s->argv[0]) : "(unknown command)", 200);
	if (set == FLAME_LIVE) {
		uint64_t c = 0;
		for (size_t i = 0; i < s->n_live; i++)
			c = c + s->live[i].charged < c ? UINT64_MAX : c + s->live[i].charged;
		view_format_size(charged, sizeof(charged), c);
		fprintf(out, ", %s still live at the end\n", charged);
		return;
	}
	if (set == FLAME_TREE) {
		view_format_size(charged, sizeof(charged), s->tree_charged);
		view_format_time(when, sizeof(when), s->tree_time);
		fprintf(out, ", combined peak of %zu process%s %s at %s\n", s->n_procs, s->n_procs == 1 ? "" : "es",
			charged, when);
		return;
	}
	int known;
	view_format_size(charged, sizeof(charged), s->peak.charged);
	view_format_size(reserved, sizeof(reserved), view_peak_reserved(s, &known));
	view_format_time(when, sizeof(when), s->peak.time);
	if (known)
		fprintf(out, ", peak %s charged (%s reserved) at %s\n", charged, reserved, when);
	else
		fprintf(out, ", peak %s charged at %s\n", charged, when);
}

/*
 * Which view the two runs show, in one line: the text report's when they
 * agree; when they differ, both, and that the stacks are compared all the
 * same (by their frames' names: memory that moved from one view's stack to
 * the other's shows as grown here and shrunk there).
 */
static void put_views(FILE *out, const struct snap *a, const struct snap *b)
{
	if (a->view == b->view) {
		fprintf(out, "view     %s: %s\n", view_view_name(a), view_view_meaning(a));
		return;
	}
	fprintf(out, "view     differs: before %s (%s), after %s (%s); stacks compared all the same\n",
		view_view_name(a), view_view_short(a), view_view_name(b), view_view_short(b));
}

/*
 * One frame of a changed stack: its label, then for a native frame its
 * source file and line where the frames merged there agree (see flame.h) and
 * its module's name, and whether it is an inlined call.
 */
static void put_node(FILE *out, const struct flame *f, uint32_t node, int innermost)
{
	const struct flame_node *fr = &f->nodes[node];
	const char *sep = " (";
	fputs(innermost ? "    \xe2\x86\x92 " : "      ", out);
	view_put_safe(out, f->labels[fr->label], FLAME_LABEL_MAX);
	if (!fr->python && fr->file != FLAME_NONE) {
		fputs(sep, out);
		view_put_safe(out, f->labels[fr->file], FLAME_LABEL_MAX);
		if (fr->line)
			fprintf(out, ":%u", (unsigned)fr->line);
		sep = ", ";
	}
	if (fr->module != FLAME_NONE) {
		fputs(sep, out);
		view_put_safe(out, f->labels[fr->module], FLAME_LABEL_MAX);
		sep = ", ";
	}
	if (*sep == ',')
		fputc(')', out);
	if (fr->inlined == FLAME_INLINED_ALL)
		fputs(" [inlined]", out);
	else if (fr->inlined == FLAME_INLINED_SOME)
		fputs(" [partly inlined]", out);
	fputc('\n', out);
}

int view_diff_text(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		   const struct view_options *o)
{
	size_t n, grew, shrank;
	uint32_t *v = view_diff_changes(f, &n, &grew, &shrank);
	if (!v)
		return -1;
	const char *set = o->set == FLAME_LIVE ? "still live at the end" :
			  o->set == FLAME_TREE ? "at the combined peak" : "at the peak";
	char d[40], share[32];

	put_run(out, "before", o->name_a, a, o->set);
	put_run(out, "after", o->name_b, b, o->set);
	put_views(out, a, b);
	const struct flame_node *root = &f->nodes[FLAME_ROOT];
	fmt_delta(d, sizeof(d), clamp_delta(root->charged[0], root->charged[1]));
	fmt_change_share(share, sizeof(share), root->charged[0], root->charged[1]);
	fprintf(out, "change   %s charged %s (%s): %zu stack%s grew, %zu shrank\n", d, set, share,
		grew, grew == 1 ? "" : "s", shrank);

	if (n == 0) {
		fprintf(out, "\nno stack changed\n");
		free(v);
		return 0;
	}
	size_t shown = o->top && o->top < n ? o->top : n;
	size_t depth = o->depth ? o->depth : 8;
	if (shown == n)
		fprintf(out, "\n%zu stack%s changed, largest change first:\n", n, n == 1 ? "" : "s");
	else
		fprintf(out, "\ntop %zu of %zu changed stacks, largest change first:\n", shown, n);
	for (size_t i = 0; i < shown; i++) {
		const struct flame_node *nd = &f->nodes[v[i]];
		char before[32], after[32];
		fmt_delta(d, sizeof(d), clamp_delta(nd->self_charged[0], nd->self_charged[1]));
		view_format_size(before, sizeof(before), nd->self_charged[0]);
		view_format_size(after, sizeof(after), nd->self_charged[1]);
		fmt_change_share(share, sizeof(share), nd->self_charged[0], nd->self_charged[1]);
		fprintf(out, "#%-2zu %10s  %s \xe2\x86\x92 %s (%s)\n", i + 1, d, before, after, share);
		size_t k = 0;
		uint32_t x = v[i];
		for (; x != FLAME_ROOT && k < depth; x = f->nodes[x].parent, k++)
			put_node(out, f, x, k == 0);
		/* The innermost Python frame is shown even past the depth (view_python_frame). */
		uint32_t py = view_python_node(f, v[i]);
		if (x != FLAME_ROOT && py != FLAME_ROOT && f->nodes[py].depth <= f->nodes[x].depth) {
			if (py != x)
				fprintf(out, "      ... %u more\n", f->nodes[x].depth - f->nodes[py].depth);
			put_node(out, f, py, 0);
			x = f->nodes[py].parent;
		}
		if (x != FLAME_ROOT)
			fprintf(out, "      ... %u more\n", f->nodes[x].depth);
	}
	if (shown < n)
		fprintf(out, "... %zu more changed stack%s\n", n - shown, n - shown == 1 ? "" : "s");
	free(v);
	return 0;
}
