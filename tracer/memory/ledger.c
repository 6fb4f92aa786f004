/* The mapping ledger: a sorted array of live ranges and the per-stack sums kept in step with it. */
#include "tracer/memory/ledger.h"

#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

void ledger_init(struct ledger *l, ledger_measure_fn measure, void *arg)
{
	memset(l, 0, sizeof(*l));
	l->measure = measure;
	l->measure_arg = arg;
}

void ledger_fin(struct ledger *l)
{
	free(l->segs);
	free(l->by_stack);
	free(l->kind);
	free(l->at_peak);
	memset(l, 0, sizeof(*l));
}

static int ensure_stack(struct ledger *l, uint32_t stack)
{
	if (stack < l->n_stacks)
		return 0;
	/* by_stack and kind have one length, n_stacks, all of it zeroed: kind grows to exactly by_stack's. */
	size_t n = l->n_stacks, n_kind = l->n_stacks;
	if (grow_array(&l->by_stack, &n, (size_t)stack + 1, sizeof(*l->by_stack), 64) ||
	    grow_array(&l->kind, &n_kind, n, sizeof(*l->kind), n))
		return -1;
	memset(l->by_stack + l->n_stacks, 0, (n - l->n_stacks) * sizeof(*l->by_stack));
	memset(l->kind + l->n_stacks, 0, n - l->n_stacks);
	l->n_stacks = n;
	return 0;
}

/* Adds (sign 1) or takes away (sign -1) a range's contribution to the sums. */
static void account(struct ledger *l, const struct ledger_seg *s, int sign)
{
	struct ledger_charge *c = &l->by_stack[s->stack];
	uint64_t size = s->end - s->start;
	if (sign > 0) {
		c->charged += s->charged;
		c->reserved += size;
		c->count++;
		l->charged += s->charged;
		l->reserved += size;
	} else {
		c->charged -= s->charged;
		c->reserved -= size;
		c->count--;
		l->charged -= s->charged;
		l->reserved -= size;
	}
}

static void remeasure(struct ledger *l, struct ledger_seg *s)
{
	ledger_measure_fn m = s->excl && l->measure_excl ? l->measure_excl : l->measure;
	uint64_t now = m(l->measure_arg, s->start, s->end);
	l->measures++;
	if (now > s->cap)
		now = s->cap;
	/* Capped memory only goes; inherited memory comes back when the other side gives its pages up. */
	if (s->cap != UINT64_MAX && !s->excl)
		s->cap = now;
	l->by_stack[s->stack].charged += now - s->charged;
	l->charged += now - s->charged;
	s->charged = now;
}

