/*
 * The frame tree behind every stack-merging view (folded stacks, flame
 * graphs, per-function totals, diffs): the stacks of one snapshot (or of two,
 * for a diff) merged by frame label, outermost frame first, with inclusive
 * and self bytes per node.
 *
 * Frames merge by their label (see flame_label), so two call sites in the
 * same function are one node, and a diff matches stacks across runs whose
 * addresses differ. A native frame's label holds no source line and no mark
 * of inlining: a line moved by an edit, or a call inlined in one build and
 * not in the other, still matches; the node keeps the source line and the
 * inlining of its frames beside the label for tooltips (file, line, inlined).
 * Labels are made safe once, here: valid UTF-8, no control bytes, at most
 * FLAME_LABEL_MAX bytes; renderers only escape them for their own syntax.
 */
#ifndef PTFIL_FLAME_H
#define PTFIL_FLAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/snap.h"

#define FLAME_ROOT 0
#define FLAME_NONE UINT32_MAX
/* Longer labels (templated C++ names, hostile files) are cut, ending in "...". */
#define FLAME_LABEL_MAX 400

/* The frame given to a stack with no frame at all, so that the root holds no bytes of its own. */
#define FLAME_NO_STACK "[no stack]"

/* flame_node.inlined: whether the frames merged into a node are calls the compiler inlined. */
enum {
	FLAME_INLINED_NONE = 0,  /* none of them (and every Python frame) */
	FLAME_INLINED_ALL = 1,   /* every one */
	FLAME_INLINED_SOME = 2,  /* some, not all: inlined at one call site, or in one run of a diff, only */
};

/* Bits of flame_node.kinds: which kinds of memory the node's stacks hold. */
enum {
	FLAME_KIND_MMAP = 1,
	FLAME_KIND_BRK = 2,
	FLAME_KIND_HEAP = 4,
	FLAME_KIND_PSEUDO = 8,
	FLAME_KIND_TOUCH = 16,  /* pages made resident (the touch view) */
};

/*
 * One node. Slot 0 is the snapshot (in a diff: the one before), slot 1 the
 * one after (zero unless flame.two). Inclusive values are the sums over the
 * node's whole subtree; self values are those of the stacks that end here.
 * The root's inclusive values are the totals.
 */
struct flame_node {
	uint32_t parent;        /* the root's parent is the root */
	uint32_t first_child;   /* 0 when none (the root is never a child) */
	uint32_t next_sibling;  /* 0 after the last child */
	uint32_t label;         /* index in flame.labels; FLAME_NONE for the root */
	uint32_t module;        /* index in flame.labels of the module's base name, or FLAME_NONE */
	uint32_t func;          /* index in flame.labels of what flame_functions counts the node as:
	                           its label, or for a Python frame "FUNCTION (SHORTFILE)" (its lines
	                           together); FLAME_NONE for the root */
	uint32_t file;          /* index in flame.labels of the source file as the frame names it
	                           (Python) or as the debug information does (native), made safe;
	                           FLAME_NONE when unknown, or when the native frames merged here
	                           name different files */
	uint32_t line;          /* line number in file, 0 when unknown or when the native frames
	                           merged here are at different lines */
	int python;             /* the frame is a Python frame (enum snap_frame_kind) */
	int process;            /* FLAME_TREE: an outermost node standing for the processes of one command */
	uint32_t pids;          /* process nodes: index in flame.labels of "pid 1234" or "pids 1234, 1240"
	                           (the processes merged here); FLAME_NONE otherwise */
	int inlined;            /* native: FLAME_INLINED_*, over the frames merged here */
	uint32_t depth;         /* 0 for the root, 1 for outermost frames */
	unsigned kinds;         /* FLAME_KIND_* bits of the stacks through this node */
	uint64_t charged[2];
	uint64_t reserved[2];
	uint64_t count[2];      /* live blocks or mappings */
	uint64_t self_charged[2];
	uint64_t self_reserved[2];
	uint64_t self_count[2];
};

