/*
 * The page ledger of the touch view: which stack made each resident page of
 * one process resident. Every page (4 KiB, or a 2 MiB transparent huge page)
 * is charged to one stack in a ledger (memory/ledger.h, as bytes no range
 * measures), from the moment it became resident until it is released, so the
 * ledger's total is what the faults made resident and still is. Pure
 * bookkeeping: it never touches the process, and is testable without one.
 */
#ifndef PTFIL_PAGES_H
#define PTFIL_PAGES_H

#include <stddef.h>
#include <stdint.h>

struct ledger;

#define PAGES_SHIFT 12                       /* 4 KiB pages */
#define PAGES_REGION_SHIFT 21                /* 2 MiB regions, a huge page each */
#define PAGES_PER_REGION (1u << (PAGES_REGION_SHIFT - PAGES_SHIFT))
#define PAGES_NONE UINT32_MAX                /* a page not resident */

/* One 2 MiB region of the address space with a resident page in it. */
struct pages_region {
	uint64_t index;                          /* address >> PAGES_REGION_SHIFT */
	uint32_t resident;                       /* pages of it charged */
	uint32_t stack[PAGES_PER_REGION];        /* each page's stack, or PAGES_NONE */
};

struct pages {
	struct pages_region **slot; size_t cap;  /* open addressing by index, NULL empty; cap a power of two */
	size_t n;                                /* regions in use */
	struct ledger *l;                        /* where the charge goes (not owned) */
	char kind;                               /* the kind its charges carry (enum snap_kind) */
	uint64_t touched, released;              /* pages charged and released, for counters */
};

/* Storage is the caller's; pages_fin frees the regions (not the ledger). */
void pages_init(struct pages *pg, struct ledger *l, char kind);
void pages_fin(struct pages *pg);

/*
 * [start, end) became resident, made so by stack: each page of it not charged
 * yet is charged to stack. With take, pages charged to another stack move to
 * this one (a fault that found the page missing is the truth about who made
 * it resident, whatever a scan guessed before its record was read); without,
 * they keep their stack (a huge page collapsed over small ones). Returns the
 * bytes newly charged, or -1 out of memory (what was charged stays).
 */
int64_t pages_touch(struct pages *pg, uint64_t start, uint64_t end, uint32_t stack, int take);
/* [start, end) is no longer resident (unmapped, discarded, swapped out): its pages' charge goes. Returns the bytes released. */
uint64_t pages_release(struct pages *pg, uint64_t start, uint64_t end);
/* mremap: the pages of [from, from + len) now live at to; what was at to is released first. Returns 0 or -1 out of memory. */
int pages_move(struct pages *pg, uint64_t from, uint64_t len, uint64_t to);
/* The stack page addr is charged to, or PAGES_NONE. */
uint32_t pages_stack(const struct pages *pg, uint64_t addr);
/* Bytes charged in [start, end). */
uint64_t pages_resident(const struct pages *pg, uint64_t start, uint64_t end);
/* Forgets everything, releasing every charge (exec). */
void pages_clear(struct pages *pg);

#endif
