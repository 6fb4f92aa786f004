/* The page ledger (memory/pages.h): 2 MiB regions in a hash table, one stack id per 4 KiB page. */
#include "tracer/memory/pages.h"

#include <stdlib.h>
#include <string.h>

#include "tracer/memory/ledger.h"

#define PAGE ((uint64_t)1 << PAGES_SHIFT)
#define REGION ((uint64_t)1 << PAGES_REGION_SHIFT)

void pages_init(struct pages *pg, struct ledger *l, char kind)
{
	memset(pg, 0, sizeof(*pg));
	pg->l = l;
	pg->kind = kind;
}

void pages_fin(struct pages *pg)
{
	for (size_t i = 0; i < pg->cap; i++)
		free(pg->slot[i]);
	free(pg->slot);
	pg->slot = NULL;
	pg->cap = pg->n = 0;
}

static size_t hash(uint64_t index, size_t cap)
{
	return (size_t)((index * 0x9e3779b97f4a7c15ULL) >> 17) & (cap - 1);
}

static struct pages_region *find(const struct pages *pg, uint64_t index)
{
	if (!pg->cap)
		return NULL;
	for (size_t i = hash(index, pg->cap);; i = (i + 1) & (pg->cap - 1)) {
		struct pages_region *r = pg->slot[i];
		if (!r || r->index == index)
			return r;
	}
}

static int grow(struct pages *pg)
{
	size_t cap = pg->cap ? pg->cap * 2 : 64;
	struct pages_region **slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return -1;
	for (size_t i = 0; i < pg->cap; i++) {
		struct pages_region *r = pg->slot[i];
		if (!r)
			continue;
		size_t j = hash(r->index, cap);
		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = r;
	}
	free(pg->slot);
	pg->slot = slot;
	pg->cap = cap;
	return 0;
}

static struct pages_region *get(struct pages *pg, uint64_t index)
{
	struct pages_region *r = find(pg, index);
	if (r)
		return r;
	if ((pg->n + 1) * 4 > pg->cap * 3 && grow(pg))
		return NULL;
	if (!(r = malloc(sizeof(*r))))
		return NULL;
	r->index = index;
	r->resident = 0;
	memset(r->stack, 0xff, sizeof(r->stack));
	size_t i = hash(index, pg->cap);
	while (pg->slot[i])
		i = (i + 1) & (pg->cap - 1);
	pg->slot[i] = r;
	pg->n++;
	return r;
}

/* Takes the (empty) region in slot i out of the table, keeping every other reachable (backward shift). */
static void drop_slot(struct pages *pg, size_t i)
{
	free(pg->slot[i]);
	pg->slot[i] = NULL;
	pg->n--;
	for (size_t j = (i + 1) & (pg->cap - 1); pg->slot[j]; j = (j + 1) & (pg->cap - 1)) {
		size_t home = hash(pg->slot[j]->index, pg->cap);
		/* Entry j may move to the hole at i when its home is not in (i, j] (cyclically). */
		int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (stays)
			continue;
		pg->slot[i] = pg->slot[j];
		pg->slot[j] = NULL;
		i = j;
	}
}

static void drop(struct pages *pg, uint64_t index)
{
	for (size_t i = hash(index, pg->cap); pg->slot[i]; i = (i + 1) & (pg->cap - 1))
		if (pg->slot[i]->index == index) {
			drop_slot(pg, i);
			return;
		}
}

int64_t pages_touch(struct pages *pg, uint64_t start, uint64_t end, uint32_t stack, int take)
{
	start &= ~(PAGE - 1);
	uint64_t added = 0, taken = 0;
	int rc = 0;
	for (uint64_t a = start; a < end;) {
		struct pages_region *r = get(pg, a >> PAGES_REGION_SHIFT);
		if (!r) {
			rc = -1;
			break;
		}
		uint64_t region_end = (a | (REGION - 1)) + 1;
		uint64_t stop = end < region_end ? end : region_end;
		for (; a < stop; a += PAGE) {
			uint32_t *s = &r->stack[(a >> PAGES_SHIFT) & (PAGES_PER_REGION - 1)];
			if (*s == stack)
				continue;
			if (*s != PAGES_NONE) {
				if (!take)
					continue;
				ledger_sub_bytes(pg->l, *s, PAGE, 1);
				*s = stack;
				taken++;
				continue;
			}
			*s = stack;
			r->resident++;
			added++;
		}
		if (!r->resident)
			drop(pg, r->index);
	}
	if ((added || taken) && ledger_add_bytes(pg->l, stack, pg->kind, (added + taken) * PAGE, added + taken))
		rc = -1;
	pg->touched += added;
	return rc ? -1 : (int64_t)(added * PAGE);
}

