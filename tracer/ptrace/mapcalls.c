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
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/ptrace/mapcalls.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/stacks.h"
#include "tracer/stacks/unwind.h"

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

static void add_range(struct tracer *T, struct proc *p, uint64_t start, uint64_t end, uint32_t stack, char kind)
{
	(void)T;
	if (ledger_add(p->ledger, start, end, stack, kind))
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

static int faults_in_order(const struct proc *p, long nr, const uint64_t a[6]);

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
		if (T->on_sigaltstack)
			T->on_sigaltstack(T, t, a[0], regs.rsp);
		return PTRACE_CONT;
	}
	t->sc->stack = STACKS_FAILED;
	if (T->apply_faults && faults_in_order(p, (long)regs.orig_rax, a))
		T->apply_faults(T);
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
 * Whether the stopped thread (regs as at the stop) is inside a function its
 * process hooks at its returns (ptrace/hooks.h): one of its frames is there.
 */
static int in_exit_fn(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs)
{
	const struct hooks *h = t->p->hooks;
	if (!h->n_exit_fn)
		return 0;
	if (hooks_exit_fn_at(h, regs->rip))
		return 1;
	/*
	 * Inside one, the function's own call (to _int_malloc, say) left a
	 * return address into it on the stack, a few hundred bytes up: with
	 * none in the first copy (8 KiB, or the whole stack when it is
	 * shorter), the thread is not inside, and no unwind is needed. A word
	 * that looks like one may be stale: the unwind decides.
	 */
	capture_account(T, t->p);
	unwind_begin(T->unw, t->tid, regs, t->p->mm, T->reg);
	const struct unwind *u = T->unw;
	int maybe = u->stack_len == 0;
	/* A word w is a return address into [lo, hi) when w - 1 - lo < hi - lo (unsigned). */
	for (size_t i = 0; i < h->n_exit_fn && !maybe; i++) {
		uint64_t lo = h->exit_fn[i].lo + 1, span = h->exit_fn[i].hi - h->exit_fn[i].lo;
		for (size_t off = 0; off + 8 <= u->stack_len; off += 8) {
			uint64_t w;
			memcpy(&w, u->stack + off, sizeof(w));
			if (w - lo < span) {
				maybe = 1;
				break;
			}
		}
	}
	if (!maybe)
		return 0;
	uint64_t ips[UNWIND_MAX_FRAMES];
	/* A whole unwind: the unwinder splices the next one onto the frames of this one. */
	size_t n = unwind_run(T->unw, ips, UNWIND_MAX_FRAMES);
	for (size_t i = 0; i < n; i++)
		if (hooks_exit_fn_at(h, i ? ips[i] - 1 : ips[i]))
			return 1;
	return 0;
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
	if (alloc_active(t))
		return 1;
	switch (nr) {
	case SYS_mmap: case SYS_munmap: case SYS_mremap: case SYS_madvise: case SYS_brk: case SYS_mprotect:
		return in_exit_fn(T, t, regs);
	default:
		return 0;
	}
}

/* Whether mapping call nr(a) can release resident pages, which the touch view must see at its exit. */
static int touch_release_call(long nr, const uint64_t a[6])
{
	switch (nr) {
	case SYS_munmap: case SYS_mremap: case SYS_brk:
		return 1;
	case SYS_mmap:
		return (a[3] & MAP_FIXED) != 0;
	case SYS_madvise:
		/* MADV_FREE'd pages stay resident until reclaimed (a write keeps them): the residency poll sees them go. */
		return is_release_advice((int)a[2]) && (int)a[2] != MADV_FREE;
	default:
		return 0;
	}
}

/*
 * Whether the touch view must apply every fault made before this stop of
 * call nr(a) first: a release (its pages must be the ledger's to go, the peak
 * before it settled), an exec (the image's last moment), and any call under
 * --charge both, whose alloc view is copied at the touch view's peak. A new
 * mapping needs no order: its pages fault after it returns. Measured on 2 M
 * small Python dicts (1,187 mapping stops): 2.39 s against 1.90-2.19 s with
 * the faults applied at the stops of releases alone (0.9-1.0 s bare).
 */
