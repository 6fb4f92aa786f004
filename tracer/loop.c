/*
 * The event loop. Every waitpid result is classified once, by next_event,
 * into one value of enum event (tracer/core/event.h); two tables over it say what
 * to do: run_event while tracing (it restarts the thread as the event's rule
 * says) and park_event while ptfil holds every thread still, to arm its
 * breakpoints (attach) or take them out and detach (leaving). Every wait is
 * bounded: the running loop's by ptfil's interval timer, the parking loop's
 * by a deadline, and a thread that has exited, become a zombie or been let go
 * is never waited for again.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/core/event.h"
#include "tracer/core/procfs.h"
#include "tracer/core/session.h"
#include "tracer/follow.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/kernel/kwait.h"
#include "tracer/lifecycle.h"
#include "tracer/loop.h"
#include "tracer/memory/ledger.h"
#include "tracer/memory/peak.h"
#include "tracer/memory/resid.h"
#include "tracer/memory/tree.h"
#include "tracer/output/live.h"
#include "tracer/output/snapshot.h"
#include "tracer/ptrace/breakpoints.h"
#include "tracer/ptrace/mapcalls.h"
#include "tracer/stacks/capture.h"

volatile sig_atomic_t loop_tick;
volatile sig_atomic_t loop_forward[65];
volatile sig_atomic_t loop_forward_from[65];
volatile sig_atomic_t loop_forward_any;
volatile sig_atomic_t loop_leave;
volatile sig_atomic_t loop_dump;

/* The last signal of each number delivered to the main process, and who sent it. */
static struct {
	pid_t from;
	double time;
} delivered[65];

/* One stop, classified: the thread, what it is, and its registers when the classifier read them. */
struct stop {
	pid_t tid;
	int status;
	enum event ev;
	struct tracee *t;      /* NULL only for EVENT_GONE of a thread ptfil did not know */
	int have_regs;
	struct user_regs_struct regs;
};

static void restart(struct tracee *t, int request, int sig)
{
	if (request == PTRACE_SYSCALL)
		t->in_syscall = 1;
	/* ESRCH: the thread died meanwhile (SIGKILL); its exit is reported next. */
	if (ptrace(request, t->tid, 0, (void *)(long)sig) < 0 && errno != ESRCH)
		error_errno("cannot restart thread %d", (int)t->tid);
}

/* Holds t stopped until unparked or detached, with the signal it is to get then. */
static void park(struct tracee *t, int sig, int group_stop)
{
	t->parked = 1;
	t->park_sig = sig;
	t->group_stop = group_stop;
}

/* True when thread tid has signal sig queued for it alone (as a fault's or an int3's SIGTRAP is). */
static int thread_pending(pid_t tid, int sig)
{
	return procfs_signal(tid, "SigPnd", sig) == 1;
}

/*
 * Where the kernel's word is not enough: a SIGTRAP is ptfil's (EVENT_TRAP)
 * when the thread is just past one of its int3s and the kernel raised it for
 * an int3 (SI_KERNEL, not a kill); an interrupt or group stop just past one,
 * with a SIGTRAP queued, is EVENT_PAST_TRAP wherever it is seen: let go now,
 * the thread would die of that SIGTRAP.
 */
static void classify(struct tracer *T, struct stop *s)
{
	struct tracee *t = s->t;
	s->ev = event_decode(s->status);
	s->have_regs = 0;
	if (s->ev == EVENT_SIGNAL && WSTOPSIG(s->status) != SIGTRAP) {
		if (kheap_owns_stop(T, t, s->status) || faults_owns_stop(T, t, s->status))
			s->ev = EVENT_BACKPRESSURE;
		return;
	}
	if (s->ev != EVENT_SIGNAL && s->ev != EVENT_INTERRUPT && s->ev != EVENT_GROUP_STOP)
		return;
	if (ptrace(PTRACE_GETREGS, t->tid, 0, &s->regs))
		return;
	s->have_regs = 1;
	if (!bp_owns(t, &s->regs))
		return;
	if (s->ev == EVENT_SIGNAL) {
		siginfo_t si;
		if (ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) == 0 && si.si_code == SI_KERNEL)
			s->ev = EVENT_TRAP;
	} else if (thread_pending(t->tid, SIGTRAP)) {
		s->ev = EVENT_PAST_TRAP;
	}
}

