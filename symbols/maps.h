/* Parsing the text of /proc/PID/maps into entries and modules; works on text, never on a pid. */
#ifndef PTFIL_MAPS_H
#define PTFIL_MAPS_H

#include <stddef.h>
#include <stdint.h>

enum {
	MAPS_R = 1, MAPS_W = 2, MAPS_X = 4,
	MAPS_SHARED = 8, /* 's' in the fourth column; 'p' otherwise */
};

struct maps_entry {
	uint64_t start, end;   /* [start, end) */
	uint64_t offset;       /* file offset of start */
	unsigned perms;        /* MAPS_* bits */
	unsigned dev_major, dev_minor;
	uint64_t inode;
	char *path;            /* NULL when anonymous; "[stack]", "[heap]", "[vdso]"... as printed; owned */
	int deleted;           /* path ended with " (deleted)" (stripped from path) */
};

struct maps {
	struct maps_entry *v;  /* ascending by start; owned */
	size_t n;
};

/*
 * Parses maps text (need not be NUL-terminated) into m, which it initializes.
 * Returns 0, or -1 after error() naming the line that does not parse; m is then
 * empty. The caller calls maps_fin either way.
 */
int maps_parse(const char *text, size_t len, struct maps *m);
void maps_fin(struct maps *m);

/* The entry containing addr, or NULL. */
const struct maps_entry *maps_find(const struct maps *m, uint64_t addr);

/*
 * The base of the module that entry e belongs to: the start of the nearest entry
 * at or below e with the same path and inode and file offset 0, with nothing
 * but mappings of that file and anonymous ones between. Returns 0 and sets
 * *base, or -1 when e is anonymous or no such entry exists (a part of a file
 * mapped alone: a copy of a program's code elsewhere, a data file).
 */
int maps_module_base(const struct maps *m, const struct maps_entry *e, uint64_t *base);

/*
 * True for a mapping that holds no file: anonymous, [heap], [stack], [stack:TID],
 * named anonymous memory ([anon:NAME], [anon_shmem:NAME]) and shared anonymous
 * memory (the kernel prints it as "/dev/zero (deleted)").
 */
int maps_entry_is_anon(const struct maps_entry *e);

#endif
