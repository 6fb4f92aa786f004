/*
 * The HTML report (ptfil-view --html): one self-contained page with the flame
 * graph (view_flame_svg, inline), the timeline, the top stacks, functions,
 * sparse memory, what was still live at the end and the run's facts; in a
 * diff, both runs side by side and what grew or shrank. It loads nothing from
 * anywhere: its style and scripts are tools/assets/report.* and flame.*, and a
 * Content-Security-Policy forbids any fetch. It is well-formed XML as well as
 * HTML, so a test can parse it either way.
 */
#include "tools/view.h"
#include "tools/assets/assets.h"
#include "common/error.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHART_W 1200
#define CHART_H 280
#define PLOT_X0 78.0
#define PLOT_X1 1150.0
#define PLOT_Y0 16.0
#define PLOT_Y1 226.0
#define TIME_LIMIT 1e12         /* seconds: times beyond are drawn at the edge */
#define MAX_POINTS 2000         /* per timeline series: longer runs keep each interval's largest */
#define STACK_FRAMES_MAX 256    /* frames listed in one stack's details */
#define TEXT_MAX 400            /* bytes of one name shown */
#define COMMAND_MAX 4096
#define INLINE_FRAMES 4        /* frames of a stack on its table row; the rest behind a click */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static void put_size(FILE *out, uint64_t bytes)
{
	char buf[32];
	view_format_size(buf, sizeof(buf), bytes);
	fputs(buf, out);
}

static void put_time(FILE *out, double t)
{
	char buf[64];
	view_format_time(buf, sizeof(buf), t);
	fputs(buf, out);
}

static int finite(double v)
{
	return v == v && v - v == 0;
}

/* ---- table cells --------------------------------------------------------------- */

/* A size: human units shown, exact bytes in the title, and data-v for sorting. */
static void td_size(FILE *out, uint64_t bytes)
{
	fprintf(out, "<td class=\"n\" data-v=\"%llu\" title=\"%llu bytes\">", (unsigned long long)bytes,
		(unsigned long long)bytes);
	put_size(out, bytes);
	fputs("</td>", out);
}

static void td_share(FILE *out, uint64_t part, uint64_t whole)
{
	double v = whole ? 100.0 * (double)part / (double)whole : 0;
	fprintf(out, "<td class=\"n\" data-v=\"%.4f\">", v);
	if (whole)
		fprintf(out, "%.1f%%", v);
	else
		fputs("-", out);
	fputs("</td>", out);
}

static void td_count(FILE *out, uint64_t n)
{
	fprintf(out, "<td class=\"n\" data-v=\"%llu\">%llu</td>", (unsigned long long)n, (unsigned long long)n);
}

/* A change: "+1.5 MiB" in the grow colour, "-1.5 MiB" in the shrink colour. */
static void td_delta(FILE *out, uint64_t a, uint64_t b)
{
	int grow = b > a;
	uint64_t d = grow ? b - a : a - b;
	fprintf(out, "<td class=\"n %s\" data-v=\"%s%llu\" title=\"%s%llu bytes\">%s",
		grow ? "grow" : b < a ? "shrink" : "same", grow || d == 0 ? "" : "-", (unsigned long long)d,
		grow ? "+" : d ? "-" : "", (unsigned long long)d, grow ? "+" : d ? "-" : "");
	put_size(out, d);
	fputs("</td>", out);
}

/*
 * A Python frame's file and line, "/home/u/demo.py:12", or in short as
 * labels have it, "demo.py:12" (no line when it is unknown).
 */
static void put_file_line(FILE *out, const struct snap_frame *fr, int brief)
{
	const char *file = fr->file && *fr->file ? fr->file : "?";
	view_put_xml(out, brief ? flame_python_file(file) : file, TEXT_MAX);
	if (fr->line)
		fprintf(out, ":%u", (unsigned)fr->line);
}

/* What a native frame's details read: "FILE:LINE, MODULE + 0xOFFSET", the pieces known; 0 if none. */
static int put_native_where(FILE *out, const struct snap_frame *fr, const struct snap_module *m)
{
	int n = 0;
	if (fr->file && *fr->file) {
		view_put_xml(out, fr->file, TEXT_MAX);
		if (fr->line)
			fprintf(out, ":%u", (unsigned)fr->line);
		n++;
	}
	/* An inlined call has the address of the frame after it, which shows it; so has an unnamed frame. */
	if (m && fr->function && *fr->function && !fr->inlined) {
		fputs(n++ ? ", " : "", out);
		view_put_xml(out, view_basename(m->path), TEXT_MAX);
		fprintf(out, " + 0x%llx", (unsigned long long)fr->offset);
	}
	return n;
}

/*
 * A frame: the function (or "MODULE + 0xOFFSET", or the address), and unless
 * brief its source file and line and its module and offset (in a tooltip
 * when brief); an inlined call marked so. A Python frame: the function (or
 * "?") and its file and line; when brief, the short file (the whole name in a
 * tooltip).
 */
static void put_frame(FILE *out, const struct snap *s, uint32_t fi, int brief)
{
	const struct snap_frame *fr = &s->frames[fi];
	const struct snap_module *m = NULL;
	if (fr->kind == SNAP_FRAME_PYTHON) {
		fputs("<span class=\"fn py\"", out);
		if (brief) {
			fputs(" title=\"", out);
			put_file_line(out, fr, 0);
			fputc('"', out);
		}
		fputc('>', out);
		view_put_xml(out, fr->function && *fr->function ? fr->function : "?", TEXT_MAX);
		fputs("</span> <span class=\"mod\">", out);
		put_file_line(out, fr, brief);
		fputs("</span>", out);
		return;
	}
	if (fr->module >= 0 && (size_t)fr->module < s->n_modules)
		m = &s->modules[fr->module];
	int has_where = (fr->file && *fr->file) || (m && fr->function && *fr->function && !fr->inlined);
	if (brief && has_where) {
		fputs("<span class=\"fn\" title=\"", out);
		put_native_where(out, fr, m);
		fputs("\">", out);
	} else {
		fputs("<span class=\"fn\">", out);
	}
	if (fr->function && *fr->function) {
		view_put_xml(out, fr->function, TEXT_MAX);
	} else if (m) {
		view_put_xml(out, view_basename(m->path), TEXT_MAX);
		fprintf(out, " + 0x%llx", (unsigned long long)fr->offset);
	} else {
		fprintf(out, "0x%llx", (unsigned long long)fr->offset);
	}
	fputs("</span>", out);
	if (!brief && has_where) {
		fputs(" <span class=\"mod\">", out);
		put_native_where(out, fr, m);
		fputs("</span>", out);
	}
	if (fr->inlined)
		fputs(" <span class=\"mod\">[inlined]</span>", out);
}

#define ARROW " <span class=\"arrow\">\xe2\x86\x90</span> "

#define ELLIPSIS ARROW "<span class=\"arrow\">\xe2\x80\xa6</span>"

/*
 * A stack, innermost frame first: the first INLINE_FRAMES on one line
 * ("f \u2190 caller \u2190 ..."), and the innermost Python frame if it is
 * further (view_python_frame), then every frame with its module in a
 * <details>.
 */
/* The user's own code (--own), for the stacks' anchors: set by view_html. */
static const struct fold_own *html_own;