/*
 * The next stop, classified. options: 0 to block, WNOHANG to poll. Returns 1
 * with *s filled, 0 when none is ready (WNOHANG), -1 with errno (EINTR,
 * ECHILD: nothing is traced any more).
 */
static int next_event(struct tracer *T, struct stop *s, int options)
{
	pid_t tid = waitpid(-1, &s->status, __WALL | options);
	if (tid <= 0)
		return tid;
	s->tid = tid;
	s->t = tracer_find(T, tid);
	s->ev = event_decode(s->status);
	if (!s->t && s->ev != EVENT_GONE) {
		/* A new thread or child can report before its creator's event. */
		if (!(s->t = lifecycle_add_thread(T, tid))) {
			/* Cannot keep track of it: let it run, as it would untraced. */
			ptrace(PTRACE_CONT, tid, 0, (void *)(long)event_pending_signal(s->ev, s->status));
			return 0;
		}
		/* Its first stop (PTRACE_EVENT_STOP of an auto-attached thread) is where it may wait (hold_for_origin). */
		s->t->origin_unknown = s->ev == EVENT_INTERRUPT && tid != s->t->p->pid && s->t->p->profiled && s->t->p->ready;
	}
	if (s->t && s->ev != EVENT_GONE)
		classify(T, s);
	return 1;
}

static void on_exit_status(struct tracer *T, struct tracee *t, int status)
{
	struct proc *p = t->p;
	if (t->tid == p->pid) {
		p->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		p->end_time = tracer_now(T);
		if (t->tid == T->main_pid)
			T->main_status = p->status;
	}
	int last = p->nthreads == 1 && p->profiled && p->pid != T->main_pid;
	/* The pages it shared with a parent or a child are theirs alone now. */
	if (p->nthreads == 1 && p->profiled && T->opts.follow_forks)
		peak_refresh_inherited(T, p);
	lifecycle_remove_thread(T, t);
	if (last) {
		/* A followed child is done: its snapshot now, its tables freed. */
		if (p->ready)
			snapshot_write(T, p, 0);
		lifecycle_drop_proc(T, p);
	}
}

/* PTRACE_EVENT_EXIT: the thread is leaving but the address space is intact. */
static void on_exit_event(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	if (!p->profiled && t->tid == p->pid && !T->attach) {
		/* A child not profiled: what the tree says of it (tracer/memory/tree.h), read while it is still there. */
		p->vmhwm = resid_vmhwm(p->pid);
		if (!p->argv)
			p->argv = procfs_argv(p->pid);
		return;
	}
	if (!p->profiled || !p->ready)
		return;
	kheap_leader_exit(T, t);
	/* Its inherited pages as they are at the end, exactly (tree_check_peak measures them at most so often). */
	if (p->tree->inherited)
		ledger_refresh_inherited(p->ledger);
	peak_last_look(T, p);
	uint64_t hwm = resid_vmhwm(p->pid);
	if (hwm > p->vmhwm)
		p->vmhwm = hwm;
	/* The last sample of the timeline is the state at exit. */
	peak_poll(T, p);
}

/* Returns 1 when the thread was let go (it must not be restarted). */
static int on_exec(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	lifecycle_new_image(T, t);
	if (procs_exec(T, t))
		return 1;
	if (p->profiled && lifecycle_exec(T, p))
		warning("process %d: cannot read its memory after exec; its mappings are not charged", (int)p->pid);
	return 0;
}

/*
 * A clone, fork or vfork event: the child is traced already (the kernel
 * attached it); learn of it now, so that its first stop is expected, unless
 * it has come and gone already. Returns the child's record, or NULL.
 */
