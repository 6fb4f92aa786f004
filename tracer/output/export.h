/*
 * From the tracer's tables to a snapshot file (export.c).
 */
#ifndef PTFIL_EXPORT_H
#define PTFIL_EXPORT_H

#include <stddef.h>
#include <stdint.h>

struct tracer;
struct proc;

/*
 * Writes process p's snapshot to path: its peak, or with live, what
 * is live now in place of the peak. Returns 0, or -1 after error().
 */
int tracer_write_snapshot(struct tracer *T, struct proc *p, int live, const char *path);

/*
 * Source lines of native frames are resolved when a snapshot is written,
 * once per frame for the whole run (stack frames keep their numbers), and
 * kept for the next snapshot: this frees them.
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

#endif
