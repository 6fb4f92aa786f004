/*
 * Refusals for `ptfil attach PID`: what stands between ptfil and a running
 * process, read from /proc, told to the user in one line that says what is
 * wrong and what to do, with an exit status per kind of problem.
 */
#ifndef PTFIL_REFUSE_H
#define PTFIL_REFUSE_H

#include <stddef.h>
#include <sys/types.h>

/* Exit statuses of `ptfil attach` when it refuses a target (documented in the README and --help). */
#define REFUSE_USAGE  2   /* not a pid, ptfil's own pid or its parent, a kernel thread */
#define REFUSE_GONE   3   /* no such process, or a zombie */
#define REFUSE_DENIED 4   /* not permitted: another user, Yama ptrace_scope, missing CAP_SYS_PTRACE */
#define REFUSE_BUSY   5   /* already traced (a debugger, strace, another ptfil) */

/* A uid that could not be read (no real uid is (uid_t)-1: setresuid reserves it). */
#define REFUSE_NO_UID ((uid_t)-1)

/*
 * Everything that decides whether ptrace may attach, gathered from /proc
 * (refuse_gather) or made up by a test. Strings are "" and numbers as said
 * below when they could not be read.
 */
struct refuse_facts {
	pid_t pid;                   /* the target */
	int exists;                  /* /proc/PID is there */
	char state;                  /* State letter of /proc/PID/status ('S', 'T', 'Z'...); 0 unknown */
	int threads;                 /* Threads: how many are left; 0 unknown */
	int kthread;                 /* a kernel thread ("Kthread: 1"); 0 also when unknown */
	char comm[64];               /* the target's /proc/PID/comm */
	uid_t uid[3];                /* its real, effective and saved uid; REFUSE_NO_UID unknown */
	char user[64];               /* name of the first of uid[] that is not self_uid */
	unsigned long long cap_prm;  /* its permitted capabilities (CapPrm); ~0 unknown */
	pid_t tracer;                /* TracerPid: 0 not traced, -1 unknown */
	char tracer_comm[64];        /* the tracer's comm */
	int descendant;              /* the target descends from self: 1, 0, or -1 unknown */

	pid_t self, parent;          /* ptfil and its parent */
	uid_t self_uid;              /* ptfil's real uid: the one the kernel compares for an attach */
	unsigned long long self_cap_prm, self_cap_eff; /* ptfil's CapPrm and CapEff */
	int yama;                    /* /proc/sys/kernel/yama/ptrace_scope, -1 without Yama */
};

/* Reads the facts about target pid as seen by the calling process (self = getpid(), parent = getppid()). Never fails: missing information is marked unknown. */
void refuse_gather(pid_t pid, struct refuse_facts *f);

/* Pure decision before trying to attach: returns 0 when nothing stands in the way, else an exit status above, with a one-line message (no trailing newline) written to msg. */
int refuse_before(const struct refuse_facts *f, char *msg, size_t n);

/* Pure decision after PTRACE_SEIZE failed with errno err: an exit status above (never 0) and a one-line message in msg that says what is wrong and what to do. */
int refuse_after(const struct refuse_facts *f, int err, char *msg, size_t n);

/* Convenience used by the attach code: gathers, decides, prints the message with error() and returns the status (0 when fine). */
int refuse_check(pid_t pid);
/* As refuse_check, after PTRACE_SEIZE failed with errno err; never returns 0. */
int refuse_explain(pid_t pid, int err);

#endif
