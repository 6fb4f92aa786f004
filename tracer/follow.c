/*
 * Processes that are there already (attach) or appear while tracing (fork,
 * vfork, exec): a new child is either followed (profiled from its first
 * stop, its inherited memory charged to a pseudo frame) or cleaned of the
 * breakpoints it inherited and, under attach, let go. Under attach, the maps
 * are compared with the ledger now and then for memory no hooked call made.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/kcmp.h>

#include "common/error.h"
#include "common/snap.h"
#include "symbols/maps.h"
#include "tracer/core/procfs.h"
#include "tracer/core/session.h"
#include "tracer/follow.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/lifecycle.h"
#include "tracer/memory/heap.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/tree.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/stacks/stacks.h"

/*
 * Anonymous memory that is there already (at attach, or inherited at fork) is
 * charged to one pseudo frame, at its residency now and never more: later
 * pages in those ranges belong to the blocks allocated there since.
 */
static void charge_existing(struct tracer *T, struct proc *p, const char *pseudo)
{
	struct maps maps;
	if (proc_maps_read(p->pid, &maps)) {
		maps_fin(&maps);
		return;
	}
	uint32_t f = stacks_pseudo_frame(T->stacks, pseudo);
	uint32_t node = f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(T->stacks, &f, 1);
	for (size_t i = 0; i < maps.n; i++) {
		const struct maps_entry *e = &maps.v[i];
		if (e->path && !strcmp(e->path, "[heap]"))
			p->brk_cur = e->end;
		if (!maps_entry_is_anon(e) || !(e->perms & (MAPS_R | MAPS_W)))
			continue;
		/* A forked child shares its parent's pages until one of them writes: counted once, by the parent. */
		if ((p->parent ? ledger_add_inherited : ledger_add_capped)(p->ledger, e->start, e->end, node,
									     SNAP_KIND_PSEUDO))
			warning("out of memory recording the memory of process %d", (int)p->pid);
	}
	maps_fin(&maps);
}

void follow_reconcile_init(struct reconcile *r)
{
	r->at = 0;
	u64map_init(&r->seen);
}

void follow_reconcile_fin(struct reconcile *r)
{
	u64map_fin(&r->seen);
}

int proc_follow(struct tracer *T, struct proc *p, pid_t tid, const char *pseudo, int arm)
{
	p->profiled = 1;
	if (!p->argv)
		p->argv = procfs_argv(p->pid);
	if (lifecycle_ready(T, p))
		return -1;
	int view = lifecycle_set_view(T, p);
	charge_existing(T, p, pseudo);
	p->tree->inherited = p->parent != 0;
	/*
	 * The touch view: what is resident at attach was made so before
	 * (a forked child's pages are its parent's until it writes them).
	 */
	if (view != CHARGE_ALLOC && !p->parent) {
		uint32_t f = stacks_pseudo_frame(T->stacks, pseudo);
		faults_charge_resident(T, p, f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(T->stacks, &f, 1));
	}
	if (view == CHARGE_TOUCH) {
		/* No breakpoint at all: the faults say what became resident, the pages what went. */
		p->wrappers = 0;
		p->hooks->wrappers = 0;
		p->hooks->no_heap = 1;
		return 0;
	}
	/* With --mappings-only, attach still needs the mapping calls' wrappers: there is no seccomp filter. */
	if (arm && (!T->opts.no_heap || p->wrappers)) {
		p->hooks->wrappers = p->wrappers;
		p->hooks->no_heap = T->opts.no_heap;
		kheap_proc_setup(T, p);
		if (hooks_exec(p->hooks, tid, p->mm, T->reg) || hooks_scan(p->hooks, tid, p->mm, T->reg))
			warning("process %d: some malloc-family hooks are missing", (int)p->pid);
	} else if (!arm && p->hooks->probe) {
		/* A forked child on the kernel path: the probes are its parent's; it gets its own. */
		kheap_proc_setup(T, p);
		if ((p->hooks->call_probe && hooks_arm_loader(p->hooks, tid, p->mm, T->reg)) ||
		    hooks_scan(p->hooks, tid, p->mm, T->reg))
			warning("process %d: some malloc-family hooks are missing", (int)p->pid);
	}
	return 0;
}