/* Index of the first range whose end is above addr. */
static size_t first_after(const struct ledger *l, uint64_t addr)
{
	size_t lo = 0, hi = l->n_segs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (l->segs[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int insert_at(struct ledger *l, size_t i, const struct ledger_seg *s)
{
	if (grow_array(&l->segs, &l->cap_segs, l->n_segs + 1, sizeof(*l->segs), 64))
		return -1;
	memmove(&l->segs[i + 1], &l->segs[i], (l->n_segs - i) * sizeof(*s));
	l->segs[i] = *s;
	l->n_segs++;
	account(l, &l->segs[i], 1);
	return 0;
}

int ledger_overlaps(const struct ledger *l, uint64_t start, uint64_t end)
{
	if (start >= end)
		return 0;
	size_t i = first_after(l, start);
	return i < l->n_segs && l->segs[i].start < end;
}

int ledger_holes(const struct ledger *l, uint64_t start, uint64_t end)
{
	if (start >= end)
		return 0;
	const struct ledger_seg *s = l->segs;
	size_t i = first_after(l, start), n = l->n_segs;
	/* Adjacent ranges may be one mapping to the kernel: a run of them counts as one. */
	if (i == n || s[i].start > start || (s[i].start == start && (i == 0 || s[i - 1].end != start)))
		return 0;
	while (s[i].end < end) {
		if (i + 1 == n || s[i + 1].start != s[i].end)
			return 0;
		i++;
	}
	return s[i].end > end || (i + 1 < n && s[i + 1].start == end);
}

int ledger_remove(struct ledger *l, uint64_t start, uint64_t end)
{
	if (start >= end)
		return 0;
	size_t i = first_after(l, start);
	while (i < l->n_segs && l->segs[i].start < end) {
		struct ledger_seg s = l->segs[i];
		account(l, &l->segs[i], -1);
		memmove(&l->segs[i], &l->segs[i + 1], (l->n_segs - i - 1) * sizeof(s));
		l->n_segs--;
		/* Keep the parts outside [start, end), measured anew. */
		if (s.start < start) {
			struct ledger_seg lo = { s.start, start, 0, s.stack, s.cap, s.excl, s.born };
			if (insert_at(l, i, &lo))
				return -1;
			remeasure(l, &l->segs[i]);
			i++;
		}
		if (s.end > end) {
			struct ledger_seg hi = { end, s.end, 0, s.stack, s.cap, s.excl, s.born };
			if (insert_at(l, i, &hi))
				return -1;
			remeasure(l, &l->segs[i]);
			i++;
		}
	}
	return 0;
}

int ledger_add(struct ledger *l, uint64_t start, uint64_t end, uint32_t stack, char kind)
{
	if (start >= end)
		return 0;
	if (ensure_stack(l, stack) || ledger_remove(l, start, end))
		return -1;
	l->kind[stack] = kind;
	struct ledger_seg s = { start, end, 0, stack, UINT64_MAX, 0, l->epoch++ };
	size_t i = first_after(l, start);
	if (insert_at(l, i, &s))
		return -1;
	remeasure(l, &l->segs[i]);
	return 0;
}

int ledger_add_capped(struct ledger *l, uint64_t start, uint64_t end, uint32_t stack, char kind)
{
	if (ledger_add(l, start, end, stack, kind))
		return -1;
	size_t i = first_after(l, start);
	l->segs[i].cap = l->segs[i].charged;
	return 0;
}

int ledger_add_inherited(struct ledger *l, uint64_t start, uint64_t end, uint32_t stack, char kind)
{
	if (ledger_add(l, start, end, stack, kind))
		return -1;
	size_t i = first_after(l, start);
	struct ledger_seg *s = &l->segs[i];
	s->cap = s->charged;  /* resident at the fork: the most it can hold */
	s->excl = 1;
	remeasure(l, s);
	return 0;
}

void ledger_refresh_inherited(struct ledger *l)
{
	for (size_t i = 0; i < l->n_segs; i++)
		if (l->segs[i].excl)
			remeasure(l, &l->segs[i]);
}

int ledger_add_bytes(struct ledger *l, uint32_t stack, char kind, uint64_t bytes, uint64_t count)
{
	if (ensure_stack(l, stack))
		return -1;
	l->kind[stack] = kind;
	struct ledger_charge *c = &l->by_stack[stack];
	c->charged += bytes;
	c->reserved += bytes;
	c->count += count;
	l->charged += bytes;
	l->reserved += bytes;
	return 0;
}

void ledger_sub_bytes(struct ledger *l, uint32_t stack, uint64_t bytes, uint64_t count)
{
	struct ledger_charge *c = &l->by_stack[stack];
	c->charged -= bytes;
	c->reserved -= bytes;
	c->count -= count;
	l->charged -= bytes;
	l->reserved -= bytes;
}

uint64_t ledger_epoch(const struct ledger *l)
{
	return l->epoch;
}

int ledger_remove_older(struct ledger *l, uint64_t start, uint64_t end, uint64_t epoch)
{
	uint64_t cur = start;
	while (cur < end) {
		/* The gap up to the next range added since epoch goes; that range stays. */
		uint64_t upto = end, resume = end;
		for (size_t i = first_after(l, cur); i < l->n_segs && l->segs[i].start < end; i++)
			if (l->segs[i].born >= epoch) {
				upto = l->segs[i].start > cur ? l->segs[i].start : cur;
				resume = l->segs[i].end;
				break;
			}
		if (ledger_remove(l, cur, upto))
			return -1;
		cur = resume;
	}
	return 0;
}

int ledger_move(struct ledger *l, uint64_t from, uint64_t len, uint64_t to)
{
	return ledger_move_older(l, from, len, to, UINT64_MAX);
}

int ledger_move_older(struct ledger *l, uint64_t from, uint64_t len, uint64_t to, uint64_t epoch)
{
	if (!len || from == to)
		return 0;
	/* Cut the moved range out at its edges, lift its ranges out, then put them back shifted. */
	size_t i = first_after(l, from);
	size_t n = 0, cap = 0;
	struct ledger_seg *moved = NULL;
	uint64_t end = from + len;
	for (size_t j = i; j < l->n_segs && l->segs[j].start < end; j++)
		cap++;
	if (cap) {
		moved = malloc(cap * sizeof(*moved));
		if (!moved)
			return -1;
		for (size_t j = i; j < l->n_segs && l->segs[j].start < end; j++) {
			struct ledger_seg s = l->segs[j];
			if (s.born >= epoch)
				continue;
			if (s.start < from)
				s.start = from;
			if (s.end > end)
				s.end = end;
			moved[n++] = s;
		}
	}
	int rc = ledger_remove_older(l, from, end, epoch);
	if (!rc)
		rc = ledger_remove(l, to, to + len);
	for (size_t k = 0; !rc && k < n; k++) {
		struct ledger_seg s = moved[k];
		s.start = s.start - from + to;
		s.end = s.end - from + to;
		s.charged = 0;
		size_t at = first_after(l, s.start);
		rc = insert_at(l, at, &s);
		if (!rc)
			remeasure(l, &l->segs[at]);
	}
	free(moved);
	return rc;
}

void ledger_refresh(struct ledger *l, uint64_t start, uint64_t end)
{
	for (size_t i = first_after(l, start); i < l->n_segs && l->segs[i].start < end; i++)
		remeasure(l, &l->segs[i]);
}

void ledger_refresh_all(struct ledger *l)
{
	for (size_t i = 0; i < l->n_segs; i++)
		remeasure(l, &l->segs[i]);
}

int ledger_note_peak(struct ledger *l, double time, uint64_t rss)
{
	if (l->has_peak && l->charged <= l->peak.charged)
		return 0;
	l->peak.time = time;
	l->peak.charged = l->charged;
	l->peak.reserved = l->reserved;
	l->peak.rss = rss;
	l->has_peak = 1;
	l->peak_stale = 1;
	return 1;
}

int ledger_settle_peak(struct ledger *l)
{
	if (!l->peak_stale)
		return 0;
	if (grow_array(&l->at_peak, &l->n_at_peak, l->n_stacks, sizeof(*l->at_peak), l->n_stacks))
		return -1;
	if (l->n_stacks)
		memcpy(l->at_peak, l->by_stack, l->n_stacks * sizeof(*l->at_peak));
	l->peak_stale = 0;
	return 0;
}

int ledger_check_peak(struct ledger *l, double time, uint64_t rss)
{
	if (l->has_peak && l->charged <= l->peak.charged)
		return 0;
	/* A copy of by_stack: exactly n_stacks (a minimum of n_stacks leaves nothing to double). */
	if (grow_array(&l->at_peak, &l->n_at_peak, l->n_stacks, sizeof(*l->at_peak), l->n_stacks))
		return -1;
	if (l->n_stacks)
		memcpy(l->at_peak, l->by_stack, l->n_stacks * sizeof(*l->at_peak));
	l->peak.time = time;
	l->peak.charged = l->charged;
	l->peak.reserved = l->reserved;
	l->peak.rss = rss;
	l->has_peak = 1;
	l->peak_stale = 0;
	return 1;
}
