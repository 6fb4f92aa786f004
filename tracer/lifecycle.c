/*
 * The life of a traced process and thread (lifecycle.h): made with every
 * module's part, set up once its image is known, set up again after exec,
 * dropped and freed. The tables themselves are core/'s.
 */
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/error.h"
#include "common/snap.h"
#include "tracer/core/procfs.h"
#include "tracer/core/rescue.h"
#include "tracer/core/session.h"
#include "tracer/follow.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/lifecycle.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/heap.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/pages.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/resid.h"
#include "tracer/memory/tree.h"
#include "tracer/output/snapshot.h"
#include "tracer/ptrace/breakpoints.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/ptrace/mapcalls.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/pystack.h"
#include "tracer/stacks/stacks.h"

static uint64_t measure_excl(void *arg, uint64_t start, uint64_t end)
{
	return resid_range_exclusive(arg, start, end);
}

static uint64_t measure(void *arg, uint64_t start, uint64_t end)
{
	return resid_range(arg, start, end);
}

void lifecycle_proc_free(struct proc *p)
{
	if (!p)
		return;
	if (p->argv)
		for (char **a = p->argv; *a; a++)
			free(*a);
	free(p->argv);
	if (p->pk)
		peak_proc_fin(p->pk);
	if (p->rec)
		follow_reconcile_fin(p->rec);
	if (p->resid)
		resid_close(p->resid);
	if (p->kp)
		kheap_proc_fin(p);
	if (p->heap)
		heap_fin(p->heap);
	if (p->hooks)
		hooks_fin(p->hooks);
	if (p->ledger)
		ledger_fin(p->ledger);
	if (p->tree)
		tree_share_fin(p->tree);
	if (p->touch)
		alloc_touch_fin(p->touch);
	free(p->touch);
	if (p->mm)
		modmap_fin(p->mm);
	if (p->py)
		pyproc_fin(p->py);
	free(p->mm);
	free(p->py);
	free(p->resid);
	free(p->ledger);
	free(p->heap);
	free(p->pk);
	free(p->tree);
	free(p->hooks);
	free(p->kp);
	free(p->rec);
	free(p);
}

/* A process not seen before, with every module's part, in the table. NULL when out of memory. */
static struct proc *proc_new(struct tracer *T, pid_t pid)
{
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->mm = calloc(1, sizeof(*p->mm));
	p->py = calloc(1, sizeof(*p->py));
	p->resid = calloc(1, sizeof(*p->resid));
	p->ledger = calloc(1, sizeof(*p->ledger));
	p->heap = calloc(1, sizeof(*p->heap));
	p->pk = calloc(1, sizeof(*p->pk));
	p->tree = calloc(1, sizeof(*p->tree));
	p->hooks = calloc(1, sizeof(*p->hooks));
	p->kp = calloc(1, sizeof(*p->kp));
	p->rec = calloc(1, sizeof(*p->rec));
	if (!p->mm || !p->py || !p->resid || !p->ledger || !p->heap || !p->pk || !p->tree || !p->hooks || !p->kp ||
	    !p->rec) {
		lifecycle_proc_free(p);
		return NULL;
	}
	p->pid = pid;
	p->resid->pagemap_fd = p->resid->stat_fd = p->resid->statm_fd = -1;
	ledger_init(p->ledger, measure, p->resid);
	p->ledger->measure_excl = measure_excl;
	heap_init(p->heap, p->ledger, T->opts.large_block, (uint64_t)sysconf(_SC_PAGESIZE));
	hooks_init(p->hooks);
	p->hooks->exact_sizes = T->opts.exact_sizes;
	p->hooks->probe_ctx = p;
	modmap_init(p->mm);
	pyproc_init(p->py);
	follow_reconcile_init(p->rec);
	p->status = -1;
	p->started = tracer_now(T);
	/* The main process is profiled from the start; a child is decided at its first stop. */
	p->profiled = pid == T->main_pid;
	p->fresh = pid != T->main_pid;
	tables_link_proc(T, p);
	return p;
}

void lifecycle_thread_free(struct tracee *t)
{
	if (!t)
		return;
	free(t->call);
	free(t->ret);
	free(t->sc);
	if (t->st)
		free(t->st->kpy);
	free(t->st);
	free(t);
}