int proc_shares_vm(const struct proc *p)
{
	/* kcmp says whether two processes have one address space: a vfork child has its parent's. */
	return p->parent && syscall(SYS_kcmp, p->parent, p->pid, KCMP_VM, 0, 0) == 0;
}

int procs_first_stop(struct tracer *T, struct tracee *t, int sig)
{
	struct proc *p = t->p;
	p->fresh = 0;
	if (proc_shares_vm(p)) {
		/* Its text is its parent's, breakpoints and all, until it execs: decided then. */
		p->shares_vm = 1;
		return 0;
	}
	if (T->opts.follow_forks) {
		if (proc_follow(T, p, t->tid, "[before fork]", 0))
			warning("process %d: cannot read its memory; it is not profiled", (int)p->pid);
		return 0;
	}
	/* Not followed: the breakpoints it inherited go, so it runs as it would untraced. */
	if (hooks_remove(p->hooks, t->tid))
		warning("process %d: some breakpoints could not be removed", (int)p->pid);
	if (!T->attach)
		return 0; /* launch: the seccomp filter needs a tracer; it stays traced, at its mapping calls only */
	if (ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)sig) && errno != ESRCH)
		warning_errno("cannot detach from process %d", (int)p->pid);
	lifecycle_remove_thread(T, t);
	return 1;
}

int procs_exec(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	int was_shared = p->shares_vm;
	p->shares_vm = 0;
	if (was_shared && T->opts.follow_forks)
		p->profiled = 1;
	/* A launched program keeps the command line it was given; others show what they run now. */
	if (p->profiled && (T->attach || p->pid != T->main_pid)) {
		char **argv = procfs_argv(p->pid);
		if (argv) {
			if (p->argv)
				for (char **a = p->argv; *a; a++)
					free(*a);
			free(p->argv);
			p->argv = argv;
		}
	}
	if (p->profiled) {
		p->hooks->wrappers = p->wrappers;
		return 0;
	}
	if (was_shared && T->attach) {
		/* A vfork child, not followed, now in a new image with no breakpoints: let it go. */
		if (ptrace(PTRACE_DETACH, t->tid, 0, 0) && errno != ESRCH)
			warning_errno("cannot detach from process %d", (int)p->pid);
		lifecycle_remove_thread(T, t);
		return 1;
	}
	return 0;
}

/* True when some live heap block starts in [start, end): the allocator made that mapping for its blocks. */
static int holds_blocks(const struct heap *h, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < h->cap; i++)
		if (h->v[i].ptr >= start && h->v[i].ptr < end)
			return 1;
	return 0;
}

void proc_reconcile(struct tracer *T, struct proc *p)
{
	double now = tracer_now(T);
	if ((!p->wrappers && !(p->touch && T->attach)) || !p->ready || !p->nthreads || now - p->rec->at < 1.0)
		return;
	p->rec->at = now;
	struct maps maps;
	if (proc_maps_read(p->pid, &maps)) {
		maps_fin(&maps);
		return;
	}
	uint32_t node = STACKS_FAILED;
	for (size_t i = 0; i < maps.n; i++) {
		const struct maps_entry *e = &maps.v[i];
		/* The brk heap and the main stack are the allocator's and the kernel's, seen otherwise. */
		if (!maps_entry_is_anon(e) || !(e->perms & (MAPS_R | MAPS_W)) ||
		    (e->path && (!strcmp(e->path, "[heap]") || !strncmp(e->path, "[stack", 6))))
			continue;
		if (ledger_overlaps(p->ledger, e->start, e->end) || u64map_get(&p->rec->seen, e->start) != U64MAP_NONE)
			continue;
		if (u64map_put(&p->rec->seen, e->start, 1))
			break;
		if (holds_blocks(p->heap, e->start, e->end))
			continue;
		/* Made by a raw system call, or by code with its own wrapper (the dynamic linker). */
		if (node == STACKS_FAILED) {
			uint32_t f = stacks_pseudo_frame(T->stacks, "[unhooked mmap]");
			node = f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(T->stacks, &f, 1);
		}
		if (ledger_add(p->ledger, e->start, e->end, node, SNAP_KIND_PSEUDO))
			break;
		T->counts.reconciled++;
	}
	maps_fin(&maps);
}
