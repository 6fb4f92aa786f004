/*
 * Loaded objects of traced processes. A registry gives every (path, base)
 * pair a global id that stacks and snapshots refer to, with its symbols and
 * cached unwind-table facts; a per-process map finds the object at an address.
 */
#ifndef PTFIL_MODULES_H
#define PTFIL_MODULES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sym_file;
struct sym_cache;

struct modreg_entry {
	char *path;             /* owned */
	uint64_t base;          /* where file offset 0 is mapped */
	struct sym_file *sym;   /* owned by the registry's cache; NULL when unreadable */
	/* .eh_frame_hdr binary-search table, as module offsets (see unwind.c) */
	int eh_state;           /* 0 not looked at, 1 usable, -1 none */
	uint64_t eh_hdr, eh_table, eh_count;
};

struct modreg {
	struct modreg_entry *v; size_t n, cap;
	struct sym_cache *cache;
};

/* One mapped range of a module in one process. */
struct modrange {
	uint64_t start, end;
	uint32_t gid;           /* index in the registry */
	unsigned perms;         /* MAPS_* bits */
};

struct modmap {
	struct modrange *v; size_t n;  /* ascending, owned */
	uint64_t stack_start, stack_end; /* the [stack] mapping when loaded, or 0 */
	unsigned loads;                  /* times loaded, for counters */
};

/* Storage is the caller's; _fin frees everything. */
int modreg_init(struct modreg *r);
void modreg_fin(struct modreg *r);

void modmap_init(struct modmap *m);
void modmap_fin(struct modmap *m);
/* (Re)reads /proc/PID/maps into m, registering new modules in r. Returns 0 or -1 after error(). */
int modmap_load(struct modmap *m, struct modreg *r, pid_t pid);

struct maps;
/* Reads and parses /proc/PID/maps into maps. Returns 0, or -1 after error(); maps_fin either way. */
int proc_maps_read(pid_t pid, struct maps *maps);
/* The module range holding addr, or NULL. */
const struct modrange *modmap_find(const struct modmap *m, uint64_t addr);

#endif
