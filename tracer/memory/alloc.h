/*
 * The heap-event sink. Every source of malloc-family events (breakpoints in
 * ptrace/, uprobe records in kernel/) says what happened in this one small
 * vocabulary, and the ledger never knows who spoke:
 *
 *   an allocating call began (alloc_enter, then alloc_set_stack) and
 *   returned (alloc_exit); a block is freed (alloc_free: measured first, then
 *   released); a block was seen whole at a return (alloc_block); the call in
 *   flight was left behind by a longjmp (alloc_left_behind).
 *
 * A call made while another is in flight (realloc calling malloc) is the
 * allocator's own business: it is counted as nested and not charged. Each
 * thread has one call in flight at most (struct alloc_call).
 */
#ifndef PTFIL_ALLOC_H
#define PTFIL_ALLOC_H

#include <stdint.h>

struct tracer;
struct tracee;
struct proc;

/* The malloc family, in the order ptrace/hooks.h and kernel/kheap_rec.h number them too. */
enum alloc_fn {
	ALLOC_MALLOC, ALLOC_CALLOC, ALLOC_REALLOC, ALLOC_REALLOCARRAY, ALLOC_FREE,
	ALLOC_POSIX_MEMALIGN, ALLOC_ALIGNED_ALLOC, ALLOC_MEMALIGN, ALLOC_VALLOC, ALLOC_PVALLOC,
	ALLOC__COUNT
};

/* A thread's allocating call in flight (struct tracee's call). */
struct alloc_call {
	int active;            /* begun, and its return not seen yet */
	enum alloc_fn fn;
	uint64_t args[3];
	uint64_t sp;           /* the stack pointer at its entry: the return address is there */
	uint32_t stack;        /* the stack it is charged to */
	int usable;            /* its block is charged at its usable size (glibc's function, no --exact-sizes) */
};

/* What the source can tell of the word at the call in flight's return slot (t->call->sp). */
enum alloc_slot {
	ALLOC_SLOT_UNKNOWN,      /* not read: the stack pointer decides */
	ALLOC_SLOT_OURS,         /* still the return the source hijacked (its trampoline, the kernel's) */
	ALLOC_SLOT_OVERWRITTEN,  /* anything else: the call's frame is gone */
};

/* True when thread t has an allocating call in flight. */
int alloc_active(const struct tracee *t);

/*
 * Whether the call in flight of thread t was left behind (by longjmp or
 * siglongjmp) when a new event happens at stack pointer sp: yes when its
 * return slot holds something else now, or, where the slot cannot be read,
 * when sp is above the call's entry (a call from inside it runs below). A
 * call left behind is forgotten: it is never seen to return. Returns 1 then.
 */
int alloc_left_behind(struct tracee *t, uint64_t sp, enum alloc_slot slot);

/*
 * Whether an event of thread t is followed now: its process is profiled and
 * set up, and no call is in flight. An event inside a call in flight is
 * counted as nested here, once. Every other function below is called only
 * for events this said yes to.
 */
int alloc_follow(struct tracer *T, struct tracee *t);

/*
 * Thread t entered fn(args) with stack pointer sp: it is now the call in
 * flight. A realloc's old block is measured first, while it is still there.
 * Its stack follows with alloc_set_stack (0, STACKS_ROOT, until then).
 * usable: fn is glibc's, whose blocks are charged at their usable size, so
 * the source reads the block's chunk header at the return (alloc_exit).
 *
 * The one charging rule, on every path: a block of glibc's malloc family is
 * charged at its usable size (malloc_usable_size: what glibc gave it, memory
 * the program holds and may use), because glibc's malloc returns where the
 * size asked for is gone, and hooking it there is the ptrace path's cheapest
 * stop. --exact-sizes charges the size asked for, on every path; so is a
 * block of an allocator whose headers ptfil does not know (jemalloc, say).
 */
void alloc_enter(struct tracer *T, struct tracee *t, enum alloc_fn fn, const uint64_t args[3], uint64_t sp, int usable);
void alloc_set_stack(struct tracee *t, uint32_t stack);
/* The source cannot see the call in flight return (its return could not be hijacked): forgotten. */
void alloc_forget(struct tracee *t);
/*
 * The call in flight returned result: the ledger gains its block and loses
 * the old one of a realloc. block: posix_memalign's block, as the source read
 * it from the call's first argument (0 when it could not). chunk_word: the
 * word before the block (glibc's chunk size word) as the source read it at
 * the return, for a call entered with usable; 0 when not read: the block is
 * then charged at the size asked for.
 */
