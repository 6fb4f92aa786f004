/*
 * Loaded objects of traced processes. A registry gives every mapped object a
 * global id that stacks and snapshots refer to, with its symbols and cached
 * unwind-table facts; a per-process map finds the object at an address.
 *
 * An object's symbols come only from a file verified to be the image that is
 * mapped: opened through the target (/proc/PID/map_files/..., else the same
 * path under /proc/PID/root, which also reaches files inside a container's
 * mount namespace) and checked against the build id read from the target's
 * memory. A library replaced on disk since it was loaded, or a file that
 * cannot be checked, gets no symbols: nothing is hooked in it and no unwind
 * table or name comes from it (one warning says so); its mappings are still
 * charged.
 */
#ifndef PTFIL_MODULES_H
#define PTFIL_MODULES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/u64map.h"

struct sym_file;
struct sym_cache;
struct sym_fde;

struct modreg_entry {
	char *path;             /* owned: as the target's maps print it, without " (deleted)": the path a user knows */
	uint64_t base;          /* where file offset 0 is mapped */
	unsigned dev_major, dev_minor;  /* the mapped file's device and inode, as maps print them */
	uint64_t inode;
	char *build_id;         /* owned: read from the mapped image in the target's memory, or NULL */
	struct sym_file *sym;   /* owned by the registry's cache; NULL when unreadable or not verified */
	/*
	 * A second mapping of part of an object mapped in full elsewhere (V8
	 * maps node's builtins so): named and unwound from that object's file,
	 * its base where file offset 0 would be for this part; never hooked.
	 */
	int copy;
	char *package;          /* owned: the package that installed the file, once looked for (export.c) */
	int package_done;
	/*
	 * The binary-search table of .eh_frame_hdr, as module offsets (see
	 * unwind.c); or, for an object without one, eh_own: the table built from
	 * .eh_frame (owned), which eh_table then gives the address unwind.c shows it at.
	 */
	int eh_state;           /* 0 not looked at, 1 usable, -1 none */
	uint64_t eh_hdr, eh_table, eh_count;
	struct sym_fde *eh_own;
	int glibc;              /* 0 not looked at, 1 glibc's libc (modreg_is_glibc), -1 not */
};

struct modreg {
	struct modreg_entry *v; size_t n, cap;
	struct sym_cache *cache;
	struct u64map failed;   /* objects (hash of path, file and build id) that got no symbols: reported once */
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
	double loaded_at;                /* when it was last read (tracer_now; kept by its users) */
	int dirty;                       /* objects may have been mapped or unmapped since it was read */
};

/* Storage is the caller's; _fin frees everything. */
int modreg_init(struct modreg *r);
void modreg_fin(struct modreg *r);
/*
 * Opens ptfil's own libc and loader into r's cache and starts opening their
 * source lines in the background (sym_prepare_lines), while the BPF programs
 * load and the program starts: nearly every target maps the very same files
 * (the same build ids), whose debug files are the slowest to open, and a
 * short program's snapshot would otherwise wait for them after its exit. A
 * target with other ones (a container's, a static binary) just does not use
 * them. Before any fork but the target's: the background thread is ptfil's.
 */
void modreg_warm(struct modreg *r);
/*
 * True when registry entry gid is glibc's libc (sym_is_glibc): its heap
 * blocks carry glibc's chunk header, which gives their usable size
 * (memory/alloc.h). Looked up once per entry.
 */
int modreg_is_glibc(struct modreg *r, uint32_t gid);
/* True when registry entries a and b are the same mapping of the same file (same path, base, device and inode). */
int modreg_same(const struct modreg *r, uint32_t a, uint32_t b);

void modmap_init(struct modmap *m);
void modmap_fin(struct modmap *m);
/*
 * (Re)reads the maps of process pid into m, registering new modules in r
 * (their files found and verified as above). A reading that finds nothing
 * mapped at all (the process is ending) leaves m as it was: what is known
 * mapped is never forgotten on no evidence. Returns 0 or -1 after error().
 */
int modmap_load(struct modmap *m, struct modreg *r, pid_t pid);

struct maps;
/*
 * Reads and parses the maps of process pid into maps: /proc/PID/maps, or when
 * that reads empty (the thread-group leader has exited: a zombie leader has
 * no memory to show) those of a live thread of the process. Empty only when
 * no thread has any. Returns 0, or -1 after error(); maps_fin either way.
 */
int proc_maps_read(pid_t pid, struct maps *maps);
/* The module range holding addr, or NULL. */
const struct modrange *modmap_find(const struct modmap *m, uint64_t addr);

#endif
