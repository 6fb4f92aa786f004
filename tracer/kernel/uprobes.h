/*
 * The kernel path's machinery (docs/heap-events.md): ptfil's BPF programs
 * loaded into the kernel, uprobes attached to a process's malloc family
 * through uprobe_multi links, and the ring buffer they write, read in the
 * order the records were written. Knows nothing of the tracer: records go to
 * a callback. The kernel removes the probes when the links' fds close,
 * however ptfil ends.
 */
#ifndef PTFIL_KPROBES_H
#define PTFIL_KPROBES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tracer/kernel/kheap_rec.h"

#define KPROBES_DEFAULT_RING (64u << 20)
#define KPROBES_MIN_RING (64u << 10)

struct kprobes {
	void *obj;                  /* struct bpf_object, owned */
	int prog_entry, prog_return, prog_free, prog_call, prog_sys_exit;
	int sys_exit_link;          /* the raw tracepoint of system calls' returns, -1 until a wrapper's probe needs it */
	int ring_fd, counters_fd, config_fd;
	int pyprocs_fd, pycodes_fd; /* the Python reader's processes and the code objects ptfil named (pyread.bpf.h) */
	size_t ring_size;
	size_t page;
	void *cons;                 /* the consumer page (read-write) */
	void *prod;                 /* the producer page, then the data mapped twice (read-only) */
	uint64_t records;           /* records read */
	uint64_t waits;             /* records found still being written, waited for */
};

/* What a probe site is, and so which programs it gets. */
enum kprobe_kind {
	KPS_ALLOC,                  /* an allocating function: entry and return */
	KPS_FREE,                   /* free: its entry */
	KPS_CALL,                   /* a call the thread must stop at (KH_CALL), its entry only */
};

/* One probe site: a function's file offset in a module, and what it is. */
struct kprobe_site {
	uint64_t offset;
	uint32_t fn;                /* enum hook_fn, the record's fn */
	enum kprobe_kind kind;
};

#define KPROBES_LINKS 4         /* links one kprobes_attach can make */

/*
 * Loads the programs with a ring of ring_bytes (a power of two, at least a
 * page), maps the ring, and makes sure this kernel attaches uprobe_multi links
 * for ptfil (asked without probing anything). Returns 0, or -1
 * with why (a sentence for the user: what is missing, what grants it) filled.
 */
int kprobes_open(struct kprobes *k, size_t ring_bytes, char *why, size_t whylen);
/* Unmaps and closes everything; links stay with their owners (kprobes_detach). */
void kprobes_close(struct kprobes *k);

/*
 * Probes the sites of module file path (as the kernel can open it) in process
 * pid only: at most KPROBES_LINKS links, their fds in fds (-1 where none).
 * All or nothing: returns 0, or -1 with errno and no link left. The first
 * KPS_CALL site of a mapping call's wrapper also attaches the system calls'
 * return tracepoint, once, for as long as k is open.
 */
int kprobes_attach(struct kprobes *k, pid_t pid, const char *path, const struct kprobe_site *sites, size_t n,
		   int fds[KPROBES_LINKS]);
/* Closes link fds (the kernel takes their probes out). */
void kprobes_detach(int *fds, size_t n);

/*
 * Calls cb for every record written before this call, in ring order, waiting
 * for those still being written (at most about a second in all). Returns how
 * many it read.
 */
typedef void (*kprobes_record_fn)(void *ctx, const void *rec, size_t len);
size_t kprobes_drain(struct kprobes *k, kprobes_record_fn cb, void *ctx);
/* Bytes written and not read yet. */
uint64_t kprobes_unread(const struct kprobes *k);
/*
 * The programs' marks: a thread writing past stop_bytes unread (0: never) is
 * sent stop_signal; ptfil is woken past wake_bytes.
 */
int kprobes_config(struct kprobes *k, uint64_t stop_bytes, uint64_t wake_bytes, int stop_signal);
/* The programs' counters (KH_C_*), summed over CPUs. */
void kprobes_counters(const struct kprobes *k, uint64_t out[KH_NCOUNTERS]);

#endif