void alloc_exit(struct tracer *T, struct tracee *t, uint64_t result, uint64_t block, uint64_t chunk_word);
/*
 * The usable size glibc's chunk size word gives its block: the chunk less
 * its header word, or less two for a chunk of its own mapping. 0 when the
 * word makes no sense.
 */
uint64_t alloc_chunk_usable(uint64_t word);

/* free(ptr) by thread t: the block's memory measured, the peak checked, the block gone. */
void alloc_free(struct tracer *T, struct tracee *t, uint64_t ptr);

/*
 * A block seen whole at a return of a function hooked there (ptrace/hooks.h):
 * charged at its usable size to stack; a usable size of 0 (its chunk header
 * made no sense) is counted and not charged.
 */
void alloc_block(struct tracer *T, struct tracee *t, uint64_t ptr, uint64_t usable, uint32_t stack);

/*
 * The touch view (memory/pages.h): pages become resident, made so by a stack
 * (a page fault, a populating call), and leave by range. Each process that
 * has this view has a struct touch (p->touch); its charge is the view's
 * (alloc_view_ledger).
 */
#include "tracer/memory/ledger.h"
#include "tracer/memory/pages.h"

struct touch {
	struct ledger l;               /* by the stack that made each page resident; its peak noted in O(1) */
	struct pages pages;
	/* The alloc view (p->ledger) as it was when the touch peak was settled: the other view at the same moment. */
	struct ledger_charge *other; size_t n_other, cap_other;
	uint64_t faults, resident_bytes_seen;   /* records applied, bytes they brought, for counters */
	/* Kept by the fault path (kernel/faults.c): */
	uint64_t rss_seen;             /* the kernel's anonymous bytes after the last record */
	uint64_t file_rss;             /* the rest of the RSS (file, shared memory) at the last poll */
	int grow_pending;              /* pages came with no fault (a GUP, another writer): a scan is due */
	uint32_t grow_stack;           /* ... charged to this stack */
	double grow_scanned_at;
	double released_scanned_at;
	double released_scanned_rec;   /* the record time (s) of the shrink record last scanned at (attach) */
	uint64_t moves_applied;        /* the number of the last mremap record applied (faults_rec.h, struct kf_moves) */
	/*
	 * Ranges that a look at the pages found gone, at gone_at (tracer_now,
	 * the clock the records' times are read in): released in the records'
	 * order, before the first record stamped after that moment or once the
	 * ring is read to its end (kernel/faults.c, scan_released). Owned.
	 */
	struct touch_range { uint64_t start, end; } *gone;
	size_t n_gone, cap_gone;
	double gone_at;
	/*
	 * Both views (--charge both): of what each touch stack made resident, the
	 * bytes inside ranges (mappings, large blocks) each alloc stack reserved,
	 * from the pages at the peak; made at most every ALLOC_LINKS_SECONDS.
	 */
	int both;
	struct alloc_link { uint32_t touch, alloc; uint64_t bytes; } *links;
	size_t n_links, cap_links;
	double links_at;
	int release_scans;             /* no mapping-call stops (attach): releases are found by comparing with the pages */
};

/* Sets up p's touch view (lifecycle.c). Returns 0, or -1 out of memory. */
int alloc_touch_init(struct touch *tv);
void alloc_touch_fin(struct touch *tv);

/* The ledger whose charge and peak are p's view: the touch ledger when p has one, else p->ledger. */
struct ledger *alloc_view_ledger(struct proc *p);

/*
 * [start, end) of p became resident at time (tracer_now's clock), made so by
 * stack; rss: the RSS then, as known. take: a fault that found the pages
 * missing, which moves them to stack from whatever charged them before
 * (memory/pages.h).
 */
void alloc_resident(struct tracer *T, struct proc *p, uint64_t start, uint64_t end, uint32_t stack, double time,
		    uint64_t rss, int take);
/* [start, end) of p is no longer resident: the peak is settled first (memory/ledger.h), then the pages go. */
void alloc_released(struct tracer *T, struct proc *p, uint64_t start, uint64_t end);
/* A successful mremap of [old, old + oldlen) to [to, to + newlen) (lengths page-rounded): the tail it cut released, the rest moved. */
void alloc_remapped(struct tracer *T, struct proc *p, uint64_t old, uint64_t oldlen, uint64_t newlen, uint64_t to);
/* Before p's touch peak is read (a snapshot): the copies at the peak made, if not yet; time: tracer_now. */
void alloc_touch_settle(struct proc *p);
#define ALLOC_LINKS_SECONDS 0.05

#endif
