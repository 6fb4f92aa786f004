/* The process and thread tables: threads hashed by tid, processes in a list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/stacks/capture.h"
#include "tracer/core/session.h"
#include "tracer/kernel/kheap.h"
#include "tracer/core/procfs.h"
#include "tracer/core/rescue.h"

double tracer_now(const struct tracer *T)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - T->t0;
}

struct tracee *tracer_find(struct tracer *T, pid_t tid)
{
	for (struct tracee *t = T->threads[(unsigned)tid % TRACER_HASH]; t; t = t->hnext)
		if (t->tid == tid)
			return t;
	return NULL;
}

struct proc *tracer_proc(struct tracer *T, pid_t pid)
{
	for (struct proc *p = T->procs; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

static uint64_t measure_excl(void *arg, uint64_t start, uint64_t end)
{
	return resid_range_exclusive(arg, start, end);
}

static uint64_t measure(void *arg, uint64_t start, uint64_t end)
{
	return resid_range(arg, start, end);
}

static struct proc *proc_new(struct tracer *T, pid_t pid)
{
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->resid.pagemap_fd = p->resid.stat_fd = p->resid.statm_fd = -1;
	ledger_init(&p->ledger, measure, &p->resid);
	p->ledger.measure_excl = measure_excl;
	heap_init(&p->heap, &p->ledger, T->opts.large_block, (uint64_t)sysconf(_SC_PAGESIZE));
	hooks_init(&p->hooks);
	p->hooks.exact_sizes = T->opts.exact_sizes;
	p->hooks.probe_ctx = p;
	modmap_init(&p->mm);
	pyproc_init(&p->py);
	u64map_init(&p->seen);
	p->status = -1;
	p->started = tracer_now(T);
	/* The main process is profiled from the start; a child is decided at its first stop. */
	p->profiled = pid == T->main_pid;
	p->fresh = pid != T->main_pid;
	p->next = T->procs;
	T->procs = p;
	return p;
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

struct tracee *tracer_add_thread(struct tracer *T, pid_t tid)
{
	/* A tid seen again is a new thread: no longer retired. */
	for (size_t i = 0; i < TRACER_RETIRED; i++)
		if (T->retired[i] == tid)
			T->retired[i] = 0;
	struct tracee *t = calloc(1, sizeof(*t));
	if (!t) {
		error("out of memory");
		return NULL;
	}
	pid_t ppid = 0;
	pid_t pid = tid == T->main_pid ? tid : tgid_of(tid, &ppid);
	struct proc *p = tracer_proc(T, pid);
	if (!p) {
		if (!(p = proc_new(T, pid))) {
			free(t);
			error("out of memory");
			return NULL;
		}
		/* A forked child's text is a copy of its parent's: it has the same breakpoints. */
		struct proc *parent = ppid ? tracer_proc(T, ppid) : NULL;
		if (parent && hooks_copy(&p->hooks, &parent->hooks))
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
	if (p->nthreads == 0 && p->parent)
	{
		for (size_t i = 0; i < p->hooks.n; i++)
			rescue_byte_note(tid, p->hooks.v[i].addr, p->hooks.v[i].orig);
		if (p->hooks.trampoline_armed)
			rescue_byte_note(tid, p->hooks.trampoline, p->hooks.trampoline_orig);
	}
	p->nthreads++;
	unsigned h = (unsigned)tid % TRACER_HASH;
	t->hnext = T->threads[h];
	T->threads[h] = t;
	T->n_threads++;
	return t;
}

void proc_fin(struct proc *p)
{
	if (p->argv)
		for (char **a = p->argv; *a; a++)
			free(*a);
	free(p->argv);
	free(p->samples);
	u64map_fin(&p->seen);
	resid_close(&p->resid);
	kheap_proc_release(p);
	free(p->klinks);
	heap_fin(&p->heap);
	hooks_fin(&p->hooks);
	ledger_fin(&p->ledger);
	free(p->at_tree);
	modmap_fin(&p->mm);
	pyproc_fin(&p->py);
	free(p);
}

void tracer_drop_proc(struct tracer *T, struct proc *p)
{
	if (T->unw_owner == p)
		capture_account(T, NULL);
	tree_note(T, p);
	rescue_bytes_forget_pid(p->pid);
	for (struct proc **pp = &T->procs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	proc_fin(p);
}

int tracer_retired(const struct tracer *T, pid_t tid)
{
	for (size_t i = 0; i < TRACER_RETIRED; i++)
		if (T->retired[i] == tid)
			return 1;
	return 0;
}

void tracer_remove_thread(struct tracer *T, struct tracee *t)
{
	T->retired[T->retired_next++ % TRACER_RETIRED] = t->tid;
	unsigned h = (unsigned)t->tid % TRACER_HASH;
	for (struct tracee **pp = &T->threads[h]; *pp; pp = &(*pp)->hnext)
		if (*pp == t) {
			*pp = t->hnext;
			break;
		}
	T->n_threads--;
	struct proc *p = t->p;
	rescue_thread_del(t->rescue);
	free(t);
	/* The profiled process is kept for the snapshot; others go with their last thread. */
	if (--p->nthreads == 0) {
		resid_close(&p->resid);
		if (!p->profiled)
			tracer_drop_proc(T, p);
	}
}
