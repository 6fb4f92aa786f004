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

struct sym_file;

/* Opens and indexes an ELF file (.symtab, else .dynsym; also a separate debug
 * file under /usr/lib/debug/.build-id when the object is stripped).
 * Returns NULL after error() when path is not a readable ELF file. sym_close frees. */
struct sym_file *sym_open(const char *path);
void sym_close(struct sym_file *f);

/* The GNU build id as lower-case hex, or NULL. Owned by f. */
const char *sym_build_id(const struct sym_file *f);

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
/* The same, with the function's size in bytes (st_size) in *size. */
int sym_dynamic_extent(const struct sym_file *f, const char *name, uint64_t *offset, uint64_t *size);
/* The same for an exported data object (a variable). */
int sym_dynamic_data(const struct sym_file *f, const char *name, uint64_t *offset);

/* The module offset of the object's entry point. Returns 0, or -1 when it has none. */
int sym_entry(const struct sym_file *f, uint64_t *offset);

/* A cache of opened files by path, so each object is indexed once. */
struct sym_cache;
struct sym_cache *sym_cache_new(void);
/* Frees the cache and every file in it. */
void sym_cache_free(struct sym_cache *c);
/* The file for path, opened on first use; NULL (remembered, reported once) when it cannot be. Owned by c. */
struct sym_file *sym_cache_get(struct sym_cache *c, const char *path);

#endif
