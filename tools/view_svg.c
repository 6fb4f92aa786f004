/*
 * The flame graph as SVG (ptfil-view --svg, and inline in --html): an icicle,
 * the root at the top, each frame as wide as its charged bytes, laid out here
 * so that it shows without script (in an image viewer too), and made
 * interactive by tools/assets/flame.js: zoom, search, and a second layout by
 * reserved bytes in which each frame's resident part is solid and the rest
 * hatched.
 */
#include "tools/view.h"
#include "tools/assets/assets.h"
#include "common/error.h"

#include <stdlib.h>
#include <string.h>

#define IMAGE_W 1200            /* the SVG's width in px */
#define PAD 10                  /* left and right margin */
#define GRAPH_W (IMAGE_W - 2 * PAD)
#define ROW_H 16                /* one level of the tree */
#define BOX_H 15
#define CHAR_W 7.0              /* mean width of a 12 px character, for fitting labels */
#define MIN_PX 0.1              /* frames narrower than this in both layouts are not drawn */
#define MAX_DRAWN 25000         /* and never more than this many, however many stacks */
#define TITLE_MAX 150           /* bytes of a command line in a title */

/* ---- text -------------------------------------------------------------------- */

/* Code points that XML 1.0 forbids or discourages and HTML calls a parse error: written as \xHH too. */
static int unfit_code_point(const unsigned char *p, size_t n)
{
	uint32_t cp;
	if (n == 2)
		cp = (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
	else if (n == 3)
		cp = (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
	else if (n == 4)
		cp = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
		     (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
	else
		return *p < 0x20 || *p == 0x7f;
	return cp < 0xa0 || (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe;
}

/* Exactly len bytes of s (len at a character boundary, or the end), escaped. */
static void put_xml_n(FILE *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	while (len) {
		size_t n = view_utf8_len(p, len);
		if (n == 0 || unfit_code_point(p, n)) {
			if (n == 0)
				n = 1;
			for (size_t i = 0; i < n; i++)
				fprintf(out, "\\x%02x", p[i]);
		} else if (n == 1) {
			switch (*p) {
			case '&': fputs("&amp;", out); break;
			case '<': fputs("&lt;", out); break;
			case '>': fputs("&gt;", out); break;
			case '"': fputs("&quot;", out); break;
			case '\'': fputs("&apos;", out); break;
			default: putc(*p, out);
			}
		} else {
			fwrite(p, 1, n, out);
		}
		p += n;
		len -= n;
	}
}

/* The length of the longest prefix of s (length len) of at most max bytes that ends at a character boundary. */
static size_t cut_at(const char *s, size_t len, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t at = 0;
	while (at < len) {
		size_t n = view_utf8_len(p + at, len - at);
		if (n == 0)
			n = 1;
		if (at + n > max)
			break;
		at += n;
	}
	return at;
}

void view_put_xml(FILE *out, const char *s, size_t max)
{
	size_t len = strlen(s);
	size_t cut = len > max ? cut_at(s, len, max) : len;
	put_xml_n(out, s, cut);
	if (cut < len)
		fputs("...", out);
}

/* One argument, in single quotes when a shell would need them. */
static void put_arg_xml(FILE *out, const char *a, size_t max)
{
	size_t len = strlen(a);
	size_t cut = len > max ? cut_at(a, len, max) : len;
	if (*a && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == len) {
		put_xml_n(out, a, cut);
	} else {
		fputs("&apos;", out);
		for (size_t i = 0; i < cut;) {
			size_t run = strcspn(a + i, "'");
			if (run > cut - i)
				run = cut - i;
			put_xml_n(out, a + i, run);
			i += run;
			if (i < cut) {
				fputs("&apos;\\&apos;&apos;", out);
				i++;
			}
		}
		fputs("&apos;", out);
	}
	if (cut < len)
		fputs("...", out);
}

void view_put_command_xml(FILE *out, const struct snap *s, size_t max)
{
	size_t used = 0;
	if (s->argc == 0) {
		fputs("(unknown command)", out);
		return;
	}
	for (size_t i = 0; i < s->argc; i++) {
		if (i)
			putc(' ', out);
		if (used >= max) {
			fprintf(out, "... (%zu more argument%s)", s->argc - i, s->argc - i == 1 ? "" : "s");
			return;
		}
		size_t len = strlen(s->argv[i]);
		put_arg_xml(out, s->argv[i], max - used);
		used += len < max - used ? len + 1 : max - used;
	}
}

/* ---- colour ------------------------------------------------------------------ */

static uint32_t hash32(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

/* h in degrees [0, 360), s and l in [0, 1], as "#rrggbb". */
static void hsl(char *buf, size_t size, double h, double s, double l)
{
	double c = (1 - (2 * l - 1 < 0 ? 1 - 2 * l : 2 * l - 1)) * s;
	double hp = h / 60;
	double m2 = hp - 2 * (double)(int)(hp / 2) - 1;
	double x = c * (1 - (m2 < 0 ? -m2 : m2));
	double r = 0, g = 0, b = 0, m = l - c / 2;
	switch ((int)hp) {
	case 0: r = c; g = x; break;
	case 1: r = x; g = c; break;
	case 2: g = c; b = x; break;
	case 3: g = x; b = c; break;
	case 4: r = x; b = c; break;
	default: r = c; b = x; break;
	}
	snprintf(buf, size, "#%02x%02x%02x", (unsigned)((r + m) * 255 + 0.5), (unsigned)((g + m) * 255 + 0.5),
		 (unsigned)((b + m) * 255 + 0.5));
}

/* A mix of two colours, t in [0, 1] from a to b. */
static void mix(char *buf, size_t size, const unsigned char a[3], const unsigned char b[3], double t)
{
	unsigned v[3];
	for (int i = 0; i < 3; i++)
		v[i] = (unsigned)(a[i] + (b[i] - a[i]) * t + 0.5);
	snprintf(buf, size, "#%02x%02x%02x", v[0], v[1], v[2]);
}

static int is_pseudo(const struct flame *f, const struct flame_node *n)
{
	const char *l = f->labels[n->label];
	return n->module == FLAME_NONE && l[0] == '[' && l[strlen(l) - 1] == ']';
}

/*
 * A frame's colour: warm, from a family of hues chosen by its module (so one
 * library's frames look alike) and varied by its label, stable across runs;
 * green for Python frames, by their file; grey for pseudo frames. In a diff: red for growth, blue for shrinking, the
 * deeper the larger the change relative to the larger side.
 */
static void frame_colour(char *buf, size_t size, const struct flame *f, const struct flame_node *n)
{
	static const double families[] = { 0, 11, 22, 33 };
	if (f->two) {
		static const unsigned char same[3] = { 0xe3, 0xe3, 0xe3 }, pale[3] = { 0xf6, 0xee, 0xea };
		static const unsigned char red[3] = { 0xc6, 0x28, 0x28 }, blue[3] = { 0x1f, 0x5f, 0xb0 };
		static const unsigned char pale_b[3] = { 0xe8, 0xee, 0xf6 };
		uint64_t a = n->charged[0], b = n->charged[1];
		if (a == b) {
			mix(buf, size, same, same, 0);
			return;
		}
		double rel = a > b ? (double)(a - b) / (double)a : (double)(b - a) / (double)b;
		mix(buf, size, b > a ? pale : pale_b, b > a ? red : blue, 0.15 + 0.85 * rel);
		return;
	}
	uint32_t h = hash32(f->labels[n->label]);
	if (n->process) {
		/* A process (FLAME_TREE): cool blue-grey, apart from the code's warm frames. */
		hsl(buf, size, 205 + (h % 20), 0.30 + ((h >> 8) % 10) / 100.0, 0.62 + ((h >> 13) % 10) / 100.0);
		return;
	}
	if (is_pseudo(f, n)) {
		hsl(buf, size, 0, 0, 0.70 + (h % 8) / 100.0);
		return;
	}
	if (n->python) {
		uint32_t file = n->file != FLAME_NONE ? hash32(f->labels[n->file]) : h >> 16;
		hsl(buf, size, 85 + (file % 4) * 10 + (h % 11), 0.45 + ((h >> 8) % 15) / 100.0,
		    0.50 + ((h >> 13) % 15) / 100.0);
		return;
	}
	uint32_t fam = n->module != FLAME_NONE ? hash32(f->labels[n->module]) : h >> 16;
	double hue = families[fam % 4] + (h % 21);
	hsl(buf, size, hue, 0.78 + ((h >> 8) % 18) / 100.0, 0.50 + ((h >> 13) % 17) / 100.0);
}

/* ---- layout ------------------------------------------------------------------ */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a > b ? a : b;
	return m > c ? m : c;
}

/*
 * Per node, its weight in each layout and its offset inside its parent (the
 * weights of the siblings before it, drawn or not), in bytes: flame.js lays a
 * zoomed view out from these exactly. A weight is the larger of the two
 * slots (a diff) but at least the sum of the children's, so children always
 * fit inside their parent.
 */
struct layout {
	uint64_t *w, *o;      /* charged layout */
	uint64_t *wr, *or;    /* reserved layout */
	uint32_t *id;         /* index among the drawn frames (0 for the root), FLAME_NONE when not drawn */
	double *x;            /* left edge in the charged layout, px */
	size_t drawn, pruned;
	size_t rows;          /* levels drawn, the root's included */
	double min_px;        /* the width below which a frame was not drawn */
};

static void layout_fin(struct layout *l)
{
	free(l->w);
	free(l->o);
	free(l->wr);
	free(l->or);
	free(l->id);
	free(l->x);
}

static int cmp_desc(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	return (a < b) - (a > b);
}

/* The larger of a node's two widths as a fraction of the whole graph. */
static double node_frac(const struct layout *l, uint32_t i)
{
	double c = l->w[0] ? (double)l->w[i] / (double)l->w[0] : 0;
	double r = l->wr[0] ? (double)l->wr[i] / (double)l->wr[0] : 0;
	return c > r ? c : r;
}

static int layout_build(struct layout *l, const struct flame *f)
{
	size_t n = f->n_nodes;
	memset(l, 0, sizeof(*l));
	if (n == 0 || n > SIZE_MAX / sizeof(uint64_t))
		return error("out of memory");
	l->w = calloc(n, sizeof(*l->w));
	l->o = calloc(n, sizeof(*l->o));
	l->wr = calloc(n, sizeof(*l->wr));
	l->or = calloc(n, sizeof(*l->or));
	l->id = malloc(n * sizeof(*l->id));
	l->x = calloc(n, sizeof(*l->x));
	if (!l->w || !l->o || !l->wr || !l->or || !l->id || !l->x) {
		layout_fin(l);
		return error("out of memory");
	}

	/* Weights bottom-up (children have larger indexes); o and or hold the children's sums meanwhile. */
	for (size_t i = n; i-- > 0;) {
		const struct flame_node *nd = &f->nodes[i];
		l->w[i] = max3(nd->charged[0], nd->charged[1], l->o[i]);
		l->wr[i] = max3(nd->reserved[0], nd->reserved[1], l->or[i]);
		if (i > 0 && nd->parent < i) {
			l->o[nd->parent] = sat_add(l->o[nd->parent], l->w[i]);
			l->or[nd->parent] = sat_add(l->or[nd->parent], l->wr[i]);
		}
	}
	/* Offsets: each parent's children in order. */
	for (size_t p = 0; p < n; p++) {
		uint64_t acc = 0, accr = 0;
		for (uint32_t c = f->nodes[p].first_child; c && c < n; c = f->nodes[c].next_sibling) {
			l->o[c] = acc;
			l->or[c] = accr;
			acc = sat_add(acc, l->w[c]);
			accr = sat_add(accr, l->wr[c]);
		}
	}
	l->o[0] = l->or[0] = 0;

	/*
	 * Which frames are drawn: at least MIN_PX wide in one layout, and at most
	 * MAX_DRAWN of them (the widest). A child is never wider than its parent,
	 * so the drawn frames always form a tree from the root.
	 */
	double min_frac = MIN_PX / GRAPH_W, cut = -1;
	size_t wanted = 0;
	for (size_t i = 1; i < n; i++)
		if (node_frac(l, (uint32_t)i) >= min_frac)
			wanted++;
	if (wanted > MAX_DRAWN) {
		double *fr = malloc(wanted * sizeof(*fr));
		if (!fr) {
			layout_fin(l);
			return error("out of memory");
		}
		size_t k = 0;
		for (size_t i = 1; i < n; i++) {
			double v = node_frac(l, (uint32_t)i);
			if (v >= min_frac)
				fr[k++] = v;
		}
		qsort(fr, k, sizeof(*fr), cmp_desc);
		cut = fr[MAX_DRAWN];  /* drawn: strictly wider, so at most MAX_DRAWN */
		free(fr);
	}
	l->min_px = cut > min_frac ? cut * GRAPH_W : MIN_PX;

	/* Preorder over the drawn frames: their indexes, and x in the charged layout. */
	double scale = l->w[0] ? (double)GRAPH_W / (double)l->w[0] : 0;
	for (size_t i = 0; i < n; i++)
		l->id[i] = FLAME_NONE;
	l->id[0] = 0;
	l->x[0] = PAD;
	l->drawn = 0;
	l->rows = 1;
	uint32_t next = 1, i = f->nodes[0].first_child;
	while (i) {
		const struct flame_node *nd = &f->nodes[i];
		double v = node_frac(l, i);
		int draw = l->id[nd->parent] != FLAME_NONE && v >= min_frac && v > cut;
		if (draw) {
			l->id[i] = next++;
			l->x[i] = l->x[nd->parent] + (double)l->o[i] * scale;
			if (nd->depth + 1 > l->rows)
				l->rows = nd->depth + 1;
		}
		/* Next in preorder, skipping the subtree of a frame not drawn. */
		if (draw && nd->first_child) {
			i = nd->first_child;
			continue;
		}
		while (i && !f->nodes[i].next_sibling)
			i = f->nodes[i].parent;
		if (i)
			i = f->nodes[i].next_sibling;
	}
	l->drawn = next - 1;
	l->pruned = n - 1 - l->drawn;
	return 0;
}

/* ---- frames ------------------------------------------------------------------- */

static void put_size(FILE *out, uint64_t bytes)
{
	char buf[32];
	view_format_size(buf, sizeof(buf), bytes);
	fputs(buf, out);
}

static void put_share(FILE *out, uint64_t part, uint64_t whole)
{
	if (whole)
		fprintf(out, "%.1f%%", 100.0 * (double)part / (double)whole);
	else
		fputs("-", out);
}

/* "+1.5 MiB", "-12 B", "+0 B". */
static void put_delta(FILE *out, uint64_t a, uint64_t b)
{
	putc(b >= a ? '+' : '-', out);
	put_size(out, b >= a ? b - a : a - b);
}

static void put_kinds(FILE *out, unsigned kinds)
{
	static const struct { unsigned bit; const char *name; } k[] = {
		{ FLAME_KIND_MMAP, "mmap" }, { FLAME_KIND_BRK, "brk" },
		{ FLAME_KIND_HEAP, "heap" }, { FLAME_KIND_PSEUDO, "pseudo" },
		{ FLAME_KIND_TOUCH, "resident" },
	};
	const char *sep = "";
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		if (kinds & k[i].bit) {
			fprintf(out, "%s%s", sep, k[i].name);
			sep = ", ";
		}
	}
	if (!*sep)
		fputs("none", out);
}

static int node_sparse(const struct flame *f, const struct flame_node *n)
{
	int k = f->two ? 1 : 0;
	struct snap_stack st = { .charged = n->charged[k], .reserved = n->reserved[k] };
	return view_is_sparse(&st);
}

/*
 * The tooltip: the whole label (flame.js reads it back from the first line),
 * then one fact per line: a native frame's module, its source file and line
 * where the frames merged into the node agree, and whether they are inlined
 * calls; a Python frame's whole file name.
 */
static void put_tooltip(FILE *out, const struct flame *f, uint32_t i)
{
	const struct flame_node *n = &f->nodes[i];
	const struct flame_node *root = &f->nodes[FLAME_ROOT];
	if (i == FLAME_ROOT)
		fputs("all", out);
	else
		view_put_xml(out, f->labels[n->label], FLAME_LABEL_MAX);
	if (n->process && n->pids != FLAME_NONE) {
		fputs("\nprocess: ", out);
		view_put_xml(out, f->labels[n->pids], FLAME_LABEL_MAX);
	}
	if (n->module != FLAME_NONE) {
		fputs("\nin ", out);
		view_put_xml(out, f->labels[n->module], FLAME_LABEL_MAX);
	} else if (n->python && n->file != FLAME_NONE) {
		fputs("\nin ", out);
		view_put_xml(out, f->labels[n->file], FLAME_LABEL_MAX);
	}
	if (!n->python && n->file != FLAME_NONE) {
		fputs("\nat ", out);
		view_put_xml(out, f->labels[n->file], FLAME_LABEL_MAX);
		if (n->line)
			fprintf(out, ":%u", (unsigned)n->line);
	}
	if (n->inlined == FLAME_INLINED_ALL)
		fputs("\ninlined into its caller", out);
	else if (n->inlined == FLAME_INLINED_SOME)
		fputs("\ninlined into its caller at some of its calls", out);
	if (f->two) {
		fputs("\ncharged ", out);
		put_size(out, n->charged[0]);
		fputs(" \xe2\x86\x92 ", out);
		put_size(out, n->charged[1]);
		fputs(" (", out);
		put_delta(out, n->charged[0], n->charged[1]);
		if (n->charged[0])
			fprintf(out, ", %+.1f%%", 100.0 * ((double)n->charged[1] - (double)n->charged[0]) / (double)n->charged[0]);
		fputs(")\nreserved ", out);
		put_size(out, n->reserved[0]);
		fputs(" \xe2\x86\x92 ", out);
		put_size(out, n->reserved[1]);
		fputs(" (", out);
		put_delta(out, n->reserved[0], n->reserved[1]);
		fprintf(out, ")\nlive %llu \xe2\x86\x92 %llu", (unsigned long long)n->count[0],
			(unsigned long long)n->count[1]);
		if (n->self_charged[0] || n->self_charged[1]) {
			fputs("\nself ", out);
			put_size(out, n->self_charged[0]);
			fputs(" \xe2\x86\x92 ", out);
			put_size(out, n->self_charged[1]);
		}
	} else {
		fputs("\ncharged ", out);
		put_size(out, n->charged[0]);
		fputs(", ", out);
		put_share(out, n->charged[0], root->charged[0]);
		fprintf(out, " of all (%llu bytes)\nreserved ", (unsigned long long)n->charged[0]);
		put_size(out, n->reserved[0]);
		fprintf(out, " (%llu bytes)\nlive %llu", (unsigned long long)n->reserved[0],
			(unsigned long long)n->count[0]);
		if (n->self_charged[0] && i != FLAME_ROOT) {
			fputs("\nself ", out);
			put_size(out, n->self_charged[0]);
			fputs(" charged, ", out);
			put_size(out, n->self_reserved[0]);
			fputs(" reserved", out);
		}
	}
	fputs("\nkind ", out);
	put_kinds(out, n->kinds);
	if (node_sparse(f, n)) {
		int k = f->two ? 1 : 0;
		fputs("\nsparse: reserved ", out);
		put_size(out, n->reserved[k]);
		fputs(", resident ", out);
		put_size(out, n->charged[k]);
	}
}

/* The label cut to fit width px, as flame.js cuts it: whole characters, then "..". */
static void put_fitted(FILE *out, const char *label, double width)
{
	double room = (width - 6) / CHAR_W;
	size_t chars = room > 0 ? (size_t)room : 0, count = 0, at = 0, keep = 0, len = strlen(label);
	if (chars < 3)
		return;
	const unsigned char *p = (const unsigned char *)label;
	while (at < len) {
		size_t k = view_utf8_len(p + at, len - at);
		at += k ? k : 1;
		if (++count == chars - 2)
			keep = at;
	}
	if (count <= chars) {
		put_xml_n(out, label, len);
	} else {
		put_xml_n(out, label, keep);
		fputs("..", out);
	}
}

struct emit {
	FILE *out;
	const struct flame *f;
	const struct layout *l;
	double scale;
	int top;  /* y of the root's row */
};

static void put_frame(const struct emit *e, uint32_t i)
{
	FILE *out = e->out;
	const struct flame *f = e->f;
	const struct layout *l = e->l;
	const struct flame_node *n = &f->nodes[i];
	char colour[16];
	double x = i ? l->x[i] : PAD;
	double width = i ? (double)l->w[i] * e->scale : GRAPH_W;
	int y = e->top + (int)n->depth * ROW_H;

	if (i == FLAME_ROOT) {
		fputs("<g class=\"total\"", out);
		snprintf(colour, sizeof(colour), "#d9d9d9");
	} else {
		fprintf(out, "<g class=\"frame\" data-p=\"%u\"", l->id[n->parent]);
		frame_colour(colour, sizeof(colour), f, n);
	}
	fprintf(out, " data-w=\"%llu\" data-o=\"%llu\" data-wr=\"%llu\" data-or=\"%llu\"",
		(unsigned long long)l->w[i], (unsigned long long)l->o[i],
		(unsigned long long)l->wr[i], (unsigned long long)l->or[i]);
	int sparse = i != FLAME_ROOT && node_sparse(f, n);
	if (sparse)
		fputs(" data-sparse=\"1\"", out);
	if (f->two && i != FLAME_ROOT)
		fprintf(out, " data-diff=\"%s\"", n->charged[1] > n->charged[0] ? "grow" :
			n->charged[1] < n->charged[0] ? "shrink" : "same");
	fputs("><title>", out);
	put_tooltip(out, f, i);
	fprintf(out, "</title><rect class=\"b\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>",
		x, y, width, BOX_H, colour);
	if (sparse)
		fprintf(out, "<rect class=\"sp\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"3\"/>",
			x, y + BOX_H - 3, width);
	fprintf(out, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + 11.5);
	if (i == FLAME_ROOT && f->two) {
		fputs("all: ", out);
		put_size(out, n->charged[0]);
		fputs(" \xe2\x86\x92 ", out);
		put_size(out, n->charged[1]);
		fputs(" charged (", out);
		put_delta(out, n->charged[0], n->charged[1]);
		fputs("), reserved ", out);
		put_size(out, n->reserved[0]);
		fputs(" \xe2\x86\x92 ", out);
		put_size(out, n->reserved[1]);
	} else if (i == FLAME_ROOT) {
		fputs("all: ", out);
		put_size(out, n->charged[0]);
		fputs(" charged, ", out);
		put_size(out, n->reserved[0]);
		fputs(" reserved", out);
	} else {
		put_fitted(out, f->labels[n->label], width);
	}
	fputs("</text></g>\n", out);
}

/* ---- the document ---------------------------------------------------------------- */

static void put_run_line(FILE *out, const struct snap *s, const char *who)
{
	if (who)
		fprintf(out, "%s: ", who);
	int known;
	uint64_t reserved = view_peak_reserved(s, &known);
	fprintf(out, "pid %d, peak ", s->pid);
	put_size(out, s->peak.charged);
	fputs(" charged", out);
	if (known) {
		fputs(", ", out);
		put_size(out, reserved);
		fputs(" reserved", out);
	}
	if (!who) {
		char when[32];
		view_format_time(when, sizeof(when), s->peak.time);
		fprintf(out, " at %s, RSS ", when);
		put_size(out, s->peak.rss);
	}
}

/*
 * Which view the graph shows, in the words of the text report: "view touch:
 * memory charged to the code that made it resident (...)"; in a diff of two
 * views, both.
 */
static void put_view_line(FILE *out, const struct snap *a, const struct snap *b)
{
	if (b && a->view != b->view) {
		fprintf(out, "view differs: before %s (%s), after %s (%s); stacks compared all the same",
			view_view_name(a), view_view_short(a), view_view_name(b), view_view_short(b));
		return;
	}
	fprintf(out, "view %s: %s", view_view_name(a), view_view_meaning(a));
}

/* A followed run's subtitle: its processes, their combined peak and the sum of their own peaks. */
static void put_tree_line(FILE *out, const struct snap *s)
{
	uint64_t sum = 0;
	char when[32];
	for (size_t i = 0; i < s->n_procs; i++)
		if (s->procs[i].profiled)
			sum = sat_add(sum, s->procs[i].peak);
	view_format_time(when, sizeof(when), s->tree_time);
	fprintf(out, "%zu process%s from pid %d, one root per command: combined peak ", s->n_procs,
		s->n_procs == 1 ? "" : "es", s->pid);
	put_size(out, s->tree_charged);
	fprintf(out, " at %s (sum of the processes' own peaks ", when);
	put_size(out, sum);
	fputc(')', out);
}

/* A line of the legend: a swatch and its words, items placed one after another. */
struct legend {
	FILE *out;
	double x;
	int y;
};

static void legend_item(struct legend *g, const char *swatch, int h, const char *text)
{
	fprintf(g->out, "<rect x=\"%.1f\" y=\"%d\" width=\"14\" height=\"%d\" %s/>", g->x, g->y - 9 + (10 - h), h, swatch);
	fprintf(g->out, "<text x=\"%.1f\" y=\"%d\">%s</text>", g->x + 19, g->y, text);
	g->x += 19 + 6.4 * (double)strlen(text) + 22;
}

static void put_legend(FILE *out, const struct flame *f, int y)
{
	struct legend g = { out, PAD, y };
	fputs("<g class=\"legend\">", out);
	if (f->two) {
		legend_item(&g, "fill=\"#c62828\"", 10, "grew from before to after");
		legend_item(&g, "fill=\"#1f5fb0\"", 10, "shrank");
		legend_item(&g, "fill=\"#e3e3e3\"", 10, "unchanged");
		fprintf(out, "<text x=\"%.1f\" y=\"%d\">the deeper the colour, the larger the change "
			"relative to the larger side; width: the larger of the two</text>", g.x, y);
	} else {
		legend_item(&g, "fill=\"#e8743b\"", 10, "width: charged (resident) bytes");
		legend_item(&g, "fill=\"#6a1b9a\"", 3,
			    "sparse: reserves at least 4\xc3\x97 what is resident");
		legend_item(&g, "fill=\"url(#ptfil-hatch)\" stroke=\"#999\"", 10,
			    "reserved view: hatched = reserved, not resident");
		legend_item(&g, "fill=\"#b8b8b8\"", 10, "no call stack (pseudo frame)");
		if (f->n_nodes > 1 && f->nodes[f->nodes[FLAME_ROOT].first_child].process)
			legend_item(&g, "fill=\"#8fa6bd\"", 10, "process (one per command)");
	}
	fputs("</g>\n", out);
}

int view_flame_svg(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		   const struct view_options *o, int standalone)
{
	struct layout l;
	if (layout_build(&l, f) < 0)
		return -1;

	/* Standalone: the title, one subtitle line per run, the view's line, the controls. */
	int top = standalone ? (b ? 114 : 98) : 4;
	int graph_end = top + (int)l.rows * ROW_H;
	int height = graph_end + 82;
	const char *what = b ? "Memory diff" : o->set == FLAME_LIVE ? "Still live at the end" :
			   o->set == FLAME_TREE ? "Combined peak memory" : "Peak memory";

	if (standalone)
		fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", out);
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" class=\"ptfil-flame\"");
	if (standalone)
		fprintf(out, " width=\"%d\" height=\"%d\"", IMAGE_W, height);
	fprintf(out, " viewBox=\"0 0 %d %d\" data-width=\"%d\" data-x0=\"%d\" data-mode=\"charged\""
		" data-frames=\"%zu\" data-pruned=\"%zu\" data-diff=\"%d\" role=\"img\">\n",
		IMAGE_W, height, GRAPH_W, PAD, l.drawn, l.pruned, b ? 1 : 0);

	fputs("<title>ptfil: ", out);
	if (b) {
		fputs("memory diff of ", out);
		view_put_xml(out, o->name_a ? o->name_a : "before", TITLE_MAX);
		fputs(" and ", out);
		view_put_xml(out, o->name_b ? o->name_b : "after", TITLE_MAX);
	} else {
		fputs(o->set == FLAME_LIVE ? "still live at the end of " :
		      o->set == FLAME_TREE ? "combined peak memory of " : "peak memory of ", out);
		view_put_command_xml(out, a, TITLE_MAX);
	}
	fputs("</title>\n", out);
	if (standalone) {
		fputs("<style type=\"text/css\"><![CDATA[\n", out);
		fputs(asset_flame_css, out);
		fputs("]]></style>\n", out);
	}
	fputs("<defs><pattern id=\"ptfil-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\""
	      " patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4f4f4\"/>"
	      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b0b0b0\" stroke-width=\"2\"/></pattern></defs>\n", out);
	fprintf(out, "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
		IMAGE_W, height);

	if (standalone) {
		fprintf(out, "<text class=\"title\" x=\"%d\" y=\"26\">%s of ", PAD, what);
		if (b) {
			view_put_xml(out, o->name_a ? o->name_a : "before", TITLE_MAX / 2);
			fputs(" \xe2\x86\x92 ", out);
			view_put_xml(out, o->name_b ? o->name_b : "after", TITLE_MAX / 2);
		} else {
			view_put_command_xml(out, a, TITLE_MAX);
		}
		fputs("</text>\n", out);
		fprintf(out, "<text class=\"subtitle\" x=\"%d\" y=\"46\">", PAD);
		if (b) {
			put_run_line(out, a, "before");
			fputs(" \xe2\x80\x94 ", out);
			view_put_command_xml(out, a, TITLE_MAX / 2);
			fprintf(out, "</text>\n<text class=\"subtitle\" x=\"%d\" y=\"64\">", PAD);
			put_run_line(out, b, "after");
			fputs(" \xe2\x80\x94 ", out);
			view_put_command_xml(out, b, TITLE_MAX / 2);
		} else if (o->set == FLAME_TREE) {
			put_tree_line(out, a);
		} else if (o->set == FLAME_LIVE) {
			fprintf(out, "pid %d: what was still live when the snapshot was written, ", a->pid);
			put_size(out, f->nodes[0].charged[0]);
			fputs(" charged, ", out);
			put_size(out, f->nodes[0].reserved[0]);
			fprintf(out, " reserved, in %zu stack%s", a->n_live, a->n_live == 1 ? "" : "s");
		} else {
			put_run_line(out, a, NULL);
		}
		fputs("</text>\n", out);
		fprintf(out, "<text class=\"subtitle view\" x=\"%d\" y=\"%d\">", PAD, b ? 82 : 64);
		put_view_line(out, a, b);
		fputs("</text>\n", out);
		int cy = top - 12;
		fprintf(out, "<g class=\"controls\"><text class=\"btn off\" data-act=\"reset\" x=\"%d\" y=\"%d\">"
			"Reset zoom</text>", PAD, cy);
		fprintf(out, "<text class=\"btn\" data-act=\"mode\" x=\"%d\" y=\"%d\">Width: charged (show reserved)</text>",
			PAD + 110, cy);
		fprintf(out, "<text class=\"btn\" data-act=\"search\" x=\"%d\" y=\"%d\" text-anchor=\"end\">Search</text>",
			IMAGE_W - PAD - 60, cy);
		fprintf(out, "<text class=\"btn off\" data-act=\"clear\" x=\"%d\" y=\"%d\" text-anchor=\"end\">Clear</text>"
			"</g>\n", IMAGE_W - PAD, cy);
	}

	struct emit e = { out, f, &l, l.w[0] ? (double)GRAPH_W / (double)l.w[0] : 0, top };
	fputs("<g class=\"frames\">\n", out);
	/* Preorder over the drawn frames, as layout_build numbered them. */
	uint32_t i = FLAME_ROOT;
	for (;;) {
		put_frame(&e, i);
		uint32_t c = f->nodes[i].first_child;
		while (c && l.id[c] == FLAME_NONE)
			c = f->nodes[c].next_sibling;
		if (c) {
			i = c;
			continue;
		}
		for (;;) {
			if (i == FLAME_ROOT)
				goto drawn;
			uint32_t s = f->nodes[i].next_sibling;
			while (s && l.id[s] == FLAME_NONE)
				s = f->nodes[s].next_sibling;
			if (s) {
				i = s;
				break;
			}
			i = f->nodes[i].parent;
		}
	}
drawn:
	fputs("</g>\n", out);

	fprintf(out, "<text class=\"details\" x=\"%d\" y=\"%d\">Hover over a frame for its bytes; "
		"click to zoom in, click the top bar or press Esc to zoom out.</text>\n", PAD, graph_end + 18);
	if (standalone)  /* the HTML report says it beside its search field */
		fprintf(out, "<text class=\"status\" x=\"%d\" y=\"%d\"></text>\n", PAD, graph_end + 36);
	fprintf(out, "<text class=\"note\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", IMAGE_W - PAD, graph_end + 36);
	if (l.pruned)
		fprintf(out, "%zu of %zu frames narrower than %.2g px in both layouts are not drawn",
			l.pruned, f->n_nodes - 1, l.min_px);
	else
		fprintf(out, "all %zu frames drawn", f->n_nodes - 1);
	fputs("</text>\n", out);
	put_legend(out, f, graph_end + 62);

	if (standalone) {
		fputs("<script type=\"text/ecmascript\"><![CDATA[\n", out);
		fputs(asset_flame_js, out);
		fputs("]]></script>\n", out);
	}
	fputs("</svg>\n", out);
	layout_fin(&l);
	return 0;
}

int view_svg(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
	     const struct view_options *o)
{
	return view_flame_svg(out, a, b, f, o, 1);
}
