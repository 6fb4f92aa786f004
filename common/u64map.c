/* Open addressing with linear probing: interning is read-mostly and keys are never removed. */
#include "common/u64map.h"

#include <stdlib.h>
#include <string.h>

void u64map_init(struct u64map *m) { memset(m, 0, sizeof(*m)); }

void u64map_fin(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	u64map_init(m);
}

static size_t slot_of(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ULL;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

uint32_t u64map_get(const struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return U64MAP_NONE;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->vals[i] == U64MAP_NONE)
			return U64MAP_NONE;
		if (m->keys[i] == key)
			return m->vals[i];
	}
}

static void place(uint64_t *keys, uint32_t *vals, size_t cap, uint64_t key, uint32_t val)
{
	size_t i = slot_of(key, cap);
	while (vals[i] != U64MAP_NONE && keys[i] != key)
		i = (i + 1) & (cap - 1);
	keys[i] = key;
	vals[i] = val;
}

int u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 4 > m->cap * 3) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		uint64_t *keys = malloc(cap * sizeof(*keys));
		uint32_t *vals = malloc(cap * sizeof(*vals));
		if (!keys || !vals) {
			free(keys);
			free(vals);
			return -1;
		}
		memset(vals, 0xff, cap * sizeof(*vals));
		for (size_t i = 0; i < m->cap; i++)
			if (m->vals[i] != U64MAP_NONE)
				place(keys, vals, cap, m->keys[i], m->vals[i]);
		free(m->keys);
		free(m->vals);
		m->keys = keys;
		m->vals = vals;
		m->cap = cap;
	}
	if (u64map_get(m, key) == U64MAP_NONE)
		m->n++;
	place(m->keys, m->vals, m->cap, key, val);
	return 0;
}
