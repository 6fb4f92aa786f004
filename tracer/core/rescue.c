/*
 * The crash rescue (tracer/core/rescue.h): tables kept up to date by the tracer,
 * and a handler that uses nothing but system calls to put every target back
 * the way it was before ptfil itself dies.
 */
#include "tracer/core/rescue.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct rescue_byte {
	volatile pid_t pid;    /* 0: free */
	uint64_t addr;
	uint8_t orig;
};

struct rescue_thread {
	volatile pid_t tid;    /* 0: free */
	pid_t pid;
	volatile uint64_t slot_addr;  /* a hijacked return in flight when not 0 */
	uint64_t ret, trampoline;
	int done;              /* handler: let go, or gone */
};

static struct rescue_byte bytes[RESCUE_BYTES];
static struct rescue_thread threads[RESCUE_THREADS];
static size_t bytes_hi, threads_hi; /* entries at or past these were never used */

#define BARRIER() __asm__ volatile("" ::: "memory")

int rescue_thread_add(pid_t tid, pid_t pid)
{
	for (size_t i = 0; i < RESCUE_THREADS; i++) {
		if (threads[i].tid)
			continue;
		threads[i].pid = pid;
		threads[i].slot_addr = 0;
		threads[i].done = 0;
		BARRIER();
		threads[i].tid = tid;
		if (i >= threads_hi)
			threads_hi = i + 1;
		return (int)i;
	}
	return RESCUE_NONE;
}

void rescue_thread_del(int slot)
{
	if (slot >= 0 && slot < RESCUE_THREADS)
		threads[slot].tid = 0;
}

void rescue_return(int slot, uint64_t slot_addr, uint64_t ret, uint64_t trampoline)
{
	if (slot < 0 || slot >= RESCUE_THREADS)
		return;
	threads[slot].ret = ret;
	threads[slot].trampoline = trampoline;
	BARRIER();
	threads[slot].slot_addr = slot_addr;
}

void rescue_return_done(int slot)
{
	if (slot >= 0 && slot < RESCUE_THREADS)
		threads[slot].slot_addr = 0;
}

/* The process of thread tid, as the thread table knows it; tid itself otherwise. */
static pid_t pid_of(pid_t tid)
{
	for (size_t i = 0; i < threads_hi; i++)
		if (threads[i].tid == tid)
			return threads[i].pid;
	return tid;
}

void rescue_byte_note(pid_t tid, uint64_t addr, uint8_t orig)
{
	pid_t pid = pid_of(tid);
	for (size_t i = 0; i < bytes_hi; i++) {
		if (bytes[i].pid == pid && bytes[i].addr == addr)
			return; /* noted already: the first original byte is the one */
	}
	for (size_t i = 0; i < RESCUE_BYTES; i++) {
		if (bytes[i].pid)
			continue;
		bytes[i].addr = addr;
		bytes[i].orig = orig;
		BARRIER();
		bytes[i].pid = pid;
		if (i >= bytes_hi)
			bytes_hi = i + 1;
		return;
	}
}

void rescue_byte_forget(pid_t tid, uint64_t addr)
{
	pid_t pid = pid_of(tid);
	for (size_t i = 0; i < bytes_hi; i++)
		if (bytes[i].pid == pid && bytes[i].addr == addr)
			bytes[i].pid = 0;
}

void rescue_bytes_forget_pid(pid_t pid)
{
	for (size_t i = 0; i < bytes_hi; i++)
		if (bytes[i].pid == pid)
			bytes[i].pid = 0;
}

/* ---- the handler: system calls only ------------------------------------------ */

static void say(const char *s)
{
	ssize_t r = write(2, s, strlen(s));
	(void)r;
}

static void put_num(char *buf, size_t *n, unsigned long v)
{
	char tmp[24];
	size_t k = 0;
	do
		tmp[k++] = (char)('0' + v % 10);
	while ((v /= 10) && k < sizeof(tmp));
	while (k)
		buf[(*n)++] = tmp[--k];
}

/* /proc/ID/WHAT opened, or -1. */
static int open_proc(pid_t id, const char *what, int flags)
{
	char path[64] = "/proc/";
	size_t n = 6;
	put_num(path, &n, (unsigned long)id);
	path[n++] = '/';
	for (const char *w = what; *w && n < sizeof(path) - 1; w++)
		path[n++] = *w;
	path[n] = '\0';
	return open(path, flags | O_CLOEXEC);
}

/* The memory of process pid, for reading and writing (a ptracer may write its text through it). */
static int mem_fd(pid_t pid)
{
	static pid_t cached_pid;
	static int cached_fd = -1;
	if (cached_pid == pid && cached_fd >= 0)
		return cached_fd;
	if (cached_fd >= 0)
		close(cached_fd);
	cached_pid = pid;
	cached_fd = open_proc(pid, "mem", O_RDWR);
	/* A main thread that is a zombie has no memory to show: ask another thread of the process. */
	for (size_t i = 0; cached_fd < 0 && i < threads_hi; i++)
		if (threads[i].tid && threads[i].pid == pid && threads[i].tid != pid)
			cached_fd = open_proc(threads[i].tid, "mem", O_RDWR);
	return cached_fd;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* True when thread tid has SIGTRAP queued for it alone (the SigPnd line of its status). */
static int trap_pending(pid_t tid)
{
	int fd = open_proc(tid, "status", O_RDONLY);
	if (fd < 0)
		return 0;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, "SigPnd:", 7))
			continue;
		unsigned long long mask = 0;
		for (char *c = l + 7; *c && *c != '\n'; c++) {
			if (*c >= '0' && *c <= '9')
				mask = mask * 16 + (unsigned long long)(*c - '0');
			else if (*c >= 'a' && *c <= 'f')
				mask = mask * 16 + (unsigned long long)(*c - 'a' + 10);
		}
		return (mask >> (SIGTRAP - 1)) & 1;
	}
	return 0;
}

