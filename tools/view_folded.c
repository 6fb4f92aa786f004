/*
 * Folded stacks ("collapsed" in flamegraph.pl's words): one line per stack,
 * frames outermost first joined by ';', then the charged bytes. In a diff,
 * two numbers (before, after): the input flamegraph.pl draws as a
 * differential flame graph (as difffolded.pl writes it).
 * speedscope and inferno read the one-number form.
 */
#include "tools/view.h"
#include "common/error.h"

#include <stdlib.h>
#include <string.h>

/* Writes a label with ';' (the frame separator) shown as ':'. Labels hold no line feed. */
static void put_label(FILE *out, const char *label)
{
	for (const char *p = label; *p; p++)
		fputc(*p == ';' ? ':' : *p, out);
}

/* The frames from the outermost to node, joined by ';'. */
static void put_path(FILE *out, const struct flame *f, uint32_t node, uint32_t *path)
{
	size_t n = 0;
	for (uint32_t x = node; x != FLAME_ROOT; x = f->nodes[x].parent)
		path[n++] = x;
	while (n--) {
		put_label(out, f->labels[f->nodes[path[n]].label]);
		if (n)
			fputc(';', out);
	}
}

struct folded {
	FILE *out;
	uint32_t *path;
};

static void put_node(const struct flame *f, uint32_t node, void *arg)
{
	struct folded *fo = arg;
	const struct flame_node *n = &f->nodes[node];
	if (node == FLAME_ROOT)
		return;
	if (f->two) {
		if (!n->self_charged[0] && !n->self_charged[1])
			return;
		put_path(fo->out, f, node, fo->path);
		fprintf(fo->out, " %llu %llu\n", (unsigned long long)n->self_charged[0],
			(unsigned long long)n->self_charged[1]);
	} else if (n->self_charged[0]) {
		put_path(fo->out, f, node, fo->path);
		fprintf(fo->out, " %llu\n", (unsigned long long)n->self_charged[0]);
	}
}

int view_folded(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		const struct view_options *o)
{
	(void)a;
	(void)b;
	(void)o;
	struct folded fo = { .out = out, .path = malloc((f->max_depth + 1) * sizeof(uint32_t)) };
	if (!fo.path)
		return error("out of memory");
	flame_walk(f, FLAME_ROOT, put_node, &fo);
	free(fo.path);
	return 0;
}
