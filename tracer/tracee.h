/*
 * The tracer's state: processes (address spaces: ledger, modules, residency
 * files) and threads (a tid, where it is in the stop protocol, a back pointer).
 * Internal to tracer/.
 */
#ifndef PTFIL_TRACEE_H
#define PTFIL_TRACEE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "tracer/heap.h"
#include "tracer/hooks.h"
#include "tracer/ledger.h"
#include "tracer/modules.h"
#include "tracer/pystack.h"
#include "tracer/resid.h"
#include "tracer/stacks.h"
#include "tracer/tracer.h"
#include "tracer/unwind.h"

#define TRACER_MAX_SAMPLES 4096
#define TRACER_SPIN_US 50 /* default of PTFIL_SPIN_US: loop_wait */

struct sample { double time; uint64_t charged, rss; };

struct proc {
	pid_t pid;
	int profiled;          /* charged into a ledger; other processes are only kept running */
	int ready;             /* the first exec has happened: the ledger and files are set up */
	int fresh;             /* a new child not looked at yet: followed or cleaned at its first stop */
	int shares_vm;         /* a vfork child: its text is its parent's until it execs */
	int wrappers;          /* no seccomp filter (attach): the libc mapping calls are hooked instead */
	pid_t parent;          /* the traced process that forked it, 0 for the main one */
	int nthreads;
	char **argv;           /* the command line, NULL-terminated (from /proc for all but a launched program) */
	int status;            /* shell-style exit status, -1 while it runs */
	double started;        /* when ptfil first saw it (tracer_now) */
	double end_time;       /* when it exited, 0 while it runs */
	uint64_t vmhwm;
	double snap_written_at;/* when its peak snapshot was last written */
	double snap_peak_time; /* the peak time that snapshot holds */
	struct sample *samples; size_t n_samples;  /* the timeline, bounded */
	double reconciled_at;  /* attach: when the maps were last compared with the ledger */
	struct u64map seen;    /* attach: starts of mappings already looked at by proc_reconcile */
	unsigned sample_stride, sample_skip;
	struct resid resid;
	struct ledger ledger;
	struct modmap mm;
	double maps_loaded_at;
	int maps_dirty;        /* objects may have been mapped or unmapped since maps were read */
	uint64_t brk_cur;      /* page-aligned end of the brk heap, 0 until known */
	uint64_t last_faults;  /* fault count at the last full residency refresh */
	double faults_checked_at;
	struct hooks hooks;    /* breakpoints in this process's text */
	struct heap heap;      /* live malloc-family blocks */
	struct pyproc py;      /* its CPython, when it runs one: where to read Python frames */
	struct proc *next;
};

#define TRACEE_MEMOS 4

struct tracee {
	pid_t tid;
	struct proc *p;
	int in_syscall;        /* resumed with PTRACE_SYSCALL: the next stop is this syscall's exit */
	long sc_nr;
	uint64_t sc_args[6];
	/* The outermost malloc-family call in progress, whose return address points at the trampoline. */
	int in_alloc;
	struct {
		enum hook_fn fn;
		uint64_t args[3];
		uint32_t stack;
		uint64_t ret;      /* the real return address */
		uint64_t rsp;      /* at entry */
	} call;
	/* The last unwinds of this thread, to skip unwinding a stack seen just before. */
	struct unwind_memo memo[TRACEE_MEMOS];
	unsigned memo_next;
	uint32_t sc_stack;     /* stack of a wrapped mapping call, taken at its entry; STACKS_FAILED when none */
	/*
	 * The stack of the call that started this thread (its creator's at the
	 * clone), put outward of every stack of its own under a "[new thread]"
	 * frame; STACKS_ROOT when not known (the main thread, threads there
	 * before an attach). origin_in/out: the last stack so extended.
	 */
	uint32_t origin, origin_in, origin_out;
	int parked;            /* held stopped (attaching, leaving), to be let go with park_sig */
	int park_sig;
	int group_stop;        /* parked in a group-stop (SIGSTOP): it stays stopped when let go */
	int exiting;           /* past its exit event, or a zombie: it never stops again, it is only reaped */
	int rescue;            /* its slot in the crash rescue's table (tracer/rescue.h) */
	struct tracee *hnext;
};

