/*
 * Breakpoints on the malloc family and on the dynamic linker's load hook, in
 * one process's text: where they are, what each displaced, and the return
 * trampoline (an int3 in ld.so's entry code, which never runs again).
 */
#ifndef PTFIL_HOOKS_H
#define PTFIL_HOOKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/u64map.h"
#include "tracer/ptrace/emu.h"
#include "tracer/stacks/modules.h"

enum hook_fn {
	HOOK_MALLOC, HOOK_CALLOC, HOOK_REALLOC, HOOK_REALLOCARRAY, HOOK_FREE,
	HOOK_POSIX_MEMALIGN, HOOK_ALIGNED_ALLOC, HOOK_MEMALIGN, HOOK_VALLOC, HOOK_PVALLOC,
	HOOK_DL_DEBUG,
	/* The libc wrappers of the mapping calls, hooked only where no seccomp filter reports them (attach). */
	HOOK_MMAP, HOOK_MUNMAP, HOOK_MREMAP, HOOK_MADVISE, HOOK_BRK,
	/*
	 * sigaltstack's wrapper: hooked under attach only for a process on the
	 * kernel path, which must leave it for a signal stack above its stack
	 * (tracer/kernel/kheap.h); launch sees the system call through seccomp.
	 */
	HOOK_SIGALTSTACK,
	HOOK__COUNT
};

#define HOOK_IS_WRAPPER(fn) ((fn) >= HOOK_MMAP)

struct hook_bp {
	uint64_t addr;
	uint32_t gid;          /* the module it lies in */
	enum hook_fn fn;
	uint8_t orig;          /* the byte the int3 replaced */
	uint8_t at_exit;       /* on one of fn's returns (fn has no entry breakpoint): rax is the block */
	struct emu_insn insn;  /* the instruction the int3 displaced */
};

/*
 * A function hooked at its returns instead of its entry: glibc's malloc (and
 * calloc where it returns only through ret), on the ptrace path unless
 * exact_sizes. Its block is charged at the usable size its chunk header
 * gives; the requested size is gone by the return. One stop per call
 * instead of two, no return address rewritten.
 */
struct hooks_exit_fn {
	uint64_t lo, hi;       /* the function's code */
	uint32_t gid;          /* its module */
};

/*
 * The kernel path (tracer/kernel/kheap.c): the malloc family of module e, found at
 * the n addresses of sites (aliases removed), is probed by the kernel instead
 * of by int3s. Returns 0, -1 when none of them is probed, or 1 when the
 * process is to keep int3s after all (the probe is then cleared).
 */
struct hooks_site {
	uint64_t addr;
	enum hook_fn fn;
};
struct modreg_entry;
typedef int (*hooks_probe_fn)(void *ctx, const struct modreg_entry *e, const struct hooks_site *sites, size_t n);

struct hooks {
	struct hook_bp *v; size_t n, cap;
	struct u64map by_addr;         /* addr -> index in v */
	uint64_t trampoline;           /* 0 until known */
	int trampoline_armed;
	uint8_t trampoline_orig;
	int wrappers;                  /* also hook the mapping calls' wrappers */
	int no_heap;                   /* --mappings-only: not the malloc family */
	int exact_sizes;               /* every allocating function is hooked at its entry (requested sizes) */
	struct hooks_exit_fn *exit_fn; size_t n_exit_fn, cap_exit_fn;
	uint64_t curbrk;               /* address of libc's __curbrk when wrappers are hooked, else 0 */
	uint32_t *scanned; size_t n_scanned, cap_scanned;  /* module ids already looked at */
	uint64_t unhookable;           /* modules whose malloc family (or wrappers) was left unhooked: one function could not be */
	hooks_probe_fn probe;          /* set: the malloc family goes to the kernel path (no int3 of ours in it) */
	/*
	 * Set (the kernel path): the loader's load hook and, under attach, the
	 * mapping calls' wrappers and sigaltstack are kernel probes too, whose
	 * calls stop the thread (ptrace/breakpoints.h, bp_kernel_call). Returns
	 * 0, or non-zero when a module's cannot be probed: they get int3s then.
	 */
	hooks_probe_fn call_probe;
	void *probe_ctx;               /* the process's, for probe and call_probe; not copied by hooks_copy */
};

extern const char *const hook_names[HOOK__COUNT];

/*
 * The target's memory as the hooks reach it: each call returns 0, or -1 with
 * errno set when it failed. hooks_mem_tid reads and writes through a stopped
 * thread with ptrace; a unit test passes a fake memory (ctx is its own).
 */
struct hooks_mem {
	int (*read)(const struct hooks_mem *m, uint64_t addr, void *buf, size_t n);
	int (*write)(const struct hooks_mem *m, uint64_t addr, const void *buf, size_t n);
	pid_t tid;             /* hooks_mem_tid's thread */
	void *ctx;             /* another implementation's state */
};
struct hooks_mem hooks_mem_tid(pid_t tid);

/* Storage is the caller's; hooks_fin frees the tables (it does not touch the process). */
void hooks_init(struct hooks *h);
void hooks_fin(struct hooks *h);
/* The same breakpoints, for a forked child whose text is a copy. Returns 0 or -1 out of memory. */
int hooks_copy(struct hooks *dst, const struct hooks *src);

/*
 * After an exec, with the process stopped: forgets the old image's
 * breakpoints (its text is gone) and arms the dynamic linker's load hook
 * (when the image has one). Returns 0, or -1 after error() when a breakpoint
 * could not be written.
 */
int hooks_exec_mem(struct hooks *h, const struct hooks_mem *mem, const struct modmap *mm, struct modreg *reg);
/*
 * The dynamic linker's load hook alone, in a process whose breakpoints are
 * kept (a forked child getting probes of its own, a process leaving the
 * kernel's probes for int3s). Returns 0 or -1 after error().
 */
int hooks_arm_loader(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg);

/*
 * At a load event (or after exec of a static program): arms the malloc family
 * in every module not looked at yet, and the return trampoline. A module's
 * malloc family is hooked all or nothing (an allocator whose free is not seen
 * would keep every block charged): when one of the functions it defines starts
 * with an instruction ptfil cannot emulate, none is hooked, and one warning
 * names the module and the function. The same holds for the mapping calls'
 * wrappers. Only modules whose file was verified (modules.h) are looked at.
 *
 * A breakpoint leaves the table only when its original byte is back in
 * memory, or when its module is known to be unmapped: mm (from a reading that
 * found the process's memory) no longer maps that object at its address. An
 * empty mm says nothing, so nothing is forgotten. Returns 0 or -1 after error().
 */
int hooks_scan_mem(struct hooks *h, const struct hooks_mem *mem, const struct modmap *mm, struct modreg *reg);

/*
 * Puts back the original bytes of every breakpoint and the trampoline, and
 * forgets those it restored. Returns 0, or -1 after error() when some could
 * not be restored: those stay in the table, their bytes maybe still in memory.
 */
int hooks_remove_mem(struct hooks *h, const struct hooks_mem *mem);

/* The same three through thread tid of the process, stopped: hooks_mem_tid(tid). */
int hooks_exec(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg);
int hooks_scan(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg);
int hooks_remove(struct hooks *h, pid_t tid);

/* The breakpoint at addr, or NULL. */
const struct hook_bp *hooks_find(const struct hooks *h, uint64_t addr);
/* The function hooked at its returns whose code holds ip, or NULL. */
const struct hooks_exit_fn *hooks_exit_fn_at(const struct hooks *h, uint64_t ip);

#endif
