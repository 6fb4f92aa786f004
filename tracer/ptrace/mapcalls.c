/*
 * The mapping syscalls (mmap, munmap, mremap, brk, madvise, execve) as seen at
 * their seccomp entry stop and their exit stop: measure before memory goes,
 * record what came, attribute it to the stack that asked.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/error.h"
#include "common/snap.h"
#include "tracer/stacks/capture.h"
#include "tracer/core/session.h"
#include "tracer/ptrace/mapcalls.h"

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

static uint64_t page_size(void)
{
	static uint64_t ps;
	if (!ps)
		ps = (uint64_t)sysconf(_SC_PAGESIZE);
	return ps;
}

static uint64_t page_up(uint64_t x) { return (x + page_size() - 1) & ~(page_size() - 1); }
static uint64_t page_down(uint64_t x) { return x & ~(page_size() - 1); }

static int is_err(uint64_t ret) { return ret > (uint64_t)-4096; }

static int is_release_advice(int advice)
{
	return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE ||
	       advice == MADV_DONTNEED_LOCKED;
}

static void sample(struct proc *p, double now)
{
	if (p->sample_skip) {
		p->sample_skip--;
		return;
	}
	if (!p->samples && !(p->samples = malloc(TRACER_MAX_SAMPLES * sizeof(*p->samples))))
		return;
	if (p->n_samples == TRACER_MAX_SAMPLES) {
		/* Keep the timeline bounded: halve its resolution and sample half as often. */
		for (size_t i = 0; i < TRACER_MAX_SAMPLES / 2; i++)
			p->samples[i] = p->samples[2 * i];
		p->n_samples = TRACER_MAX_SAMPLES / 2;
		p->sample_stride = p->sample_stride ? p->sample_stride * 2 : 2;
	}
	p->samples[p->n_samples].time = now;
	p->samples[p->n_samples].charged = p->ledger.charged;
	p->samples[p->n_samples].rss = resid_rss(&p->resid);
	p->n_samples++;
	p->sample_skip = p->sample_stride ? p->sample_stride - 1 : 0;
}

/* Brings every range's residency up to date if the process faulted in pages since the last time. */
void sysc_refresh_if_faulted(struct tracer *T, struct proc *p)
{
	p->faults_checked_at = tracer_now(T);
	uint64_t faults = resid_faults(&p->resid);
	if (faults != p->last_faults) {
		/* Faults are read first so that pages faulted during the refresh are seen next time. */
		p->last_faults = faults;
		ledger_refresh_all(&p->ledger);
		T->refreshes++;
	}
}

void sysc_refresh_inherited(struct tracer *T, struct proc *except)
{
	for (struct proc *q = T->procs; q; q = q->next)
		if (q != except && q->inherited && q->ready && q->nthreads)
			ledger_refresh_inherited(&q->ledger);
}

static void check_peak(struct tracer *T, struct proc *p)
{
	/* The tree's sum may peak at a moment that is no process's own peak. */
	tree_check_peak(T);
	if (p->ledger.has_peak && p->ledger.charged <= p->ledger.peak.charged)
		return;
	if (ledger_check_peak(&p->ledger, tracer_now(T), resid_rss(&p->resid)) < 0)
		warning("out of memory copying the peak");
}

void sysc_before_release(struct tracer *T, struct proc *p, uint64_t start, uint64_t end)
{
	if (!p->ready)
		return;
	/* Exact residency of what is about to go, while its pages are still there. */
	ledger_refresh(&p->ledger, start, end);
	sysc_refresh_if_faulted(T, p);
	check_peak(T, p);
}

void sysc_before_small_release(struct tracer *T, struct proc *p)
{
	if (!p->ready)
		return;
	/*
	 * A small block's charge is exact; only ranges' residency can be stale. Reading the
	 * fault counter costs a system call, so at most once a millisecond here.
	 */
	if (tracer_now(T) - p->faults_checked_at > 0.001)
		sysc_refresh_if_faulted(T, p);
	check_peak(T, p);
}

void sysc_poll(struct tracer *T, struct proc *p)
{
	if (!p->ready || !p->nthreads)
		return;
	sysc_refresh_if_faulted(T, p);
	check_peak(T, p);
	sample(p, tracer_now(T));
}

static void add_range(struct tracer *T, struct proc *p, uint64_t start, uint64_t end, uint32_t stack, char kind)
{
	(void)T;
	if (ledger_add(&p->ledger, start, end, stack, kind))
		warning("out of memory recording a mapping");
}

static int get_regs(struct tracee *t, struct user_regs_struct *regs)
{
	if (ptrace(PTRACE_GETREGS, t->tid, 0, regs) == 0)
		return 0;
	if (errno != ESRCH)
		error_errno("cannot read the registers of thread %d", (int)t->tid);
	return -1;
}

