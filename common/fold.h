/*
 * How a stack reads as its author's code (fold.c): which frames are the
 * user's own, the frame each stack is anchored on, and the folds every report
 * shows by default in place of machinery the user did not write: a run of
 * Python's import-system frames becomes one frame "[import numpy.core]", a
 * run of native frames without names in one module becomes one frame
 * "[_multiarray_umath…so, 6 frames]". Folding rewrites a snapshot in memory
 * only; the file keeps every frame.
 *
 * Own code, unless the user names it (--own PATH: then only files and
 * modules under those paths are):
 *  - a Python frame whose file is not in the standard library (lib/python3.N/),
 *    site- or dist-packages, or "<frozen ...>" and other "<...>" names
 *    (except IPython's cells, and "<string>" or "<stdin>" run by the user:
 *    python -c, or exec'd by their own code);
 *  - a native frame of a module outside the system's directories (/usr, /lib,
 *    /bin, /opt is not one of them) and outside site- or dist-packages, that
 *    is not an inlined std:: or __gnu_cxx:: function or a header of
 *    /usr/include; in a stack with Python frames, never the interpreter;
 *  - failing those, in a stack without Python frames, a frame of the
 *    program's executable itself (a system program: /usr/bin/sqlite3).
 */
#ifndef PTFIL_FOLD_H
#define PTFIL_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "common/snap.h"

/* The user's --own paths, normalised (fold_own_add); none: the rules above. Storage is the caller's. */
struct fold_own {
	char **paths;   /* owned */
	size_t n;
};

/*
 * Adds path to o: made absolute against the working directory and
 * normalised ("a/./b/../c" reads "a/c") as frames' files are before they
 * are compared. Returns 0, or -1 after error() when out of memory.
 */
int fold_own_add(struct fold_own *o, const char *path);
void fold_own_fin(struct fold_own *o);

/* Lexical normalisation of a path into out (size at least strlen(path) + 1): "//", "/./", "x/.." removed. */
void fold_normalize(const char *path, char *out, size_t size);

/*
 * Where a Python source file's module path begins when the file is in a
 * library directory: past the last "/site-packages/" or "/dist-packages/",
 * else past "lib/python3.N/" (the standard library: Debian's, a venv's,
 * pyenv's); NULL when it is in neither.
 */
const char *fold_python_library(const char *file);
/* Whether a Python frame's file is the import system's (importlib's bootstrap, frozen or not; zipimport). */
int fold_import_file(const char *file);
/*
 * The module a Python file is, dotted, into buf: "numpy.core.overrides"
 * for .../dist-packages/numpy/core/overrides.py, "numpy" for its
 * __init__.py, "os" for "<frozen os>", the file's base name without ".py"
 * outside the library directories.
 */
void fold_module_name(const char *file, char *buf, size_t size);

/* Whether a Python frame's file is the user's own code. */
int fold_own_python(const struct fold_own *o, const char *file);
/*
 * Whether a native frame is: module its module's path (NULL when none),
 * src the source file its debug information gives (or NULL), function its
 * name (or NULL); python: the stack has Python frames (the interpreter
 * and libpython are then never own code).
 */
int fold_own_native(const struct fold_own *o, const char *module, const char *src, const char *function, int python);

/*
 * The frame a stack of s is anchored on, among frames[0..n) innermost
 * first: the innermost own frame by the rules above (fold_stack_own), else n.
 */
size_t fold_anchor(const struct snap *s, const struct fold_own *o, const uint32_t *frames, size_t n);
/* Whether any of frames[0..n) of s is a Python frame: the stack is a Python program's. */
int fold_has_python(const struct snap *s, const uint32_t *frames, size_t n);
/* Whether frame fi of s is own code, in a stack with (python) or without Python frames. */
int fold_frame_own(const struct snap *s, const struct fold_own *o, uint32_t fi, int python);
/*
 * The same for frames[k] of a stack frames[0..n): code given as text
 * ("<string>", "<stdin>") is own when the Python frame outside it is, or
 * when it is the outermost (python -c).
 */
int fold_stack_own(const struct snap *s, const struct fold_own *o, const uint32_t *frames, size_t n, size_t k,
		   int python);

/* One line of "your lines": an anchor frame (or UINT32_MAX: stacks with none) and what its stacks hold. */
struct fold_line {
	uint32_t frame;
	uint64_t charged;
	size_t stacks;
};

/*
 * The charge of stacks st[0..n) of s by their anchor, frames that read the
 * same (function, file and line; a native frame without a line: the same
 * frame) summed as one line, largest first; the stacks without an own frame
 * are one line of their own, frame UINT32_MAX. *n_lines gets their number.
 * The caller frees the result; NULL after error() when out of memory.
 */
struct fold_line *fold_lines(const struct snap *s, const struct fold_own *o, const struct snap_stack *st, size_t n,
			     size_t *n_lines);

/*
 * Frame fi of s in a few words for a line of text: "load (demo.py:12)",
 * "make_rows (alloc.cpp:13)", "libfoo.so + 0x12"; files by their base name,
 * bytes that are not printable ASCII or UTF-8 as '?'.
 */
void fold_frame_brief(const struct snap *s, uint32_t fi, char *buf, size_t size);

/* What fold_snap folds. */
struct fold_options {
	int imports;   /* runs of import-system frames */
	int natives;   /* in Python stacks, runs of unnamed native frames of one module
	                  (left alone when the run kept every native frame: --native) */
};

/*
 * Rewrites s in place so that every stack (at the peak, live at the end,
 * at the combined peak, the other view's, and the links) reads folded as o
 * says. Stacks that become the same merge, their bytes and counts summed:
 * the totals are unchanged. New frames are added to s->frames, native
 * frames named "[...]" as pseudo frames are (an import fold has no module,
 * a native fold keeps its module), and the trie is rebuilt. Returns the number of frames folded away, or -1 after error()
 * when out of memory (s is then still whole, possibly partly folded).
 */
long fold_snap(struct snap *s, const struct fold_options *o);

#endif
