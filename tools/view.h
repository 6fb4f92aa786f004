/*
 * The ptfil-view renderers: turn a snapshot read by snap_read into a report
 * for a person (view_text) or a document for a program (view_json), and the
 * small helpers both share.
 */
#ifndef PTFIL_VIEW_H
#define PTFIL_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/fold.h"
#include "common/snap.h"
#include "tools/flame.h"

struct view_options {
	size_t top;      /* stacks shown, 0 for all */
	int top_set;     /* --top was given: JSON honours it too (it lists all by default) */
	size_t depth;    /* frames shown per stack in text, 0 to choose from the number of stacks */
	enum flame_set set;      /* --live: the stacks still live at the end instead of the peak;
	                            FLAME_TREE: the combined peak of a process tree (folded, svg, html) */
	int one_process;         /* --pid: the snapshot as one process's alone, without its tree */
	const char *name_a;      /* the snapshot file as given (in a diff, the one before) */
	const char *name_b;      /* in a diff, the one after; NULL otherwise */
	const struct fold_own *own; /* --own: the paths that are the user's code, or NULL (fold.h's rules) */
	int raw_frames;          /* --raw-frames: the stacks as recorded, not folded (fold_snap) */
};

#define VIEW_DEFAULT_TOP 10
#define VIEW_DEFAULT_LIVE_TOP 5  /* stacks still live at the end shown in the report without --top */

/*
 * Write the report for s to out. Return 0, or -1 after error() when memory
 * runs out; write errors are left on out for the caller to check (ferror).
 */
int view_text(FILE *out, const struct snap *s, const struct view_options *o);
int view_json(FILE *out, const struct snap *s, const struct view_options *o);

/*
 * The renderers over the frame tree. a is the snapshot (in a diff, the one
 * before), b the one after or NULL, f their tree (flame_build(f, a, b, o->set)).
 * Same return convention as view_text.
 *
 * view_folded: collapsed stacks, one line per stack, "outer;...;inner BYTES"
 * (in a diff "outer;...;inner BEFORE AFTER", which flamegraph.pl draws as a differential graph).
 * view_svg: a self-contained interactive flame graph (one <g class="frame">
 * per node drawn). view_html: the whole report as one self-contained page.
 * view_diff_text / view_diff_json: the stacks that grew or shrank.
 */
int view_folded(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		const struct view_options *o);
int view_svg(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
	     const struct view_options *o);
int view_html(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
	      const struct view_options *o);
int view_diff_text(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		   const struct view_options *o);
int view_diff_json(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		   const struct view_options *o);

/*
 * view_pprof: the stacks o->set names (the peak, the combined peak of a
 * tree with each sample's pid and command as labels, or those live at the
 * end) of b, or of a without b, as a gzip-compressed pprof profile
 * (profile.proto) with the sample types inuse_objects, inuse_space (the
 * default: charged bytes) and reserved_space. Same bytes for the same
 * snapshot. Same return convention as view_text.
 */
int view_pprof(FILE *out, const struct snap *a, const struct snap *b, const struct view_options *o);

/* "1.5 MiB", "12 B": binary units, one decimal, into buf of at least 32 bytes. */
void view_format_size(char *buf, size_t size, uint64_t bytes);
/* "750.0 ms", "1.50 s", "120 s". */
void view_format_time(char *buf, size_t size, double seconds);

/*
 * Pointers to the n stacks of st, largest first: by charged bytes, then
 * reserved, then count, then node and kind so the order is total. The caller
 * frees the returned array (not the stacks); NULL after error() when out of
 * memory. n == 0 gives a valid (unusable) pointer that must still be freed.
 */
const struct snap_stack **view_sort_stacks(const struct snap_stack *st, size_t n);

/* Whether a stack's reservation far exceeds what is resident: flagged in both outputs. */
int view_is_sparse(const struct snap_stack *st);

/* "mmap", "brk", "heap", "pseudo", "resident" (a touch stack), or "unknown". */
const char *view_kind_name(char kind);
/* The same for JSON and pprof labels: "touch" for a touch stack, else as view_kind_name. */
const char *view_kind_key(char kind);

/* The view s holds, as every output names it: "alloc" or "touch". */
const char *view_view_name(const struct snap *s);
/*
 * What that view charges, the words every output's view line gives after
 * its name: "memory charged to the code that allocated it", "memory charged
 * to the code that made it resident (its first write to each page)".
 */
const char *view_view_meaning(const struct snap *s);
/* The same, shorter, where two views are named in one line: "charged to the code that allocated it". */
const char *view_view_short(const struct snap *s);

/*
 * The stacks whose reservations tell how sparse memory is: the peak's, or
 * in the touch view, whose stacks reserve nothing, the alloc view's at the
 * same peak (s->other). *n gets their number; *known is 0 for a touch
 * snapshot without the alloc view (nothing tells), else 1.
 */