int sysc_entry(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	if (!p->profiled || !p->ready) {
		/* Still, the first exec of the launched program must be seen: it is execve. */
		return PTRACE_CONT;
	}
	struct user_regs_struct regs;
	if (get_regs(t, &regs))
		return PTRACE_CONT;
	uint64_t a[6] = { regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9 };
	if (regs.orig_rax == SYS_sigaltstack) {
		kheap_sigaltstack(T, t, a[0], regs.rsp);
		return PTRACE_CONT;
	}
	t->sc_stack = STACKS_FAILED;
	return sysc_begin(T, t, (long)regs.orig_rax, a, &regs) ? PTRACE_SYSCALL : PTRACE_CONT;
}

/*
 * True when munmap(start, len) will succeed. It fails on arguments the kernel
 * refuses (checked here, with the lowest user address limit of x86-64), and
 * with ENOMEM when cutting a hole in a mapping would pass vm.max_map_count:
 * a hole in ranges of ours is left to the exit stop; one in a mapping the
 * kernel merged from ours and others (the allocator's) is not seen, and
 * would fail only in a process at that limit (65,530 mappings by default).
 */
static int munmap_cannot_fail(const struct ledger *l, uint64_t start, uint64_t len)
{
	uint64_t end = start + page_up(len);
	if (!len || (start & (page_size() - 1)) || end <= start || end > (1ULL << 47) - page_size())
		return 0;
	return !ledger_holes(l, start, end);
}

/*
 * Whether thread t, at the entry of mapping call nr, is inside a
 * malloc-family call: its return breakpoint is set (ptrace path), the kernel
 * recorded its entry and not yet its return (the kernel path: every record
 * before this stop has been applied), or one of its frames is in a function
 * hooked at its returns (glibc's malloc on the ptrace path), which only an
 * unwind can tell.
 */
static int in_allocator(struct tracer *T, struct tracee *t, long nr, const struct user_regs_struct *regs)
{
	if (t->in_alloc || t->kin_call)
		return 1;
	switch (nr) {
	case SYS_mmap: case SYS_munmap: case SYS_mremap: case SYS_madvise: case SYS_brk: case SYS_mprotect:
		return capture_in_exit_fn(T, t, regs);
	default:
		return 0;
	}
}

int sysc_begin(struct tracer *T, struct tracee *t, long nr, const uint64_t a[6], const struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	t->sc_nr = nr;
	memcpy(t->sc_args, a, sizeof(t->sc_args));
	struct ledger *l = &p->ledger;
	t->sc_heap = nr != SYS_execve && nr != SYS_execveat && in_allocator(T, t, nr, regs);
	if (t->sc_heap)
		return nr == SYS_brk ? 1 : 0;
	switch (nr) {
	case SYS_mmap:
		if (!(a[3] & MAP_ANONYMOUS))
			p->maps_dirty = 1;
		/* MAP_FIXED over live memory unmaps it implicitly. */
		if ((a[3] & MAP_FIXED) && ledger_overlaps(l, a[0], a[0] + page_up(a[1])))
			sysc_before_release(T, p, a[0], a[0] + page_up(a[1]));
		return 1;
	case SYS_munmap:
		p->maps_dirty = 1;
		sysc_before_release(T, p, a[0], a[0] + page_up(a[1]));
		if (!munmap_cannot_fail(l, a[0], a[1]))
			return 1;
		/* Done now: no exit stop, one stop fewer per munmap. */
		ledger_remove(l, a[0], a[0] + page_up(a[1]));
		return 0;
	case SYS_mremap:
		p->maps_dirty = 1;
		if (page_up(a[2]) < page_up(a[1]))
			sysc_before_release(T, p, a[0] + page_up(a[2]), a[0] + page_up(a[1]));
		if ((a[3] & MREMAP_FIXED) && ledger_overlaps(l, a[4], a[4] + page_up(a[2])))
			sysc_before_release(T, p, a[4], a[4] + page_up(a[2]));
		return 1;
	case SYS_madvise:
		if (!is_release_advice((int)a[2]))
			return 0;
		sysc_before_release(T, p, page_down(a[0]), page_up(a[0] + a[1]));
		return 1;
	case SYS_brk:
		if (a[0] == 0 && p->brk_cur)
			return 0;
		if (a[0] && p->brk_cur && page_up(a[0]) < p->brk_cur)
			sysc_before_release(T, p, page_up(a[0]), p->brk_cur);
		return 1;
	case SYS_execve:
	case SYS_execveat:
		/* The whole image goes if it succeeds: the last chance to see its peak. */
		sysc_before_release(T, p, 0, UINT64_MAX);
		return 0;
	default:
		return 0;
	}
}

void sysc_exit(struct tracer *T, struct tracee *t)
{
	struct user_regs_struct regs;
	if (!t->p->ready || get_regs(t, &regs))
		return;
	sysc_end(T, t, regs.rax, &regs);
}

