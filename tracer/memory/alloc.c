/* The heap-event sink (memory/alloc.h): one path from a source's event to the ledger. */
#include "tracer/memory/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/snap.h"
#include "common/u64map.h"
#include "tracer/core/session.h"
#include "tracer/memory/heap.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/tree.h"

int alloc_active(const struct tracee *t)
{
	return t->call->active;
}

int alloc_left_behind(struct tracee *t, uint64_t sp, enum alloc_slot slot)
{
	struct alloc_call *c = t->call;
	if (!c->active)
		return 0;
	int gone = slot == ALLOC_SLOT_UNKNOWN ? sp > c->sp : slot == ALLOC_SLOT_OVERWRITTEN;
	if (gone)
		c->active = 0;
	return gone;
}

int alloc_follow(struct tracer *T, struct tracee *t)
{
	if (t->call->active) {
		T->counts.nested_calls++;
		t->p->counts.nested_calls++;
		return 0;
	}
	return t->p->profiled && t->p->ready;
}

/* A block about to lose its memory: measured, and the peak checked, first. */
static void before_free(struct tracer *T, struct proc *p, uint64_t ptr)
{
	const struct heap_block *b = heap_find(p->heap, ptr);
	if (!b)
		return;
	if (b->large)
		peak_before_release(T, p, b->ptr, b->ptr + b->size);
	else
		peak_before_small_release(T, p);
}

void alloc_enter(struct tracer *T, struct tracee *t, enum alloc_fn fn, const uint64_t args[3], uint64_t sp, int usable)
{
	struct alloc_call *c = t->call;
	c->active = 1;
	c->fn = fn;
	c->usable = usable;
	for (int i = 0; i < 3; i++)
		c->args[i] = args[i];
	c->sp = sp;
	c->stack = 0;
	if ((fn == ALLOC_REALLOC || fn == ALLOC_REALLOCARRAY) && args[0])
		before_free(T, t->p, args[0]);
}

void alloc_set_stack(struct tracee *t, uint32_t stack)
{
	t->call->stack = stack;
}

void alloc_forget(struct tracee *t)
{
	t->call->active = 0;
}

static uint64_t mul_or_zero(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? 0 : r;
}

uint64_t alloc_chunk_usable(uint64_t word)
{
	uint64_t chunk = word & ~(uint64_t)7;
	uint64_t hdr = (word & 2) ? 16 : 8; /* IS_MMAPPED */
	if (chunk < 2 * hdr || chunk >= (1ULL << 47))
		return 0;
	return chunk - hdr;
}

void alloc_exit(struct tracer *T, struct tracee *t, uint64_t result, uint64_t block, uint64_t chunk_word)
{
	struct alloc_call *c = t->call;
	struct proc *p = t->p;
	const uint64_t *a = c->args;
	uint64_t ptr = result, size = 0;
	c->active = 0;
	switch (c->fn) {
	case ALLOC_MALLOC: size = a[0]; break;
	case ALLOC_CALLOC: size = mul_or_zero(a[0], a[1]); break;
	case ALLOC_VALLOC: size = a[0]; break;
	case ALLOC_PVALLOC: {
		uint64_t ps = p->heap->page_size;
		size = a[0] ? (a[0] + ps - 1) & ~(ps - 1) : ps;
		break;
	}
	case ALLOC_ALIGNED_ALLOC:
	case ALLOC_MEMALIGN: size = a[1]; break;
	case ALLOC_POSIX_MEMALIGN:
		/* Returns 0 and the block through its first argument. */
		ptr = result == 0 ? block : 0;
		size = a[2];
		break;
	case ALLOC_REALLOC:
	case ALLOC_REALLOCARRAY:
		size = c->fn == ALLOC_REALLOC ? a[1] : mul_or_zero(a[1], a[2]);
		/* realloc(p, 0) frees p and returns NULL; a failed realloc leaves p alone. */
		if (a[0] && (result || size == 0))
			heap_free(p->heap, a[0]);
		break;
	default:
		return;
	}
	if (!ptr)
		return;
	/* The usable size, where the chunk header was read and holds at least what was asked for. */
	uint64_t usable = c->usable && chunk_word ? alloc_chunk_usable(chunk_word) : 0;
	int by_usable = usable >= size && usable > 0;
	if (heap_alloc(p->heap, ptr, by_usable ? usable : size, c->stack)) {
		warning("out of memory recording a block");
	} else if (by_usable) {
		T->counts.usable_blocks++;
		p->counts.usable_blocks++;
	}
}

void alloc_free(struct tracer *T, struct tracee *t, uint64_t ptr)
{
	if (!ptr)
		return;
	before_free(T, t->p, ptr);
	heap_free(t->p->heap, ptr);
}

void alloc_block(struct tracer *T, struct tracee *t, uint64_t ptr, uint64_t usable, uint32_t stack)
{
	struct proc *p = t->p;
	if (!usable) {
		T->counts.unsized_blocks++;
		p->counts.unsized_blocks++;
	} else if (heap_alloc(p->heap, ptr, usable, stack)) {
		warning("out of memory recording a block");
	} else {
		T->counts.usable_blocks++;
		p->counts.usable_blocks++;
		T->counts.one_stop_blocks++;
		p->counts.one_stop_blocks++;
	}
}

