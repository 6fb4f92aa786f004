/*
 * ptfil attach: profile a process that is already running, then leave it as
 * it was (tracer/detach.c). Its children are followed or let go as under
 * launch (tracer/follow.c).
 *
 * `ptfil attach` runs as two processes. The one the user started only waits:
 * it passes its signals on and returns the tracer's status. The tracer, its
 * child, does the work. So `kill -9` of the ptfil the user started kills a
 * process that traces nothing, and the tracer, told by the kernel that its
 * parent died, detaches cleanly. A SIGKILL of the tracer itself cannot be
 * handled: whatever breakpoints it wrote stay (README.md, "Attaching to a running process").
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/core/procfs.h"
#include "tracer/core/rescue.h"
#include "tracer/core/session.h"
#include "tracer/detach.h"
#include "tracer/follow.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/lifecycle.h"
#include "tracer/loop.h"
#include "tracer/memory/peak.h"
#include "tracer/output/export.h"
#include "tracer/output/live.h"
#include "tracer/output/snapshot.h"
#include "tracer/output/summary.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/refuse.h"
#include "tracer/session.h"
#include "tracer/signals.h"
#include "tracer/stacks/modules.h"
#include "tracer/tracer.h"

#define ATTACH_TIMEOUT_S 10.0 /* for every thread to stop at the attach */
#define ATTACH_OPTIONS (PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | \
			PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT)

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
			/*
			 * A thread started by one seized already is traced already (by
			 * PTRACE_O_TRACECLONE), its first stop not seen yet: expect it.
			 */
			pid_t tracer = 0;
			int seize_errno = errno;
			char st = seize_errno == EPERM ? procfs_state(tid, &tracer) : 0;
			/*
			 * Such a thread may also have ended before its state could be
			 * read: it was ours (nothing else traces a process ptfil has
			 * seized threads of), and it is gone.
			 */
			if (seize_errno == EPERM && tid != pid && !st && T->n_threads > 0)
				continue;
			errno = seize_errno;
			if (errno == EPERM && st && tracer == getpid()) {
				if (!tracer_find(T, tid) && !lifecycle_add_thread(T, tid)) {
					closedir(d);
					*status = 1;
					return -1;
				}
				added++;
				continue;
			}
			int e = errno;
			closedir(d);
			*status = refuse_explain(pid, e);
			return -1;
		}
		struct tracee *t = lifecycle_add_thread(T, tid);
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
	/*
	 * Asked to leave before anything was seized (Ctrl-C while the BPF programs
	 * loaded, or the front already gone): the target is not touched at all.
	 */
	if (loop_leave) {
		notice("interrupted before attaching: process %d was not touched", (int)pid);
		return 1;
	}
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
	/* Before the probes go in: the back-pressure signal and the ring's marks are set. */
	if (kheap_start(T) || faults_start(T)) {
		tracer_leave(T);
		return 1;
	}
	struct tracee *any = live_thread(T, p);
	if (proc_follow(T, p, any->tid, "[before attach]", 1)) {
		tracer_leave(T);
		error("cannot read the memory of process %d; detached", (int)pid);
		return 1;
	}
	peak_poll(T, p);
	int nthreads = p->nthreads;
	unpark_all(T);
	double took = tracer_now(T) - t_start;
	char comm[64] = "?";
	procfs_comm(pid, comm, sizeof(comm));
	notice("attached to process %d (%s, %d thread%s) in %.1f ms; Ctrl-C to detach",
	       (int)pid, comm, nthreads, nthreads == 1 ? "" : "s", took * 1000.0);
	if (p->hooks->n || p->hooks->trampoline_armed)
		notice("breakpoints are in process %d's code while attached (the alloc view): every way of stopping "
		       "ptfil takes them out, even kill -9 of ptfil (pid %d), but not kill -9 of its tracing process "
		       "(pid %d), which would leave them to kill process %d; --charge touch needs none",
		       (int)pid, (int)getppid(), (int)getpid(), (int)pid);
	if (T->opts.duration > 0)
		T->deadline = tracer_now(T) + T->opts.duration;
	T->live->on = T->opts.live != NULL;
	loop_run(T);
	live_end(T);
	int target_ended = T->main_status >= 0;
	/* Followed children may outlive the main process: they are left as it would be. */
	if (T->n_threads)
		tracer_leave(T);
	kheap_end(T);
	faults_end(T);
	struct proc *mp = tracer_proc(T, pid);
	char *path = mp ? snapshot_path(T, mp, 0) : NULL;
	int rc = 0;
	if (!mp || !path || tracer_write_snapshot(T, mp, 0, path)) {
		error("no snapshot written");
		rc = 1;
	} else {
		if (target_ended)
			notice("process %d exited with status %d", (int)pid, mp->status);
		else
			notice("detached from process %d", (int)pid);
		summary_peak(T, mp, path);
	}
	free(path);
	/* Followed children still in the table (they outlived the main process or were detached). */
	for (struct proc *c = T->procs; c; c = c->next)
		if (c != mp && c->profiled && c->ready)
			snapshot_write(T, c, 0);
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
static volatile sig_atomic_t front_all; /* the tracing process is in a group of its own */

/*
 * In the process the user started: signals are for the tracer. In the same
 * group it got the terminal's too (SI_KERNEL); in a group of its own, only
 * through here.
 */
static void front_forward(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (front_child > 0 && (front_all || si->si_code != SI_KERNEL))
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
	/*
	 * The tracing process gets a process group of its own, so that a kill of
	 * the front's group (kill -9 -- -PGID, a job control stop) reaches only
	 * the front: its death is a clean leave (PR_SET_PDEATHSIG below). Not
	 * with --live, which draws on the terminal and reads its keys from there
	 * (the terminal's foreground group).
	 */
	int own_group = !o->live;
	pid_t child = fork();
	if (child < 0) {
		free(def);
		return error_errno("cannot fork"), 1;
	}
	if (child == 0) {
		static struct tracer T;
		if (own_group) {
			setpgid(0, 0);
			/* Out of the terminal's foreground group: its messages are still written under stty tostop. */
			signal(SIGTTOU, SIG_IGN);
		}
		/*
		 * Root may make the OOM killer pass over the tracing process, so that
		 * it chooses among the processes it would choose without ptfil
		 * (-999: unless ptfil itself grew to nearly all of memory).
		 */
		int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
		if (adj >= 0) {
			if (write(adj, "-999", 4) < 0) {
				/* Not root: it stays where it was. */
			}
			close(adj);
		}
		if (session_init(&T, o))
			_exit(1);
		/* Before the event sources are chosen: the fault path loads what attach needs. */
		T.attach = 1;
		/* While the BPF programs load. */
		modreg_warm(T.reg);
		if (faults_choose(&T) || kheap_choose(&T))
			_exit(1);
		T.main_pid = pid;
		T.output = output;
		signals_install(1);
		/* A crash of the tracer itself still leaves the target as it was. */
		rescue_install();
		/* The user's ptfil gone (even by SIGKILL): leave as on Ctrl-C. */
		prctl(PR_SET_PDEATHSIG, SIGHUP);
		if (getppid() != front)
			loop_leave = 1;
		sigprocmask(SIG_SETMASK, &old, NULL);
		signals_start_timer(o->interval_ms ? o->interval_ms : 250);
		int rc = trace(&T, pid);
		signals_stop_timer();
		session_fin(&T);
		fflush(stderr);
		_exit(rc);
	}
	front_child = child;
	if (own_group) {
		/* As the child does too: whichever runs first, the group exists before a signal is forwarded. */
		setpgid(child, child);
		front_all = 1;
	}
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
