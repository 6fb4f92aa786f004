/* Interning of frames and stacks: a hash lookup per frame, so repeated stacks cost no memory. */
#include "tracer/stacks/stacks.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

int stacks_init(struct stacks *s)
{
	memset(s, 0, sizeof(*s));
	u64map_init(&s->frame_ids);
	u64map_init(&s->node_ids);
	if (grow_array(&s->nodes, &s->cap_nodes, 1, sizeof(*s->nodes), 256))
		return -1;
	s->nodes[0].parent = 0;
	s->nodes[0].frame = 0;
	s->n_nodes = 1;
	return 0;
}

void stacks_fin(struct stacks *s)
{
	free(s->frames);
	free(s->nodes);
	u64map_fin(&s->frame_ids);
	u64map_fin(&s->node_ids);
	memset(s, 0, sizeof(*s));
}

static uint64_t frame_key(uint32_t module, uint64_t offset)
{
	/* User-space addresses fit in 47 bits, module ids in the other 17; stacks_frame resolves a rare clash. */
	return ((uint64_t)module << 47) ^ offset;
}

static uint32_t add_frame(struct stacks *s, uint32_t module, uint64_t offset, const char *name)
{
	if (grow_array(&s->frames, &s->cap_frames, s->n_frames + 1, sizeof(*s->frames), 256))
		return STACKS_FAILED;
	uint32_t id = (uint32_t)s->n_frames++;
	s->frames[id].module = module;
	s->frames[id].offset = offset;
	s->frames[id].name = name;
	return id;
}

uint32_t stacks_frame(struct stacks *s, uint32_t module, uint64_t offset)
{
	/* A clash of packed keys (module ids past 2^17, addresses past 2^47) moves on to a derived key. */
	uint64_t key = frame_key(module, offset);
	for (;;) {
		uint32_t id = u64map_get(&s->frame_ids, key);
		if (id == U64MAP_NONE)
			break;
		if (s->frames[id].module == module && s->frames[id].offset == offset)
			return id;
		key = key * 0x9e3779b97f4a7c15ULL + 1;
	}
	uint32_t id = add_frame(s, module, offset, NULL);
	if (id == STACKS_FAILED || u64map_put(&s->frame_ids, key, id))
		return STACKS_FAILED;
	return id;
}

uint32_t stacks_pseudo_frame(struct stacks *s, const char *name)
{
	for (size_t i = 0; i < s->n_frames; i++)
		if (s->frames[i].name && strcmp(s->frames[i].name, name) == 0)
			return (uint32_t)i;
	return add_frame(s, STACKS_NO_MODULE, 0, name);
}

uint32_t stacks_intern(struct stacks *s, const uint32_t *frames, size_t n)
{
	uint32_t node = STACKS_ROOT;
	for (size_t i = n; i-- > 0;) {
		uint64_t key = ((uint64_t)node << 32) | frames[i];
		uint32_t child = u64map_get(&s->node_ids, key);
		if (child == U64MAP_NONE) {
			if (grow_array(&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof(*s->nodes), 256))
				return STACKS_FAILED;
			child = (uint32_t)s->n_nodes++;
			s->nodes[child].parent = node;
			s->nodes[child].frame = frames[i];
			if (u64map_put(&s->node_ids, key, child))
				return STACKS_FAILED;
		}
		node = child;
	}
	return node;
}

size_t stacks_frames(const struct stacks *s, uint32_t node, uint32_t *out, size_t max)
{
	size_t n = 0;
	for (uint32_t k = node; k != STACKS_ROOT && n < max; k = s->nodes[k].parent)
		out[n++] = s->nodes[k].frame;
	return n;
}
