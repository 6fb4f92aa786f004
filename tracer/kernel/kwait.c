/* One wait for ptrace stops and the kernel rings (kernel/kwait.h). */
#include "tracer/kernel/kwait.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/core/procfs.h"
#include "tracer/core/session.h"

static int users;
static int sigfd = -1, epfd = -1;
static int blocked;
static sigset_t old_mask;
static int stop_signal = SIGSTOP;

/* Whether a thread of process pid blocks sig now (-1: unknown). */
static int blocked_by_a_thread(pid_t pid, int sig)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int any = 0;
	struct dirent *de;
	while (!any && (de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		any = tid > 0 && procfs_signal(tid, "SigBlk", sig) == 1;
	}
	closedir(d);
	return any;
}

/*
 * The stop signal of an attached process, chosen for what a queued one does
 * if ptfil dies before the stop it was sent for: a signal it neither catches
 * nor (in any thread now) blocks is dropped by the kernel (SIGURG, else
 * SIGWINCH, both ignored by default). One blocked in some thread stops that
 * thread only when it unblocks it: its calls are then seen late, which
 * ptfil takes, but never harm it. Where both are caught, SIGURG, whose
 * handler then runs once for nothing (Go's runtime, which catches every
 * signal, takes spurious ones by design): a SIGSTOP would freeze it until a
 * SIGCONT.
 */
static int attach_stop_signal(pid_t pid)
{
	static const int candidates[] = { SIGURG, SIGWINCH };
	int uncaught = 0;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
		if (procfs_signal(pid, "SigCgt", candidates[i]) == 0) {
			if (blocked_by_a_thread(pid, candidates[i]) == 0)
				return candidates[i];
			if (!uncaught)
				uncaught = candidates[i];
		}
	return uncaught ? uncaught : SIGURG;
}

int kwait_start(struct tracer *T)
{
	if (users++)
		return 0;
	stop_signal = T->attach ? attach_stop_signal(T->main_pid) : SIGSTOP;
	/* SIGCHLD through a signalfd, so that one wait covers ptrace stops and the rings. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, &old_mask))
		return error_errno("cannot block SIGCHLD");
	blocked = 1;
	sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event sig = { .events = EPOLLIN, .data.u32 = 0 };
	if (sigfd < 0 || epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, sigfd, &sig))
		return error_errno("cannot wait on the ring buffer");
	return 0;
}

int kwait_add(int fd)
{
	struct epoll_event ring = { .events = EPOLLIN | EPOLLET, .data.u32 = 1 };
	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ring))
		return error_errno("cannot wait on the ring buffer");
	return 0;
}

int kwait_on(void)
{
	return users > 0 && epfd >= 0;
}

int kwait_wait(int timeout_ms)
{
	struct epoll_event ev[4];
	int n = epoll_wait(epfd, ev, 4, timeout_ms);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (ev[i].data.u32 == 0) {
			struct signalfd_siginfo si[16];
			while (read(sigfd, si, sizeof(si)) > 0) {
			}
		}
	return 0;
}

void kwait_end(void)
{
	if (!users || --users)
		return;
	if (sigfd >= 0)
		close(sigfd);
	if (epfd >= 0)
		close(epfd);
	sigfd = epfd = -1;
	if (blocked)
		sigprocmask(SIG_SETMASK, &old_mask, NULL);
	blocked = 0;
}

int kwait_stop_signal(void)
{
	return stop_signal;
}

int kwait_owns_stop(struct tracee *t, int status)
{
	siginfo_t si;
	if (!users || WSTOPSIG(status) != stop_signal || ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) ||
	    si.si_code != SI_KERNEL)
		return 0;
	return 1;
}
