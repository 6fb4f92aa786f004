/*
 * The event loop: one waitpid stop at a time, dispatched by what the kernel
 * says it is. Each case says how the thread is restarted.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/loop.h"
#include "tracer/tracee.h"

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

static void restart(struct tracee *t, int request, int sig)
{
	if (request == PTRACE_SYSCALL)
		t->in_syscall = 1;
	/* ESRCH: the thread died meanwhile (SIGKILL); its exit is reported next. */
	if (ptrace(request, t->tid, 0, (void *)(long)sig) < 0 && errno != ESRCH)
		error_errno("cannot restart thread %d", (int)t->tid);
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
	tracer_remove_thread(T, t);
	if (last) {
		/* A followed child is done: its snapshot now, its tables freed. */
		if (p->ready)
			run_write(T, p, 0);
		tracer_drop_proc(T, p);
	}
}

/* PTRACE_EVENT_EXIT: the thread is leaving but the address space is intact. */
static void on_exit_event(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	if (!p->profiled || !p->ready)
		return;
	sysc_before_release(T, p, 0, 0);
	uint64_t hwm = resid_vmhwm(p->pid);
	if (hwm > p->vmhwm)
		p->vmhwm = hwm;
	/* The last sample of the timeline is the state at exit. */
	sysc_poll(T, p);
}

/* After exec: the thread may have had another tid, and the image has none of the old breakpoints. */
static void new_image(struct tracer *T, struct tracee *t)
{
	unsigned long former = 0;
	ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &former);
	/* A non-leader thread that execs takes the leader's tid; its old tid never reports an exit. */
	if ((pid_t)former != t->tid) {
		struct tracee *old = tracer_find(T, (pid_t)former);
		if (old)
			tracer_remove_thread(T, old);
	}
	struct proc *p = t->p;
	t->in_alloc = 0;
	int wrappers = p->hooks.wrappers, no_heap = p->hooks.no_heap;
	hooks_fin(&p->hooks);
	hooks_init(&p->hooks);
	p->hooks.wrappers = wrappers;
	p->hooks.no_heap = no_heap;
}

/* Returns 1 when the thread was let go (it must not be restarted). */
static int on_exec(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	new_image(T, t);
	if (procs_exec(T, t))
		return 1;
	if (p->profiled && sysc_exec(T, p))
		warning("process %d: cannot read its memory after exec; its mappings are not charged", (int)p->pid);
	return 0;
}

static int is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* The thread a waitpid result is about, when it is a stop; an exit is dealt with here. */
static struct tracee *stopped_thread(struct tracer *T, pid_t tid, int status)
{
	struct tracee *t = tracer_find(T, tid);
	/* A new thread or child can report before its creator's event. */
	if (!t && !(t = tracer_add_thread(T, tid)))
		return NULL;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		on_exit_status(T, t, status);
		return NULL;
	}
	return WIFSTOPPED(status) ? t : NULL;
}

void loop_dispatch(struct tracer *T, pid_t tid, int status)
{
	T->spin_next = 0;
	struct tracee *t = stopped_thread(T, tid, status);
	if (!t)
		return;
	int sig = WSTOPSIG(status);
	int event = status >> 16;
	/* A new child's first stop: followed, or cleaned (and in attach mode let go). */
	if (t->p->fresh && procs_first_stop(T, t, event == 0 && sig != SIGTRAP ? sig : 0))
		return;

	if (sig == (SIGTRAP | 0x80)) {
		/* The exit of a mapping syscall we asked to see: record its result, run on. */
		T->stops[STOP_SYSCALL_EXIT]++;
		t->in_syscall = 0;
		sysc_exit(T, t);
		restart(t, PTRACE_CONT, 0);
		return;
	}
	switch (event) {
	case PTRACE_EVENT_SECCOMP:
		/* A mapping syscall's entry: measure before a release; see its exit only if needed. */
		T->stops[STOP_SECCOMP]++;
		restart(t, sysc_entry(T, t), 0);
		return;
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK: {
		/* The child is traced already (auto-attach); learn of it now so its first stop is known. */
		T->stops[STOP_CLONE]++;
		unsigned long child = 0;
		if (ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &child) == 0) {
			struct tracee *c = tracer_find(T, (pid_t)child);
			if (!c)
				c = tracer_add_thread(T, (pid_t)child);
			/* A thread's stacks read on into the call that started it. */
			if (c && event == PTRACE_EVENT_CLONE)
				sysc_thread_origin(T, t, c);
		}
		restart(t, PTRACE_CONT, 0);
		return;
	}
	case PTRACE_EVENT_VFORK_DONE:
		T->stops[STOP_OTHER]++;
		restart(t, PTRACE_CONT, 0);
		return;
	case PTRACE_EVENT_EXEC:
		T->stops[STOP_EXEC]++;
		if (!on_exec(T, t))
			restart(t, PTRACE_CONT, 0);
		return;
	case PTRACE_EVENT_EXIT:
		T->stops[STOP_EXIT]++;
		on_exit_event(T, t);
		restart(t, PTRACE_CONT, 0);
		return;
	case PTRACE_EVENT_STOP:
		if (is_stop_signal(sig)) {
			/* Group-stop: stay stopped, as without ptfil, until SIGCONT. */
			T->stops[STOP_GROUP]++;
			restart(t, PTRACE_LISTEN, 0);
		} else {
			/* A new task's first stop, or the end of a listen. */
			T->stops[STOP_NEW_TASK]++;
			restart(t, PTRACE_CONT, 0);
		}
		return;
	case 0: {
		/* An int3 of ours: a hooked call, its return, or a library load. */
		if (sig == SIGTRAP && calls_trap(T, t)) {
			T->spin_next = 1;
			return;
		}
		/* Signal-delivery-stop: deliver the signal exactly as it came. */
		T->stops[STOP_SIGNAL]++;
		siginfo_t si;
		if (t->p->pid == T->main_pid && (sig == SIGINT || sig == SIGQUIT || sig == SIGTERM || sig == SIGHUP) &&
		    ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) == 0 && si.si_code <= 0) {
			delivered[sig].from = si.si_pid;
			delivered[sig].time = tracer_now(T);
		}
		restart(t, PTRACE_CONT, sig);
		return;
	}
	default:
		T->stops[STOP_OTHER]++;
		restart(t, PTRACE_CONT, 0);
		return;
	}
}

