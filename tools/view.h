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

#include "common/snap.h"

struct view_options {
	size_t top;      /* stacks shown, 0 for all */
	int top_set;     /* --top was given: JSON honours it too (it lists all by default) */
	size_t depth;    /* frames shown per stack in text, 0 to choose from the number of stacks */
};

#define VIEW_DEFAULT_TOP 10

/*
 * Write the report for s to out. Return 0, or -1 after error() when memory
 * runs out; write errors are left on out for the caller to check (ferror).
 */
int view_text(FILE *out, const struct snap *s, const struct view_options *o);
int view_json(FILE *out, const struct snap *s, const struct view_options *o);

/*
 * Pointers to the n stacks of st, largest first: by charged bytes, then
 * reserved, then count, then node and kind so the order is total. The caller
 * frees the returned array (not the stacks); NULL after error() when out of
 * memory. n == 0 gives a valid (unusable) pointer that must still be freed.
 */
const struct snap_stack **view_sort_stacks(const struct snap_stack *st, size_t n);

/* Whether a stack's reservation far exceeds what is resident: flagged in both outputs. */
int view_is_sparse(const struct snap_stack *st);

/* "mmap", "brk", "heap", "pseudo", or "unknown". */
const char *view_kind_name(char kind);

/* The shortest decimal text that reads back as v (v finite), into buf of at least 32 bytes. */
void view_format_double(char *buf, size_t size, double v);

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0 if p starts an invalid one. */
size_t view_utf8_len(const unsigned char *p, size_t n);

/* The last path component of path (a pointer into it). */
const char *view_basename(const char *path);

#endif
