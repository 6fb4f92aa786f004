/*
 * Residency: how much of a range of the target's address space is resident
 * memory, read from /proc/PID/pagemap, and the cheap counters (/proc/PID/stat,
 * statm, status) that say whether anything changed.
 */
#ifndef PTFIL_RESID_H
#define PTFIL_RESID_H

#include <stdint.h>
#include <sys/types.h>

struct resid {
	pid_t pid;
	int pagemap_fd;
	int stat_fd;
	int statm_fd;
	int use_scan;        /* PAGEMAP_SCAN works; else plain pagemap reads */
	char dir[64];        /* its memory's /proc directory: "PID", or "PID/task/TID" of a live thread */
	uint64_t scans;      /* ranges measured, for the snapshot's counters */
};

/* Opens the /proc files of pid (again after an exec: they pin the old image). Returns 0 or -1 after error(). */
int resid_open(struct resid *r, pid_t pid);
/* Closes what resid_open opened; safe on a closed resid. */
void resid_close(struct resid *r);

/*
 * Resident bytes in [start, end) (page-aligned), not counting pages that map
 * the shared zero page (a read of untouched memory). Returns 0 when the range
 * cannot be read (the process is gone).
 */
uint64_t resid_range(struct resid *r, uint64_t start, uint64_t end);
/*
 * Bytes of [start, end) in pages present and mapped by this process alone
 * (pagemap's "exclusively mapped" bit): after a fork, the pages parent and
 * child still share copy-on-write are neither's alone.
 */
uint64_t resid_range_exclusive(struct resid *r, uint64_t start, uint64_t end);

/*
 * Calls fn(ctx, s, e) for each run [s, e) of [start, end) whose pages are
 * resident and anonymous (present, not a file's page nor shared memory, not
 * the shared zero page where that can be told: a private mapping's
 * copy-on-write pages are), in order.
 * Returns 0, or -1 when the process's pages cannot be read.
 */
typedef void (*resid_range_fn)(void *ctx, uint64_t start, uint64_t end);
int resid_present(struct resid *r, uint64_t start, uint64_t end, resid_range_fn fn, void *ctx);

/* minflt + majflt of the whole process, or 0 when it cannot be read. */
uint64_t resid_faults(struct resid *r);
/* Resident set size in bytes (statm), or 0. */
uint64_t resid_rss(struct resid *r);
/* Anonymous resident bytes (statm's resident less its shared: the kernel's MM_ANONPAGES), or 0. */
uint64_t resid_anon(struct resid *r);
/* VmHWM in bytes from /proc/PID/status, or 0 when it cannot be read. */
uint64_t resid_vmhwm(pid_t pid);

#endif