static int td_stack(FILE *out, const struct snap *s, uint32_t node)
{
	uint32_t *frames = malloc(STACK_FRAMES_MAX * sizeof(*frames));
	if (!frames)
		return error("out of memory");
	size_t total = snap_stack_frames(s, node, frames, STACK_FRAMES_MAX);
	size_t shown = total < STACK_FRAMES_MAX ? total : STACK_FRAMES_MAX;
	fputs("<td class=\"stack\">", out);
	/* Headed by the user's own frame, as the text report is. */
	size_t anchor = fold_anchor(s, html_own, frames, shown);
	if (anchor < shown) {
		fputs("<div class=\"yours\">your code: ", out);
		put_frame(out, s, frames[anchor], 1);
		fputs("</div>", out);
	}
	fputs("<div class=\"inline\">", out);
	if (total == 0)
		fputs("<span class=\"none\">(no call stack)</span>", out);
	for (size_t k = 0; k < shown && k < INLINE_FRAMES; k++) {
		if (k)
			fputs(ARROW, out);
		put_frame(out, s, frames[k], 1);
	}
	size_t more = INLINE_FRAMES;
	if (total > INLINE_FRAMES) {
		size_t py = view_python_frame(s, frames, 0, shown);
		if (py >= INLINE_FRAMES && py < shown) {
			fputs(ELLIPSIS ARROW, out);
			put_frame(out, s, frames[py], 1);
			more = py + 1;
		}
	}
	if (total > more)
		fputs(ELLIPSIS, out);
	fputs("</div>", out);
	if (total > 0) {
		fprintf(out, "<details><summary>%zu frame%s</summary><ol class=\"frames\">", total, total == 1 ? "" : "s");
		for (size_t k = 0; k < shown; k++) {
			fputs("<li>", out);
			put_frame(out, s, frames[k], 0);
			fputs("</li>", out);
		}
		if (total > shown)
			fprintf(out, "<li class=\"more\">... %zu more</li>", total - shown);
		fputs("</ol></details>", out);
	}
	fputs("</td>", out);
	free(frames);
	return 0;
}

/* A native node's details: "FILE:LINE, MODULE", the pieces known (see flame.h); 0 if none. */
static int put_node_where(FILE *out, const struct flame *f, const struct flame_node *n)
{
	int k = 0;
	if (n->file != FLAME_NONE) {
		view_put_xml(out, f->labels[n->file], TEXT_MAX);
		if (n->line)
			fprintf(out, ":%u", (unsigned)n->line);
		k++;
	}
	if (n->module != FLAME_NONE) {
		fputs(k++ ? ", " : "", out);
		view_put_xml(out, f->labels[n->module], TEXT_MAX);
	}
	return k;
}

static void put_label(FILE *out, const struct flame *f, uint32_t node, int brief)
{
	const struct flame_node *n = &f->nodes[node];
	int has_where = !n->python && (n->file != FLAME_NONE || n->module != FLAME_NONE);
	if (n->python && n->file != FLAME_NONE) {
		/* The label has the short file and the line; the tooltip the whole file name. */
		fputs("<span class=\"fn py\" title=\"", out);
		view_put_xml(out, f->labels[n->file], TEXT_MAX);
		fputs("\">", out);
	} else if (brief && has_where) {
		fputs("<span class=\"fn\" title=\"", out);
		put_node_where(out, f, n);
		fputs("\">", out);
	} else {
		fputs("<span class=\"fn\">", out);
	}
	view_put_xml(out, f->labels[n->label], TEXT_MAX);
	fputs("</span>", out);
	if (!brief && has_where) {
		fputs(" <span class=\"mod\">", out);
		put_node_where(out, f, n);
		fputs("</span>", out);
	}
	if (n->inlined == FLAME_INLINED_ALL)
		fputs(" <span class=\"mod\">[inlined]</span>", out);
	else if (n->inlined == FLAME_INLINED_SOME)
		fputs(" <span class=\"mod\">[partly inlined]</span>", out);
}

/* The same for a node of the frame tree (a diff matches stacks by labels, not addresses). */
static void td_path(FILE *out, const struct flame *f, uint32_t node)
{
	size_t depth = f->nodes[node].depth, k;
	uint32_t p;
	fputs("<td class=\"stack\"><div class=\"inline\">", out);
	for (k = 0, p = node; p != FLAME_ROOT && p < f->n_nodes && k < INLINE_FRAMES; p = f->nodes[p].parent, k++) {
		if (k)
			fputs(ARROW, out);
		put_label(out, f, p, 1);
	}
	if (p != FLAME_ROOT && p < f->n_nodes) {
		uint32_t py = view_python_node(f, node);
		if (py != FLAME_ROOT && f->nodes[py].depth <= f->nodes[p].depth) {
			fputs(ELLIPSIS ARROW, out);
			put_label(out, f, py, 1);
			p = f->nodes[py].parent;
		}
	}
	if (p != FLAME_ROOT && p < f->n_nodes)
		fputs(ELLIPSIS, out);
	fprintf(out, "</div><details><summary>%zu frame%s</summary><ol class=\"frames\">", depth, depth == 1 ? "" : "s");
	for (k = 0, p = node; p != FLAME_ROOT && p < f->n_nodes; p = f->nodes[p].parent, k++) {
		if (k >= STACK_FRAMES_MAX) {
			fprintf(out, "<li class=\"more\">... %zu more</li>", depth - k);
			break;
		}
		fputs("<li>", out);
		put_label(out, f, p, 0);
		fputs("</li>", out);
	}
	fputs("</ol></details></td>", out);
}

static void put_badge_kind(FILE *out, char kind)
{
	fprintf(out, "<td><span class=\"kind k-%s\">%s</span></td>", view_kind_name(kind), view_kind_name(kind));
}

static size_t limit_of(const struct view_options *o, size_t n)
{
	return o->top && o->top < n ? o->top : n;
}

static void put_more_row(FILE *out, size_t cols, size_t shown, size_t n, const char *what)
{
	if (shown < n)
		fprintf(out, "<tr class=\"more\"><td colspan=\"%zu\">... %zu more %s (ptfil-view --html --top 0 "
			"lists all)</td></tr>", cols, n - shown, what);
}

/* ---- the page ------------------------------------------------------------------ */

static void put_head(FILE *out, const struct snap *a, const struct snap *b, const struct view_options *o)
{
	fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
	      "<meta charset=\"utf-8\"/>\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\"/>\n"
	      "<meta name=\"generator\" content=\"ptfil-view\"/>\n<title>", out);
	if (b) {
		fputs("ptfil diff: ", out);
		view_put_xml(out, o->name_a ? o->name_a : "before", 200);
		fputs(" \xe2\x86\x92 ", out);
		view_put_xml(out, o->name_b ? o->name_b : "after", 200);
	} else {
		fputs("ptfil: ", out);
		put_size(out, o->set == FLAME_TREE ? a->tree_charged : a->peak.charged);
		fputs(o->set == FLAME_TREE ? " combined peak, " : " peak, ", out);
		view_put_command_xml(out, a, 200);
	}
	fputs("</title>\n<style>/*<![CDATA[*/\n", out);
	fputs(asset_report_css, out);
	fputs(asset_flame_css, out);
	fputs("/*]]>*/</style>\n</head>\n<body>\n", out);
}

