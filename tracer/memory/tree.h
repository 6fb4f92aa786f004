/*
 * The program's process tree (tree.c): every process the run saw, its own
 * peak and, with --follow-forks, the tree's combined peak: the moment the
 * sum of the charges of every live profiled process was highest, and what
 * each one held then, by stack. Memory a forked child still shares with its
 * parent is charged to the parent alone (ledger_add_inherited), so the sum
 * counts it once.
 */
#ifndef PTFIL_TREE_H
#define PTFIL_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tracer;
struct proc;
struct ledger_charge;

/*
 * A process's part (struct proc's tree): its charge by stack at the combined
 * peak, copied when that peak was gen (an older gen means it held nothing
 * then: it had not started, or had gone), and the ranges it inherited at a
 * fork. Storage is the process's; tree_share_fin frees the copy.
 */
struct tree_share {
	struct ledger_charge *at_tree; size_t n_at_tree;
	uint64_t charged;
	unsigned gen;
	int inherited;         /* has ranges forked from its parent, charged as they become its own */
	double inherited_at;   /* when they were last measured (tree_check_peak) */
};

void tree_share_fin(struct tree_share *s);

/* One stack's charge at the combined peak, kept for a process that has gone. */
struct tree_charge {
	uint32_t stack;         /* a stack node of T->stacks */
	char kind;
	uint64_t charged, reserved, count;
};

/* A process that has gone: what the tree says of it. */
struct tree_proc {
	pid_t pid, ppid;
	int profiled;
	uint64_t peak;          /* its own peak (charged bytes) */
	double peak_time;       /* tracer_now clock */
	uint64_t vmhwm;
	double start, end;      /* tracer_now clock */
	char *command;          /* owned: argv joined by spaces, or NULL */
	char *file;             /* owned: its snapshot's file name, or NULL */
	unsigned gen;           /* the combined peak its charges below are from */
	uint64_t at_combined;
	struct tree_charge *charges; size_t n_charges;  /* owned */
};

struct tree {
	unsigned gen;           /* bumped at each new combined peak */
	int pending;            /* its stacks not copied yet (tree_settle) */
	int has_peak;
	double time;            /* tracer_now clock */
	uint64_t charged;
	struct tree_proc *done; size_t n_done, cap_done;
	/* Children seen and not profiled (launch without --follow-forks). */
	uint64_t unprofiled;
	uint64_t unprofiled_hwm;  /* the largest VmHWM among them */
	pid_t unprofiled_pid;
	char *unprofiled_command; /* owned */
};

void tree_fin(struct tree *t);

/*
 * With --follow-forks and more than one process: when the charges of the
 * live profiled processes sum to more than the combined peak so far, that
 * sum is the new one (O(processes): the touch view calls it at every page).
 * Each process's charge by stack is copied by tree_settle, which comes
 * before anything is taken away from any process and before the copies are
 * read: until then charges only grow, so the copy is the combined peak's.
 */
void tree_check_peak(struct tracer *T);
void tree_settle(struct tracer *T);

/*
 * Process p is going (its last thread gone, its snapshot written): its line
 * of the tree is kept, with file, its snapshot's file name (owned from now
 * on; NULL for none). Under attach, processes that were not profiled are not
 * known well enough to list and are left out.
 */
void tree_note(struct tracer *T, struct proc *p, char *file);

/*
 * The largest stack at the combined peak: its node in T->stacks, the
 * process, and its charge. Returns 0, or -1 when there is no combined peak.
 */
int tree_top(struct tracer *T, uint32_t *node, pid_t *pid, uint64_t *charged);

/* "cc1 -quiet ...": argv joined by spaces (at most 4 KiB), or NULL. The caller frees. */
char *tree_command(char *const *argv);

#endif
