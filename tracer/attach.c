/*
 * ptfil attach: profile a process that is already running, then leave it as
 * it was. Also what attach and launch share about processes that appear while
 * tracing: a forked child is either followed (profiled from its first stop)
 * or cleaned of the breakpoints it inherited.
 *
 * `ptfil attach` runs as two processes. The one the user started only waits:
 * it passes its signals on and returns the tracer's status. The tracer, its
 * child, does the work. So `kill -9` of ptfil kills a process that traces
 * nothing, and the tracer, told by the kernel that its parent died, detaches
 * cleanly instead of leaving breakpoints behind with no one to answer them.
 */
#include <errno.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/kcmp.h>

#include "common/error.h"
#include "common/snap.h"
#include "symbols/maps.h"
#include "tracer/loop.h"
#include "tracer/procfs.h"
#include "tracer/refuse.h"
#include "tracer/rescue.h"
#include "tracer/tracee.h"

#define ATTACH_TIMEOUT_S 10.0 /* for every thread to stop at the attach */
#define ATTACH_OPTIONS (PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | \
			PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT)

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
	uint32_t f = stacks_pseudo_frame(&T->stacks, pseudo);
	uint32_t node = f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(&T->stacks, &f, 1);
	for (size_t i = 0; i < maps.n; i++) {
		const struct maps_entry *e = &maps.v[i];
		if (e->path && !strcmp(e->path, "[heap]"))
			p->brk_cur = e->end;
		if (!maps_entry_is_anon(e) || !(e->perms & (MAPS_R | MAPS_W)))
			continue;
		if (ledger_add_capped(&p->ledger, e->start, e->end, node, SNAP_KIND_PSEUDO))
			warning("out of memory recording the memory of process %d", (int)p->pid);
	}
	maps_fin(&maps);
}

int proc_follow(struct tracer *T, struct proc *p, pid_t tid, const char *pseudo, int arm)
{
	p->profiled = 1;
	if (!p->argv)
		p->argv = procfs_argv(p->pid);
	if (resid_open(&p->resid, p->pid) || modmap_load(&p->mm, &T->reg, p->pid))
		return -1;
	p->maps_loaded_at = tracer_now(T);
	unwind_flush(&T->unw);
	p->ready = 1;
	p->last_faults = resid_faults(&p->resid);
	charge_existing(T, p, pseudo);
	/* With --mappings-only, attach still needs the mapping calls' wrappers: there is no seccomp filter. */
	if (arm && (!T->opts.no_heap || p->wrappers)) {
		p->hooks.wrappers = p->wrappers;
		p->hooks.no_heap = T->opts.no_heap;
		if (hooks_exec(&p->hooks, tid, &p->mm, &T->reg) || hooks_scan(&p->hooks, tid, &p->mm, &T->reg))
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
	if (hooks_remove(&p->hooks, t->tid))
		warning("process %d: some breakpoints could not be removed", (int)p->pid);
	if (!T->attach)
		return 0; /* launch: the seccomp filter needs a tracer; it stays traced, at its mapping calls only */
	if (ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)sig) && errno != ESRCH)
		warning("cannot detach from process %d: %s", (int)p->pid, strerror(errno));
	tracer_remove_thread(T, t);
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
		p->hooks.wrappers = p->wrappers;
		return 0;
	}
	if (was_shared && T->attach) {
		/* A vfork child, not followed, now in a new image with no breakpoints: let it go. */
		if (ptrace(PTRACE_DETACH, t->tid, 0, 0) && errno != ESRCH)
			warning("cannot detach from process %d: %s", (int)p->pid, strerror(errno));
		tracer_remove_thread(T, t);
		return 1;
	}
	return 0;
}

/* ---- the tracer process ---------------------------------------------------- */

/* True when process pid has a live thread besides its main one. */
static int other_threads(pid_t pid)
{
	static const char *const name[] = { "Threads" };
	unsigned long long n = 0;
	procfs_status(pid, name, &n, 1, 10);
	return n > 1;
}