static void put_scripts(FILE *out)
{
	fputs("<script>//<![CDATA[\n", out);
	fputs(asset_flame_js, out);
	fputs("//]]></script>\n<script>//<![CDATA[\n", out);
	fputs(asset_report_js, out);
	fputs("//]]></script>\n", out);
}

static void put_exit(FILE *out, int status)
{
	if (status < 0)
		fputs("had not exited", out);
	else if (status > 128 && status < 128 + 65)
		fprintf(out, "%d (killed by signal %d)", status, status - 128);
	else
		fprintf(out, "%d", status);
}

static void put_start(FILE *out, double t)
{
	char buf[64];
	struct tm tm;
	if (finite(t) && t >= 0 && t < 253402300800.0) {  /* before the year 10000 */
		time_t secs = (time_t)t;
		if (gmtime_r(&secs, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm)) {
			fputs(buf, out);
			return;
		}
	}
	char d[32];
	view_format_double(d, sizeof(d), t);
	fprintf(out, "%s s since the epoch", d);
}

/* Whether the report lists a followed run's processes (their own section). */
static int shows_tree(const struct snap *s, const struct view_options *o)
{
	return s->n_procs > 1 && !o->one_process;
}

static void put_nav(FILE *out, int diff, int tree)
{
	fputs("<nav><a href=\"#flame\">Flame graph</a>", out);
	if (tree)
		fputs("<a href=\"#processes\">Processes</a>", out);
	fputs("<a href=\"#timeline\">Timeline</a>", out);
	if (diff)
		fputs("<a href=\"#changes\">Changes</a><a href=\"#functions\">Functions</a><a href=\"#facts\">Runs</a>", out);
	else
		fputs("<a href=\"#top\">Top stacks</a><a href=\"#functions\">Functions</a><a href=\"#sparse\">Sparse</a>"
		      "<a href=\"#live\">Live at end</a><a href=\"#facts\">Run</a>", out);
	fputs("</nav>\n", out);
}

/* The sparse stacks' totals, from the stacks that reserve (view_reserving_stacks); 0 when nothing tells. */
static int sparse_totals(const struct snap *s, uint64_t *reserved, uint64_t *charged, size_t *n)
{
	size_t n_st;
	int known;
	const struct snap_stack *st = view_reserving_stacks(s, &n_st, &known);
	*reserved = *charged = 0;
	*n = 0;
	for (size_t i = 0; i < n_st; i++) {
		if (!view_is_sparse(&st[i]))
			continue;
		(*n)++;
		*reserved = sat_add(*reserved, st[i].reserved);
		*charged = sat_add(*charged, st[i].charged);
	}
	return known;
}

static void live_totals(const struct snap *s, uint64_t *charged, uint64_t *reserved)
{
	*charged = *reserved = 0;
	for (size_t i = 0; i < s->n_live; i++) {
		*charged = sat_add(*charged, s->live[i].charged);
		*reserved = sat_add(*reserved, s->live[i].reserved);
	}
}

