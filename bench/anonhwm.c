/*
 * The anonymous-memory high-water mark of a program and of every process it starts, measured from
 * the kernel's own counter, independently of ptfil's ledger:
 *
 *     anonhwm [-o OUT] [-r RING_MIB] -- CMD ARGS...
 *
 * The kernel keeps no high-water mark of anonymous memory (VmHWM is all of RSS: file pages and
 * shared memory too), but it announces every change of its counters: the tracepoint kmem:rss_stat
 * fires at each add_mm_counter() with the mm (a 32-bit hash of it, mm_id), the counter (member:
 * MM_FILEPAGES 0, MM_ANONPAGES 1, MM_SWAPENTS 2, MM_SHMEMPAGES 3) and the counter's exact value
 * after the change (size: percpu_counter_sum_positive(), in bytes). RssAnon in /proc/PID/status is
 * MM_ANONPAGES; its largest value over a process's life is the largest `size` of its mm's events
 * with member 1. That is exact, not sampled: every change is an event, and each carries the sum.
 *
 * The events are read by a small BPF program on the tracepoint (assembled here, loaded with the
 * bpf() system call: no libbpf, no BTF), which writes each event of a tracked process into a ring
 * buffer, and returns 1. Not a perf event with a ring of its own: while ptfil's fault path runs,
 * its BPF program on kmem:rss_stat returns 0, and the kernel then writes the tracepoint to no perf
 * ring at all (perf_trace_run_bpf_submit); every BPF program attached still runs. A second program,
 * on sched:sched_process_fork, tracks the children of tracked processes (CMD's whole tree, and
 * under `ptfil launch` ptfil itself and the program it traces). Field offsets come from the
 * tracepoints' format files in tracefs, mounted in a private mount namespace of a helper process
 * when it is not mounted (CMD's namespace is left alone), as ptfil's tracer/kernel/faults.c does.
 *
 * The events are sorted by time; each mm is named by the process whose thread first raised one of
 * its events while running in it (curr = 1: an event in another context, fork copying the parent's
 * pages into the child's mm, exec writing the arguments into the new mm, is counted for the mm
 * but does not name it). An mm_id is a new mm (the hash of a freed and reused mm_struct) when
 * another process raises an event of it while running in it, or when anyone else does once all
 * its counters are back to 0 (exit_mmap). A process's figure is its last mm's, the one after its
 * last exec (the mm a forked child copied from its parent before exec is reported apart, as
 * "earlier").
 *
 * What it does not see: changes made in a context outside the tracked tree (khugepaged filling
 * holes when it collapses a huge page, another process's process_vm_writev, reclaim by kswapd).
 * None of the bench's workloads does the first two; the third only lowers the count.
 *
 * From the same events, as a check of the method: the largest RSS (file + anon + shmem counters,
 * the latest value of each at each event), to compare with the kernel's own VmHWM (ru_maxrss of
 * CMD), which reads the counters without their per-CPU parts and so can be a little lower.
 *
 * Output (OUT, or standard error), one line per process, then one line about CMD and the run:
 *
 *     proc PID ppid PPID comm COMM anon_hwm BYTES rss_hwm BYTES anon_end BYTES events N earlier BYTES
 *     anonhwm: pid PID status N minflt N majflt N utime S stime S wall S maxrss BYTES events N lost N
 *
 * `lost`: records the ring had no room for (0: every change was seen). Needs root (CAP_BPF,
 * CAP_PERFMON, CAP_SYS_ADMIN to mount tracefs). Exits with CMD's status, 128+N if killed by N;
 * 125 when it cannot measure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FORK_MEMBER 100 /* a record of sched_process_fork: size = the child's pid */

/* What the BPF programs write: 48 bytes. */
struct rec {
	uint64_t time;
	int64_t size;
	uint32_t tgid, mm, curr, member;
	char comm[16];
};

struct fmt {
	unsigned long long rss_id, fork_id;
	int off_mm, off_curr, off_member, off_size, off_child;
};

struct proc {
	uint32_t pid, ppid;
	char comm[16];
};

struct mm {
	uint32_t id, pid;  /* pid 0: not named yet */
	uint64_t named_at; /* time of its first curr event */
	int64_t cur[4];	   /* latest value of each counter */
	int64_t anon_max, rss_max;
	uint64_t events;
};

static struct rec *evs;
static size_t nev, cap_ev;
static struct proc *procs;
static size_t nproc, cap_proc;
static volatile pid_t child;

static void die(const char *what)
{
	fprintf(stderr, "anonhwm: %s: %s\n", what, strerror(errno));
	if (child > 0)
		kill(child, SIGKILL);
	exit(125);
}

