/*
 * Source lines and inlined calls from DWARF, read with elfutils' libdw: what
 * a code address was compiled from, the calls the compiler inlined there
 * included. Pure lookups on an open Dwarf handle (sym.c finds and opens it).
 */
#ifndef PTFIL_SRCLINE_H
#define PTFIL_SRCLINE_H

#include <elfutils/libdw.h>
#include <stddef.h>
#include <stdint.h>

/* One frame of source: a function, or a call to one inlined into the next entry. */
struct sym_srcframe {
	char *function;   /* owned: demangled for C++; NULL when the DWARF names none */
	char *file;       /* owned: as the DWARF names it, "." components dropped; NULL when unknown */
	uint32_t line;    /* 0 when unknown */
	int inlined;      /* 1: this call was inlined into the next entry (outward) */
};

/* At most this many entries come back for one address (deeper inlining is cut, outermost kept). */
#define SRCLINE_MAX 16

/*
 * Lookups in one object's DWARF (dw stays the caller's, open while this is):
 * each compile unit's functions are indexed by address the first time an
 * address falls in it, so a lookup walks one function's tree, not its CU.
 */
struct srcline;
struct srcline *srcline_new(Dwarf *dw);  /* NULL when out of memory */
void srcline_close(struct srcline *sl);

/*
 * The source of link-time address vaddr: innermost first, every call
 * inlined there, then the function that holds them (inlined 0). Returns the
 * number of entries written to out (at most SRCLINE_MAX), 0 when the DWARF
 * does not cover vaddr, -1 when memory runs out. srcline_free frees the strings.
 */
int srcline_lookup(struct srcline *sl, uint64_t vaddr, struct sym_srcframe *out);
void srcline_free(struct sym_srcframe *v, size_t n);

/* "./malloc/./malloc/malloc.c" as "malloc/malloc.c": a copy of path without "." components, or NULL. */
char *srcline_tidy(const char *path);

#endif