static void card(FILE *out, const char *cls, const char *label, uint64_t bytes, const char *note_fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* One summary card: a label, a size in large type, a line of context. */
static void card(FILE *out, const char *cls, const char *label, uint64_t bytes, const char *note_fmt, ...)
{
	fprintf(out, "<div class=\"card %s\"><div class=\"label\">%s</div><div class=\"value\" title=\"%llu bytes\">",
		cls, label, (unsigned long long)bytes);
	put_size(out, bytes);
	fputs("</div><div class=\"note\">", out);
	va_list ap;
	va_start(ap, note_fmt);
	vfprintf(out, note_fmt, ap);
	va_end(ap);
	fputs("</div></div>\n", out);
}

/* Which view the page shows, in the words of the text report; in a diff of two views, both. */
static void put_view_line(FILE *out, const struct snap *a, const struct snap *b)
{
	fputs("<p class=\"sub view\">", out);
	if (b && a->view != b->view)
		fprintf(out, "view differs: before %s (%s), after %s (%s); stacks compared all the same",
			view_view_name(a), view_view_short(a), view_view_name(b), view_view_short(b));
	else
		fprintf(out, "view %s: %s", view_view_name(a), view_view_meaning(a));
	if (!b && a->view == SNAP_VIEW_TOUCH && (a->n_other || a->n_links))
		fputs(", with the alloc view", out);
	fputs("</p>\n", out);
}

static void put_header(FILE *out, const struct snap *s, const struct view_options *o)
{
	char dur[32], when[32], sz[32], sz2[32];
	fputs("<header>\n<div class=\"brand\">ptfil</div>\n<h1>", out);
	fputs(o->set == FLAME_LIVE ? "Still live at the end of " :
	      o->set == FLAME_TREE ? "Combined peak memory of " : "Peak memory of ", out);
	fputs("<code>", out);
	view_put_command_xml(out, s, 300);
	fputs("</code></h1>\n<p class=\"sub\">", out);
	view_format_time(dur, sizeof(dur), s->duration);
	fprintf(out, "pid %d, ", s->pid);
	view_put_xml(out, s->mode && *s->mode ? s->mode : "unknown mode", 32);
	if (view_mappings_only(s))
		fputs(", mappings only", out);
	fprintf(out, ", ran %s, exit status ", dur);
	put_exit(out, s->exit_status);
	fputs("</p>\n", out);
	put_view_line(out, s, NULL);
	fputs("</header>\n", out);

	uint64_t sp_res, sp_chg, live_c, live_r;
	size_t sp_n;
	int sp_known = sparse_totals(s, &sp_res, &sp_chg, &sp_n), res_known;
	uint64_t reserved = view_peak_reserved(s, &res_known);
	live_totals(s, &live_c, &live_r);
	view_format_time(when, sizeof(when), s->peak.time);
	fputs("<section class=\"cards\">\n", out);
	if (s->has_tree && !o->one_process) {
		char tw[32];
		uint64_t sum = 0;
		for (size_t i = 0; i < s->n_procs; i++)
			if (s->procs[i].profiled)
				sum = sat_add(sum, s->procs[i].peak);
		view_format_time(tw, sizeof(tw), s->tree_time);
		view_format_size(sz, sizeof(sz), sum);
		card(out, "charged", "Combined peak of the processes", s->tree_charged,
		     "at %s, %zu processes (sum of their own peaks %s)", tw, s->n_procs, sz);
	}
	card(out, "charged", s->has_tree && !o->one_process ? "Main process's peak" : "Peak charged (resident)",
	     s->peak.charged, "at %s", when);
	view_format_size(sz, sizeof(sz), reserved > s->peak.charged ? reserved - s->peak.charged : 0);
	if (res_known)
		card(out, "reserved", s->view == SNAP_VIEW_TOUCH ? "Reserved at the peak (alloc view)" : "Reserved at the peak",
		     reserved, "%s of it never resident", sz);
	view_format_size(sz, sizeof(sz), s->vmhwm);
	card(out, "rss", "Process RSS at the peak", s->peak.rss, "VmHWM %s", sz);
	view_format_size(sz, sizeof(sz), sp_res);
	view_format_size(sz2, sizeof(sz2), sp_chg);
	if (sp_known)
		card(out, "sparse", "Reserved, not resident", sp_res - (sp_chg < sp_res ? sp_chg : sp_res),
		     "in %zu sparse stack%s%s (%s reserved, %s resident)", sp_n, sp_n == 1 ? "" : "s",
		     s->view == SNAP_VIEW_TOUCH ? " of the alloc view" : "", sz, sz2);
	view_format_size(sz, sizeof(sz), live_r);
	if (s->view == SNAP_VIEW_TOUCH)  /* touch stacks reserve nothing of their own */
		card(out, "live", "Still live at the end", live_c, "in %zu stack%s", s->n_live, s->n_live == 1 ? "" : "s");
	else
		card(out, "live", "Still live at the end", live_c, "in %zu stack%s, %s reserved", s->n_live,
		     s->n_live == 1 ? "" : "s", sz);
	fputs("</section>\n", out);
}

static void put_diff_header(FILE *out, const struct snap *a, const struct snap *b, const struct view_options *o)
{
	fputs("<header>\n<div class=\"brand\">ptfil</div>\n<h1>Memory diff: <code>", out);
	view_put_xml(out, o->name_a ? o->name_a : "before", 300);
	fputs("</code> \xe2\x86\x92 <code>", out);
	view_put_xml(out, o->name_b ? o->name_b : "after", 300);
	fputs("</code></h1>\n<p class=\"sub\">before: <code>", out);
	view_put_command_xml(out, a, 200);
	fprintf(out, "</code>, pid %d; after: <code>", a->pid);
	view_put_command_xml(out, b, 200);
	fprintf(out, "</code>, pid %d</p>\n", b->pid);
	put_view_line(out, a, b);
	fputs("</header>\n", out);

	char before[32], dl[64];
	fputs("<section class=\"cards\">\n", out);
	view_format_size(before, sizeof(before), a->peak.charged);
	snprintf(dl, sizeof(dl), "%s", b->peak.charged >= a->peak.charged ? "+" : "-");
	view_format_size(dl + 1, sizeof(dl) - 1, b->peak.charged >= a->peak.charged ?
			 b->peak.charged - a->peak.charged : a->peak.charged - b->peak.charged);
	card(out, b->peak.charged > a->peak.charged ? "grow" : b->peak.charged < a->peak.charged ? "shrink" : "charged",
	     "Peak charged, after", b->peak.charged, "%s from %s before", dl, before);
	view_format_size(before, sizeof(before), a->peak.reserved);
	snprintf(dl, sizeof(dl), "%s", b->peak.reserved >= a->peak.reserved ? "+" : "-");
	view_format_size(dl + 1, sizeof(dl) - 1, b->peak.reserved >= a->peak.reserved ?
			 b->peak.reserved - a->peak.reserved : a->peak.reserved - b->peak.reserved);
	card(out, "reserved", "Reserved at the peak, after", b->peak.reserved, "%s from %s before", dl, before);
	view_format_size(before, sizeof(before), a->peak.rss);
	card(out, "rss", "RSS at the peak, after", b->peak.rss, "%s before", before);
	fputs("</section>\n", out);
}

/* ---- flame graph ------------------------------------------------------------------ */

static int put_flame(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		     const struct view_options *o)
{
	fputs("<section id=\"flame\">\n<h2>", out);
	fputs(b ? "What grew and what shrank" : o->set == FLAME_LIVE ? "What was still live at the end" :
	      o->set == FLAME_TREE ? "Where the memory was at the combined peak, by process" :
	      "Where the memory was at the peak", out);
	fputs("</h2>\n<p class=\"help\">", out);
	if (b)
		fputs("Each frame is as wide as the larger of its two sizes: red grew from before to after, blue "
		      "shrank, grey is unchanged. ", out);
	else
		fputs("Each frame is as wide as the memory charged to it, callers above callees. A violet underline "
		      "marks frames that reserve far more than is resident; <em>Width: reserved</em> lays the graph "
		      "out by reserved bytes, resident part solid, the rest hatched. ", out);
	fputs("Click to zoom, Esc to zoom out, / to search.</p>\n"
	      "<div class=\"flamebox\">\n<div class=\"controls\">"
	      "<button type=\"button\" data-act=\"reset\" class=\"off\">Reset zoom</button>"
	      "<button type=\"button\" data-act=\"mode\">Width: charged (show reserved)</button>"
	      "<input type=\"search\" data-act=\"search-input\" placeholder=\"Search frames (/)\" "
	      "aria-label=\"Search frames\"/>"
	      "<button type=\"button\" data-act=\"clear\" class=\"off\">Clear</button>"
	      "<span class=\"search-status\" data-act=\"search-status\"></span></div>\n", out);
	if (view_flame_svg(out, a, b, f, o, 0) < 0)
		return -1;
	fputs("</div>\n</section>\n", out);
	return 0;
}

/* ---- timeline ---------------------------------------------------------------------- */

/* 1, 2 or 5 times a power of ten, the smallest at least raw (raw > 0). */
static double nice_step(double raw)
{
	double m = 1;
	while (m * 10 <= raw)
		m *= 10;
	while (m > raw)
		m /= 10;
	return raw <= m ? m : raw <= 2 * m ? 2 * m : raw <= 5 * m ? 5 * m : 10 * m;
}

static double ceil_div(double v, double step)
{
	double q = (double)(long long)(v / step);
	return q * step < v ? (q + 1) * step : q * step;
}

/*
 * The samples kept for one series (rss: the RSS one, else charged): all of
 * them, or the largest of each of MAX_POINTS equal runs of samples. Writes
 * sample indexes to idx (room for MAX_POINTS) and returns how many.
 */
static size_t downsample(const struct snap *s, int rss, size_t *idx)
{
	size_t n = s->n_samples;
	if (n <= MAX_POINTS) {
		for (size_t i = 0; i < n; i++)
			idx[i] = i;
		return n;
	}
	for (size_t k = 0; k < MAX_POINTS; k++) {
		/* n is bounded by memory, far below 2^64 / MAX_POINTS. */
		size_t lo = (size_t)((uint64_t)k * n / MAX_POINTS), hi = (size_t)((uint64_t)(k + 1) * n / MAX_POINTS);
		size_t best = lo;
		for (size_t i = lo + 1; i < hi; i++) {
			uint64_t v = rss ? s->samples[i].rss : s->samples[i].charged;
			uint64_t bv = rss ? s->samples[best].rss : s->samples[best].charged;
			if (v > bv)
				best = i;
		}
		idx[k] = best;
	}
	return MAX_POINTS;
}

struct chart {
	double t0, t1, ymax;
};

static double chart_x(const struct chart *c, double t)
{
	if (!finite(t))
		t = 0;
	double x = PLOT_X0 + (t - c->t0) / (c->t1 - c->t0) * (PLOT_X1 - PLOT_X0);
	return x < PLOT_X0 ? PLOT_X0 : x > PLOT_X1 ? PLOT_X1 : x;
}

static double chart_y(const struct chart *c, double v)
{
	return PLOT_Y1 - v / c->ymax * (PLOT_Y1 - PLOT_Y0);
}

static void put_series(FILE *out, const struct snap *s, const struct chart *c, int rss, const size_t *idx, size_t n)
{
	char d[32];
	fprintf(out, "<polyline class=\"%s\" data-n=\"%zu\" points=\"", rss ? "rss" : "charged", n);
	for (size_t k = 0; k < n; k++) {
		const struct snap_sample *sm = &s->samples[idx[k]];
		double v = (double)(rss ? sm->rss : sm->charged);
		fprintf(out, "%s%.1f,%.1f", k ? " " : "", chart_x(c, sm->time), chart_y(c, v));
	}
	fputs("\" data-t=\"", out);
	for (size_t k = 0; k < n; k++) {
		view_format_double(d, sizeof(d), finite(s->samples[idx[k]].time) ? s->samples[idx[k]].time : 0);
		fprintf(out, "%s%s", k ? "," : "", d);
	}
	fputs("\" data-v=\"", out);
	for (size_t k = 0; k < n; k++) {
		const struct snap_sample *sm = &s->samples[idx[k]];
		fprintf(out, "%s%llu", k ? "," : "", (unsigned long long)(rss ? sm->rss : sm->charged));
	}
	fputs("\"/>\n", out);
}

static int put_timeline(FILE *out, const struct snap *s, const char *caption)
{
	if (caption)
		fprintf(out, "<h3>%s</h3>\n", caption);
	if (s->n_samples == 0) {
		fputs("<p class=\"empty\">No timeline: the run was profiled without polling (<code>--interval 0</code>), "
		      "or ended before the first poll. The peak was ", out);
		put_size(out, s->peak.charged);
		fputs(" at ", out);
		put_time(out, s->peak.time);
		fputs(".</p>\n", out);
		return 0;
	}
	size_t *ic = malloc(MAX_POINTS * sizeof(*ic)), *ir = malloc(MAX_POINTS * sizeof(*ir));
	if (!ic || !ir) {
		free(ic);
		free(ir);
		return error("out of memory");
	}
	size_t nc = downsample(s, 0, ic), nr = downsample(s, 1, ir);

	struct chart c = { 0, 0, 0 };
	uint64_t ymax = s->peak.charged > s->peak.rss ? s->peak.charged : s->peak.rss;
	for (size_t i = 0; i < s->n_samples; i++) {
		const struct snap_sample *sm = &s->samples[i];
		if (finite(sm->time) && sm->time > c.t1)
			c.t1 = sm->time;
		if (finite(sm->time) && sm->time < c.t0)
			c.t0 = sm->time;
		if (sm->charged > ymax)
			ymax = sm->charged;
		if (sm->rss > ymax)
			ymax = sm->rss;
	}
	if (finite(s->peak.time) && s->peak.time > c.t1)
		c.t1 = s->peak.time;
	if (finite(s->duration) && s->duration > c.t1)
		c.t1 = s->duration;
	/* A hostile file's times must not make the axis infinite, or its steps vanish. */
	if (c.t0 < -TIME_LIMIT)
		c.t0 = -TIME_LIMIT;
	if (c.t1 > TIME_LIMIT)
		c.t1 = TIME_LIMIT;
	if (c.t1 - c.t0 < 1e-6)
		c.t1 = c.t0 + 1;
	double tstep = nice_step((c.t1 - c.t0) / 8);
	c.t1 = c.t0 + ceil_div(c.t1 - c.t0, tstep);

	/* The y axis in the binary unit of the largest value, in steps of 1, 2 or 5 of it. */
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double unit = 1;
	size_t u = 0;
	while (u + 1 < sizeof(units) / sizeof(units[0]) && (double)ymax >= unit * 1024) {
		unit *= 1024;
		u++;
	}
	double v = ymax ? (double)ymax / unit : 1;
	double ystep = nice_step(v / 5);
	c.ymax = ceil_div(v, ystep) * unit;
	if (c.ymax <= 0)
		c.ymax = 1;

	fprintf(out, "<figure class=\"timeline\"><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" "
		"viewBox=\"0 0 %d %d\" role=\"img\" data-samples=\"%zu\" data-t0=\"%g\" data-t1=\"%g\" "
		"data-px0=\"%g\" data-px1=\"%g\" data-py0=\"%g\" data-py1=\"%g\" data-ymax=\"%.17g\">\n",
		CHART_W, CHART_H, s->n_samples, c.t0, c.t1, PLOT_X0, PLOT_X1, PLOT_Y0, PLOT_Y1, c.ymax);
	fputs("<title>Charged memory and process RSS over time</title>\n<g class=\"grid\">", out);
	int ticks = 0;
	for (double yv = 0; yv <= c.ymax / unit + ystep / 2 && ticks < 50; yv += ystep, ticks++) {
		double y = chart_y(&c, yv * unit);
		fprintf(out, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\"/>"
			"<text class=\"ylab\" x=\"%g\" y=\"%.1f\">%g %s</text>",
			PLOT_X0, y, PLOT_X1, y, PLOT_X0 - 8, y + 4, yv, units[u]);
	}
	ticks = 0;
	for (double t = c.t0; t <= c.t1 + tstep / 2 && ticks < 50; t += tstep, ticks++) {
		char lab[32];
		double x = chart_x(&c, t);
		view_format_time(lab, sizeof(lab), t);
		fprintf(out, "<line class=\"v\" x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\"/>"
			"<text class=\"xlab\" x=\"%.1f\" y=\"%g\">%s</text>",
			x, PLOT_Y0, x, PLOT_Y1, x, PLOT_Y1 + 18, lab);
	}
	fputs("</g>\n", out);
	put_series(out, s, &c, 1, ir, nr);
	put_series(out, s, &c, 0, ic, nc);

	double px = chart_x(&c, s->peak.time), py = chart_y(&c, (double)s->peak.charged);
	char pt[32];
	view_format_double(pt, sizeof(pt), finite(s->peak.time) ? s->peak.time : 0);
	fprintf(out, "<g class=\"peak\" data-t=\"%s\" data-v=\"%llu\"><line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\"/>"
		"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\"/><text x=\"%.1f\" y=\"%g\"%s>peak ",
		pt, (unsigned long long)s->peak.charged, px, PLOT_Y0, px, PLOT_Y1, px, py,
		px > PLOT_X1 - 200 ? px - 6 : px + 6, PLOT_Y0 + 12, px > PLOT_X1 - 200 ? " text-anchor=\"end\"" : "");
	put_size(out, s->peak.charged);
	fputs(" at ", out);
	put_time(out, s->peak.time);
	fputs("</text></g>\n", out);
	fprintf(out, "<g class=\"legend\"><line class=\"charged\" x1=\"%g\" y1=\"%d\" x2=\"%g\" y2=\"%d\"/>"
		"<text x=\"%g\" y=\"%d\">charged</text><line class=\"rss\" x1=\"%g\" y1=\"%d\" x2=\"%g\" y2=\"%d\"/>"
		"<text x=\"%g\" y=\"%d\">process RSS</text><circle class=\"peakdot\" cx=\"%g\" cy=\"%d\" r=\"4\"/>"
		"<text x=\"%g\" y=\"%d\">the peak, as measured at a release</text></g>\n",
		PLOT_X0, CHART_H - 14, PLOT_X0 + 24, CHART_H - 14, PLOT_X0 + 30, CHART_H - 10,
		PLOT_X0 + 110, CHART_H - 14, PLOT_X0 + 134, CHART_H - 14, PLOT_X0 + 140, CHART_H - 10,
		PLOT_X0 + 260, CHART_H - 14, PLOT_X0 + 270, CHART_H - 10);
	fprintf(out, "<g class=\"cursor\" visibility=\"hidden\"><line x1=\"0\" y1=\"%g\" x2=\"0\" y2=\"%g\"/>"
		"<text x=\"0\" y=\"%g\"></text></g>\n", PLOT_Y0, PLOT_Y1, PLOT_Y0 - 4);
	fputs("</svg>\n<figcaption>", out);
	fprintf(out, "%zu sample%s", s->n_samples, s->n_samples == 1 ? "" : "s");
	if (nc < s->n_samples)
		fprintf(out, ", downsampled to %zu points per line, each the largest of its interval", nc);
	fputs(". The polls may miss short spikes; the peak marker is exact.</figcaption></figure>\n", out);
	free(ic);
	free(ir);
	return 0;
}

/* ---- tables ------------------------------------------------------------------------ */

/* A process in a table cell: "pid 1234: cc1 -quiet big.c". */
static void td_process(FILE *out, const struct snap *s, uint32_t proc)
{
	fputs("<td class=\"stack\">", out);
	if (proc < s->n_procs) {
		fprintf(out, "pid %d", s->procs[proc].pid);
		if (s->procs[proc].command) {
			fputs(": <code>", out);
			view_put_xml(out, s->procs[proc].command, 200);
			fputs("</code>", out);
		}
	} else {
		fputs("unknown process", out);
	}
	fputs("</td>", out);
}

/* The top stacks at the peak, or with FLAME_TREE those of every process at the combined peak. */
static int put_top(FILE *out, const struct snap *s, const struct view_options *o)
{
	int tree = o->set == FLAME_TREE;
	const struct snap_stack *stacks = tree ? s->tree_stacks : s->stacks;
	size_t n = tree ? s->n_tree_stacks : s->n_stacks;
	uint64_t whole = tree ? s->tree_charged : s->peak.charged;
	const char *at = tree ? "the combined peak" : "the peak";
	int cols = tree ? 8 : 7;
	const struct snap_stack **v = view_sort_stacks(stacks, n);
	if (!v)
		return -1;
	size_t shown = limit_of(o, n);
	fprintf(out, "<section id=\"top\">\n<h2>Top stacks at %s</h2>\n<p class=\"help\">", at);
	if (shown < n)
		fprintf(out, "The %zu largest of %zu stacks", shown, n);
	else
		fprintf(out, "All %zu stack%s", n, n == 1 ? "" : "s");
	fprintf(out, " holding memory at %s, by charged bytes; the innermost frame is the function that asked for "
		"the memory.</p>\n<table class=\"sortable\" id=\"top-table\"><thead><tr><th class=\"n\">#</th>"
		"<th class=\"n\">Charged</th><th class=\"n\">Share</th><th class=\"n\">Reserved</th><th>Kind</th>"
		"<th class=\"n\">Live</th>%s<th class=\"stackh\">Stack (innermost first)</th></tr></thead><tbody>\n",
		at, tree ? "<th>Process</th>" : "");
	for (size_t i = 0; i < shown; i++) {
		const struct snap_stack *st = v[i];
		fprintf(out, "<tr%s>", view_is_sparse(st) ? " class=\"is-sparse\"" : "");
		td_count(out, i + 1);
		td_size(out, st->charged);
		td_share(out, st->charged, whole);
		td_size(out, st->reserved);
		put_badge_kind(out, st->kind);
		td_count(out, st->count);
		if (tree)
			td_process(out, s, st->proc);
		if (td_stack(out, s, st->node) < 0) {
			free(v);
			return -1;
		}
		fputs("</tr>\n", out);
	}
	put_more_row(out, (size_t)cols, shown, n, "stacks");
	if (n == 0)
		fprintf(out, "<tr class=\"more\"><td colspan=\"%d\">No stack holds memory at %s.</td></tr>", cols, at);
	fputs("</tbody></table>\n</section>\n", out);
	free(v);
	return 0;
}

/* A followed run's processes, each under the one that started it (view_proc_tree). */
static int put_processes(FILE *out, const struct snap *s)
{
	size_t n = s->n_procs;
	uint32_t *order = malloc((n ? n : 1) * sizeof(*order));
	uint32_t *depth = malloc((n ? n : 1) * sizeof(*depth));
	if (!order || !depth || view_proc_tree(s, order, depth) < 0) {
		free(order);
		free(depth);
		return error("out of memory");
	}
	fputs("<section id=\"processes\">\n<h2>Processes</h2>\n<p class=\"help\">", out);
	if (s->has_tree) {
		char when[32];
		view_format_time(when, sizeof(when), s->tree_time);
		fputs("Every process of the run, each under the one that started it: its own peak and when, and what it "
		      "held at the combined peak (", out);
		put_size(out, s->tree_charged);
		fprintf(out, " at %s). <code>ptfil-view --pid PID</code> shows one alone.", when);
	} else {
		fputs("The processes the program started were seen but not profiled: their peak RSS only. "
		      "<code>ptfil --follow-forks</code> profiles them.", out);
	}
	fputs("</p>\n<table id=\"processes-table\"><thead><tr><th class=\"n\">Pid</th><th>Command</th>"
	      "<th class=\"n\">Own peak</th><th class=\"n\">At</th><th class=\"n\">At the combined peak</th>"
	      "<th class=\"n\">Share</th><th class=\"n\">VmHWM</th></tr></thead><tbody>\n", out);
	for (size_t k = 0; k < n; k++) {
		const struct snap_proc *p = &s->procs[order[k]];
		fprintf(out, "<tr><td class=\"n\">%d</td><td class=\"stack\" style=\"padding-left:%ulem\"><code>",
			p->pid, 1 + (depth[order[k]] < 16 ? depth[order[k]] : 16) * 2);
		view_put_xml(out, p->command ? p->command : "(unknown command)", 300);
		fputs("</code></td>", out);
		if (p->profiled) {
			td_size(out, p->peak);
			fputs("<td class=\"n\">", out);
			put_time(out, p->peak_time);
			fputs("</td>", out);
		} else {
			fputs("<td class=\"n\">not profiled</td><td class=\"n\">-</td>", out);
		}
		if (p->profiled && s->has_tree) {
			td_size(out, p->at_combined);
			td_share(out, p->at_combined, s->tree_charged);
		} else {
			fputs("<td class=\"n\">-</td><td class=\"n\">-</td>", out);
		}
		td_size(out, p->vmhwm);
		fputs("</tr>\n", out);
	}
	fputs("</tbody></table>\n</section>\n", out);
	free(order);
	free(depth);
	return 0;
}

static int put_functions(FILE *out, const struct flame *f, const struct view_options *o)
{
	size_t n;
	struct flame_func *fn = flame_functions(f, &n);
	if (!fn)
		return -1;
	size_t shown = limit_of(o, n);
	const struct flame_node *root = &f->nodes[FLAME_ROOT];
	fputs("<section id=\"functions\">\n<h2>Functions</h2>\n<p class=\"help\">", out);
	if (f->two)
		fputs("Inclusive bytes (of the stacks a function is in) before and after, and the change.", out);
	else
		fputs("Inclusive: the bytes of the stacks a function is in, counted once per stack; self: the bytes "
		      "of the stacks it is the innermost frame of.", out);
	fputs("</p>\n<table class=\"sortable\" id=\"functions-table\"><thead><tr><th>Function</th>", out);
	if (f->two)
		fputs("<th class=\"n\">Before</th><th class=\"n\">After</th><th class=\"n\">Change</th>"
		      "<th class=\"n\">Self after</th>", out);
	else
		fputs("<th class=\"n\">Inclusive</th><th class=\"n\">Share</th><th class=\"n\">Self</th>"
		      "<th class=\"n\">Share</th>", out);
	fputs("</tr></thead><tbody>\n", out);
	for (size_t i = 0; i < shown; i++) {
		fputs("<tr><td class=\"stack\"><span class=\"fn\">", out);
		view_put_xml(out, f->labels[fn[i].label], TEXT_MAX);
		fputs("</span></td>", out);
		if (f->two) {
			td_size(out, fn[i].inclusive[0]);
			td_size(out, fn[i].inclusive[1]);
			td_delta(out, fn[i].inclusive[0], fn[i].inclusive[1]);
			td_size(out, fn[i].self[1]);
		} else {
			td_size(out, fn[i].inclusive[0]);
			td_share(out, fn[i].inclusive[0], root->charged[0]);
			td_size(out, fn[i].self[0]);
			td_share(out, fn[i].self[0], root->charged[0]);
		}
		fputs("</tr>\n", out);
	}
	put_more_row(out, 5, shown, n, "functions");
	fputs("</tbody></table>\n</section>\n", out);
	free(fn);
	return 0;
}

static int put_sparse(FILE *out, const struct snap *s, const struct view_options *o)
{
	size_t n_st;
	int known;
	const struct snap_stack *st_all = view_reserving_stacks(s, &n_st, &known);
	const struct snap_stack **v = view_sort_stacks(st_all, n_st);
	if (!v)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < n_st; i++)
		if (view_is_sparse(v[i]))
			v[n++] = v[i];
	size_t shown = limit_of(o, n);
	fputs("<section id=\"sparse\">\n<h2>Sparse memory</h2>\n<p class=\"help\">Stacks that reserved at least "
	      "four times what is resident (and 1 MiB or more unused) at the peak: address space an in-process "
	      "profiler would have charged in full, that ptfil charges by its resident pages.", out);
	if (s->view == SNAP_VIEW_TOUCH)
		fputs(" Touch stacks reserve nothing: these are the stacks of the alloc view at the same peak.", out);
	fputs("</p>\n", out);
	if (!known) {
		fputs("<p class=\"empty\">Not known: this touch snapshot has no alloc view beside it.</p>\n</section>\n", out);
		free(v);
		return 0;
	}
	if (n == 0) {
		fputs("<p class=\"empty\">None: no stack reserves much more than is resident.</p>\n</section>\n", out);
		free(v);
		return 0;
	}
	fputs("<table class=\"sortable\" id=\"sparse-table\"><thead><tr><th class=\"n\">Reserved</th>"
	      "<th class=\"n\">Resident</th><th class=\"n\">Not resident</th><th class=\"n\">Resident share</th>"
	      "<th>Kind</th><th class=\"n\">Live</th><th class=\"stackh\">Stack (innermost first)</th></tr></thead>"
	      "<tbody>\n", out);
	for (size_t i = 0; i < shown; i++) {
		const struct snap_stack *st = v[i];
		fputs("<tr>", out);
		td_size(out, st->reserved);
		td_size(out, st->charged);
		td_size(out, st->reserved - st->charged);  /* sparse: reserved > charged */
		td_share(out, st->charged, st->reserved);
		put_badge_kind(out, st->kind);
		td_count(out, st->count);
		if (td_stack(out, s, st->node) < 0) {
			free(v);
			return -1;
		}
		fputs("</tr>\n", out);
	}
	put_more_row(out, 7, shown, n, "sparse stacks");
	fputs("</tbody></table>\n</section>\n", out);
	free(v);
	return 0;
}

