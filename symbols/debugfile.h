/*
 * Separate debug files: where a distribution (or a build's own `objcopy
 * --only-keep-debug`) put the symbols and DWARF that the installed object
 * lost to `strip`. Looked for in gdb's order: by build id under each debug
 * directory, then by the object's .gnu_debuglink beside the object, in its
 * .debug subdirectory and under each debug directory; and, on request, from
 * the debuginfod servers in DEBUGINFOD_URLS. Takes paths and build ids,
 * never a pid: the caller passes the target's root when its files are seen
 * through one.
 */
#ifndef PTFIL_DEBUGFILE_H
#define PTFIL_DEBUGFILE_H

#include <stdint.h>

/* How a debug file was found (for the report and the tests). */
enum debugfile_how {
	DEBUGFILE_NONE = 0,
	DEBUGFILE_BUILD_ID,    /* DIR/.build-id/xx/rest.debug */
	DEBUGFILE_LINK,        /* .gnu_debuglink */
	DEBUGFILE_DEBUGINFOD,  /* fetched from a debuginfod server */
};

/*
 * The debug directories, in order: PTFIL_DEBUG_DIRS when set (colon-separated,
 * as gdb's debug-file-directory), else /usr/lib/debug. Returns the number of
 * directories and points *dirs at them (static storage, read once).
 */
size_t debugfile_dirs(const char *const **dirs);

/*
 * Opens the local debug file of the object that the target calls path.
 * build_id: the object's build id in hex, or NULL; link: the file name its
 * .gnu_debuglink names, or NULL, with crc its CRC-32. root: a directory the
 * target's files are seen under ("/proc/PID/root"), searched before the
 * host's own, or NULL. A file found by build id is trusted; one found by
 * debuglink must carry the same build id when the object has one, else its
 * CRC-32 must be crc. Returns an open descriptor (the caller closes it) and
 * sets *how, or -1 when there is none (silently: the common case).
 */
int debugfile_find(const char *path, const char *root, const char *build_id, const char *link, uint32_t crc,
		   enum debugfile_how *how);

/*
 * Fetches the debug file of build id build_id (hex) from the servers in
 * DEBUGINFOD_URLS, through libdebuginfod and its cache. Returns an open
 * descriptor, or -1 with *why (static text) saying why not: the variable is
 * unset, no server has it, the network failed.
 */
int debugfile_fetch(const char *build_id, const char **why);
/* Ends the debuginfod client debugfile_fetch made, if any. */
void debugfile_fin(void);

/*
 * The Debian package that installed the file at path ("libc6",
 * "python3.11-minimal"), from dpkg's file lists, or NULL (not installed by
 * dpkg, or no dpkg). The caller frees it. Reads every list: call it for the
 * few modules a report asks about, not per frame.
 */
char *debugfile_package(const char *path);
/* The same for path[0..n) in one reading of the lists: pkg[i] (the caller frees each) or NULL. */
void debugfile_packages(const char *const *path, size_t n, char **pkg);

/* Whether DEBUGINFOD_URLS names at least one server. */
int debugfile_have_servers(void);

#endif