static void *grow(void *p, size_t *cap, size_t need, size_t each)
{
	if (need <= *cap)
		return p;
	size_t n = *cap ? *cap * 2 : 4096;
	while (n < need)
		n *= 2;
	p = realloc(p, n * each);
	if (!p)
		die("out of memory");
	*cap = n;
	return p;
}

static struct proc *proc_of(uint32_t pid)
{
	for (size_t i = 0; i < nproc; i++)
		if (procs[i].pid == pid)
			return &procs[i];
	procs = grow(procs, &cap_proc, nproc + 1, sizeof(*procs));
	struct proc *p = &procs[nproc++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

/* --- the tracepoints' ids and layouts, from tracefs ------------------------------------------- */

/* "field:unsigned int mm_id;	offset:8;	size:4;" -> 8 for "mm_id" */
static int field_offset(const char *text, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), " %s;", name);
	const char *f = strstr(text, key);
	if (!f)
		return -1;
	const char *o = strstr(f, "offset:");
	return o ? atoi(o + 7) : -1;
}

static int read_format(const char *dir, const char *event, char *text, size_t n, unsigned long long *id)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/events/%s/format", dir, event);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t got = read(fd, text, n - 1);
	close(fd);
	if (got <= 0)
		return -1;
	text[got] = 0;
	const char *i = strstr(text, "\nID: ");
	if (!i)
		return -1;
	*id = strtoull(i + 5, NULL, 10);
	return *id ? 0 : -1;
}

static int read_fmt(const char *dir, struct fmt *f)
{
	char text[4096];
	if (read_format(dir, "kmem/rss_stat", text, sizeof(text), &f->rss_id))
		return -1;
	f->off_mm = field_offset(text, "mm_id");
	f->off_curr = field_offset(text, "curr");
	f->off_member = field_offset(text, "member");
	f->off_size = field_offset(text, "size");
	if (read_format(dir, "sched/sched_process_fork", text, sizeof(text), &f->fork_id))
		return -1;
	f->off_child = field_offset(text, "child_pid");
	return f->off_mm >= 8 && f->off_curr >= 8 && f->off_member >= 8 && f->off_size >= 8 && f->off_child >= 8
		       ? 0
		       : -1;
}

static int find_fmt(struct fmt *f)
{
	if (read_fmt("/sys/kernel/tracing", f) == 0 || read_fmt("/sys/kernel/debug/tracing", f) == 0)
		return 0;
	int fd[2];
	if (pipe(fd))
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct fmt v;
		memset(&v, 0, sizeof(v));
		if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		    mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0 && read_fmt("/sys/kernel/tracing", &v))
			memset(&v, 0, sizeof(v));
		_exit(write(fd[1], &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 1);
	}
	close(fd[1]);
	ssize_t got = read(fd[0], f, sizeof(*f));
	close(fd[0]);
	waitpid(pid, NULL, 0);
	return got == (ssize_t)sizeof(*f) && f->rss_id ? 0 : -1;
}

/* --- a small BPF assembler ----------------------------------------------------------------- */

struct prog {
	struct bpf_insn in[96];
	int n;
	int label[8];	  /* instruction index of each label */
	int fix[16][2]; /* (instruction, label) of each jump */
	int nfix;
};

static void emit(struct prog *p, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	p->in[p->n++] = (struct bpf_insn){ .code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm };
}

#define MOV_REG(d, s) emit(p, BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) emit(p, BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i) emit(p, BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define RSH_IMM(d, i) emit(p, BPF_ALU64 | BPF_RSH | BPF_K, d, 0, 0, i)
#define LDX(sz, d, s, o) emit(p, BPF_LDX | (sz) | BPF_MEM, d, s, o, 0)
#define STX(sz, d, s, o) emit(p, BPF_STX | (sz) | BPF_MEM, d, s, o, 0)
#define ST(sz, d, o, i) emit(p, BPF_ST | (sz) | BPF_MEM, d, 0, o, i)
#define CALL(f) emit(p, BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define LD_MAP(d, fd) (emit(p, BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), emit(p, 0, 0, 0, 0, 0))
#define JMP_IMM(op, d, i, l) (p->fix[p->nfix][0] = p->n, p->fix[p->nfix++][1] = l, \
			      emit(p, BPF_JMP | (op) | BPF_K, d, 0, 0, i))
#define LABEL(l) (p->label[l] = p->n)

static void resolve(struct prog *p)
{
	for (int i = 0; i < p->nfix; i++)
		p->in[p->fix[i][0]].off = (int16_t)(p->label[p->fix[i][1]] - p->fix[i][0] - 1);
}