static int put_live(FILE *out, const struct snap *s, const struct view_options *o)
{
	const struct snap_stack **v = view_sort_stacks(s->live, s->n_live);
	if (!v)
		return -1;
	uint64_t charged, reserved;
	live_totals(s, &charged, &reserved);
	size_t shown = limit_of(o, s->n_live);
	fputs("<section id=\"live\">\n<h2>Still live at the end</h2>\n<p class=\"help\">What had not been released "
	      "when the snapshot was written (", out);
	put_size(out, charged);
	fputs(" charged, ", out);
	put_size(out, reserved);
	fprintf(out, " reserved, in %zu stack%s): leak candidates, when the program had exited.</p>\n",
		s->n_live, s->n_live == 1 ? "" : "s");
	if (s->n_live == 0) {
		fputs("<p class=\"empty\">Nothing was still live.</p>\n</section>\n", out);
		free(v);
		return 0;
	}
	fputs("<table class=\"sortable\" id=\"live-table\"><thead><tr><th class=\"n\">Charged</th>"
	      "<th class=\"n\">Reserved</th><th>Kind</th><th class=\"n\">Live</th>"
	      "<th class=\"stackh\">Stack (innermost first)</th></tr></thead><tbody>\n", out);
	for (size_t i = 0; i < shown; i++) {
		const struct snap_stack *st = v[i];
		fputs("<tr>", out);
		td_size(out, st->charged);
		td_size(out, st->reserved);
		put_badge_kind(out, st->kind);
		td_count(out, st->count);
		if (td_stack(out, s, st->node) < 0) {
			free(v);
			return -1;
		}
		fputs("</tr>\n", out);
	}
	put_more_row(out, 5, shown, s->n_live, "stacks");
	fputs("</tbody></table>\n</section>\n", out);
	free(v);
	return 0;
}