/* The thread group and parent of tid: the kernel says, so the order of ptrace events does not matter. */
static pid_t tgid_of(pid_t tid, pid_t *ppid)
{
	static const char *const name[] = { "Tgid", "PPid" };
	unsigned long long v[2] = { (unsigned long long)tid, 0 };
	procfs_status(tid, name, v, 2, 10);
	*ppid = (pid_t)v[1];
	return (pid_t)v[0];
}

struct tracee *lifecycle_add_thread(struct tracer *T, pid_t tid)
{
	struct tracee *t = calloc(1, sizeof(*t));
	if (t) {
		t->call = calloc(1, sizeof(*t->call));
		t->ret = calloc(1, sizeof(*t->ret));
		t->sc = calloc(1, sizeof(*t->sc));
		t->st = calloc(1, sizeof(*t->st));
	}
	if (!t || !t->call || !t->ret || !t->sc || !t->st) {
		lifecycle_thread_free(t);
		error("out of memory");
		return NULL;
	}
	t->sc->stack = STACKS_FAILED;
	t->st->fault_stack = STACKS_FAILED;
	pid_t ppid = 0;
	pid_t pid = tid == T->main_pid ? tid : tgid_of(tid, &ppid);
	struct proc *p = tracer_proc(T, pid);
	if (!p) {
		if (!(p = proc_new(T, pid))) {
			lifecycle_thread_free(t);
			error("out of memory");
			return NULL;
		}
		/* A forked child's text is a copy of its parent's: it has the same breakpoints. */
		struct proc *parent = ppid ? tracer_proc(T, ppid) : NULL;
		if (parent && hooks_copy(p->hooks, parent->hooks))
			warning("out of memory copying breakpoints to process %d", (int)pid);
		if (parent) {
			p->parent = parent->pid;
			p->wrappers = parent->wrappers;
		}
	}
	t->tid = tid;
	t->p = p;
	t->rescue = rescue_thread_add(tid, p->pid);
	/* A forked child's copies of the breakpoints are bytes to put back too. */
	if (p->nthreads == 0 && p->parent) {
		for (size_t i = 0; i < p->hooks->n; i++)
			rescue_byte_note(tid, p->hooks->v[i].addr, p->hooks->v[i].orig);
		if (p->hooks->trampoline_armed)
			rescue_byte_note(tid, p->hooks->trampoline, p->hooks->trampoline_orig);
	}
	tables_link_thread(T, t);
	return t;
}

void lifecycle_drop_proc(struct tracer *T, struct proc *p)
{
	if (T->cap->unw_owner == p)
		capture_account(T, NULL);
	faults_untrack(T, p);
	tree_note(T, p, snapshot_file_name(T, p));
	rescue_bytes_forget_pid(p->pid);
	tables_unlink_proc(T, p);
	lifecycle_proc_free(p);
}

void lifecycle_remove_thread(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	tables_unlink_thread(T, t);
	rescue_thread_del(t->rescue);
	lifecycle_thread_free(t);
	/* The profiled process is kept for the snapshot; others go with their last thread. */
	if (p->nthreads == 0) {
		resid_close(p->resid);
		/* Its Python is read no more: the kernel's readers forget it (their maps are bounded). */
		if (p->kpy_described) {
			faults_python_forget(T, p);
			kheap_python_forget(T, p);
		}
		if (!p->profiled)
			lifecycle_drop_proc(T, p);
	}
}

int lifecycle_set_view(struct tracer *T, struct proc *p)
{
	int view = faults_view(T, p);
	if (view == CHARGE_ALLOC) {
		if (p->touch) {
			faults_untrack(T, p);
			alloc_touch_fin(p->touch);
			free(p->touch);
			p->touch = NULL;
		}
		return view;
	}
	if (p->touch) {
		/* A new image: its peak stays, its pages are gone (and so are those a look found gone). */
		alloc_touch_settle(p);
		pages_clear(&p->touch->pages);
		p->touch->n_gone = 0;
	} else if (!(p->touch = calloc(1, sizeof(*p->touch))) || alloc_touch_init(p->touch)) {
		free(p->touch);
		p->touch = NULL;
		warning("out of memory: process %d is charged by allocation", (int)p->pid);
		return CHARGE_ALLOC;
	}
	/* The mapping calls stop under launch (seccomp); under attach their releases are found in the pages. */
	p->touch->release_scans = T->attach;
	p->touch->both = view == CHARGE_BOTH;
	uint64_t rss = resid_rss(p->resid), anon = resid_anon(p->resid);
	p->touch->file_rss = rss >= anon ? rss - anon : 0;
	if (faults_track(T, p))
		warning("process %d: its page faults cannot be followed", (int)p->pid);
	return view;
}

