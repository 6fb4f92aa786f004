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
#include "tracer/resid.h"
#include "tracer/stacks.h"
#include "tracer/tracer.h"
#include "tracer/unwind.h"

struct proc {
	pid_t pid;
	int profiled;          /* charged into a ledger; other processes are only kept running */
	int ready;             /* the first exec has happened: the ledger and files are set up */
	int nthreads;
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
	struct tracee *hnext;
};

/* Why ptfil stopped the target, counted for the snapshot (DESIGN's stop budget). */
enum stop_kind {
	STOP_SECCOMP, STOP_SYSCALL_EXIT, STOP_SIGNAL, STOP_GROUP, STOP_NEW_TASK,
	STOP_CLONE, STOP_EXEC, STOP_EXIT, STOP_BP_ENTRY, STOP_BP_RETURN, STOP_DL_DEBUG,
	STOP_OTHER, STOP__COUNT
};

#define TRACER_HASH 256
#define TRACER_MAX_SAMPLES 4096

struct tracer {
	struct tracer_opts opts;
	struct proc *procs;
	struct tracee *threads[TRACER_HASH];
	size_t n_threads;
	struct stacks stacks;
	struct modreg reg;
	struct unwind unw;
	pid_t main_pid;
	int main_status;       /* shell-style, -1 until the main process exits */
	double t0;             /* monotonic seconds at start */
	double start_time;     /* unix time at start */
	double end_time;       /* monotonic seconds when the main process ended */
	uint64_t vmhwm;
	uint64_t stops[STOP__COUNT];
	uint64_t refreshes;
	uint64_t nested_calls;    /* hooked calls made inside the allocator, not counted */
	struct { double time; uint64_t charged, rss; } samples[TRACER_MAX_SAMPLES];
	size_t n_samples;
	unsigned sample_stride, sample_skip;
	uint32_t main_stack_node;
};

/* proc.c: the process and thread tables */
struct tracee *tracer_find(struct tracer *T, pid_t tid);
/* Adds thread tid, finding (or creating) its process from /proc/TID/status. NULL after error(). */
struct tracee *tracer_add_thread(struct tracer *T, pid_t tid);
void tracer_remove_thread(struct tracer *T, struct tracee *t);
struct proc *tracer_proc(struct tracer *T, pid_t pid);
/* Frees a process and all it owns (not its threads). */
void proc_fin(struct proc *p);
double tracer_now(const struct tracer *T);

/* sysc.c: the mapping syscalls. Each returns the ptrace request to restart the thread with. */
int sysc_entry(struct tracer *T, struct tracee *t);
void sysc_exit(struct tracer *T, struct tracee *t);
/* Sets up a profiled process after exec: files, modules, an empty ledger. */
int sysc_exec(struct tracer *T, struct proc *p);
/* Measures what must be measured before memory is released, and records a peak. */
void sysc_before_release(struct tracer *T, struct proc *p, uint64_t start, uint64_t end);
/* The timer's work: refresh when faults moved, peak, one timeline sample. */
void sysc_poll(struct tracer *T, struct proc *p);

/* Unwinds the stopped thread (regs as at the stop) and interns its stack; STACKS_ROOT when nothing could be read. */
uint32_t capture_stack(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs);
/* Before a small block is freed: a peak check whose residency refresh is bounded in rate. */
void sysc_before_small_release(struct tracer *T, struct proc *p);

/* calls.c: breakpoint stops. Returns 1 when the SIGTRAP was ptfil's (the thread is restarted), 0 if the program's own. */
int calls_trap(struct tracer *T, struct tracee *t);

/* export.c */
int tracer_write_snapshot(struct tracer *T, const char *path);

#endif