static struct tracee *learn_child(struct tracer *T, struct tracee *t)
{
	unsigned long child = 0;
	if (ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &child) || !child)
		return NULL;
	struct tracee *c = tracer_find(T, (pid_t)child);
	if (!c && !tracer_retired(T, (pid_t)child))
		c = lifecycle_add_thread(T, (pid_t)child);
	if (c)
		c->origin_unknown = 0;
	return c;
}

/*
 * A new thread's first stop can come before its creator's clone event, and
 * the stacks of all it does are read on into the call that started it
 * (capture_thread_origin) only once that event is seen: such a thread is
 * held at its first stop until then. The creator stops in that event as it
 * returns from clone, so the wait is short; should the event never come (a
 * read of it failed), the timer lets the thread go after HOLD_SECONDS, and
 * so does leaving.
 */
#define HOLD_SECONDS 0.2

static void hold_for_origin(struct tracer *T, struct tracee *t)
{
	t->held_since = tracer_now(T);
	if (t->held_since <= 0)
		t->held_since = 1e-9;
}

static void let_go_held(struct tracee *t)
{
	t->held_since = 0;
	t->origin_unknown = 0;
	restart(t, PTRACE_CONT, 0);
}

/* Every held thread, or those held for longer than HOLD_SECONDS (older_only), let go. */
static void let_go_all_held(struct tracer *T, int older_only)
{
	double now = tracer_now(T);
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *t = T->threads[h]; t; t = t->hnext)
			if (t->held_since > 0 && (!older_only || now - t->held_since > HOLD_SECONDS))
				let_go_held(t);
}

/* The running table: each event handled and its thread restarted as event.h says. */
static void run_event(struct tracer *T, struct stop *s)
{
	T->spin_next = 0;
	struct tracee *t = s->t;
	/*
	 * The kernel paths: every heap event and fault the program made before
	 * this stop is applied first, except at a mapping call's stops, where
	 * the faults are applied only if the call needs them in order
	 * (sysc_entry, sysc_exit): the program waits at the stop meanwhile.
	 */
	kheap_drain(T);
	if (s->ev != EVENT_SECCOMP && s->ev != EVENT_SYSCALL_EXIT)
		faults_drain(T);
	if (t && s->ev != EVENT_GONE)
		kheap_leave_pending(T, t);
	if (s->ev == EVENT_GONE) {
		if (t)
			on_exit_status(T, t, s->status);
		return;
	}
	/* A new child's first stop: followed, or cleaned (and in attach mode let go). */
	if (t->p->fresh && procs_first_stop(T, t, event_pending_signal(s->ev, s->status)))
		return;
	switch (s->ev) {
	case EVENT_SYSCALL_EXIT:
		/* The exit of a mapping syscall we asked to see: record its result, run on. */
		tracer_count_stop(T, t, STOP_SYSCALL_EXIT);
		t->in_syscall = 0;
		sysc_exit(T, t);
		restart(t, PTRACE_CONT, 0);
		return;
	case EVENT_SECCOMP:
		/* A mapping syscall's entry: measure before a release; see its exit only if needed. */
		tracer_count_stop(T, t, STOP_SECCOMP);
		restart(t, sysc_entry(T, t), 0);
		return;
	case EVENT_CLONE:
	case EVENT_FORK:
	case EVENT_VFORK: {
		tracer_count_stop(T, t, STOP_CLONE);
		struct tracee *c = learn_child(T, t);
		/* A thread's stacks read on into the call that started it. */
		if (c && s->ev == EVENT_CLONE)
			capture_thread_origin(T, t, c);
		if (c && c->held_since > 0)
			let_go_held(c);
		restart(t, PTRACE_CONT, 0);
		return;
	}
	case EVENT_VFORK_DONE:
		tracer_count_stop(T, t, STOP_OTHER);
		restart(t, PTRACE_CONT, 0);
		return;
	case EVENT_EXEC:
		tracer_count_stop(T, t, STOP_EXEC);
		if (!on_exec(T, t))
			restart(t, PTRACE_CONT, 0);
		return;
	case EVENT_EXIT:
		tracer_count_stop(T, t, STOP_EXIT);
		t->exiting = 1;
		on_exit_event(T, t);
		restart(t, PTRACE_CONT, 0);
		return;
	case EVENT_GROUP_STOP:
		/* Stay stopped, as without ptfil, until SIGCONT. */
		tracer_count_stop(T, t, STOP_GROUP);
		restart(t, PTRACE_LISTEN, 0);
		return;
	case EVENT_INTERRUPT:
		tracer_count_stop(T, t, STOP_NEW_TASK);
		if (t->origin_unknown && !t->held_since) {
			hold_for_origin(T, t);
			return;
		}
		restart(t, PTRACE_CONT, 0);
		return;
	case EVENT_PAST_TRAP:
		/* Its int3's SIGTRAP is reported next, as EVENT_TRAP. */
		tracer_count_stop(T, t, STOP_OTHER);
		restart(t, PTRACE_CONT, 0);
		return;
	case EVENT_TRAP:
		/* An int3 of ours: a hooked call, its return, or a library load. */
		bp_trap(T, t, &s->regs);
		T->spin_next = 1;
		return;
	case EVENT_SIGNAL: {
		/* Signal-delivery-stop: deliver the signal exactly as it came. */
		tracer_count_stop(T, t, STOP_SIGNAL);
		int sig = WSTOPSIG(s->status);
		siginfo_t si;
		if (t->p->pid == T->main_pid && (sig == SIGINT || sig == SIGQUIT || sig == SIGTERM || sig == SIGHUP) &&
		    ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) == 0 && si.si_code <= 0) {
			delivered[sig].from = si.si_pid;
			delivered[sig].time = tracer_now(T);
		}
		restart(t, PTRACE_CONT, sig);
		return;
	}
	case EVENT_BACKPRESSURE:
		/*
		 * The ring was drained above: a probed call's stop is handled (attach
		 * on the kernel path), and the thread goes on as if never stopped.
		 */
	{
		enum stop_kind k = (enum stop_kind)kheap_call_stop(T, t);
		tracer_count_stop(T, t, k);
		restart(t, PTRACE_CONT, 0);
		/* A probed call's stop, as a breakpoint's: the next stop is usually microseconds away. */
		T->spin_next = k != STOP_BACKPRESSURE;
	}
		return;
	case EVENT_GONE:
	case EVENT__COUNT:
		break;
	}
}