static int faults_in_order(const struct proc *p, long nr, const uint64_t a[6])
{
	return p->touch && (p->touch->both || touch_release_call(nr, a) || nr == SYS_execve || nr == SYS_execveat);
}

/*
 * The touch view's side of a mapping call that succeeded with ret: the pages
 * it released or moved, whichever mappings they lie in (the allocator's, a
 * file's private copy). Every fault before the call was applied at this
 * stop; the residency scan waited for it (sysc_moving). Under attach an
 * mremap is the fault path's own record (kernel/faults.bpf.c).
 */
static void touch_end(struct tracer *T, struct proc *p, const struct sc_call *sc, uint64_t ret)
{
	const uint64_t *a = sc->args;
	switch (sc->nr) {
	case SYS_mmap:
		if (a[3] & MAP_FIXED)
			alloc_released(T, p, ret, ret + page_up(a[1]));
		return;
	case SYS_munmap:
		if (sc->unmapping)
			alloc_released(T, p, a[0], a[0] + page_up(a[1]));
		return;
	case SYS_mremap:
		/* Under attach (wrapper stops) the fault path's record, drained before this stop, moved them. */
		if (a[1] && !T->attach)
			alloc_remapped(T, p, a[0], page_up(a[1]), page_up(a[2]), ret);
		return;
	case SYS_madvise:
		if (touch_release_call(sc->nr, a))
			alloc_released(T, p, page_down(a[0]), page_up(a[0] + a[1]));
		return;
	case SYS_brk:
		if (p->brk_cur && page_up(ret) < p->brk_cur)
			alloc_released(T, p, page_up(ret), p->brk_cur);
		return;
	default:
		return;
	}
}

static int begin_call(struct tracer *T, struct tracee *t, long nr, const uint64_t a[6], const struct user_regs_struct *regs);

int sysc_begin(struct tracer *T, struct tracee *t, long nr, const uint64_t a[6], const struct user_regs_struct *regs)
{
	int see_exit = begin_call(T, t, nr, a, regs);
	t->sc->moving = see_exit && nr == SYS_mremap && t->p->touch;
	t->sc->unmapping = see_exit && nr == SYS_munmap && t->p->touch;
	return see_exit;
}

/*
 * A new mapping [start, end) of thread t's: another thread's munmap whose
 * exit stop has not been handled yet, though the kernel has done it (this
 * mmap was given some of its addresses), is released in the touch view now,
 * after the faults so far and before t can fault the same addresses in
 * again: exit stops come in waitpid's order, not the kernel's, and its
 * release at its own exit would take t's new pages away.
 */
static void settle_reused(struct tracer *T, struct tracee *t, uint64_t start, uint64_t end)
{
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *o = T->threads[h]; o; o = o->hnext) {
			if (o == t || o->p != t->p || !o->sc || !o->sc->unmapping)
				continue;
			uint64_t s = o->sc->args[0], e = s + page_up(o->sc->args[1]);
			if (s >= end || start >= e)
				continue;
			if (T->apply_faults)
				T->apply_faults(T);
			alloc_released(T, t->p, s, e);
			o->sc->unmapping = 0;
		}
}

int sysc_moving(const struct tracer *T, const struct proc *p)
{
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (const struct tracee *t = T->threads[h]; t; t = t->hnext)
			if (t->p == p && t->sc && t->sc->moving)
				return 1;
	return 0;
}