const struct snap_stack *view_reserving_stacks(const struct snap *s, size_t *n, int *known);
/*
 * The bytes reserved at the peak: s->peak.reserved, or in the touch view
 * the sum of the alloc view's stacks beside it; *known is 0 (and the result
 * 0) for a touch snapshot without the alloc view.
 */
uint64_t view_peak_reserved(const struct snap *s, int *known);

/*
 * The one frame that names a stack in a single line ("made resident by",
 * "reserved by"): among frames[0..n) of s, innermost first, its Python
 * frame when it has one (view_python_frame), else the innermost frame that
 * is not in the C library, the dynamic linker, the C++ runtime or a malloc
 * library and is not a pseudo frame, else the innermost; 0 when n is 0.
 */
size_t view_telling_frame(const struct snap *s, const uint32_t *frames, size_t n);

/* The shortest decimal text that reads back as v (v finite), into buf of at least 32 bytes. */
void view_format_double(char *buf, size_t size, double v);

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0 if p starts an invalid one. */
size_t view_utf8_len(const unsigned char *p, size_t n);

/*
 * Writes s for a terminal: control bytes and invalid UTF-8 as \xHH (a file
 * must not be able to send escape sequences), at most max bytes, then "...".
 */
void view_put_safe(FILE *out, const char *s, size_t max);

/*
 * The nodes of a two-slot tree whose own (self) charged bytes differ, largest
 * change first; *grew and *shrank count each direction. Caller frees; NULL
 * after error() when out of memory.
 */
uint32_t *view_diff_changes(const struct flame *f, size_t *n, size_t *grew, size_t *shrank);

/*
 * The Python frame a stack listing cut short shows anyway (a Python
 * program's own line can lie under more interpreter frames than are shown):
 * among frames[from..n) of s, innermost first, the first Python frame outside
 * importlib's frozen modules ("<frozen importlib._bootstrap>", which Python's
 * own tracebacks leave out), else the first Python frame, else n.
 */
size_t view_python_frame(const struct snap *s, const uint32_t *frames, size_t from, size_t n);
/* Whether a Python source file is a frozen module ("<frozen ...>"). */
int view_frozen_file(const char *file);
/* The same for a node of a frame tree and its ancestors: the node chosen, or FLAME_ROOT. */
uint32_t view_python_node(const struct flame *f, uint32_t node);

/*
 * The processes of s (s->procs) in tree order, for listing them indented:
 * each process after the one that started it (the process with its ppid as
 * pid, the latest such listed before it), siblings in file order; a process
 * whose parent is not in the tree starts a tree of its own (so does one of a
 * hostile file's cycles). Fills order[] with the n_procs indexes and depth[i]
 * with the depth of procs[i] (0 for a root); the caller allocates both.
 * Returns 0, or -1 after error() when out of memory.
 */
int view_proc_tree(const struct snap *s, uint32_t *order, uint32_t *depth);

/* The processes of s that were seen but not profiled (not counting the main one), and the largest of them by VmHWM. */
size_t view_unprofiled(const struct snap *s, const struct snap_proc **largest);

/* Whether ptfil ran with --mappings-only (the counter options.mappings_only). */
int view_mappings_only(const struct snap *s);

/*
 * The modules that frames of s's stacks (at the peak, live at the end, at
 * the combined peak and in the other view) come from and that had no full symbol table or no source lines, as the
 * snapshot records it (format 3 on; older ones say nothing): their indexes
 * in s->modules, in order, into an array the caller frees (NULL after
 * error() when out of memory); *n gets their number.
 */
size_t *view_debug_missing(const struct snap *s, size_t *n);
/* Whether module m lacks function names (none, or exported ones only). */
int view_module_unnamed(const struct snap_module *m);

/* The last path component of path (a pointer into it). */
const char *view_basename(const char *path);

/*
 * Text for XML and HTML (view_svg.c): & < > " ' as entity references;
 * control bytes, invalid UTF-8 and the non-characters U+FFFE and U+FFFF
 * (which XML 1.0 forbids even escaped) as the text \xHH; at most max bytes of
 * s, then "...".
 */
void view_put_xml(FILE *out, const char *s, size_t max);

/*
 * The command line of s for XML and HTML: arguments quoted as a shell needs,
 * escaped as view_put_xml does, at most about max bytes of them, then "...".
 */
void view_put_command_xml(FILE *out, const struct snap *s, size_t max);

/*
 * The flame graph as one <svg> element, shared by view_svg and view_html
 * (view_svg.c). standalone: a whole SVG document with its title, controls,
 * style and script; otherwise an element for the HTML report, which brings
 * the controls, style and script once for the page. Same arguments and
 * return convention as view_svg.
 */
int view_flame_svg(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
		   const struct view_options *o, int standalone);

#endif