struct flame {
	struct flame_node *nodes;  /* nodes[FLAME_ROOT] is the root; parents have smaller indexes */
	size_t n_nodes;
	char **labels;             /* interned, owned */
	size_t n_labels;
	int two;                   /* a diff: slot 1 is filled */
	size_t max_depth;          /* deepest node's depth */
	/* private */
	uint32_t *child_index;     /* hash of (parent, label) -> node */
	size_t child_cap;
	uint32_t *label_index;     /* hash of label text -> label */
	size_t label_cap;
	size_t labels_cap, nodes_cap;
};

/*
 * Which stacks of a snapshot to merge: those at the process's own peak, those
 * still live at the end, or (a snapshot with a process tree, has_tree) those
 * of every process at the tree's combined peak, each under one outermost node
 * per command (flame_process_label), so that two workers of one command merge.
 */
enum flame_set { FLAME_PEAK, FLAME_LIVE, FLAME_TREE };

/* Processes named in one process node's pids text; more read "and N more". */
#define FLAME_PIDS_MAX 8

/*
 * The label of process p's node in a FLAME_TREE tree, into buf (size at least
 * FLAME_LABEL_MAX + 1): the base name of its command's first word ("cc1"),
 * made safe as every label is, or "[pid N]" when the command is unknown.
 */
void flame_process_label(const struct snap_proc *p, char *buf, size_t size);

/*
 * Builds the tree of a (slot 0) and, when b is not NULL, of b (slot 1), from
 * the given set of stacks. Children are ordered largest first (by the larger
 * of the two slots' charged bytes), then by label, so the output is
 * deterministic. Sums saturate at UINT64_MAX. Returns 0, or -1 after error()
 * when memory runs out (f is then empty but must still be given to
 * flame_fin). Time and memory are linear in the snapshot's nodes and stacks.
 */
int flame_build(struct flame *f, const struct snap *a, const struct snap *b, enum flame_set set);
void flame_fin(struct flame *f);

/*
 * The label of frame fi of s, as a NUL-terminated string into buf (size at
 * least FLAME_LABEL_MAX + 1): the function name, without its source line
 * or any mark of inlining; for an unnamed frame in a module
 * "MODULE-BASENAME + 0xOFFSET"; otherwise "0xADDRESS". Pseudo frames
 * keep their brackets ("[before attach]"). A Python frame is
 * "FUNCTION (SHORTFILE:LINE)" (see flame_python_file), without ":LINE" when
 * the line is 0, with "?" for an unknown function or an empty file name.
 */
void flame_label(const struct snap *s, uint32_t fi, char *buf, size_t size);

/*
 * The label a frame is counted under in the per-function totals: its label,
 * or for a Python frame "FUNCTION (SHORTFILE)" without the line, so that the
 * lines of one Python function add up as one function. Same buffer rules as
 * flame_label.
 */
void flame_function_label(const struct snap *s, uint32_t fi, char *buf, size_t size);

/*
 * A Python source file as it reads in labels: the module path. After the
 * last "/site-packages/" or "/dist-packages/" ("numpy/core/_methods.py");
 * else after the last ".../lib/python3.N/" or ".../lib64/python3.N/" (the
 * standard library: "json/decoder.py"); else the whole name (a script's path
 * as the code object has it, "<frozen importlib._bootstrap>", "<string>").
 * Returns a pointer into file.
 */
const char *flame_python_file(const char *file);

/* Calls fn for each node of the subtree under (and including) `from`, parents before children, children in order. */
void flame_walk(const struct flame *f, uint32_t from,
		void (*fn)(const struct flame *f, uint32_t node, void *arg), void *arg);

/* Per-function totals, for the text report (heaptrack_print's "inclusive" and "self"). */
struct flame_func {
	uint32_t label;         /* the nodes' func, an index in flame.labels */
	uint64_t inclusive[2];  /* charged bytes of the stacks the function appears in (once per stack) */
	uint64_t self[2];       /* charged bytes of the stacks it is the innermost frame of */
};

/*
 * The functions of f (nodes grouped by their func) with their totals, sorted by inclusive bytes (slot 0, or
 * in a diff the larger slot), largest first, then by label. Returns the array
 * (caller frees) and its length in *n; NULL after error() when out of memory.
 */
struct flame_func *flame_functions(const struct flame *f, size_t *n);

#endif