static int begin_call(struct tracer *T, struct tracee *t, long nr, const uint64_t a[6], const struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	struct sc_call *sc = t->sc;
	sc->nr = nr;
	memcpy(sc->args, a, sizeof(sc->args));
	struct ledger *l = p->ledger;
	sc->epoch = ledger_epoch(l);
	sc->heap = nr != SYS_execve && nr != SYS_execveat && in_allocator(T, t, nr, regs);
	/*
	 * The touch view follows every release, the allocator's own too (a trim, a
	 * block of its own mapping freed or moved): its exit is seen for that.
	 */
	if (sc->heap)
		return nr == SYS_brk || (p->touch && touch_release_call(nr, a));
	switch (nr) {
	case SYS_mmap:
		if (!(a[3] & MAP_ANONYMOUS))
			p->mm->dirty = 1;
		/* MAP_FIXED over live memory unmaps it implicitly. */
		if ((a[3] & MAP_FIXED) && ledger_overlaps(l, a[0], a[0] + page_up(a[1])))
			peak_before_release(T, p, a[0], a[0] + page_up(a[1]));
		return 1;
	case SYS_munmap:
		p->mm->dirty = 1;
		peak_before_release(T, p, a[0], a[0] + page_up(a[1]));
		if (!munmap_cannot_fail(l, a[0], a[1]))
			return 1;
		/* Done now: no exit stop, one stop fewer per munmap. */
		ledger_remove(l, a[0], a[0] + page_up(a[1]));
		alloc_released(T, p, a[0], a[0] + page_up(a[1]));
		return 0;
	case SYS_mremap:
		p->mm->dirty = 1;
		if (page_up(a[2]) < page_up(a[1]))
			peak_before_release(T, p, a[0] + page_up(a[2]), a[0] + page_up(a[1]));
		if ((a[3] & MREMAP_FIXED) && ledger_overlaps(l, a[4], a[4] + page_up(a[2])))
			peak_before_release(T, p, a[4], a[4] + page_up(a[2]));
		return 1;
	case SYS_madvise:
		if (!is_release_advice((int)a[2]))
			return 0;
		peak_before_release(T, p, page_down(a[0]), page_up(a[0] + a[1]));
		return 1;
	case SYS_brk:
		if (a[0] == 0 && p->brk_cur)
			return 0;
		if (a[0] && p->brk_cur && page_up(a[0]) < p->brk_cur)
			peak_before_release(T, p, page_up(a[0]), p->brk_cur);
		return 1;
	case SYS_execve:
	case SYS_execveat:
		/* The whole image goes if it succeeds: the last chance to see its peak. */
		peak_before_exec(T, p);
		return 0;
	default:
		return 0;
	}
}

void sysc_exit(struct tracer *T, struct tracee *t)
{
	struct user_regs_struct regs;
	if (T->apply_faults && faults_in_order(t->p, t->sc->nr, t->sc->args))
		T->apply_faults(T);
	if (!t->p->ready || get_regs(t, &regs))
		return;
	sysc_end(T, t, regs.rax, &regs);
}

/* The stack of the call being finished: taken at its entry (a wrapped call), or now (a syscall exit). */
static uint32_t call_stack(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs)
{
	return t->sc->stack != STACKS_FAILED ? t->sc->stack : capture_stack(T, t, regs);
}

void sysc_end(struct tracer *T, struct tracee *t, uint64_t ret, const struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	if (!p->ready)
		return;
	struct sc_call *sc = t->sc;
	sc->moving = 0;
	const uint64_t *a = sc->args;
	struct ledger *l = p->ledger;
	if (p->touch && !is_err(ret)) {
		if (sc->nr == SYS_mmap && !(a[3] & MAP_FIXED))
			settle_reused(T, t, ret, ret + page_up(a[1]));
		touch_end(T, p, sc, ret);
	}
	sc->unmapping = 0;
	if (sc->heap) {
		/* The allocator's own mappings: its blocks are charged instead. Only the brk end is followed. */
		if (sc->nr == SYS_brk && !is_err(ret))
			p->brk_cur = page_up(ret);
		return;
	}
	switch (sc->nr) {
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
		/* Not what another thread mapped there since, and the tracer saw first. */
		if (!is_err(ret))
			ledger_remove_older(l, a[0], a[0] + page_up(a[1]), sc->epoch);
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
			ledger_remove_older(l, old + newlen, old + oldlen, sc->epoch);
		if (ret != old)
			ledger_move_older(l, old, kept, ret, sc->epoch);
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
			ledger_remove_older(l, now, p->brk_cur, sc->epoch);
		p->brk_cur = now;
		return;
	}
	default:
		return;
	}
}