enum { R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 };
enum { OUT };

/* r1 = &key(r10-4) of the current tgid; jumps to OUT when the tgid is not tracked. Leaves the tgid at r10-4. */
static void if_tracked(struct prog *p, int tracked)
{
	CALL(BPF_FUNC_get_current_pid_tgid);
	RSH_IMM(R0, 32);
	STX(BPF_W, R10, R0, -4);
	LD_MAP(R1, tracked);
	MOV_REG(R2, R10);
	ADD_IMM(R2, -4);
	CALL(BPF_FUNC_map_lookup_elem);
	JMP_IMM(BPF_JEQ, R0, 0, OUT);
}

/* The record at r10-64 (time, then what the caller stored: size, mm, curr, member), tgid and comm
 * filled in here, written to the ring; a record the ring has no room for counts in lost[0]. */
static void output(struct prog *p, int ring, int lost)
{
	CALL(BPF_FUNC_ktime_get_ns);
	STX(BPF_DW, R10, R0, -64);
	LDX(BPF_W, R1, R10, -4);
	STX(BPF_W, R10, R1, -48);
	MOV_REG(R1, R10);
	ADD_IMM(R1, -32);
	MOV_IMM(R2, 16);
	CALL(BPF_FUNC_get_current_comm);
	LD_MAP(R1, ring);
	MOV_REG(R2, R10);
	ADD_IMM(R2, -64);
	MOV_IMM(R3, (int32_t)sizeof(struct rec));
	MOV_IMM(R4, BPF_RB_NO_WAKEUP);
	CALL(BPF_FUNC_ringbuf_output);
	JMP_IMM(BPF_JEQ, R0, 0, OUT);
	ST(BPF_W, R10, -8, 0);
	LD_MAP(R1, lost);
	MOV_REG(R2, R10);
	ADD_IMM(R2, -8);
	CALL(BPF_FUNC_map_lookup_elem);
	JMP_IMM(BPF_JEQ, R0, 0, OUT);
	MOV_IMM(R1, 1);
	emit(p, BPF_STX | BPF_DW | BPF_ATOMIC, R0, R1, 0, BPF_ADD);
	LABEL(OUT);
	MOV_IMM(R0, 1); /* let the tracepoint go on to perf */
	EXIT();
}

static int load(struct prog *p)
{
	static char log[65536];
	resolve(p);
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_TRACEPOINT;
	a.insns = (uint64_t)(uintptr_t)p->in;
	a.insn_cnt = (uint32_t)p->n;
	a.license = (uint64_t)(uintptr_t) "GPL";
	a.log_buf = (uint64_t)(uintptr_t)log;
	a.log_size = sizeof(log);
	a.log_level = 1;
	int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	if (fd < 0) {
		int e = errno;
		fprintf(stderr, "anonhwm: the verifier's log:\n%s\n", log);
		errno = e;
	}
	return fd;
}

static int map_create(int type, int key, int value, int entries)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_type = (uint32_t)type;
	a.key_size = (uint32_t)key;
	a.value_size = (uint32_t)value;
	a.max_entries = (uint32_t)entries;
	return (int)syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a));
}

static int map_update(int fd, const void *key, const void *value)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)key;
	a.value = (uint64_t)(uintptr_t)value;
	return (int)syscall(SYS_bpf, BPF_MAP_UPDATE_ELEM, &a, sizeof(a));
}

static int map_lookup(int fd, const void *key, void *value)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)key;
	a.value = (uint64_t)(uintptr_t)value;
	return (int)syscall(SYS_bpf, BPF_MAP_LOOKUP_ELEM, &a, sizeof(a));
}

static int attach(unsigned long long id, int prog)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_TRACEPOINT;
	a.config = id;
	a.sample_period = 1;
	/* One event carries the program: it runs at every hit of the tracepoint, on every CPU. */
	int fd = (int)syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0 || ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
		return -1;
	return fd;
}

/* --- the ring ------------------------------------------------------------------------------ */

struct ring {
	unsigned long *cons, *prod;
	char *data;
	size_t mask;
};

static void drain(struct ring *r)
{
	unsigned long c = *r->cons, pr = __atomic_load_n(r->prod, __ATOMIC_ACQUIRE);
	while (c < pr) {
		uint32_t len = __atomic_load_n((uint32_t *)(r->data + (c & r->mask)), __ATOMIC_ACQUIRE);
		if (len & BPF_RINGBUF_BUSY_BIT)
			break;
		if (!(len & BPF_RINGBUF_DISCARD_BIT) && len >= sizeof(struct rec)) {
			evs = grow(evs, &cap_ev, nev + 1, sizeof(*evs));
			memcpy(&evs[nev++], r->data + (c & r->mask) + BPF_RINGBUF_HDR_SZ, sizeof(struct rec));
		}
		len &= ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
		c += (len + BPF_RINGBUF_HDR_SZ + 7) & ~7ul;
		__atomic_store_n(r->cons, c, __ATOMIC_RELEASE);
	}
}

