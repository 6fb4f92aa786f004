/*
 * Live heap blocks of one process, by address, and their charge in the
 * process's ledger: a small block at its requested size, a large one by the
 * resident pages inside it (as a ledger range) plus its partial edge pages at
 * their byte size. Pure bookkeeping: testable without a process.
 */
#ifndef PTFIL_HEAP_H
#define PTFIL_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "tracer/memory/ledger.h"

#define HEAP_DEFAULT_LARGE (64 * 1024)

struct heap_block {
	uint64_t ptr;      /* 0 marks an empty slot */
	uint64_t size;
	uint32_t stack;
	uint8_t large;
};

struct heap {
	struct heap_block *v; size_t cap, n;   /* open addressing, linear probing */
	uint64_t threshold;                    /* blocks of this size or more are large */
	uint64_t page_size;
	struct ledger *l;
	uint64_t allocs, frees, unknown_frees;
};

/* Storage is the caller's; heap_fin frees the table (not the ledger, which is the caller's). */
void heap_init(struct heap *h, struct ledger *l, uint64_t threshold, uint64_t page_size);
void heap_fin(struct heap *h);

/*
 * A new live block [ptr, ptr+size) allocated at stack. A block already
 * recorded at ptr (its free was not seen) is replaced. Returns 0, or -1 when
 * out of memory.
 */
int heap_alloc(struct heap *h, uint64_t ptr, uint64_t size, uint32_t stack);
/* Forgets the block at ptr and its charge. Returns 1 when it was known, 0 when not (ignored). */
int heap_free(struct heap *h, uint64_t ptr);
/* The live block at ptr, or NULL. */
const struct heap_block *heap_find(const struct heap *h, uint64_t ptr);
/* Forgets every block (the process image went away). */
void heap_clear(struct heap *h);

#endif