/* ---- facts ---------------------------------------------------------------------------- */

/* One row of facts for one or two runs: fn writes a run's cell. */
static void fact(FILE *out, const char *name, const struct snap *a, const struct snap *b,
		 void (*fn)(FILE *out, const struct snap *s))
{
	fprintf(out, "<tr><th scope=\"row\">%s</th><td>", name);
	fn(out, a);
	fputs("</td>", out);
	if (b) {
		fputs("<td>", out);
		fn(out, b);
		fputs("</td>", out);
	}
	fputs("</tr>\n", out);
}

static void size_cell(FILE *out, uint64_t v)
{
	fprintf(out, "<span title=\"%llu bytes\">", (unsigned long long)v);
	put_size(out, v);
	fputs("</span>", out);
}

static void f_command(FILE *out, const struct snap *s)
{
	fputs("<code>", out);
	view_put_command_xml(out, s, COMMAND_MAX);
	fputs("</code>", out);
}
static void f_pid(FILE *out, const struct snap *s) { fprintf(out, "%d", s->pid); }
static void f_mode(FILE *out, const struct snap *s)
{
	view_put_xml(out, s->mode ? s->mode : "unknown", 64);
	if (view_mappings_only(s))
		fputs(", mappings only (malloc calls not followed)", out);
}
static void f_view(FILE *out, const struct snap *s)
{
	fprintf(out, "%s: %s", view_view_name(s), view_view_meaning(s));
}
static void f_version(FILE *out, const struct snap *s)
{
	view_put_xml(out, s->ptfil_version ? s->ptfil_version : "unknown", 64);
}
static void f_start(FILE *out, const struct snap *s) { put_start(out, s->start_time); }
static void f_duration(FILE *out, const struct snap *s) { put_time(out, s->duration); }
static void f_exit(FILE *out, const struct snap *s) { put_exit(out, s->exit_status); }
static void f_peak(FILE *out, const struct snap *s) { size_cell(out, s->peak.charged); }
static void f_reserved(FILE *out, const struct snap *s)
{
	int known;
	uint64_t reserved = view_peak_reserved(s, &known);
	if (known)
		size_cell(out, reserved);
	else
		fputs("not known (touch stacks reserve nothing)", out);
}
static void f_peak_time(FILE *out, const struct snap *s) { put_time(out, s->peak.time); }
static void f_rss(FILE *out, const struct snap *s) { size_cell(out, s->peak.rss); }
static void f_hwm(FILE *out, const struct snap *s) { size_cell(out, s->vmhwm); }
static void f_page(FILE *out, const struct snap *s) { fprintf(out, "%llu bytes", (unsigned long long)s->page_size); }
static void f_stacks(FILE *out, const struct snap *s) { fprintf(out, "%zu", s->n_stacks); }
static void f_live(FILE *out, const struct snap *s) { fprintf(out, "%zu", s->n_live); }
static void f_samples(FILE *out, const struct snap *s) { fprintf(out, "%zu", s->n_samples); }
static void f_modules(FILE *out, const struct snap *s) { fprintf(out, "%zu", s->n_modules); }

