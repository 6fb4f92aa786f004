/*
 * What a tracing session needs whether it launched its program or attached to
 * it: the tracer's tables, ptfil's own signal handlers and timer, snapshot
 * names, and writing snapshots (at the end, at new peaks, and on SIGUSR1).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "common/error.h"
#include "common/snap.h"
#include "tracer/core/session.h"
#include "tracer/output/export.h"
#include "tracer/output/live.h"
#include "tracer/loop.h"
#include "tracer/run.h"

/* How often at most a growing peak is written again, so that a killed ptfil leaves a recent one. */
#define CHECKPOINT_SECONDS 1.0

int run_init(struct tracer *T, const struct tracer_opts *o)
{
	memset(T, 0, sizeof(*T));
	T->opts = *o;
	T->main_status = -1;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	T->t0 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	clock_gettime(CLOCK_REALTIME, &ts);
	T->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	pynames_init(&T->pynames);
	T->new_thread_frame = STACKS_FAILED;
	T->py_cut_frame = STACKS_FAILED;
	const char *np = getenv("PTFIL_NO_PYTHON");
	T->no_python = np && *np && strcmp(np, "0") != 0;
	/* DESIGN.md, Placement: see loop_wait. */
	const char *spin = getenv("PTFIL_SPIN_US");
	T->spin = (spin && *spin ? strtod(spin, NULL) : TRACER_SPIN_US) * 1e-6;
	if (!(T->spin >= 0 && T->spin <= 0.01))
		T->spin = TRACER_SPIN_US * 1e-6;
	if (stacks_init(&T->stacks) || modreg_init(&T->reg) || unwind_init(&T->unw))
		return error("cannot initialize the tracer");
	return 0;
}

void run_fin(struct tracer *T)
{
	kheap_end(T);
	T->unw_owner = NULL;
	while (T->procs) {
		struct proc *p = T->procs;
		T->procs = p->next;
		proc_fin(p);
	}
	for (size_t h = 0; h < TRACER_HASH; h++)
		while (T->threads[h]) {
			struct tracee *t = T->threads[h];
			T->threads[h] = t->hnext;
			free(t);
		}
	unwind_fin(&T->unw);
	pynames_fin(&T->pynames);
	export_fin(T);
	live_fin(T);
	tree_fin(&T->tree);
	modreg_fin(&T->reg);
	stacks_fin(&T->stacks);
}

/* The signals ptfil catches while it traces, and what they were before (a launched child gets those back). */
static const int caught[RUN_CAUGHT] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1 };
static struct sigaction saved[RUN_CAUGHT];

/* launch: the program decides what a signal means, ptfil follows it out. */
static void on_forward(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	/* From the terminal (SI_KERNEL) the program got the signal too. Sent to ptfil alone, by kill, it is passed on. */
	if (si->si_code != SI_KERNEL && sig < 65) {
		loop_forward_from[sig] = si->si_pid;
		loop_forward[sig] = 1;
		loop_forward_any = 1;
	}
}

/* attach: ptfil leaves, the program never hears of it. */
static void on_leave(int sig)
{
	(void)sig;
	loop_leave = 1;
}

static void on_dump(int sig)
{
	(void)sig;
	loop_dump = 1;
}

static void on_alarm(int sig)
{
	(void)sig;
	loop_tick = 1;
}

/* SIGPIPE as ptfil was given it: a launched program gets it back (an ignored signal stays ignored across exec). */
static struct sigaction saved_pipe;

void run_install_handlers(int attach)
{
	struct sigaction sa;
	/*
	 * A closed stderr (ptfil ... 2>&1 | head) must not kill ptfil while it
	 * holds breakpoints in the program: a write fails with EPIPE instead.
	 */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &saved_pipe);
	for (size_t i = 0; i < RUN_CAUGHT; i++) {
		memset(&sa, 0, sizeof(sa));
		sigemptyset(&sa.sa_mask);
		/* No SA_RESTART: waitpid returns to the loop, which looks at the flags. */
		if (caught[i] == SIGUSR1) {
			sa.sa_handler = on_dump;
		} else if (attach) {
			sa.sa_handler = on_leave;
		} else {
			sa.sa_sigaction = on_forward;
			sa.sa_flags = SA_SIGINFO;
		}
		sigaction(caught[i], &sa, &saved[i]);
	}
}

void run_restore_handlers(void)
{
	sigaction(SIGPIPE, &saved_pipe, NULL);
	for (size_t i = 0; i < RUN_CAUGHT; i++)
		sigaction(caught[i], &saved[i], NULL);
}

void run_start_timer(unsigned interval_ms)
{
	struct sigaction al;
	memset(&al, 0, sizeof(al));
	al.sa_handler = on_alarm;
	sigemptyset(&al.sa_mask);
	sigaction(SIGALRM, &al, NULL);
	struct itimerval it;
	it.it_interval.tv_sec = interval_ms / 1000;
	it.it_interval.tv_usec = (interval_ms % 1000) * 1000;
	it.it_value = it.it_interval;
	setitimer(ITIMER_REAL, &it, NULL);
}

void run_stop_timer(void)
{
	struct itimerval it;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
}