/* True when signal sig is pending for process pid (queued, not yet delivered). */
static int is_pending(pid_t pid, int sig)
{
	static const char *const name[] = { "SigPnd", "ShdPnd" };
	unsigned long long mask[2] = { 0, 0 };
	resid_status(pid, name, mask, 2, 16);
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
			int status;
			pid_t tid;
			while ((tid = waitpid(-1, &status, __WALL | WNOHANG)) > 0)
				loop_dispatch(T, tid, status);
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
	for (struct proc *p = T->procs; p; p = p->next) {
		if (!p->profiled)
			continue;
		proc_reconcile(T, p);
		if (T->opts.interval_ms)
			sysc_poll(T, p);
	}
	run_checkpoint(T);
	if (T->deadline > 0 && tracer_now(T) >= T->deadline)
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
static pid_t loop_wait(struct tracer *T, int *status)
{
	if (T->spin_next && T->spin > 0) {
		double until = tracer_now(T) + T->spin;
		do {
			pid_t tid = waitpid(-1, status, __WALL | WNOHANG);
			if (tid != 0)
				return tid;
			/* On a CPU it shares with ptfil, the program runs now instead. */
			sched_yield();
		} while (!loop_tick && !loop_forward_any && !loop_leave && !loop_dump && tracer_now(T) < until);
	}
	return waitpid(-1, status, __WALL);
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
				run_write(T, p, 1);
		}
		if (loop_leave && T->attach)
			return;
		int status;
		pid_t tid = loop_wait(T, &status);
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			if (errno != ECHILD)
				error_errno("waitpid");
			break;
		}
		loop_dispatch(T, tid, status);
	}
}

void loop_park(struct tracer *T, pid_t tid, int status)
{
	struct tracee *t = stopped_thread(T, tid, status);
	if (!t)
		return;
	int sig = WSTOPSIG(status);
	int event = status >> 16;
	struct proc *p = t->p;
	if (p->fresh && proc_shares_vm(p)) {
		p->fresh = 0;
		p->shares_vm = 1;
	}
	if (p->shares_vm && event != PTRACE_EVENT_EXEC && event != PTRACE_EVENT_EXIT) {
		/*
		 * A vfork child runs on until it execs or exits: its parent cannot stop
		 * before that. Its breakpoints are its parent's, handled as usual.
		 */
		if (event == 0 && sig == SIGTRAP && calls_trap(T, t))
			return;
		restart(t, PTRACE_CONT, event == 0 ? sig : 0);
		return;
	}
	t->parked = 1;
	t->park_sig = 0;
	t->group_stop = 0;
	switch (event) {
	case PTRACE_EVENT_STOP:
		t->group_stop = is_stop_signal(sig);
		return;
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK: {
		unsigned long child = 0;
		if (ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &child) == 0 && !tracer_find(T, (pid_t)child))
			tracer_add_thread(T, (pid_t)child);
		return;
	}
	case PTRACE_EVENT_EXEC:
		new_image(T, t);
		p->shares_vm = 0;
		return;
	case 0:
		if (sig == SIGTRAP && calls_park_trap(T, t))
			return;
		/* A signal on its way: it is delivered when the thread is let go. */
		t->park_sig = sig == (SIGTRAP | 0x80) ? 0 : sig;
		return;
	default:
		return;
	}
}