static void f_counters(FILE *out, const struct snap *s)
{
	if (s->n_counters == 0) {
		fputs("none", out);
		return;
	}
	fputs("<table class=\"counters\"><tbody>", out);
	for (size_t i = 0; i < s->n_counters; i++) {
		fputs("<tr><td>", out);
		view_put_xml(out, s->counters[i].name ? s->counters[i].name : "?", 100);
		fputs("</td>", out);
		td_count(out, s->counters[i].count);
		fputs("</tr>", out);
	}
	fputs("</tbody></table>", out);
}

static void put_facts(FILE *out, const struct snap *a, const struct snap *b, const struct view_options *o)
{
	fprintf(out, "<section id=\"facts\">\n<h2>%s</h2>\n<table class=\"facts\" id=\"facts-table\">",
		b ? "The two runs" : "The run");
	if (b) {
		fputs("<thead><tr><th></th><th>Before: <code>", out);
		view_put_xml(out, o->name_a ? o->name_a : "", 300);
		fputs("</code></th><th>After: <code>", out);
		view_put_xml(out, o->name_b ? o->name_b : "", 300);
		fputs("</code></th></tr></thead>", out);
	}
	fputs("<tbody>\n", out);
	fact(out, "Command", a, b, f_command);
	fact(out, "Process id", a, b, f_pid);
	fact(out, "Mode", a, b, f_mode);
	fact(out, "View", a, b, f_view);
	fact(out, "Started", a, b, f_start);
	fact(out, "Duration", a, b, f_duration);
	fact(out, "Exit status", a, b, f_exit);
	fact(out, "Peak charged", a, b, f_peak);
	fact(out, "Reserved at the peak", a, b, f_reserved);
	fact(out, "Time of the peak", a, b, f_peak_time);
	fact(out, "RSS at the peak", a, b, f_rss);
	fact(out, "VmHWM", a, b, f_hwm);
	fact(out, "Stacks at the peak", a, b, f_stacks);
	fact(out, "Stacks live at the end", a, b, f_live);
	fact(out, "Timeline samples", a, b, f_samples);
	fact(out, "Modules", a, b, f_modules);
	fact(out, "Page size", a, b, f_page);
	fact(out, "Stops and other counters", a, b, f_counters);
	fact(out, "Written by ptfil", a, b, f_version);
	fputs("</tbody></table>\n</section>\n", out);
}

