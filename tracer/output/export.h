/*
 * From the tracer's tables to a snapshot file (export.c).
 */
#ifndef PTFIL_EXPORT_H
#define PTFIL_EXPORT_H

#include <stddef.h>
#include <stdint.h>

struct tracer;
struct proc;
struct snap;
struct srcmemo;

/* The run's part (struct tracer's exp): what writing snapshots keeps from one to the next. */
struct export {
	struct srcmemo *src;       /* source lines of stack frame i, resolved when written */
	size_t n_src;
	uint64_t src_lookups;      /* frames looked up in DWARF, for the counters */
	double src_seconds;        /* time spent resolving them and fetching debug files */
	uint64_t src_fetched;      /* debug files fetched from debuginfod */
	unsigned live_written;     /* SIGUSR1 snapshots so far (output/snapshot.h) */
	char *where;               /* owned: the main process's largest own lines at its peak, as the end of
	                              the run prints them (summary_keep), or NULL */
	char *where_tree;          /* the same at the combined peak of a followed tree, or NULL */
	char *where_top;           /* the largest of them alone, for the --max-peak line, or NULL */
};

/*
 * Writes process p's snapshot to path: its peak, or with live, what
 * is live now in place of the peak. Returns 0, or -1 after error().
 */
int tracer_write_snapshot(struct tracer *T, struct proc *p, int live, const char *path);

/*
 * Source lines of native frames are resolved when a snapshot is written,
 * once per frame for the whole run (stack frames keep their numbers), and
 * kept for the next snapshot (T->exp): this frees them.
 */
void export_fin(struct tracer *T);

/*
 * Stack node `node` as one line, innermost first, at most max frames:
 * "malloc (malloc.c:3281) <- make_table (table.c:24) <- main (table.c:32)".
 * The caller frees it; NULL when out of memory.
 */
char *export_stack_text(struct tracer *T, uint32_t node, size_t max);

/*
 * Stack frame fi as text: "make_table (table.c:24)", "load (demo.py:12)",
 * "libfoo.so + 0x1234"; with lines 0, native frames name their module
 * instead of a source line (no DWARF is read: cheap while tracing).
 */
void export_frame_text(struct tracer *T, uint32_t fi, int lines, char *buf, size_t size);

/*
 * For the main process's snapshot s (tree_export.c): the tree's processes (the main one
 * first, then by when they started) and, when more than one was profiled,
 * the combined peak with its stacks. map maps T->stacks nodes to s's nodes.
 * Times in s are the main process's clock (tracer_now). Returns 0, or -1
 * when out of memory.
 */
int tree_export(struct tracer *T, struct snap *s, const uint32_t *map);


#endif