/* Releases the pages of [a, stop) in region r (stop within it): each one's charge leaves its stack. */
static uint64_t release_in(struct pages *pg, struct pages_region *r, uint64_t a, uint64_t stop)
{
	uint64_t n = 0;
	uint32_t run_stack = PAGES_NONE;
	uint64_t run = 0;
	for (; a < stop && r->resident; a += PAGE) {
		uint32_t *s = &r->stack[(a >> PAGES_SHIFT) & (PAGES_PER_REGION - 1)];
		if (*s == PAGES_NONE)
			continue;
		/* Consecutive pages of one stack leave together. */
		if (*s != run_stack && run) {
			ledger_sub_bytes(pg->l, run_stack, run * PAGE, run);
			run = 0;
		}
		run_stack = *s;
		run++;
		*s = PAGES_NONE;
		r->resident--;
		n++;
	}
	if (run)
		ledger_sub_bytes(pg->l, run_stack, run * PAGE, run);
	return n;
}

uint64_t pages_release(struct pages *pg, uint64_t start, uint64_t end)
{
	start &= ~(PAGE - 1);
	if (end <= start || !pg->n)
		return 0;
	uint64_t first = start >> PAGES_REGION_SHIFT, last = (end - 1) >> PAGES_REGION_SHIFT, n = 0;
	if (last - first < pg->n) {
		for (uint64_t idx = first; idx <= last; idx++) {
			struct pages_region *r = find(pg, idx);
			if (!r)
				continue;
			uint64_t lo = idx << PAGES_REGION_SHIFT, hi = lo + REGION;
			n += release_in(pg, r, start > lo ? start : lo, end < hi ? end : hi);
			if (!r->resident)
				drop(pg, idx);
		}
	} else {
		/* A range wider than the table (munmap of a huge reservation): visit the table instead. */
		for (size_t i = 0; i < pg->cap;) {
			struct pages_region *r = pg->slot[i];
			if (!r || r->index < first || r->index > last) {
				i++;
				continue;
			}
			uint64_t lo = r->index << PAGES_REGION_SHIFT, hi = lo + REGION;
			n += release_in(pg, r, start > lo ? start : lo, end < hi ? end : hi);
			if (r->resident) {
				i++;
				continue;
			}
			/* The backward shift may bring an unvisited region into slot i: look at it again. */
			drop_slot(pg, i);
		}
	}
	pg->released += n;
	return n * PAGE;
}

uint32_t pages_stack(const struct pages *pg, uint64_t addr)
{
	const struct pages_region *r = find(pg, addr >> PAGES_REGION_SHIFT);
	return r ? r->stack[(addr >> PAGES_SHIFT) & (PAGES_PER_REGION - 1)] : PAGES_NONE;
}

uint64_t pages_resident(const struct pages *pg, uint64_t start, uint64_t end)
{
	uint64_t n = 0;
	for (uint64_t a = start & ~(PAGE - 1); a < end; a += PAGE) {
		const struct pages_region *r = find(pg, a >> PAGES_REGION_SHIFT);
		if (!r) {
			a = (a | (REGION - 1)) + 1 - PAGE;
			continue;
		}
		n += r->stack[(a >> PAGES_SHIFT) & (PAGES_PER_REGION - 1)] != PAGES_NONE;
	}
	return n * PAGE;
}

int pages_move(struct pages *pg, uint64_t from, uint64_t len, uint64_t to)
{
	from &= ~(PAGE - 1);
	to &= ~(PAGE - 1);
	len = (len + PAGE - 1) & ~(PAGE - 1);
	if (!len || from == to)
		return 0;
	/* The moved pages' stacks, lifted out without touching the ledger. */
	size_t n = (size_t)(len >> PAGES_SHIFT);
	uint32_t *moved = malloc(n * sizeof(*moved));
	if (!moved)
		return -1;
	for (size_t i = 0; i < n; i++) {
		uint64_t a = from + ((uint64_t)i << PAGES_SHIFT);
		struct pages_region *r = find(pg, a >> PAGES_REGION_SHIFT);
		if (!r) {
			moved[i] = PAGES_NONE;
			continue;
		}
		uint32_t *s = &r->stack[(a >> PAGES_SHIFT) & (PAGES_PER_REGION - 1)];
		moved[i] = *s;
		if (*s != PAGES_NONE) {
			*s = PAGES_NONE;
			if (!--r->resident)
				drop(pg, r->index);
		}
	}
	/* What the destination held is gone (MREMAP_FIXED over it). */
	pages_release(pg, to, to + len);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (moved[i] == PAGES_NONE)
			continue;
		uint64_t a = to + ((uint64_t)i << PAGES_SHIFT);
		struct pages_region *r = get(pg, a >> PAGES_REGION_SHIFT);
		if (!r) {
			/* Out of memory: the page's charge leaves with it, so the totals stay true. */
			ledger_sub_bytes(pg->l, moved[i], PAGE, 1);
			rc = -1;
			continue;
		}
		r->stack[(a >> PAGES_SHIFT) & (PAGES_PER_REGION - 1)] = moved[i];
		r->resident++;
	}
	free(moved);
	return rc;
}

void pages_clear(struct pages *pg)
{
	for (size_t i = 0; i < pg->cap; i++) {
		struct pages_region *r = pg->slot[i];
		if (!r)
			continue;
		uint64_t lo = r->index << PAGES_REGION_SHIFT;
		pg->released += release_in(pg, r, lo, lo + REGION);
		free(r);
		pg->slot[i] = NULL;
	}
	pg->n = 0;
}