/* ---- a diff's changes -------------------------------------------------------------------- */

static int put_changes(FILE *out, const struct flame *f, const struct view_options *o)
{
	size_t n, grew, shrank;
	uint32_t *c = view_diff_changes(f, &n, &grew, &shrank);
	if (!c)
		return -1;
	size_t shown = limit_of(o, n);
	fputs("<section id=\"changes\">\n<h2>Stacks that grew or shrank</h2>\n<p class=\"help\">", out);
	fprintf(out, "%zu stack%s grew and %zu shrank in charged bytes, largest change first; stacks are matched "
		"across the two runs by their function names.</p>\n", grew, grew == 1 ? "" : "s", shrank);
	if (n == 0) {
		fputs("<p class=\"empty\">No stack changed.</p>\n</section>\n", out);
		free(c);
		return 0;
	}
	fputs("<table class=\"sortable\" id=\"changes-table\"><thead><tr><th class=\"n\">Change</th>"
	      "<th class=\"n\">Before</th><th class=\"n\">After</th><th class=\"n\">Reserved before</th>"
	      "<th class=\"n\">Reserved after</th><th class=\"stackh\">Stack (innermost first)</th></tr></thead>"
	      "<tbody>\n", out);
	for (size_t i = 0; i < shown; i++) {
		const struct flame_node *nd = &f->nodes[c[i]];
		fputs("<tr>", out);
		td_delta(out, nd->self_charged[0], nd->self_charged[1]);
		td_size(out, nd->self_charged[0]);
		td_size(out, nd->self_charged[1]);
		td_size(out, nd->self_reserved[0]);
		td_size(out, nd->self_reserved[1]);
		td_path(out, f, c[i]);
		fputs("</tr>\n", out);
	}
	put_more_row(out, 6, shown, n, "stacks");
	fputs("</tbody></table>\n</section>\n", out);
	free(c);
	return 0;
}

/* ---- the report ---------------------------------------------------------------------------- */

int view_html(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
	      const struct view_options *o)
{
	html_own = o->own;
	put_head(out, a, b, o);
	if (b)
		put_diff_header(out, a, b, o);
	else
		put_header(out, a, o);
	put_nav(out, b != NULL, !b && shows_tree(a, o));
	fputs("<main>\n", out);
	if (put_flame(out, a, b, f, o) < 0 || (!b && shows_tree(a, o) && put_processes(out, a) < 0))
		return -1;
	fputs("<section id=\"timeline\">\n<h2>Timeline</h2>\n<p class=\"help\">Charged memory and the process's RSS "
	      "as polled during the run (<code>--interval</code>), and the peak.</p>\n", out);
	if (put_timeline(out, a, b ? "Before" : NULL) < 0 || (b && put_timeline(out, b, "After") < 0))
		return -1;
	fputs("</section>\n", out);
	if (b) {
		if (put_changes(out, f, o) < 0 || put_functions(out, f, o) < 0)
			return -1;
	} else {
		if (put_top(out, a, o) < 0 || put_functions(out, f, o) < 0 || put_sparse(out, a, o) < 0 ||
		    put_live(out, a, o) < 0)
			return -1;
	}
	put_facts(out, a, b, o);
	fputs("</main>\n<footer>Written by ptfil-view. This page is self-contained: it loads nothing from the "
	      "network.</footer>\n", out);
	put_scripts(out);
	fputs("</body>\n</html>\n", out);
	return 0;
}
