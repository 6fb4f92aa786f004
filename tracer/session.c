/*
 * The tracing session, whether it launched its program or attached to it:
 * its tables and each module's state of the run, made and freed together.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/core/session.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/lifecycle.h"
#include "tracer/memory/tree.h"
#include "tracer/output/export.h"
#include "tracer/output/live.h"
#include "tracer/session.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/stacks.h"
#include "tracer/stacks/unwind.h"

int session_init(struct tracer *T, const struct tracer_opts *o)
{
	memset(T, 0, sizeof(*T));
	T->opts = *o;
	T->main_status = -1;
	notice_set_quiet(o->quiet);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	T->t0 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	clock_gettime(CLOCK_REALTIME, &ts);
	T->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	/* DESIGN.md, Placement: see loop_wait. */
	const char *spin = getenv("PTFIL_SPIN_US");
	T->spin = (spin && *spin ? strtod(spin, NULL) : TRACER_SPIN_US) * 1e-6;
	if (!(T->spin >= 0 && T->spin <= 0.01))
		T->spin = TRACER_SPIN_US * 1e-6;
	T->stacks = calloc(1, sizeof(*T->stacks));
	T->reg = calloc(1, sizeof(*T->reg));
	T->unw = calloc(1, sizeof(*T->unw));
	T->cap = calloc(1, sizeof(*T->cap));
	T->tree = calloc(1, sizeof(*T->tree));
	T->exp = calloc(1, sizeof(*T->exp));
	T->live = calloc(1, sizeof(*T->live));
	if (!T->stacks || !T->reg || !T->unw || !T->cap || !T->tree || !T->exp || !T->live)
		return error("out of memory");
	capture_init(T->cap);
	if (stacks_init(T->stacks) || modreg_init(T->reg) || unwind_init(T->unw))
		return error("cannot initialize the tracer");
	return 0;
}

/*
 * Detaching BPF programs from tracepoints, and uprobes from a launched
 * program's libraries, waits for the kernel to be done with them (tens of
 * milliseconds a link): that wait happens in a child of ptfil's
 * that outlives it, holding the last references to them, so that ptfil's own
 * exit (and the shell's prompt) does not wait for it.
 */
static void kernel_close_later(struct tracer *T)
{
	if (!T->kf && !kheap_on(T))
		return;
	int fd[2];
	if (pipe(fd))
		return;
	pid_t c = fork();
	if (c < 0) {
		close(fd[0]);
		close(fd[1]);
		return;
	}
	if (c == 0) {
		/* Nothing of ptfil's output kept open: a pipeline ends when ptfil does. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int i = 0; i < 3 && null >= 0; i++)
			dup2(null, i);
		close(fd[1]);
		char b;
		/* Until ptfil has closed its copies (its exit, or the pipe's last writer gone). */
		while (read(fd[0], &b, 1) < 0 && errno == EINTR) {
		}
		_exit(0);
	}
	close(fd[0]);
	/* The write end stays open until ptfil exits: the child's read then ends, and its exit closes the links. */
	(void)fcntl(fd[1], F_SETFD, FD_CLOEXEC);
}

void session_fin(struct tracer *T)
{
	kernel_close_later(T);
	kheap_free(T);
	faults_free(T);
	if (T->cap)
		T->cap->unw_owner = NULL;
	while (T->procs) {
		struct proc *p = T->procs;
		tables_unlink_proc(T, p);
		lifecycle_proc_free(p);
	}
	for (size_t h = 0; h < TRACER_HASH; h++)
		while (T->threads[h]) {
			struct tracee *t = T->threads[h];
			T->threads[h] = t->hnext;
			lifecycle_thread_free(t);
		}
	if (T->unw)
		unwind_fin(T->unw);
	if (T->cap)
		capture_fin(T->cap);
	if (T->exp)
		export_fin(T);
	if (T->live)
		live_fin(T);
	if (T->tree)
		tree_fin(T->tree);
	if (T->reg)
		modreg_fin(T->reg);
	if (T->stacks)
		stacks_fin(T->stacks);
	free(T->stacks);
	free(T->reg);
	free(T->unw);
	free(T->cap);
	free(T->tree);
	free(T->exp);
	free(T->live);
	T->stacks = NULL;
	T->reg = NULL;
	T->unw = NULL;
	T->cap = NULL;
	T->tree = NULL;
	T->exp = NULL;
	T->live = NULL;
}