int lifecycle_ready(struct tracer *T, struct proc *p)
{
	if (resid_open(p->resid, p->pid) || capture_load_maps(T, p))
		return -1;
	p->ready = 1;
	p->pk->last_faults = resid_faults(p->resid);
	p->pk->rss_at_refresh = resid_rss(p->resid);
	return 0;
}

void lifecycle_new_image(struct tracer *T, struct tracee *t)
{
	unsigned long former = 0;
	ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &former);
	/* A non-leader thread that execs takes the leader's tid; its old tid never reports an exit. */
	if ((pid_t)former != t->tid) {
		struct tracee *old = tracer_find(T, (pid_t)former);
		if (old)
			lifecycle_remove_thread(T, old);
	}
	struct proc *p = t->p;
	alloc_forget(t);
	t->ret->armed = 0;
	t->exiting = 0;
	/* The kernel's probes of the old image go with it. */
	kheap_proc_release(p);
	rescue_return_done(t->rescue);
	rescue_bytes_forget_pid(p->pid);
	int wrappers = p->hooks->wrappers, no_heap = p->hooks->no_heap, exact = p->hooks->exact_sizes;
	hooks_fin(p->hooks);
	hooks_init(p->hooks);
	p->hooks->wrappers = wrappers;
	p->hooks->no_heap = no_heap;
	p->hooks->exact_sizes = exact;
}

static uint64_t page_up(uint64_t x)
{
	uint64_t ps = (uint64_t)sysconf(_SC_PAGESIZE);
	return (x + ps - 1) & ~(ps - 1);
}

/* The main thread's stack is mapped by the kernel, not by a call: charge it to a pseudo frame. */
static void add_main_stack(struct tracer *T, struct proc *p)
{
	if (!p->mm->stack_end)
		return;
	struct rlimit rl;
	uint64_t size = 8 << 20;
	if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (1ULL << 32))
		size = page_up(rl.rlim_cur);
	uint64_t lo = p->mm->stack_end - size;
	if (lo > p->mm->stack_start)
		lo = p->mm->stack_start;
	uint32_t f = stacks_pseudo_frame(T->stacks, "[main thread stack]");
	uint32_t node = f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(T->stacks, &f, 1);
	if (ledger_add(p->ledger, lo, p->mm->stack_end, node, SNAP_KIND_PSEUDO))
		warning("out of memory recording a mapping");
}

int lifecycle_exec(struct tracer *T, struct proc *p)
{
	/*
	 * A new image: what the old one had mapped is gone, the peak stays. What
	 * the ledger last knew of the old one may be a peak, its own or the tree's.
	 */
	if (p->ready)
		peak_check(T, p);
	heap_clear(p->heap);
	ledger_remove(p->ledger, 0, UINT64_MAX);
	p->brk_cur = 0;
	p->tree->inherited = 0;
	if (T->opts.follow_forks)
		peak_refresh_inherited(T, p);  /* the pages it shared are its relatives' alone now */
	pyproc_fin(p->py);
	pyproc_init(p->py);
	if (lifecycle_ready(T, p))
		return -1;
	int view = lifecycle_set_view(T, p);
	if (view != CHARGE_ALLOC) {
		/* What exec made resident before the program ran (its stack of arguments and environment). */
		uint32_t f = stacks_pseudo_frame(T->stacks, "[program start]");
		faults_charge_resident(T, p, f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(T->stacks, &f, 1));
	}
	add_main_stack(T, p);
	/* The touch view alone needs no malloc-family hooks: the faults say what became resident. */
	p->hooks->no_heap = T->opts.no_heap || view == CHARGE_TOUCH;
	if (view != CHARGE_TOUCH)
		kheap_proc_setup(T, p);
	if ((!p->hooks->no_heap || p->hooks->wrappers) && hooks_exec(p->hooks, p->pid, p->mm, T->reg))
		warning("process %d: the malloc family cannot be hooked; only mappings are charged", (int)p->pid);
	return 0;
}