/* The stack of the call being finished: taken at its entry (a wrapped call), or now (a syscall exit). */
static uint32_t call_stack(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs)
{
	return t->sc_stack != STACKS_FAILED ? t->sc_stack : capture_stack(T, t, regs);
}

void sysc_end(struct tracer *T, struct tracee *t, uint64_t ret, const struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	if (!p->ready)
		return;
	const uint64_t *a = t->sc_args;
	struct ledger *l = &p->ledger;
	if (t->sc_heap) {
		/* The allocator's own mappings: its blocks are charged instead. Only the brk end is followed. */
		if (t->sc_nr == SYS_brk && !is_err(ret))
			p->brk_cur = page_up(ret);
		return;
	}
	switch (t->sc_nr) {
	case SYS_mmap: {
		if (is_err(ret))
			return;
		uint64_t len = page_up(a[1]);
		if (a[3] & MAP_FIXED)
			ledger_remove(l, ret, ret + len);
		if (a[3] & MAP_ANONYMOUS)
			add_range(T, p, ret, ret + len, call_stack(T, t, regs), SNAP_KIND_MMAP);
		return;
	}
	case SYS_munmap:
		if (!is_err(ret))
			ledger_remove(l, a[0], a[0] + page_up(a[1]));
		return;
	case SYS_mremap: {
		if (is_err(ret))
			return;
		uint64_t old = a[0], oldlen = page_up(a[1]), newlen = page_up(a[2]);
		if (!ledger_overlaps(l, old, old + (oldlen ? oldlen : page_size())))
			return; /* a file mapping, or one made before we could see it */
		if (oldlen == 0) {
			/* A second mapping of shared memory. */
			add_range(T, p, ret, ret + newlen, call_stack(T, t, regs), SNAP_KIND_MMAP);
			return;
		}
		uint64_t kept = newlen < oldlen ? newlen : oldlen;
		if (newlen < oldlen)
			ledger_remove(l, old + newlen, old + oldlen);
		if (ret != old)
			ledger_move(l, old, kept, ret);
		if (newlen > oldlen)
			add_range(T, p, ret + oldlen, ret + newlen, call_stack(T, t, regs), SNAP_KIND_MMAP);
		return;
	}
	case SYS_madvise:
		ledger_refresh(l, page_down(a[0]), page_up(a[0] + a[1]));
		return;
	case SYS_brk: {
		uint64_t now = page_up(ret);
		if (!p->brk_cur) {
			p->brk_cur = now;
			return;
		}
		if (now > p->brk_cur)
			add_range(T, p, p->brk_cur, now, call_stack(T, t, regs), SNAP_KIND_BRK);
		else if (now < p->brk_cur)
			ledger_remove(l, now, p->brk_cur);
		p->brk_cur = now;
		return;
	}
	default:
		return;
	}
}

/* The main thread's stack is mapped by the kernel, not by a call: charge it to a pseudo frame. */
static void add_main_stack(struct tracer *T, struct proc *p)
{
	if (!p->mm.stack_end)
		return;
	struct rlimit rl;
	uint64_t size = 8 << 20;
	if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (1ULL << 32))
		size = page_up(rl.rlim_cur);
	uint64_t lo = p->mm.stack_end - size;
	if (lo > p->mm.stack_start)
		lo = p->mm.stack_start;
	uint32_t f = stacks_pseudo_frame(&T->stacks, "[main thread stack]");
	uint32_t node = f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(&T->stacks, &f, 1);
	T->main_stack_node = node;
	add_range(T, p, lo, p->mm.stack_end, node, SNAP_KIND_PSEUDO);
}

int sysc_exec(struct tracer *T, struct proc *p)
{
	/*
	 * A new image: what the old one had mapped is gone, the peak stays. What
	 * the ledger last knew of the old one may be a peak, its own or the tree's.
	 */
	if (p->ready)
		check_peak(T, p);
	heap_clear(&p->heap);
	ledger_remove(&p->ledger, 0, UINT64_MAX);
	p->brk_cur = 0;
	p->inherited = 0;
	if (T->opts.follow_forks)
		sysc_refresh_inherited(T, p);  /* the pages it shared are its relatives' alone now */
	if (resid_open(&p->resid, p->pid))
		return -1;
	if (modmap_load(&p->mm, &T->reg, p->pid))
		return -1;
	p->maps_loaded_at = tracer_now(T);
	unwind_flush(&T->unw);
	pyproc_fin(&p->py);
	pyproc_init(&p->py);
	p->ready = 1;
	p->last_faults = resid_faults(&p->resid);
	add_main_stack(T, p);
	p->hooks.no_heap = T->opts.no_heap;
	kheap_proc_setup(T, p);
	if ((!T->opts.no_heap || p->hooks.wrappers) && hooks_exec(&p->hooks, p->pid, &p->mm, &T->reg))
		warning("process %d: the malloc family cannot be hooked; only mappings are charged", (int)p->pid);
	return 0;
}
