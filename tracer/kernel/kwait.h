/*
 * Waiting for whichever comes first, a ptrace stop or records in a kernel
 * ring (kwait.c): SIGCHLD through a signalfd and the rings' fds in one epoll,
 * for both kernel event sources (kernel/kheap.h, kernel/faults.h). It also
 * owns the back-pressure signal both sources' programs send.
 */
#ifndef PTFIL_KWAIT_H
#define PTFIL_KWAIT_H

struct tracer;
struct tracee;

/* Once per source that uses it (counted): SIGCHLD blocked, the signalfd and epoll made. Returns 0 or -1 after error(). */
int kwait_start(struct tracer *T);
/* A ring's fd, woken only past its mark (edge-triggered). Returns 0 or -1 after error(). */
int kwait_add(int fd);
/* True while some source waits through here. */
int kwait_on(void);
/* Waits at most timeout_ms until a ptrace stop may be ready, a ring passed its mark, or a signal came. 0, or -1 (EINTR). */
int kwait_wait(int timeout_ms);
/* The last source done: everything closed, SIGCHLD as it was. */
void kwait_end(void);

/*
 * The signal the programs stop a thread with when a ring is nearly full: a
 * launched program dies with ptfil (PTRACE_O_EXITKILL), so SIGSTOP, which
 * nothing can block or catch; an attached one outlives ptfil, and a SIGSTOP
 * sent just before would stop it for good: SIGURG or SIGWINCH where it leaves
 * that to its default (ignored: under ptrace still reported, untraced
 * dropped), one no thread blocks first; where it catches both, SIGURG, whose
 * handler then runs once for nothing (kwait.c, attach_stop_signal).
 */
int kwait_stop_signal(void);
/* Whether thread t's signal-delivery-stop (status) is that back-pressure (from the kernel, not a kill): suppressed, after a drain. */
int kwait_owns_stop(struct tracee *t, int status);

#endif