/*
 * The leaving table: the thread stays stopped (parked) with the signal it is
 * to get when let go, and whatever ptfil's int3 did to it is undone.
 */
static void park_event(struct tracer *T, struct stop *s)
{
	struct tracee *t = s->t;
	kheap_drain(T);
	faults_drain(T);
	if (s->ev == EVENT_GONE) {
		if (t)
			on_exit_status(T, t, s->status);
		return;
	}
	struct proc *p = t->p;
	if (p->fresh && proc_shares_vm(p)) {
		p->fresh = 0;
		p->shares_vm = 1;
	}
	if (p->shares_vm && s->ev != EVENT_EXEC && s->ev != EVENT_EXIT) {
		/*
		 * A vfork child runs on until it execs or exits: its parent cannot stop
		 * before that. Its breakpoints are its parent's, handled as usual.
		 */
		if (s->ev == EVENT_TRAP)
			bp_trap(T, t, &s->regs);
		else
			restart(t, PTRACE_CONT, event_pending_signal(s->ev, s->status));
		return;
	}
	switch (s->ev) {
	case EVENT_PAST_TRAP:
		/* Not yet: its SIGTRAP comes next, and is undone as EVENT_TRAP. */
		restart(t, PTRACE_CONT, 0);
		return;
	case EVENT_TRAP:
		bp_park_trap(T, t, &s->regs);
		park(t, 0, 0);
		return;
	case EVENT_SYSCALL_EXIT:
		t->in_syscall = 0;
		sysc_exit(T, t);
		park(t, 0, 0);
		return;
	case EVENT_CLONE:
	case EVENT_FORK:
	case EVENT_VFORK:
		learn_child(T, t);
		park(t, 0, 0);
		return;
	case EVENT_EXEC:
		lifecycle_new_image(T, t);
		p->shares_vm = 0;
		park(t, 0, 0);
		return;
	case EVENT_EXIT:
		t->exiting = 1;
		park(t, 0, 0);
		return;
	case EVENT_GROUP_STOP:
		park(t, 0, 1);
		return;
	case EVENT_SIGNAL:
		/* A signal on its way: it is delivered when the thread is let go. */
		park(t, WSTOPSIG(s->status), 0);
		return;
	case EVENT_SECCOMP:
	case EVENT_VFORK_DONE:
	case EVENT_INTERRUPT:
	case EVENT_BACKPRESSURE:
		park(t, 0, 0);
		return;
	case EVENT_GONE:
	case EVENT__COUNT:
		break;
	}
}

