/* Why ptfil may not attach to a process: facts read from /proc, decided before and after PTRACE_SEIZE. */
#include "tracer/refuse.h"

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/core/procfs.h"

/* CAP_SYS_PTRACE of <linux/capability.h>: its bit in CapEff. */
#define CAP_SYS_PTRACE_BIT 19

/* The fields of /proc/PID/status that matter here; unknown ones keep the values set by read_status. */
struct status {
	char state;
	int threads, kthread;
	pid_t ppid, tracer;
	uid_t uid[3];
	unsigned long long cap_prm, cap_eff;
};

static int read_status(pid_t pid, struct status *s)
{
	char path[64], line[256];
	*s = (struct status){ .ppid = -1, .tracer = -1, .uid = { REFUSE_NO_UID, REFUSE_NO_UID, REFUSE_NO_UID },
			      .cap_prm = ~0ULL, .cap_eff = ~0ULL };
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *fp = fopen(path, "re");
	if (!fp)
		return -1;
	/* Each pattern matches only the line that starts with its name. */
	while (fgets(line, sizeof(line), fp)) {
		sscanf(line, "State: %c", &s->state);
		sscanf(line, "Threads: %d", &s->threads);
		sscanf(line, "Kthread: %d", &s->kthread);
		sscanf(line, "PPid: %d", &s->ppid);
		sscanf(line, "TracerPid: %d", &s->tracer);
		sscanf(line, "Uid: %u %u %u", &s->uid[0], &s->uid[1], &s->uid[2]);
		sscanf(line, "CapPrm: %llx", &s->cap_prm);
		sscanf(line, "CapEff: %llx", &s->cap_eff);
	}
	fclose(fp);
	return 0;
}

static int read_yama(void)
{
	int scope = -1;
	FILE *fp = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (fp) {
		if (fscanf(fp, "%d", &scope) != 1)
			scope = -1;
		fclose(fp);
	}
	return scope;
}

/* Yama's scope 1 lets a process attach to what descends from it: the chain of real parents, as the kernel walks it. */
static int descends(pid_t pid, pid_t self)
{
	for (int depth = 0; depth < 4096 && pid > 0; depth++) {
		struct status s;
		if (read_status(pid, &s) < 0 || s.ppid < 0)
			return -1;
		if (s.ppid == self)
			return 1;
		pid = s.ppid;
	}
	return 0;
}

/* The first of the target's uids that is not ptfil's: the kernel lets an attach through only when all three match. */
static int other_uid(const struct refuse_facts *f, uid_t *uid)
{
	for (int i = 0; i < 3; i++) {
		if (f->uid[i] != REFUSE_NO_UID && f->uid[i] != f->self_uid) {
			*uid = f->uid[i];
			return 1;
		}
	}
	return 0;
}

void refuse_gather(pid_t pid, struct refuse_facts *f)
{
	memset(f, 0, sizeof(*f));
	f->pid = pid;
	f->uid[0] = f->uid[1] = f->uid[2] = REFUSE_NO_UID;
	f->cap_prm = ~0ULL;
	f->tracer = -1;
	f->descendant = -1;
	f->self = getpid();
	f->parent = getppid();
	/* PTRACE_ATTACH compares real uids (PTRACE_MODE_REALCREDS), not effective ones. */
	f->self_uid = getuid();
	f->yama = read_yama();

	struct status s;
	/* Unknown capabilities read as all set, so that nothing is refused on a guess. */
	read_status(f->self, &s);
	f->self_cap_prm = s.cap_prm;
	f->self_cap_eff = s.cap_eff;
	if (pid <= 0)
		return;
	if (read_status(pid, &s) < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		f->exists = access(path, F_OK) == 0;
		return;
	}
	f->exists = 1;
	f->state = s.state;
	f->threads = s.threads;
	f->kthread = s.kthread;
	f->tracer = s.tracer;
	memcpy(f->uid, s.uid, sizeof(f->uid));
	f->cap_prm = s.cap_prm;
	f->comm[0] = 0;
	procfs_comm(pid, f->comm, sizeof(f->comm));
	if (f->tracer > 0)
		procfs_comm(f->tracer, f->tracer_comm, sizeof(f->tracer_comm));
	uid_t u;
	if (other_uid(f, &u)) {
		struct passwd *pw = getpwuid(u);
		if (pw)
			snprintf(f->user, sizeof(f->user), "%s", pw->pw_name);
	}
	f->descendant = descends(pid, f->self);
}

static int has_cap(const struct refuse_facts *f)
{
	return (f->self_cap_eff >> CAP_SYS_PTRACE_BIT) & 1;
}

/* What to do about a missing CAP_SYS_PTRACE: a root without it is most likely in a container. */
static const char *cap_remedy(const struct refuse_facts *f)
{
	return f->self_uid == 0 ? "in a container, run it with --cap-add=SYS_PTRACE"
				: "run ptfil as root (in a container, with --cap-add=SYS_PTRACE)";
}

/* "process PID (COMM)", or "process PID" when the name is unknown. */
static void describe(char *buf, size_t n, pid_t pid, const char *comm)
{
	if (comm[0])
		snprintf(buf, n, "process %d (%s)", (int)pid, comm);
	else
		snprintf(buf, n, "process %d", (int)pid);
}

static int say(int status, char *msg, size_t n, const char *fmt, ...) PTFIL_PRINTF(4, 5);
static int say(int status, char *msg, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, n, fmt, ap);
	va_end(ap);
	return status;
}