static int by_time(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	return x->time < y->time ? -1 : x->time > y->time;
}

static void on_signal(int sig)
{
	(void)sig;
	if (child > 0)
		kill(child, SIGKILL);
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	size_t ring_mib = 64;
	int opt;
	while ((opt = getopt(argc, argv, "+o:r:")) != -1) {
		if (opt == 'o')
			out = optarg;
		else if (opt == 'r')
			ring_mib = strtoul(optarg, NULL, 10);
		else
			goto usage;
	}
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	if (optind >= argc || !ring_mib || (ring_mib & (ring_mib - 1))) {
	usage:
		fprintf(stderr, "usage: anonhwm [-o OUT] [-r RING_MIB (a power of two)] -- CMD [ARGS...]\n");
		return 2;
	}
	struct fmt F;
	if (find_fmt(&F)) {
		fprintf(stderr, "anonhwm: the tracepoints kmem:rss_stat and sched:sched_process_fork cannot be read "
				"(tracefs cannot be mounted)\n");
		return 125;
	}
	/* CMD is forked first, before the ring is mapped: a child forked later would inherit the
	 * mapping, and its ru_maxrss (which counts the mm it had before its exec) the ring's pages. */
	int go[2];
	if (pipe2(go, O_CLOEXEC))
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(125);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "anonhwm: cannot run %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	child = pid;
	close(go[0]);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	size_t ring_bytes = ring_mib << 20;
	int tracked = map_create(BPF_MAP_TYPE_HASH, 4, 4, 65536);
	int lost = map_create(BPF_MAP_TYPE_ARRAY, 4, 8, 1);
	int ringfd = map_create(BPF_MAP_TYPE_RINGBUF, 0, 0, (int)ring_bytes);
	if (tracked < 0 || lost < 0 || ringfd < 0)
		die("creating the BPF maps (root, or CAP_BPF and CAP_PERFMON)");

	static struct prog rss, fork_prog;
	struct prog *p = &rss;
	MOV_REG(R6, R1);
	LDX(BPF_W, R7, R6, (int16_t)F.off_member);
	JMP_IMM(BPF_JEQ, R7, 2, OUT); /* MM_SWAPENTS: not resident */
	if_tracked(p, tracked);
	LDX(BPF_DW, R1, R6, (int16_t)F.off_size);
	STX(BPF_DW, R10, R1, -56);
	LDX(BPF_W, R1, R6, (int16_t)F.off_mm);
	STX(BPF_W, R10, R1, -44);
	LDX(BPF_W, R1, R6, (int16_t)F.off_curr);
	STX(BPF_W, R10, R1, -40);
	STX(BPF_W, R10, R7, -36);
	output(p, ringfd, lost);

	p = &fork_prog;
	MOV_REG(R6, R1);
	if_tracked(p, tracked);
	LDX(BPF_W, R1, R6, (int16_t)F.off_child);
	STX(BPF_W, R10, R1, -12);
	ST(BPF_W, R10, -16, 1);
	LD_MAP(R1, tracked);
	MOV_REG(R2, R10);
	ADD_IMM(R2, -12);
	MOV_REG(R3, R10);
	ADD_IMM(R3, -16);
	MOV_IMM(R4, BPF_ANY);
	CALL(BPF_FUNC_map_update_elem);
	LDX(BPF_W, R1, R10, -12);
	STX(BPF_DW, R10, R1, -56);
	ST(BPF_W, R10, -44, 0);
	ST(BPF_W, R10, -40, 0);
	ST(BPF_W, R10, -36, FORK_MEMBER);
	output(p, ringfd, lost);

	int rss_fd = load(&rss), fork_fd = load(&fork_prog);
	if (rss_fd < 0 || fork_fd < 0)
		die("loading the BPF programs");
	long page = sysconf(_SC_PAGESIZE);
	struct ring ring;
	ring.cons = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, ringfd, 0);
	ring.prod = mmap(NULL, (size_t)page + 2 * ring_bytes, PROT_READ, MAP_SHARED, ringfd, page);
	if (ring.cons == MAP_FAILED || ring.prod == MAP_FAILED)
		die("mapping the ring");
	ring.data = (char *)ring.prod + page;
	ring.mask = ring_bytes - 1;

	uint32_t key = (uint32_t)pid, one = 1;
	int rss_link = attach(F.rss_id, rss_fd), fork_link = attach(F.fork_id, fork_fd);
	if (map_update(tracked, &key, &one) || rss_link < 0 || fork_link < 0)
		die("attaching the BPF programs");
	proc_of((uint32_t)pid)->ppid = (uint32_t)getpid();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (write(go[1], "x", 1) != 1)
		die("releasing the command");
	close(go[1]);
	int status = 0;
	struct rusage ru;
	for (;;) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		drain(&ring);
		pid_t w = wait4(pid, &status, WNOHANG, &ru);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			die("wait4");
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	child = 0;
	drain(&ring);
	close(rss_link);
	close(fork_link);
	uint32_t zero = 0;
	uint64_t nlost = 0;
	map_lookup(lost, &zero, &nlost);

	qsort(evs, nev, sizeof(*evs), by_time);
	if (getenv("ANONHWM_DEBUG"))
		for (size_t i = 0; i < nev; i++)
			fprintf(stderr, "ev %llu tgid %u comm %.16s mm %08x curr %u member %u size %lld\n",
				(unsigned long long)evs[i].time, evs[i].tgid, evs[i].comm, evs[i].mm, evs[i].curr,
				evs[i].member, (long long)evs[i].size);
	struct mm *mms = NULL;
	size_t nmm = 0, cap_mm = 0;
	for (size_t i = 0; i < nev; i++) {
		struct rec *e = &evs[i];
		if (e->member == FORK_MEMBER) {
			proc_of((uint32_t)e->size)->ppid = e->tgid;
			continue;
		}
		if (e->curr)
			memcpy(proc_of(e->tgid)->comm, e->comm, 16);
		struct mm *m = NULL;
		for (size_t j = nmm; j-- > 0;)
			if (mms[j].id == e->mm) {
				m = &mms[j];
				break;
			}
		/* The hash of an mm freed and reused: raised by another process while running in it, or by
		 * anyone else once every counter of the old one is back to 0 (exit_mmap zeroes them; a live
		 * mm has its program's pages). A fork copies the parent's pages into the child's new mm in
		 * the parent's context, so its first events come from the parent. */
		if (m && m->pid != e->tgid &&
		    ((e->curr && m->pid) || (m->events && !m->cur[0] && !m->cur[1] && !m->cur[3])))
			m = NULL;
		if (!m) {
			mms = grow(mms, &cap_mm, nmm + 1, sizeof(*mms));
			m = &mms[nmm++];
			memset(m, 0, sizeof(*m));
			m->id = e->mm;
		}
		if (e->curr && !m->pid) {
			m->pid = e->tgid;
			m->named_at = e->time;
		}
		if (e->member < 4)
			m->cur[e->member] = e->size;
		m->events++;
		int64_t rss = m->cur[0] + m->cur[1] + m->cur[3];
		if (m->cur[1] > m->anon_max)
			m->anon_max = m->cur[1];
		if (rss > m->rss_max)
			m->rss_max = rss;
	}
	FILE *o = out ? fopen(out, "w") : stderr;
	if (!o)
		die("opening the output");
	for (size_t i = 0; i < nproc; i++) {
		struct proc *q = &procs[i];
		struct mm *last = NULL;
		int64_t earlier = 0;
		for (size_t j = 0; j < nmm; j++)
			if (mms[j].pid == q->pid && (!last || mms[j].named_at > last->named_at))
				last = &mms[j];
		for (size_t j = 0; j < nmm; j++)
			if (mms[j].pid == q->pid && &mms[j] != last && mms[j].anon_max > earlier)
				earlier = mms[j].anon_max;
		if (!last)
			continue; /* a thread, or a process whose counters never moved while it ran */
		fprintf(o, "proc %u ppid %u comm %.16s anon_hwm %lld rss_hwm %lld anon_end %lld events %llu earlier %lld\n",
			q->pid, q->ppid, q->comm[0] ? q->comm : "?", (long long)last->anon_max, (long long)last->rss_max,
			(long long)last->cur[1], (unsigned long long)last->events, (long long)earlier);
	}
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	fprintf(o,
		"anonhwm: pid %d status %d minflt %ld majflt %ld utime %.6f stime %.6f wall %.6f maxrss %ld events %zu "
		"lost %llu\n",
		(int)pid, code, ru.ru_minflt, ru.ru_majflt, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
		(double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, ru.ru_maxrss * 1024L, nev,
		(unsigned long long)nlost);
	if (out && fclose(o))
		die("writing the output");
	return code;
}
