/* Lifecycle of the in-memory snapshot and walks over its stack trie. */
#include "common/snap.h"

#include <stdlib.h>
#include <string.h>

void snap_init(struct snap *s)
{
	memset(s, 0, sizeof(*s));
}

void snap_fin(struct snap *s)
{
	size_t i;

	free(s->ptfil_version);
	free(s->mode);
	if (s->argv)
		for (i = 0; i < s->argc; i++)
			free(s->argv[i]);
	free(s->argv);
	if (s->modules)
		for (i = 0; i < s->n_modules; i++) {
			free(s->modules[i].path);
			free(s->modules[i].build_id);
			free(s->modules[i].package);
		}
	free(s->modules);
	if (s->frames)
		for (i = 0; i < s->n_frames; i++) {
			free(s->frames[i].function);
			free(s->frames[i].file);
		}
	free(s->frames);
	free(s->nodes);
	free(s->stacks);
	free(s->live);
	if (s->procs)
		for (size_t i = 0; i < s->n_procs; i++) {
			free(s->procs[i].command);
			free(s->procs[i].file);
		}
	free(s->procs);
	free(s->tree_stacks);
	free(s->other);
	free(s->links);
	free(s->samples);
	if (s->counters)
		for (i = 0; i < s->n_counters; i++)
			free(s->counters[i].name);
	free(s->counters);
	memset(s, 0, sizeof(*s));
}

size_t snap_stack_frames(const struct snap *s, uint32_t node, uint32_t *out, size_t max)
{
	size_t depth = 0;

	/*
	 * Parents have smaller indexes, so each step strictly descends and the
	 * walk ends in at most `node` steps even if a bad trie slipped through;
	 * an out-of-range node or frame ends the stack there rather than read
	 * outside the arrays.
	 */
	while (node != 0 && node < s->n_nodes && s->nodes) {
		const struct snap_node *n = &s->nodes[node];
		if (n->frame >= s->n_frames)
			break;
		if (depth < max && out)
			out[depth] = n->frame;
		depth++;
		if (n->parent >= node)
			break;
		node = n->parent;
	}
	return depth;
}