/* The threads of pid now, from /proc/PID/task; each new one is seized and interrupted. Returns how many were new, or -1. */
static int seize_new_threads(struct tracer *T, pid_t pid, int *status)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d) {
		*status = refuse_explain(pid, errno == ENOENT ? ESRCH : errno);
		return -1;
	}
	int added = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid <= 0 || tracer_find(T, tid))
			continue;
		if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)ATTACH_OPTIONS)) {
			if (tid != pid && errno == ESRCH)
				continue; /* a thread that ended meanwhile */
			/*
			 * A main thread that called pthread_exit is a zombie that ptrace
			 * refuses, while the process runs on in its other threads: those
			 * are traced, and they are all that can still run.
			 */
			if (tid == pid && errno == EPERM && procfs_state(tid, NULL) == 'Z' && other_threads(pid))
				continue;
			int e = errno;
			closedir(d);
			*status = refuse_explain(pid, e);
			return -1;
		}
		struct tracee *t = tracer_add_thread(T, tid);
		if (!t) {
			closedir(d);
			*status = 1;
			return -1;
		}
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		added++;
	}
	closedir(d);
	return added;
}

/* Restarts every parked thread as its stop requires. */
static void unpark_all(struct tracer *T)
{
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *t = T->threads[h]; t; t = t->hnext) {
			if (!t->parked)
				continue;
			t->parked = 0;
			int req = t->group_stop ? PTRACE_LISTEN : PTRACE_CONT;
			if (ptrace(req, t->tid, 0, (void *)(long)(t->group_stop ? 0 : t->park_sig)) && errno != ESRCH)
				error_errno("cannot restart thread %d", (int)t->tid);
			t->park_sig = 0;
			t->group_stop = 0;
		}
}

/* A parked thread of p that can still run (not exiting), or NULL. */
static struct tracee *live_thread(struct tracer *T, struct proc *p)
{
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *t = T->threads[h]; t; t = t->hnext)
			if (t->p == p && t->parked && !t->exiting)
				return t;
	return NULL;
}

static int trace(struct tracer *T, pid_t pid)
{
	double t_start = tracer_now(T);
	int status = 0, n;
	/* Threads started while we seize are seized by their creator's PTRACE_O_TRACECLONE or by the next pass. */
	while ((n = seize_new_threads(T, pid, &status)) > 0)
		;
	if (n < 0) {
		/* Whatever was seized goes back as it was. */
		tracer_leave(T);
		return status;
	}
	if (loop_park_all(T, ATTACH_TIMEOUT_S)) {
		tracer_leave(T);
		error("cannot stop process %d to attach; detached", (int)pid);
		return 1;
	}
	struct proc *p = tracer_proc(T, pid);
	if (!p || !p->nthreads || !live_thread(T, p)) {
		error("process %d exited while ptfil attached", (int)pid);
		return REFUSE_GONE;
	}
	p->wrappers = 1;
	struct tracee *any = live_thread(T, p);
	if (proc_follow(T, p, any->tid, "[before attach]", 1)) {
		tracer_leave(T);
		error("cannot read the memory of process %d; detached", (int)pid);
		return 1;
	}
	sysc_poll(T, p);
	int nthreads = p->nthreads;
	unpark_all(T);
	double took = tracer_now(T) - t_start;
	if (!T->opts.quiet) {
		char comm[64] = "?";
		procfs_comm(pid, comm, sizeof(comm));
		fprintf(stderr, "%s: attached to process %d (%s, %d thread%s) in %.1f ms; Ctrl-C to detach\n",
			error_progname(), (int)pid, comm, nthreads, nthreads == 1 ? "" : "s", took * 1000.0);
	}
	if (T->opts.duration > 0)
		T->deadline = tracer_now(T) + T->opts.duration;
	loop_run(T);
	int target_ended = T->main_status >= 0;
	/* Followed children may outlive the main process: they are left as it would be. */
	if (T->n_threads)
		tracer_leave(T);
	struct proc *mp = tracer_proc(T, pid);
	char *path = mp ? run_snapshot_path(T, mp, 0) : NULL;
	int rc = 0;
	if (!mp || !path || tracer_write_snapshot(T, mp, 0, path)) {
		error("no snapshot written");
		rc = 1;
	} else if (!T->opts.quiet) {
		if (target_ended)
			fprintf(stderr, "%s: process %d exited with status %d\n", error_progname(), (int)pid, mp->status);
		else
			fprintf(stderr, "%s: detached from process %d\n", error_progname(), (int)pid);
		run_summary(mp, path);
	}
	free(path);
	/* Followed children still in the table (they outlived the main process or were detached). */
	for (struct proc *c = T->procs; c; c = c->next)
		if (c != mp && c->profiled && c->ready)
			run_write(T, c, 0);
	return rc;
}

