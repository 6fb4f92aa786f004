/* The live-block table: a hash by address with backward-shift deletion, kept in step with the ledger. */
#include "tracer/memory/heap.h"

#include <stdlib.h>
#include <string.h>

#include "common/snap.h"

void heap_init(struct heap *h, struct ledger *l, uint64_t threshold, uint64_t page_size)
{
	memset(h, 0, sizeof(*h));
	h->l = l;
	h->threshold = threshold ? threshold : HEAP_DEFAULT_LARGE;
	h->page_size = page_size;
}

void heap_fin(struct heap *h)
{
	free(h->v);
	h->v = NULL;
	h->cap = h->n = 0;
}

static size_t slot_of(uint64_t ptr, size_t cap)
{
	/* Heap pointers are 16-byte aligned and clustered: mix the bits before masking. */
	ptr *= 0x9e3779b97f4a7c15ULL;
	return (size_t)(ptr >> 20) & (cap - 1);
}

static size_t find_slot(const struct heap *h, uint64_t ptr)
{
	size_t i = slot_of(ptr, h->cap);
	while (h->v[i].ptr && h->v[i].ptr != ptr)
		i = (i + 1) & (h->cap - 1);
	return i;
}

const struct heap_block *heap_find(const struct heap *h, uint64_t ptr)
{
	if (!h->cap || !ptr)
		return NULL;
	size_t i = find_slot(h, ptr);
	return h->v[i].ptr ? &h->v[i] : NULL;
}

static int grow(struct heap *h)
{
	size_t cap = h->cap ? h->cap * 2 : 1024;
	struct heap_block *v = calloc(cap, sizeof(*v));
	if (!v)
		return -1;
	struct heap_block *old = h->v;
	size_t ocap = h->cap;
	h->v = v;
	h->cap = cap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].ptr)
			h->v[find_slot(h, old[i].ptr)] = old[i];
	free(old);
	return 0;
}

/* The pages wholly inside a large block, measured by residency; the rest is charged by size. */
static void inner(const struct heap *h, const struct heap_block *b, uint64_t *lo, uint64_t *hi)
{
	uint64_t mask = h->page_size - 1;
	*lo = (b->ptr + mask) & ~mask;
	*hi = (b->ptr + b->size) & ~mask;
	if (*hi < *lo)
		*hi = *lo;
}

static int charge(struct heap *h, const struct heap_block *b)
{
	if (!b->large)
		return ledger_add_bytes(h->l, b->stack, SNAP_KIND_HEAP, b->size, 1);
	uint64_t lo, hi;
	inner(h, b, &lo, &hi);
	if (ledger_add_bytes(h->l, b->stack, SNAP_KIND_HEAP, b->size - (hi - lo), lo == hi))
		return -1;
	return lo < hi ? ledger_add(h->l, lo, hi, b->stack, SNAP_KIND_HEAP) : 0;
}

static void uncharge(struct heap *h, const struct heap_block *b)
{
	if (!b->large) {
		ledger_sub_bytes(h->l, b->stack, b->size, 1);
		return;
	}
	uint64_t lo, hi;
	inner(h, b, &lo, &hi);
	ledger_sub_bytes(h->l, b->stack, b->size - (hi - lo), lo == hi);
	if (lo < hi)
		ledger_remove(h->l, lo, hi);
}

static void remove_at(struct heap *h, size_t i)
{
	/* Backward-shift deletion keeps probe chains whole without tombstones. */
	size_t j = i;
	for (;;) {
		j = (j + 1) & (h->cap - 1);
		if (!h->v[j].ptr)
			break;
		size_t k = slot_of(h->v[j].ptr, h->cap);
		/* Move j back to i unless its home slot lies cyclically in (i, j]. */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			h->v[i] = h->v[j];
			i = j;
		}
	}
	h->v[i].ptr = 0;
	h->n--;
}

int heap_free(struct heap *h, uint64_t ptr)
{
	if (!ptr)
		return 0;
	/* Before the first block too: attached, the first free may be of a block made before ptfil came. */
	size_t i = h->cap ? find_slot(h, ptr) : 0;
	if (!h->cap || !h->v[i].ptr) {
		h->unknown_frees++;
		return 0;
	}
	uncharge(h, &h->v[i]);
	remove_at(h, i);
	h->frees++;
	return 1;
}

int heap_alloc(struct heap *h, uint64_t ptr, uint64_t size, uint32_t stack)
{
	if (!ptr)
		return 0;
	if (heap_find(h, ptr))
		heap_free(h, ptr);
	if ((h->n + 1) * 4 > h->cap * 3 && grow(h))
		return -1;
	struct heap_block b = { ptr, size, stack, size >= h->threshold };
	if (charge(h, &b))
		return -1;
	h->v[find_slot(h, ptr)] = b;
	h->n++;
	h->allocs++;
	return 0;
}

void heap_clear(struct heap *h)
{
	for (size_t i = 0; i < h->cap; i++)
		if (h->v[i].ptr)
			uncharge(h, &h->v[i]);
	if (h->v)
		memset(h->v, 0, h->cap * sizeof(*h->v));
	h->n = 0;
}