int alloc_touch_init(struct touch *tv)
{
	memset(tv, 0, sizeof(*tv));
	/* Its charges are bytes no range measures: nothing to measure. */
	ledger_init(&tv->l, NULL, NULL);
	pages_init(&tv->pages, &tv->l, 't'); /* SNAP_KIND_TOUCH */
	return 0;
}

void alloc_touch_fin(struct touch *tv)
{
	pages_fin(&tv->pages);
	ledger_fin(&tv->l);
	free(tv->other);
	tv->other = NULL;
	free(tv->links);
	tv->links = NULL;
	free(tv->gone);
	tv->gone = NULL;
	tv->n_gone = tv->cap_gone = 0;
}

static double monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The alloc ledger's range holding addr (segs ascending), or NULL. */
static const struct ledger_seg *seg_at(const struct ledger *l, uint64_t addr)
{
	size_t lo = 0, hi = l->n_segs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->segs[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < l->n_segs && l->segs[lo].start <= addr ? &l->segs[lo] : NULL;
}

/* Both views: each resident page's touch stack against the alloc stack of the range it lies in. */
static void make_links(struct proc *p)
{
	struct touch *tv = p->touch;
	double now = monotonic();
	if (tv->n_links && now - tv->links_at < ALLOC_LINKS_SECONDS)
		return;
	tv->links_at = now;
	tv->n_links = 0;
	struct u64map idx;
	u64map_init(&idx);
	for (size_t i = 0; i < tv->pages.cap; i++) {
		const struct pages_region *r = tv->pages.slot[i];
		if (!r)
			continue;
		uint64_t base = r->index << PAGES_REGION_SHIFT;
		for (uint32_t k = 0; k < PAGES_PER_REGION; k++) {
			uint32_t ts = r->stack[k];
			if (ts == PAGES_NONE)
				continue;
			const struct ledger_seg *sg = seg_at(p->ledger, base + ((uint64_t)k << PAGES_SHIFT));
			if (!sg)
				continue;
			uint64_t key = (uint64_t)ts << 32 | sg->stack;
			uint32_t j = u64map_get(&idx, key);
			if (j == U64MAP_NONE) {
				if (grow_array(&tv->links, &tv->cap_links, tv->n_links + 1, sizeof(*tv->links), 64) ||
				    u64map_put(&idx, key, (uint32_t)tv->n_links))
					goto out;
				j = (uint32_t)tv->n_links++;
				tv->links[j] = (struct alloc_link){ ts, sg->stack, 0 };
			}
			tv->links[j].bytes += (uint64_t)1 << PAGES_SHIFT;
		}
	}
out:
	u64map_fin(&idx);
}

struct ledger *alloc_view_ledger(struct proc *p)
{
	return p->touch ? &p->touch->l : p->ledger;
}

void alloc_touch_settle(struct proc *p)
{
	struct touch *tv = p->touch;
	if (!tv || !tv->l.peak_stale)
		return;
	if (ledger_settle_peak(&tv->l))
		warning("out of memory copying the peak");
	/* The alloc view at the same moment, for the report's other side. */
	const struct ledger *a = p->ledger;
	if (grow_array(&tv->other, &tv->cap_other, a->n_stacks, sizeof(*tv->other), a->n_stacks)) {
		tv->n_other = 0;
		return;
	}
	tv->n_other = a->n_stacks;
	if (a->n_stacks)
		memcpy(tv->other, a->by_stack, a->n_stacks * sizeof(*tv->other));
	if (tv->both)
		make_links(p);
}

void alloc_resident(struct tracer *T, struct proc *p, uint64_t start, uint64_t end, uint32_t stack, double time,
		    uint64_t rss, int take)
{
	struct touch *tv = p->touch;
	if (!tv || !p->profiled || !p->ready)
		return;
	tv->faults++;
	int64_t added = pages_touch(&tv->pages, start, end, stack, take);
	if (added < 0) {
		warning("out of memory recording resident pages");
		return;
	}
	tv->resident_bytes_seen += (uint64_t)added;
	if (added) {
		/* The RSS then was at least what is charged now: a figure read late (a scan at exit) is not. */
		uint64_t floor = tv->l.charged + tv->file_rss;
		ledger_note_peak(&tv->l, time, rss > floor ? rss : floor);
		/* The tree's sum can be a new high without this process's own (its image was replaced since). */
		tree_check_peak(T);
	}
}

void alloc_released(struct tracer *T, struct proc *p, uint64_t start, uint64_t end)
{
	struct touch *tv = p->touch;
	if (!tv)
		return;
	alloc_touch_settle(p);
	tree_settle(T);
	pages_release(&tv->pages, start, end);
}

/* [from, from + len) of p moved to to. */
static void alloc_moved(struct tracer *T, struct proc *p, uint64_t from, uint64_t len, uint64_t to)
{
	struct touch *tv = p->touch;
	if (!tv)
		return;
	(void)T;
	alloc_touch_settle(p);
	if (pages_move(&tv->pages, from, len, to))
		warning("out of memory moving resident pages");
}

void alloc_remapped(struct tracer *T, struct proc *p, uint64_t old, uint64_t oldlen, uint64_t newlen, uint64_t to)
{
	if (newlen < oldlen)
		alloc_released(T, p, old + newlen, old + oldlen);
	if (to != old)
		alloc_moved(T, p, old, newlen < oldlen ? newlen : oldlen, to);
}