/* Why ptfil stopped the target, counted for the snapshot (DESIGN's stop budget). */
enum stop_kind {
	STOP_SECCOMP, STOP_SYSCALL_EXIT, STOP_SIGNAL, STOP_GROUP, STOP_NEW_TASK,
	STOP_CLONE, STOP_EXEC, STOP_EXIT, STOP_BP_ENTRY, STOP_BP_RETURN, STOP_DL_DEBUG,
	STOP_OTHER, STOP__COUNT
};

#define TRACER_HASH 256
#define TRACER_RETIRED 1024

struct tracer {
	struct tracer_opts opts;
	struct proc *procs;
	struct tracee *threads[TRACER_HASH];
	size_t n_threads;
	struct stacks stacks;
	struct modreg reg;
	struct unwind unw;
	struct pynames pynames; /* the Python frames' names, for every process */
	struct pystats pystats;
	int no_python;          /* PTFIL_NO_PYTHON set: native stacks only, to measure what Python frames cost */
	double spin;            /* seconds to poll for the next stop after a hooked call's stop (PTFIL_SPIN_US) */
	int spin_next;          /* the stop just handled was a hooked call's: poll before sleeping */
	pid_t main_pid;
	int main_status;       /* shell-style, -1 until the main process exits */
	int attach;            /* attach mode: never kill, leave every process as it was */
	const char *output;    /* the main snapshot's path */
	unsigned live_written; /* SIGUSR1 snapshots so far */
	double t0;             /* monotonic seconds at start */
	double start_time;     /* unix time at start */
	double deadline;       /* --duration: when to leave, 0 for never */
	uint64_t stops[STOP__COUNT];
	uint64_t refreshes;
	uint64_t reconciled;      /* mappings found by proc_reconcile */
	uint64_t nested_calls;    /* hooked calls made inside the allocator, not counted */
	struct capture {        /* the capture begun (capture_begin) */
		pid_t tid;
		uint32_t native;    /* its native stack, or STACKS_PENDING: still to unwind */
		int py;             /* its process's Python frames were readable: time it for the counters */
		double begin_s;     /* seconds spent in capture_begin */
	} capture;
	uint32_t main_stack_node;
	uint32_t new_thread_frame; /* the "[new thread]" pseudo frame, STACKS_FAILED until made */
	/*
	 * Threads ptfil has seen go (exited, released): a creator's clone or fork
	 * event that reports one late must not bring it back as a thread to wait
	 * for. A ring of the last TRACER_RETIRED.
	 */
	pid_t retired[TRACER_RETIRED];
	unsigned retired_next;
};

/* proc.c: the process and thread tables */
struct tracee *tracer_find(struct tracer *T, pid_t tid);
/* Adds thread tid, finding (or creating) its process from /proc/TID/status. NULL after error(). */
struct tracee *tracer_add_thread(struct tracer *T, pid_t tid);
/* Forgets thread t (gone, or let go): it is retired, never waited for again. */
void tracer_remove_thread(struct tracer *T, struct tracee *t);
/* True when tid was removed lately (tracer_remove_thread) and has not been added since. */
int tracer_retired(const struct tracer *T, pid_t tid);
struct proc *tracer_proc(struct tracer *T, pid_t pid);
/* Frees a process and all it owns (not its threads). */
void proc_fin(struct proc *p);
/* Unlinks process p from the table and frees it. */
void tracer_drop_proc(struct tracer *T, struct proc *p);
double tracer_now(const struct tracer *T);

/* sysc.c: the mapping syscalls. sysc_entry returns the ptrace request to restart the thread with. */
int sysc_entry(struct tracer *T, struct tracee *t);
void sysc_exit(struct tracer *T, struct tracee *t);
/*
 * The same for a call seen some other way (a hooked libc wrapper in attach
 * mode): sysc_begin at its entry returns 1 when its result must be seen, and
 * sysc_end takes that result (a raw syscall's, -errno on failure) and the
 * registers then. t->sc_stack, when set, is the stack the call is charged to.
 */
int sysc_begin(struct tracer *T, struct tracee *t, long nr, const uint64_t args[6]);
void sysc_end(struct tracer *T, struct tracee *t, uint64_t ret, const struct user_regs_struct *regs);
/* Sets up a profiled process after exec: files, modules, an empty ledger. */
int sysc_exec(struct tracer *T, struct proc *p);
/* Measures what must be measured before memory is released, and records a peak. */
void sysc_before_release(struct tracer *T, struct proc *p, uint64_t start, uint64_t end);
/* The timer's work: refresh when faults moved, peak, one timeline sample. */
void sysc_poll(struct tracer *T, struct proc *p);

