/*
 * ptfil launch: start a program under ptrace from its first instruction, with
 * a seccomp filter that stops it only at the mapping syscalls, trace it and
 * everything it starts to the end, and write the snapshot.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/caveats.h"
#include "tracer/core/session.h"
#include "tracer/kernel/faults.h"
#include "tracer/kernel/kheap.h"
#include "tracer/lifecycle.h"
#include "tracer/loop.h"
#include "tracer/output/export.h"
#include "tracer/output/live.h"
#include "tracer/output/summary.h"
#include "tracer/session.h"
#include "tracer/signals.h"
#include "tracer/stacks/modules.h"

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

#define ARG_LO(n) (offsetof(struct seccomp_data, args) + (n) * sizeof(uint64_t))

/*
 * Trace mmap when it could create or replace anonymous memory, munmap, mremap,
 * brk, execve(at) (the last chance to see the old image's peak), and madvise
 * only for the advice values that release memory. Everything else runs free.
 */
static struct sock_filter filter[] = {
	/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	/* 2 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	/* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	/* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 4),
	/* 5 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)),
	/* 6 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_ANONYMOUS | MAP_FIXED, 0, 1),
	/* 7 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
	/* 8 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	/* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_munmap, 4, 0),
	/* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mremap, 3, 0),
	/* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 2, 0),
	/* 12 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execveat, 1, 0),
	/* 12' (the kernel path, tracer/kernel/kheap.h) */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sigaltstack, 0, 1),
	/* 13 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
	/* 14 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_brk, 0, 1),
	/* 15 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
	/* 16 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 6),
	/* 17 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
	/* 18 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_DONTNEED, 3, 0),
	/* 19 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_FREE, 2, 0),
	/* 20 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_REMOVE, 1, 0),
	/* 21 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MADV_DONTNEED_LOCKED, 0, 1),
	/* 22 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
	/* 23 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

static pid_t child_pid;

/*
 * The touch view needs no stop at brk: what the heap's growth makes resident
 * the faults say, and what a shrink takes back the page count's fall does
 * (kernel/faults.c compares the pages then). So brk leaves the filter unless
 * the alloc view is asked for alone, where it is followed as before.
 */
static void filter_for(const struct tracer *T)
{
	if (!faults_on(T) || T->opts.charge == CHARGE_ALLOC)
		return;
	for (size_t i = 0; i < sizeof(filter) / sizeof(filter[0]); i++)
		if (filter[i].code == (BPF_JMP | BPF_JEQ | BPF_K) && filter[i].k == __NR_brk)
			filter[i].k = 0xffffffffu; /* no system call has this number: brk is allowed */
}

static int install_filter(void)
{
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0)
		return 0;
	/* Without CAP_SYS_ADMIN a filter needs no_new_privs; ptrace already disables set-uid gains. */
	if (errno == EACCES && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0)
		return 0;
	return -1;
}

/* In the child: wait to be seized, install the filter, become the program. Never returns. */
static void child_exec(char **argv, int report_fd, const sigset_t *mask)
{
	signals_restore();
	sigprocmask(SIG_SETMASK, mask, NULL);
	raise(SIGSTOP);
	int msg[2] = { 0, 0 }; /* errno, and 1 when the filter failed */
	if (install_filter()) {
		msg[0] = errno;
		msg[1] = 1;
	} else {
		execvp(argv[0], argv);
		msg[0] = errno;
	}
	int err = msg[0];
	/* Tell ptfil why, through the close-on-exec pipe. */
	if (write(report_fd, msg, sizeof(msg)) < 0)
		_exit(127);
	_exit(err == ENOENT ? 127 : 126);
}

char *tracer_default_output(const char *prog, int pid)
{
	const char *base = strrchr(prog, '/');
	base = base ? base + 1 : prog;
	size_t n = strlen(base) + 40;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "ptfil-%s-%d.gz", base, pid);
	return s;
}

static void kill_child(void)
{
	if (child_pid > 0)
		kill(child_pid, SIGKILL);
}

int tracer_launch(const struct tracer_opts *o)
{
	static struct tracer T;
	caveats_warn_launch(o->argv[0]);
	if (session_init(&T, o)) {
		session_fin(&T);
		return -1;
	}
	/* While the BPF programs load. */
	modreg_warm(T.reg);
	if (faults_choose(&T) || kheap_choose(&T)) {
		session_fin(&T);
		return -1;
	}
	filter_for(&T);
	sigset_t mask;
	sigprocmask(SIG_SETMASK, NULL, &mask);
	int report[2];
	if (pipe2(report, O_CLOEXEC)) {
		session_fin(&T);
		return error_errno("cannot create a pipe");
	}
	signals_install(0);
	pid_t pid = fork();
	if (pid < 0) {
		session_fin(&T);
		return error_errno("cannot fork");
	}
	if (pid == 0) {
		close(report[0]);
		child_exec(o->argv, report[1], &mask);
	}
	close(report[1]);
	child_pid = pid;
	error_set_die_hook(kill_child);
	T.main_pid = pid;

	int status;
	pid_t started;
	while ((started = waitpid(pid, &status, WUNTRACED)) < 0 && errno == EINTR)
		;
	if (started == pid && WIFSIGNALED(status)) {
		/* Ctrl-C before the program started: the status a shell shows for it, and nothing to profile. */
		close(report[0]);
		session_fin(&T);
		return 128 + WTERMSIG(status);
	}
	if (started != pid || !WIFSTOPPED(status)) {
		close(report[0]);
		kill_child();
		session_fin(&T);
		return error("the child did not start");
	}
	long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACESECCOMP | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
		    PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL;
	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)opts)) {
		int e = errno;
		close(report[0]);
		kill_child();
		waitpid(pid, &status, 0);
		session_fin(&T);
		errno = e;
		return error_errno("cannot trace the child (ptrace PTRACE_SEIZE)%s",
				   e == EPERM ? "; is ptrace allowed here? (see /proc/sys/kernel/yama/ptrace_scope, CAP_SYS_PTRACE)" : "");
	}
	if (!lifecycle_add_thread(&T, pid) || kheap_start(&T) || faults_start(&T)) {
		kill_child();
		session_fin(&T);
		return -1;
	}
	char *def = NULL;
	T.output = o->output ? o->output : (def = tracer_default_output(o->argv[0], pid));
	if (!T.output) {
		kill_child();
		session_fin(&T);
		return error("out of memory");
	}
	/* The timer also writes growing peaks to disk, so it runs even without the timeline poll. */
	signals_start_timer(o->interval_ms ? o->interval_ms : 250);
	kill(pid, SIGCONT);

	T.live->on = T.opts.live != NULL;
	loop_run(&T);
	live_end(&T);
	signals_stop_timer();
	kheap_end(&T);
	faults_end(&T);

	int msg[2];
	ssize_t got = read(report[0], msg, sizeof(msg));
	close(report[0]);
	if (got == (ssize_t)sizeof(msg)) {
		errno = msg[0];
		if (msg[1])
			error_errno("cannot install the seccomp filter in the child");
		else
			error_errno("cannot run %s", o->argv[0]);
		session_fin(&T);
		free(def);
		return T.main_status >= 0 ? T.main_status : 127;
	}

	int rc = T.main_status;
	struct proc *p = tracer_proc(&T, pid);
	if (!p || tracer_write_snapshot(&T, p, 0, T.output)) {
		error("no snapshot written; the program exited with status %d", T.main_status);
		rc = -1;
	} else {
		summary_peak(&T, p, T.output);
		summary_children(&T);
		rc = summary_budget(&T, p, rc);
	}
	free(def);
	session_fin(&T);
	return rc;
}