static char *default_output(pid_t pid)
{
	char comm[64] = "process";
	procfs_comm(pid, comm, sizeof(comm));
	/* A name with a slash would make a path: keep to the file name. */
	for (char *c = comm; *c; c++)
		if (*c == '/')
			*c = '_';
	return tracer_default_output(comm, pid);
}

static pid_t front_child;

/* In the process the user started: signals are for the tracer. From the terminal it got them too. */
static void front_forward(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (front_child > 0 && si->si_code != SI_KERNEL)
		kill(front_child, sig);
}

int tracer_attach(const struct tracer_opts *o)
{
	pid_t pid = o->attach_pid;
	int refused = refuse_check(pid);
	if (refused)
		return refused;
	char *def = NULL;
	const char *output = o->output;
	if (!output && !(output = def = default_output(pid)))
		return error("out of memory"), 1;

	static const int sigs[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1 };
	sigset_t block, old;
	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&block, sigs[i]);
	/* Held until each side has its handlers, so an early Ctrl-C is not lost. */
	sigprocmask(SIG_BLOCK, &block, &old);
	pid_t front = getpid();
	pid_t child = fork();
	if (child < 0) {
		free(def);
		return error_errno("cannot fork"), 1;
	}
	if (child == 0) {
		static struct tracer T;
		if (run_init(&T, o))
			_exit(1);
		T.attach = 1;
		T.main_pid = pid;
		T.output = output;
		run_install_handlers(1);
		/* A crash of the tracer itself still leaves the target as it was. */
		rescue_install();
		/* The user's ptfil gone (even by SIGKILL): leave as on Ctrl-C. */
		prctl(PR_SET_PDEATHSIG, SIGHUP);
		if (getppid() != front)
			loop_leave = 1;
		sigprocmask(SIG_SETMASK, &old, NULL);
		run_start_timer(o->interval_ms ? o->interval_ms : 250);
		int rc = trace(&T, pid);
		run_stop_timer();
		run_fin(&T);
		fflush(stderr);
		_exit(rc);
	}
	front_child = child;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = front_forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	int status;
	pid_t got;
	while ((got = waitpid(child, &status, 0)) < 0 && errno == EINTR)
		;
	free(def);
	if (got != child)
		return error_errno("waitpid"), 1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	error("ptfil's tracing process died of signal %d (a bug in ptfil); it tried to leave process %d as it was",
	      WTERMSIG(status), (int)pid);
	return 1;
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
	if (!p->wrappers || !p->ready || !p->nthreads || now - p->reconciled_at < 1.0)
		return;
	p->reconciled_at = now;
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
		if (ledger_overlaps(&p->ledger, e->start, e->end) || u64map_get(&p->seen, e->start) != U64MAP_NONE)
			continue;
		if (u64map_put(&p->seen, e->start, 1))
			break;
		if (holds_blocks(&p->heap, e->start, e->end))
			continue;
		/* Made by a raw system call, or by code with its own wrapper (the dynamic linker). */
		if (node == STACKS_FAILED) {
			uint32_t f = stacks_pseudo_frame(&T->stacks, "[unhooked mmap]");
			node = f == STACKS_FAILED ? STACKS_ROOT : stacks_intern(&T->stacks, &f, 1);
		}
		if (ledger_add(&p->ledger, e->start, e->end, node, SNAP_KIND_PSEUDO))
			break;
		T->reconciled++;
	}
	maps_fin(&maps);
}
