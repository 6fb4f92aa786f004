/* A small open-addressing hash map from 64-bit keys to 32-bit values, for interning. */
#ifndef PTFIL_U64MAP_H
#define PTFIL_U64MAP_H

#include <stddef.h>
#include <stdint.h>

#define U64MAP_NONE UINT32_MAX

struct u64map {
	uint64_t *keys;   /* owned */
	uint32_t *vals;   /* owned; U64MAP_NONE marks an empty slot */
	size_t cap;       /* power of two, or 0 */
	size_t n;
};

/* Storage is the caller's; u64map_fin frees the tables. */
void u64map_init(struct u64map *m);
void u64map_fin(struct u64map *m);
/* The value for key, or U64MAP_NONE. */
uint32_t u64map_get(const struct u64map *m, uint64_t key);
/* Sets key to val (val != U64MAP_NONE). Returns 0, or -1 when out of memory. */
int u64map_put(struct u64map *m, uint64_t key, uint32_t val);

#endif
