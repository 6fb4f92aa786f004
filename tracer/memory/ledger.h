/*
 * The ledger: the live mappings of one process, each charged by its own
 * resident bytes and attributed to a stack, the per-stack totals, and the
 * peak. It never touches the process: residency comes from a measure callback
 * (pagemap in ptfil, a fake in the unit tests).
 */
#ifndef PTFIL_LEDGER_H
#define PTFIL_LEDGER_H

#include <stddef.h>
#include <stdint.h>

/* Resident bytes of [start, end) right now. */
typedef uint64_t (*ledger_measure_fn)(void *arg, uint64_t start, uint64_t end);

/* A live range, page-aligned, never overlapping another. */
struct ledger_seg {
	uint64_t start, end;
	uint64_t charged;   /* resident bytes when last measured */
	uint32_t stack;
	uint64_t cap;       /* the charge never rises above this; UINT64_MAX for none */
	int excl;           /* inherited at fork: measured by its pages mapped here only (measure_excl) */
	uint64_t born;      /* the ledger's epoch when the range was added (kept by its pieces and moves) */
};

struct ledger_charge {
	uint64_t charged;
	uint64_t reserved;
	uint64_t count;
};

struct ledger_peak {
	double time;
	uint64_t charged, reserved, rss;
};

struct ledger {
	struct ledger_seg *segs; size_t n_segs, cap_segs;  /* ascending by start */
	struct ledger_charge *by_stack; char *kind;         /* indexed by stack id */
	size_t n_stacks;
	struct ledger_charge *at_peak; size_t n_at_peak;    /* by_stack copied at the peak */
	uint64_t charged, reserved;                         /* totals now */
	struct ledger_peak peak;
	int has_peak;
	int peak_stale;                                     /* at_peak not copied yet (ledger_note_peak) */
	ledger_measure_fn measure;
	ledger_measure_fn measure_excl;                     /* pages mapped by this process alone */
	void *measure_arg;
	uint64_t measures;                                  /* calls to measure, for counters */
	uint64_t epoch;                                     /* ranges added so far (ledger_epoch) */
};

/* Storage is the caller's; ledger_fin frees the arrays. */
void ledger_init(struct ledger *l, ledger_measure_fn measure, void *arg);
void ledger_fin(struct ledger *l);

/*
 * A new live range attributed to stack (with kind, an enum snap_kind): any
 * overlap with older ranges is removed first, then the range is measured.
 * Returns 0, or -1 when out of memory.
 */
int ledger_add(struct ledger *l, uint64_t start, uint64_t end, uint32_t stack, char kind);
/*
 * As ledger_add, for memory that was there before ptfil saw it being made:
 * charged at its residency now, and from then on only less (what goes), never
 * more (pages that fault in later belong to the blocks made there since).
 */
int ledger_add_capped(struct ledger *l, uint64_t start, uint64_t end, uint32_t stack, char kind);
/*
 * As ledger_add_capped, for memory a forked child shares copy-on-write with
 * its parent: charged by its pages that this process alone maps (measure_excl:
 * written since the fork by either side, or left to it by the other), at
 * most what was resident at the fork; its parent keeps the shared pages.
 */
int ledger_add_inherited(struct ledger *l, uint64_t start, uint64_t end, uint32_t stack, char kind);
/* Measures again the ranges ledger_add_inherited made (the other side of a fork wrote or went). */
void ledger_refresh_inherited(struct ledger *l);
/*
 * Charges bytes that no range measures (a small heap block, at its size) to
 * stack, with count live objects. Returns 0, or -1 when out of memory.
 */
int ledger_add_bytes(struct ledger *l, uint32_t stack, char kind, uint64_t bytes, uint64_t count);
/* Takes back what ledger_add_bytes charged. */
void ledger_sub_bytes(struct ledger *l, uint32_t stack, uint64_t bytes, uint64_t count);
/* Forgets [start, end); ranges cut in two keep their stacks and are measured again. */
int ledger_remove(struct ledger *l, uint64_t start, uint64_t end);
/* Moves what lies in [from, from+len) to start at to (mremap), replacing what was there. */
int ledger_move(struct ledger *l, uint64_t from, uint64_t len, uint64_t to);
/*
 * A call's release seen at its end, after other threads' calls that the
 * kernel made later may have been seen already: a munmap returns, another
 * thread's mmap is given the same addresses, and the tracer hears of the mmap
 * first. ledger_epoch, taken at the release's start, marks the ranges that
 * were there; the _older forms leave alone every range added since, which
 * the released call cannot have reached (its addresses were not mapped when
 * it ran, or the program unmapped memory another thread was still mapping).
 * A move loses what the newer range took of its source when it was added
 * (cut away then as an overlap): that part is not charged at the destination.
 */
uint64_t ledger_epoch(const struct ledger *l);
int ledger_remove_older(struct ledger *l, uint64_t start, uint64_t end, uint64_t epoch);
int ledger_move_older(struct ledger *l, uint64_t from, uint64_t len, uint64_t to, uint64_t epoch);
/* Measures again every range overlapping [start, end). */
void ledger_refresh(struct ledger *l, uint64_t start, uint64_t end);
void ledger_refresh_all(struct ledger *l);
/* True when any live range overlaps [start, end). */
int ledger_overlaps(const struct ledger *l, uint64_t start, uint64_t end);
/* True when [start, end) lies inside a run of adjacent live ranges, with some of it left on both sides. */
int ledger_holes(const struct ledger *l, uint64_t start, uint64_t end);

/*
 * Records a new peak when the charge now exceeds the last one, copying the
 * per-stack charge. Returns 1 for a new peak, 0 otherwise, -1 out of memory.
 */
int ledger_check_peak(struct ledger *l, double time, uint64_t rss);
/*
 * The same in O(1), for a ledger that grows by many small steps (a page at a
 * time): the per-stack charge is copied only by ledger_settle_peak, which the
 * caller calls before anything is taken away, and before reading at_peak.
 * Between a new peak and the next release the charge only grows, so the copy
 * made then is the state at the peak (as Fil copies it). Returns 1 for a new
 * peak, else 0.
 */
int ledger_note_peak(struct ledger *l, double time, uint64_t rss);
/* Copies the per-stack charge at the peak noted last, if not done yet. Returns 0, or -1 out of memory. */
int ledger_settle_peak(struct ledger *l);

#endif
