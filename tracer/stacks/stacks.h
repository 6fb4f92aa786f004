/*
 * Interned frames and call stacks. A frame is a module and an offset in it; a
 * stack is a node of a trie whose root-to-node path is the stack outermost
 * first, so the ledger stores one 32-bit id per block or mapping.
 */
#ifndef PTFIL_STACKS_H
#define PTFIL_STACKS_H

#include <stddef.h>
#include <stdint.h>

#include "common/u64map.h"

#define STACKS_NO_MODULE UINT32_MAX
#define STACKS_PY_MODULE (UINT32_MAX - 1)  /* a Python frame: offset is name id << 32 | line */
#define STACKS_ROOT 0
#define STACKS_FAILED UINT32_MAX

struct stacks_frame {
	uint32_t module;   /* global module id, or STACKS_NO_MODULE */
	uint64_t offset;   /* in the module; the absolute address without one */
	const char *name;  /* pseudo frames only: a static string such as "[main thread stack]" */
};

struct stacks_node {
	uint32_t parent;
	uint32_t frame;
};

struct stacks {
	struct stacks_frame *frames; size_t n_frames, cap_frames;
	struct stacks_node *nodes;   size_t n_nodes, cap_nodes;   /* nodes[0] is the root */
	struct u64map frame_ids;     /* (module, offset) -> frame */
	struct u64map node_ids;      /* (parent, frame) -> node */
};

/* Storage is the caller's; stacks_fin frees what stacks_init and the interning allocated. */
int stacks_init(struct stacks *s);
void stacks_fin(struct stacks *s);

/* The frame id for (module, offset), created on first use; STACKS_FAILED when out of memory. */
uint32_t stacks_frame(struct stacks *s, uint32_t module, uint64_t offset);
/* A Python frame: a name id (struct pynames, tracer/stacks/pystack.h) and a line; STACKS_FAILED out of memory. */
static inline uint32_t stacks_py_frame(struct stacks *s, uint32_t name, uint32_t line)
{
	return stacks_frame(s, STACKS_PY_MODULE, (uint64_t)name << 32 | line);
}
/* A frame that names memory without a call stack; name must outlive s (a string literal). */
uint32_t stacks_pseudo_frame(struct stacks *s, const char *name);

/* The frames of node, innermost first: writes at most max to out and returns how many. */
size_t stacks_frames(const struct stacks *s, uint32_t node, uint32_t *out, size_t max);

/*
 * Interns a stack given innermost first (frames[0] is where the call stopped)
 * and returns its node id (STACKS_ROOT for an empty stack), or STACKS_FAILED.
 */
uint32_t stacks_intern(struct stacks *s, const uint32_t *frames, size_t n);

#endif
