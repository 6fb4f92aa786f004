/*
 * ELF files, read with libelf: function names for module offsets, build ids,
 * and the bytes the remote unwinder needs. Takes file paths, never a pid, so it
 * is testable on fixture files and usable offline.
 *
 * A "module offset" is an address in the target minus the module base (the
 * address where file offset 0 of the object is mapped; see maps_module_base).
 */
#ifndef PTFIL_SYM_H
#define PTFIL_SYM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

struct sym_file;

/*
 * Opens and indexes an ELF file: function names from its .symtab, else from
 * its separate debug file (found on this machine as debugfile.h says: by
 * build id, then by .gnu_debuglink), else from MiniDebugInfo, else from
 * .dynsym (exported functions only). The separate debug file is also looked
 * for when the object has a .symtab but no DWARF, for sym_source.
 * Returns NULL after error() when path is not a readable ELF file. sym_close frees.
 */
struct sym_file *sym_open(const char *path);
/*
 * The same for the file open on fd, named name in messages (the path a user
 * knows, when fd was opened through another). fd stays the caller's to close,
 * which it may do at once.
 */
struct sym_file *sym_open_fd(int fd, const char *name);
/*
 * The same for an object the target names name and sees under root
 * ("/proc/PID/root", or NULL for ours): its debug files are looked for under
 * root first, then on the host (either way matched by build id or CRC).
 */
struct sym_file *sym_open_fd_at(int fd, const char *name, const char *root);
void sym_close(struct sym_file *f);

/* Where a file's function names come from. */
enum sym_names {
	SYM_NAMES_NONE = 0,   /* no symbol table at all */
	SYM_NAMES_EXPORTS,    /* .dynsym only: exported functions; static ones show as their neighbours */
	SYM_NAMES_MINI,       /* MiniDebugInfo (with .dynsym) */
	SYM_NAMES_FULL,       /* a full .symtab, the object's own or its debug file's */
};
enum sym_names sym_names(const struct sym_file *f);

/*
 * Source lines (libdw, symbols/srcline.h) for module offset `offset`:
 * innermost first, the calls inlined there, then the function holding them.
 * Writes up to SRCLINE_MAX entries to out and returns their number; 0 when
 * the object has no DWARF for it, -1 when memory runs out. The DWARF is
 * opened on first use, not by sym_open: tracing never pays for it.
 */
struct sym_srcframe;
int sym_source(struct sym_file *f, uint64_t offset, struct sym_srcframe *out);
/*
 * Starts opening f's DWARF in the background when it is in a separate debug
 * file (libc6-dbg's sections are compressed: tens of milliseconds to
 * inflate), so that the snapshot's first sym_source finds it ready instead of
 * paying for it after the program's exit. Once per file; nothing when f has
 * no such file or its DWARF is open already. sym_source waits for the open
 * under way, or does it itself when it has not started.
 */
void sym_prepare_lines(struct sym_file *f);
/* Whether f has DWARF for sym_source (opens it). */
int sym_has_lines(struct sym_file *f);
/*
 * Asks the debuginfod servers in DEBUGINFOD_URLS for f's debug file, by
 * build id, once per file, when f has no DWARF yet. Returns 0 when f has
 * DWARF afterwards, else -1 with *why (static text).
 */
int sym_fetch_debug(struct sym_file *f, const char **why);
/* Where f's DWARF or names came from, for the report ("a debug file found by build id"), or NULL. */
const char *sym_debug_origin(const struct sym_file *f);

/* The GNU build id as lower-case hex, or NULL. Owned by f. */
const char *sym_build_id(const struct sym_file *f);

/*
 * An object as it is loaded somewhere (a process's memory, which only the
 * tracer reads): read copies len bytes found at module offset off into buf and
 * returns 0, or -1 when they cannot be read. The ELF and program headers lie
 * at module offset 0 of every object the kernel or ld.so maps.
 */
struct sym_image {
	int (*read)(void *ctx, uint64_t off, void *buf, size_t len);
	void *ctx;
};

/*
 * The GNU build id of a loaded object, from its program headers and PT_NOTE
 * segments, as lower-case hex in *id (the caller frees it; NULL when the object
 * has none). Returns 0, or -1 when im cannot be read as a loaded x86-64 ELF object.
 */
int sym_image_build_id(const struct sym_image *im, char **id);