char *run_snapshot_path(struct tracer *T, struct proc *p, unsigned live)
{
	const char *out = T->output;
	size_t stem = strlen(out);
	if (stem > 3 && !strcmp(out + stem - 3, ".gz"))
		stem -= 3;
	size_t n = stem + 64;
	char *s = malloc(n);
	if (!s)
		return NULL;
	int len = snprintf(s, n, "%.*s", (int)stem, out);
	if (p->pid != T->main_pid)
		len += snprintf(s + len, n - (size_t)len, ".%d", (int)p->pid);
	if (live)
		len += snprintf(s + len, n - (size_t)len, ".live-%u", live);
	if (p->pid != T->main_pid || live || stem != strlen(out))
		snprintf(s + len, n - (size_t)len, ".gz");
	return s;
}

int run_write(struct tracer *T, struct proc *p, int live)
{
	char *path = run_snapshot_path(T, p, live ? ++T->live_written : 0);
	if (!path)
		return error("out of memory");
	int rc = tracer_write_snapshot(T, p, live, path);
	if (rc == 0 && !live) {
		p->snap_written_at = tracer_now(T);
		p->snap_peak_time = p->ledger.peak.time;
	}
	if (rc == 0 && live && !T->opts.quiet)
		fprintf(stderr, "%s: live state of process %d written to %s\n", error_progname(), (int)p->pid, path);
	free(path);
	return rc;
}

void run_checkpoint(struct tracer *T)
{
	/* Reported once: the same error at every tick would bury the run; the end reports it for good. */
	static int failed;
	double now = tracer_now(T);
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled || !p->ready || !p->ledger.has_peak || p->ledger.peak.time == p->snap_peak_time)
			continue;
		if (p->snap_written_at && now - p->snap_written_at < CHECKPOINT_SECONDS)
			continue;
		/* A device or a FIFO (-o /dev/stdout) takes the last snapshot only: a rewrite would follow the first. */
		char *path = run_snapshot_path(T, p, 0);
		int in_place = path && snap_output_in_place(path);
		free(path);
		if (in_place)
			continue;
		error_set_quiet(failed);
		if (run_write(T, p, 0)) {
			failed = 1;
			p->snap_written_at = now;  /* tried again a second later, not at every tick */
		}
		error_set_quiet(0);
	}
}

void run_summary(struct proc *p, const char *path)
{
	const struct ledger_peak *pk = &p->ledger.peak;
	fprintf(stderr, "%s: peak %.1f MiB resident (%.1f MiB reserved) at %.2f s; process peak RSS %.1f MiB\n",
		error_progname(), (double)pk->charged / 1048576.0, (double)pk->reserved / 1048576.0, pk->time,
		(double)p->vmhwm / 1048576.0);
	fprintf(stderr, "%s: snapshot written to %s; read it with: ptfil-view %s\n", error_progname(), path, path);
}

void run_summary_children(struct tracer *T)
{
	const struct tree *t = &T->tree;
	size_t profiled = 0;
	for (size_t i = 0; i < t->n_done; i++)
		profiled += t->done[i].profiled;
	for (struct proc *q = T->procs; q; q = q->next)
		profiled += q->profiled;
	if (t->has_peak && profiled > 1)
		fprintf(stderr, "%s: combined peak of the %zu processes profiled: %.1f MiB at %.2f s (ptfil-view shows the tree)\n",
			error_progname(), profiled, (double)t->charged / 1048576.0, t->time);
	if (!t->unprofiled)
		return;
	/* The program's name alone: a compiler's command line runs for lines. */
	const char *cmd = t->unprofiled_command ? t->unprofiled_command : "?";
	size_t len = strcspn(cmd, " ");
	const char *base = cmd;
	for (const char *q = cmd; q < cmd + len; q++)
		if (*q == '/')
			base = q + 1;
	fprintf(stderr, "%s: %llu child process%s %s not profiled; the largest, %.*s (pid %d), peaked at %.1f MiB RSS: "
		"--follow-forks profiles them\n", error_progname(), (unsigned long long)t->unprofiled,
		t->unprofiled == 1 ? "" : "es", t->unprofiled == 1 ? "was" : "were", (int)(cmd + len - base), base,
		(int)t->unprofiled_pid, (double)t->unprofiled_hwm / 1048576.0);
}

int run_budget(struct tracer *T, struct proc *p, int rc)
{
	if (!T->opts.max_peak || !p)
		return rc;
	uint64_t peak = p->ledger.peak.charged, charged = 0;
	uint32_t node = STACKS_ROOT;
	pid_t who = p->pid;
	const char *what = "peak";
	size_t profiled = 0;
	for (size_t i = 0; i < T->tree.n_done; i++)
		profiled += T->tree.done[i].profiled;
	for (struct proc *q = T->procs; q; q = q->next)
		profiled += q->profiled;
	if (T->opts.follow_forks && profiled > 1 && tree_top(T, &node, &who, &charged) == 0) {
		peak = T->tree.charged;
		what = "combined peak";
	} else {
		for (size_t j = 0; j < p->ledger.n_at_peak; j++)
			if (p->ledger.at_peak[j].charged > charged) {
				charged = p->ledger.at_peak[j].charged;
				node = (uint32_t)j;
			}
	}
	if (peak <= T->opts.max_peak)
		return rc;
	char *stack = export_stack_text(T, node, 4);
	fprintf(stderr, "%s: %s %.1f MiB is over the budget of %.1f MiB (--max-peak); top stack, %.1f MiB in pid %d: %s\n",
		error_progname(), what, (double)peak / 1048576.0, (double)T->opts.max_peak / 1048576.0,
		(double)charged / 1048576.0, (int)who, stack ? stack : "?");
	free(stack);
	/* A program that failed says so first: its own status is kept. */
	return rc == 0 ? PTFIL_EXIT_OVER_BUDGET : rc;
}