static int is_byte_of(pid_t pid, uint64_t addr)
{
	for (size_t i = 0; i < bytes_hi; i++)
		if (bytes[i].pid == pid && bytes[i].addr == addr)
			return 1;
	return 0;
}

/*
 * Thread r, if it is in a ptrace stop now: whatever ptfil's int3 did to it
 * undone, then detached. Returns 1 when it was let go (or is gone), 0 when
 * it is still running, -1 when it was restarted to report a queued SIGTRAP.
 */
static int settle(struct rescue_thread *r, int status, int have_status)
{
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, r->tid, 0, &regs))
		return errno == ESRCH && !have_status ? 0 : 1;
	int sig = 0;
	siginfo_t si;
	int info = ptrace(PTRACE_GETSIGINFO, r->tid, 0, &si) == 0;
	uint64_t at = regs.rip - 1;
	int tramp = r->trampoline && at == r->trampoline && r->ret;
	int ours = tramp || is_byte_of(r->pid, at);
	int delivery = have_status ? ((unsigned)status >> 16) == 0 && WSTOPSIG(status) != (SIGTRAP | 0x80)
				   : info && si.si_signo != SIGTRAP;
	if (ours && info && si.si_signo == SIGTRAP && si.si_code == SI_KERNEL) {
		/* Stopped by our int3: run the original instruction again, or return where the call would have. */
		regs.rip = tramp ? r->ret : at;
		ptrace(PTRACE_SETREGS, r->tid, 0, &regs);
	} else if (ours && trap_pending(r->tid)) {
		/* Its int3's SIGTRAP is still queued: let it be reported, then undo it. */
		ptrace(PTRACE_CONT, r->tid, 0, 0);
		return -1;
	} else if (delivery && have_status) {
		sig = WSTOPSIG(status);
	} else if (delivery && info) {
		sig = si.si_signo;
	}
	ptrace(PTRACE_DETACH, r->tid, 0, (void *)(long)sig);
	return 1;
}

static volatile sig_atomic_t rescuing;

static void on_crash(int sig)
{
	if (rescuing)
		_exit(128 + sig);
	rescuing = 1;
	/* 1. Every original byte and every hijacked return back, the threads running or not. */
	for (size_t i = 0; i < bytes_hi; i++) {
		pid_t pid = bytes[i].pid;
		int fd = pid ? mem_fd(pid) : -1;
		if (fd >= 0 && pwrite(fd, &bytes[i].orig, 1, (off_t)bytes[i].addr) != 1)
			say("ptfil: rescue: cannot put a byte back\n");
	}
	for (size_t i = 0; i < threads_hi; i++) {
		struct rescue_thread *r = &threads[i];
		if (!r->tid || !r->slot_addr)
			continue;
		uint64_t word = 0;
		int fd = mem_fd(r->pid);
		if (fd >= 0 && pread(fd, &word, 8, (off_t)r->slot_addr) == 8 && word == r->trampoline)
			(void)!pwrite(fd, &r->ret, 8, (off_t)r->slot_addr);
	}
	/* 2. Every thread stopped, undone and let go; a second or two at most. */
	size_t left = 0;
	for (size_t i = 0; i < threads_hi; i++) {
		struct rescue_thread *r = &threads[i];
		r->done = !r->tid;
		if (r->done)
			continue;
		if (settle(r, 0, 0) == 1) {
			r->done = 1;
			continue;
		}
		ptrace(PTRACE_INTERRUPT, r->tid, 0, 0);
		left++;
	}
	double until = now_s() + 2.0;
	while (left && now_s() < until) {
		int status;
		pid_t tid = waitpid(-1, &status, __WALL | WNOHANG);
		if (tid < 0)
			break;
		if (tid == 0) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
			continue;
		}
		for (size_t i = 0; i < threads_hi; i++) {
			struct rescue_thread *r = &threads[i];
			if (r->done || r->tid != tid)
				continue;
			if (!WIFSTOPPED(status) || settle(r, status, 1) == 1) {
				r->done = 1;
				left--;
			}
			break;
		}
	}
	say("ptfil: crashed while attached; the breakpoints were taken out and the process let go\n");
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	/*
	 * Not sigprocmask: a crash inside libunwind would find ptfil's own
	 * (stacks/sigmask.c) doing nothing, and the signal would stay blocked:
	 * no core dump where the system would make one.
	 */
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);
}

void rescue_install(void)
{
	static char altstack[64 * 1024];
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack), .ss_flags = 0 };
	sigaltstack(&ss, NULL);
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGSYS, SIGTRAP };
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_crash;
	sa.sa_flags = SA_ONSTACK | SA_NODEFER;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}