/* 1 when the loaded object's ELF header and program headers are f's byte for byte, else 0. */
int sym_image_same_headers(const struct sym_file *f, const struct sym_image *im);

/*
 * The function containing module offset `offset`, or NULL when none does.
 * *delta (when not NULL) gets offset minus the symbol's start. Owned by f.
 * Callers pass return addresses minus one for frames other than the innermost.
 */
const char *sym_lookup(const struct sym_file *f, uint64_t offset, uint64_t *delta);

/*
 * The readable form of a C++ (Itanium ABI) symbol name, "operator new(unsigned
 * long)" for "_Znwm", in a string the caller frees; NULL when name is not a
 * mangled C++ name (C functions stay as they are) or cannot be demangled.
 */
char *sym_demangle(const char *name);

/*
 * Copies len bytes found at module offset `offset` in the object's loaded
 * image (translated through its PT_LOAD segments to file contents). Returns 0,
 * or -1 (silently) when any byte is not backed by the file (bss, out of range).
 */
int sym_read(const struct sym_file *f, uint64_t offset, void *buf, size_t len);

/*
 * The module offset at which file offset foff is loaded (the PT_LOAD segment
 * whose file bytes hold it). Returns 0, or -1 (silently) when no segment does.
 */
int sym_file_offset_to_module(const struct sym_file *f, uint64_t foff, uint64_t *offset);

/*
 * Where .eh_frame_hdr (PT_GNU_EH_FRAME) lies, as a module offset and a size.
 * Returns 0, or -1 (silently) when the object has none.
 */
int sym_eh_frame_hdr(const struct sym_file *f, uint64_t *offset, uint64_t *size);

/*
 * The module offset of the function exported as `name` in the dynamic symbol
 * table (where a hook on it must go). Returns 0, or -1 (silently) when the
 * object does not define it.
 */
int sym_dynamic(const struct sym_file *f, const char *name, uint64_t *offset);
/*
 * True when f is glibc's libc (it exports gnu_get_libc_version): its malloc
 * family's blocks carry glibc's chunk header, and its malloc returns only
 * through ret instructions. False for NULL.
 */
int sym_is_glibc(const struct sym_file *f);
/* The same, with the function's size in bytes (st_size) in *size. */
int sym_dynamic_extent(const struct sym_file *f, const char *name, uint64_t *offset, uint64_t *size);
/* The same for an exported data object (a variable). */
int sym_dynamic_data(const struct sym_file *f, const char *name, uint64_t *offset);

/* The module offset of the object's entry point. Returns 0, or -1 when it has none. */
int sym_entry(const struct sym_file *f, uint64_t *offset);

/*
 * For an object without .eh_frame_hdr (a static executable: gcc links those
 * without one), the search table that header would hold, built from
 * .eh_frame: one row per FDE, sorted by pc, laid out as the header's table
 * (pairs of signed 32-bit offsets) with module offsets as values, so that
 * module offset 0 serves as its base. Returns 0 with *table (the caller
 * frees it) and its rows in *n, or -1 when there is no usable .eh_frame.
 */
struct sym_fde {
	int32_t pc, fde;
};
int sym_eh_frame_table(const struct sym_file *f, struct sym_fde **table, size_t *n);

/*
 * Opened files, each indexed once, found by what they are rather than where:
 * by build id, or (a file without one) by its device, inode, size and
 * modification time. Two different files at one path (two containers, a
 * library before and after an upgrade) never share symbols, and one build
 * found at two paths is indexed once.
 */
struct sym_cache;
struct sym_cache *sym_cache_new(void);
/* Frees the cache and every file in it. */
void sym_cache_free(struct sym_cache *c);
/* The cached file with this build id (hex), or NULL. Owned by c. */
struct sym_file *sym_cache_find(struct sym_cache *c, const char *build_id);
/* The cached file without a build id that st (from fstat) describes, or NULL. Owned by c. */
struct sym_file *sym_cache_find_file(struct sym_cache *c, const struct stat *st);
/*
 * Gives f to c and returns the file cached under f's key: f, or the one cached
 * before with the same key (f is then closed). NULL after error() when out of
 * memory (f closed too). Owned by c.
 */
struct sym_file *sym_cache_add(struct sym_cache *c, struct sym_file *f);

#endif