/* True when signal sig is pending for process pid (queued, not yet delivered). */
static int is_pending(pid_t pid, int sig)
{
	static const char *const name[] = { "SigPnd", "ShdPnd" };
	unsigned long long mask[2] = { 0, 0 };
	procfs_status(pid, name, mask, 2, 16);
	return ((mask[0] | mask[1]) >> (sig - 1)) & 1;
}

/*
 * Signals sent to ptfil go to the program too, once: a kill of the whole
 * process group already reached it (seen as a delivery, or still pending), a
 * kill of ptfil alone did not.
 */
static void forward_signals(struct tracer *T)
{
	loop_forward_any = 0;
	for (int sig = 1; sig < 65; sig++) {
		if (!loop_forward[sig])
			continue;
		loop_forward[sig] = 0;
		pid_t from = (pid_t)loop_forward_from[sig];
		/*
		 * The same send may already be on its way to the program: pending, or taken
		 * off its queue and about to be reported. Look a few times over ~10 ms.
		 */
		int reached = 0;
		for (int tries = 0; tries < 10 && !reached; tries++) {
			struct stop s;
			while (next_event(T, &s, WNOHANG) > 0)
				run_event(T, &s);
			if (T->main_status >= 0)
				reached = 1;
			else if (delivered[sig].from == from && tracer_now(T) - delivered[sig].time < 0.5)
				reached = 1;
			else if (is_pending(T->main_pid, sig))
				reached = 1;
			else if (tries < 9)
				usleep(1000);
		}
		if (!reached)
			kill(T->main_pid, sig);
	}
}

/* The timer's work: residency for the timelines, peaks to disk, the end of --duration. */
static void tick(struct tracer *T)
{
	let_go_all_held(T, 1);
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled)
			continue;
		proc_reconcile(T, p);
		faults_poll(T, p);
		if (T->opts.interval_ms)
			peak_poll(T, p);
	}
	snapshot_checkpoint(T);
	if (T->deadline > 0 && tracer_now(T) >= T->deadline)
		loop_leave = 1;
	live_tick(T);
	if (T->live->leave)
		loop_leave = 1;
}

/*
 * The next stop. After a hooked call's stop the next one is usually a few
 * microseconds away (the call's return, the program's next malloc or free):
 * poll for it a little while before sleeping in waitpid, yielding the CPU
 * between polls. A sleeping tracer must be woken on its CPU for every stop,
 * which costs more than the stop itself where idle CPUs sleep deeply
 * (virtual machines). Measured on the reference machine (50,000-pair
 * single-threaded allocation storm): 5.7 s without polling, 4.3 s with it;
 * with ptfil and the program on one CPU, 4.8 s without, 4.5 s with (6.7 s
 * polling without yielding). After a mapping syscall's stop the program is
 * in the kernel for longer, and polling there measured slower.
 */