int refuse_before(const struct refuse_facts *f, char *msg, size_t n)
{
	char w[128];
	int pid = (int)f->pid;
	describe(w, sizeof(w), f->pid, f->comm);

	if (pid <= 0)
		return say(REFUSE_USAGE, msg, n, "%d is not a process id; give the pid of a running program (see ps)",
			   pid);
	if (f->pid == f->self)
		return say(REFUSE_USAGE, msg, n, "process %d is ptfil itself; give the pid of the program to profile",
			   pid);
	/* The parent is blocked waiting for ptfil: its pid here is a slip ($$ or $PPID for the program's pid). */
	if (f->pid == f->parent)
		return say(REFUSE_USAGE, msg, n, "%s is ptfil's own parent; attach to it from another shell, "
			   "or start the program with ptfil launch", w);
	if (!f->exists)
		return say(REFUSE_GONE, msg, n, "no process %d (it may have exited); check the pid with ps", pid);
	/* A main thread that called pthread_exit is a zombie too, but its process runs on. */
	if ((f->state == 'Z' || f->state == 'X') && f->threads <= 1)
		return say(REFUSE_GONE, msg, n, "%s has exited and waits for its parent to reap it (zombie); "
			   "nothing to profile", w);
	if (f->kthread)
		return say(REFUSE_USAGE, msg, n, "%s is a kernel thread, which has no program memory to profile; "
			   "give the pid of a user program", w);
	/* A process has one tracer at a time; the kernel would only say EPERM. */
	if (f->tracer > 0) {
		char t[128];
		describe(t, sizeof(t), f->tracer, f->tracer_comm);
		return say(REFUSE_BUSY, msg, n, "%s is already traced by %s; detach the debugger (or stop strace) first",
			   w, t);
	}
	/* Scope 3 has no exception at all; scopes 1 and 2 do (PR_SET_PTRACER), so they wait for the kernel's answer. */
	if (f->yama == 3)
		return say(REFUSE_DENIED, msg, n, "cannot attach to %s: ptrace attach is disabled until reboot "
			   "(kernel.yama.ptrace_scope is 3); set a lower ptrace_scope for the next boot", w);
	uid_t u;
	if (!has_cap(f) && other_uid(f, &u)) {
		char name[96];
		if (f->user[0])
			snprintf(name, sizeof(name), "user %s (uid %u)", f->user, (unsigned)u);
		else
			snprintf(name, sizeof(name), "uid %u", (unsigned)u);
		if (f->self_uid == 0)
			return say(REFUSE_DENIED, msg, n, "%s belongs to %s and ptfil, though root, lacks "
				   "CAP_SYS_PTRACE; %s", w, name, cap_remedy(f));
		return say(REFUSE_DENIED, msg, n, "%s belongs to %s; run ptfil as that user or as root", w, name);
	}
	return 0;
}

int refuse_after(const struct refuse_facts *f, int err, char *msg, size_t n)
{
	/* The facts were read after the failure: the target may have exited or been traced since refuse_before. */
	int rc = refuse_before(f, msg, n);
	if (rc)
		return rc;
	char w[128];
	describe(w, sizeof(w), f->pid, f->comm);

	/* refuse_before let a zombie main thread through when other threads run on; the kernel does not. */
	if (err == EPERM && f->state == 'Z')
		return say(REFUSE_DENIED, msg, n, "cannot attach to %s: its main thread has exited while the rest "
			   "of it runs on, and ptrace cannot attach through that thread; start the program with "
			   "ptfil launch", w);
	if (err == ESRCH)
		return say(REFUSE_GONE, msg, n, "no process %d (it exited); check the pid with ps", (int)f->pid);
	if (err != EPERM)
		return say(REFUSE_DENIED, msg, n, "cannot attach to %s: %s", w, strerror(err));
	if (!has_cap(f)) {
		if (f->yama == 2)
			return say(REFUSE_DENIED, msg, n, "cannot attach to %s: kernel.yama.ptrace_scope is 2, so only "
				   "a process with CAP_SYS_PTRACE may attach, and ptfil lacks it; %s", w, cap_remedy(f));
		if (f->yama == 1 && f->descendant != 1)
			return say(REFUSE_DENIED, msg, n, "cannot attach to %s: kernel.yama.ptrace_scope is 1, so "
				   "a process may only attach to its own descendants; run ptfil as root, or "
				   "sysctl kernel.yama.ptrace_scope=0, or start the program with ptfil launch", w);
		/* Same uid, but the target holds capabilities ptfil lacks: the kernel wants CAP_SYS_PTRACE then. */
		if ((f->cap_prm & ~f->self_cap_prm) != 0)
			return say(REFUSE_DENIED, msg, n, "cannot attach to %s: ptfil lacks CAP_SYS_PTRACE, which it "
				   "needs for a process that holds capabilities ptfil does not; %s", w, cap_remedy(f));
	}
	return say(REFUSE_DENIED, msg, n, "the kernel refused to let ptfil trace %s (%s): it may be set-uid or "
		   "set-gid, non-dumpable, or guarded by a security module (SELinux, AppArmor); %s", w, strerror(err),
		   has_cap(f) && f->self_uid == 0 ? "look for the denial in dmesg or the audit log"
						  : "run ptfil as root");
}

int refuse_check(pid_t pid)
{
	struct refuse_facts f;
	char msg[512];
	refuse_gather(pid, &f);
	int rc = refuse_before(&f, msg, sizeof(msg));
	if (rc)
		error("%s", msg);
	return rc;
}

int refuse_explain(pid_t pid, int err)
{
	struct refuse_facts f;
	char msg[512];
	refuse_gather(pid, &f);
	int rc = refuse_after(&f, err, msg, sizeof(msg));
	error("%s", msg);
	return rc;
}