/* Unwinds the stopped thread (regs as at the stop) and interns its stack; STACKS_ROOT when nothing could be read. */
uint32_t capture_stack(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs);
/*
 * capture_stack in two halves, so that the thread can run on between them:
 * capture_begin takes what must be taken while it is stopped (its registers,
 * which must stay valid until capture_finish, and a copy of its stack);
 * capture_finish unwinds from that copy. Valid only while the thread cannot
 * change the frames above its stack pointer at the stop (it is inside a call
 * whose return stops it), and with no other capture in between.
 */
void capture_begin(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs);
uint32_t capture_finish(struct tracer *T, struct tracee *t);
/* At a clone event of thread t: the new thread child of the same process records t's stack as its origin. */
void sysc_thread_origin(struct tracer *T, struct tracee *t, struct tracee *child);
/* Before a small block is freed: a peak check whose residency refresh is bounded in rate. */
void sysc_before_small_release(struct tracer *T, struct proc *p);

/*
 * calls.c: breakpoint stops. calls_owns: true when thread t, stopped with
 * regs, is just past one of ptfil's int3s (a hook, or the trampoline while a
 * hooked call of t is in flight).
 */
int calls_owns(const struct tracee *t, const struct user_regs_struct *regs);
/* Handles the SIGTRAP of an int3 that calls_owns: the call is noted and the thread restarted. */
void calls_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs);
/*
 * Leaving: the same SIGTRAP, but the thread stays stopped, undone so that it
 * can run without ptfil (rip back on a breakpoint whose byte goes back; a
 * hijacked return completed).
 */
void calls_park_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs);

/* run.c: what launch and attach share */
#define RUN_CAUGHT 5
int run_init(struct tracer *T, const struct tracer_opts *o);
void run_fin(struct tracer *T);
/* ptfil's SIGINT, SIGQUIT, SIGTERM, SIGHUP: passed on to the program (launch) or leave (attach); SIGUSR1: dump. */
void run_install_handlers(int attach);
/* What they were before run_install_handlers (for a launched child before exec). */
void run_restore_handlers(void);
void run_start_timer(unsigned interval_ms);
void run_stop_timer(void);
/*
 * Where process p's snapshot goes: the output path for the main process,
 * STEM.PID.gz for another (STEM: the output without .gz), and with live = N
 * > 0, STEM.live-N.gz (STEM.PID.live-N.gz). Caller frees; NULL out of memory.
 */
char *run_snapshot_path(struct tracer *T, struct proc *p, unsigned live);
/* Writes process p's peak snapshot, or with live its present state under the next live name. 0 or -1 after error(). */
int run_write(struct tracer *T, struct proc *p, int live);
/* Rewrites the snapshot of every process whose peak grew, at most once a second each. */
void run_checkpoint(struct tracer *T);
void run_summary(struct proc *p, const char *path);

/* attach.c: processes that are there already (attach) or appear (fork) */
/*
 * Starts profiling p, which is running already: its memory now is charged
 * to the pseudo frame named pseudo; with arm, its breakpoints go in (tid is
 * a stopped thread of it). Returns 0, or -1 after error().
 */
int proc_follow(struct tracer *T, struct proc *p, pid_t tid, const char *pseudo, int arm);
/* True when p is a vfork child that still runs in its parent's address space. */
int proc_shares_vm(const struct proc *p);
/* A new child's first stop (sig: the signal it stopped with, to pass on). Returns 1 when it was let go. */
int procs_first_stop(struct tracer *T, struct tracee *t, int sig);
/* After exec, before the new image is set up. Returns 1 when the thread was let go. */
int procs_exec(struct tracer *T, struct tracee *t);
/*
 * Attach mode, at most once a second: anonymous mappings that no hooked call
 * made (a raw mmap system call, the dynamic linker's own) and that hold no
 * heap block are charged to the pseudo frame [unhooked mmap].
 */
void proc_reconcile(struct tracer *T, struct proc *p);

/* detach.c: stops every thread, takes every breakpoint out, restores hijacked returns, detaches. */
void tracer_leave(struct tracer *T);

/*
 * export.c: writes process p's snapshot to path: its peak, or with live, what
 * is live now in place of the peak. Returns 0, or -1 after error().
 */
int tracer_write_snapshot(struct tracer *T, struct proc *p, int live, const char *path);

#endif