static int loop_wait(struct tracer *T, struct stop *s)
{
	if (kwait_on()) {
		/*
		 * The kernel path: the ring is drained whenever it passes its wake
		 * mark, and at least every 10 ms; a ptrace stop wakes the wait
		 * through SIGCHLD (a signalfd), ptfil's own signals through EINTR.
		 */
		for (;;) {
			int r = next_event(T, s, WNOHANG);
			if (r != 0)
				return r;
			if (loop_tick || loop_forward_any || loop_leave || loop_dump) {
				errno = EINTR;
				return -1;
			}
			if (kwait_wait(10) < 0)
				return -1;
			kheap_drain(T);
			faults_drain_between(T);
		}
	}
	if (T->spin_next && T->spin > 0) {
		double until = tracer_now(T) + T->spin;
		do {
			int r = next_event(T, s, WNOHANG);
			if (r != 0)
				return r;
			/* On a CPU it shares with ptfil, the program runs now instead. */
			sched_yield();
		} while (!loop_tick && !loop_forward_any && !loop_leave && !loop_dump && tracer_now(T) < until);
	}
	/* Blocking, but never for long: ptfil's interval timer (SIGALRM, no SA_RESTART) ends the wait. */
	return next_event(T, s, 0);
}

void loop_run(struct tracer *T)
{
	while (T->n_threads > 0) {
		if (loop_forward_any)
			forward_signals(T);
		if (loop_tick) {
			loop_tick = 0;
			tick(T);
		}
		if (loop_dump) {
			loop_dump = 0;
			struct proc *p = tracer_proc(T, T->main_pid);
			if (p && p->ready)
				snapshot_write(T, p, 1);
		}
		if (loop_leave && T->attach) {
			let_go_all_held(T, 0);
			return;
		}
		struct stop s;
		if (loop_wait(T, &s) < 0) {
			if (errno == EINTR)
				continue;
			if (errno != ECHILD)
				error_errno("waitpid");
			break;
		}
		run_event(T, &s);
	}
}

/* A thread the parking loop still waits for: traced, not held yet, and able to stop. */
static int awaited(const struct tracee *t)
{
	return !t->parked && !t->exiting;
}

static size_t count_awaited(struct tracer *T)
{
	size_t n = 0;
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *t = T->threads[h]; t; t = t->hnext)
			n += awaited(t);
	return n;
}

/*
 * Threads the kernel will never report a stop for, found by looking: gone
 * without an exit report (let go, or never ours), zombies (a main thread that
 * called pthread_exit), traced by someone else. Each is asked again to stop.
 */
static void sweep(struct tracer *T)
{
	pid_t self = getpid();
	for (size_t h = 0; h < TRACER_HASH; h++) {
		struct tracee *t = T->threads[h];
		while (t) {
			struct tracee *next = t->hnext;
			if (awaited(t)) {
				pid_t tracer = 0;
				char st = procfs_state(t->tid, &tracer);
				if (!st || tracer != self)
					lifecycle_remove_thread(T, t);
				else if (st == 'Z' || st == 'X')
					t->exiting = 1;
				else if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) && errno == ESRCH)
					t->exiting = 1;
			}
			t = next;
		}
	}
}

int loop_park_all(struct tracer *T, double timeout)
{
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *t = T->threads[h]; t; t = t->hnext)
			if (awaited(t) && ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) && errno == ESRCH)
				t->exiting = 1; /* a zombie, or already reaped: its exit report, if any, comes by itself */
	double start = tracer_now(T), swept = start;
	while (count_awaited(T)) {
		struct stop s;
		int r = next_event(T, &s, WNOHANG);
		if (r > 0) {
			park_event(T, &s);
			continue;
		}
		if (r < 0 && errno == ECHILD) {
			/* Nothing is traced any more: every record left is of a thread that is not ours. */
			sweep(T);
			break;
		}
		double now = tracer_now(T);
		if (now - swept >= 0.05) {
			sweep(T);
			swept = now;
		}
		if (now - start >= timeout) {
			error("%zu thread%s did not stop within %.0f s; going on without them", count_awaited(T),
			      count_awaited(T) == 1 ? "" : "s", timeout);
			return -1;
		}
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

int loop_stragglers(struct tracer *T, double seconds)
{
	double until = tracer_now(T) + seconds;
	int any = 0;
	while (tracer_now(T) < until) {
		struct stop s;
		int r = next_event(T, &s, WNOHANG);
		if (r < 0 && errno == ECHILD)
			break;
		if (r > 0) {
			park_event(T, &s);
			any |= s.ev != EVENT_GONE;
			continue;
		}
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
	return any;
}
