/*
 * Measures what recording a launched program's page faults costs it (docs/fault-path.md):
 * loads fault.bpf.c with one hook, or opens perf software page-fault events, launches the
 * program, drains the records on this process's CPU into a ledger of resident pages, and
 * prints one line of key=value results.
 *
 * Usage: fault [-m bare|t|r|f|p] [-s 0|1|2] [-A] [-C] [-D] [-k] [-r RING] [-w WAKE] [-B BP] [-U K] [-p PID [-d S]] [-- PROG ARGS]
 *   -m  t: BPF on exceptions:page_fault_user/kernel, write faults only; f: BPF fentry on
 *       folio_add_new_anon_rmap; p: perf_event_open(PERF_COUNT_SW_PAGE_FAULTS, period 1,
 *       inherit); bare: nothing attached, the same launcher
 *   -s  0: count only (BPF), 1: a record with the user registers, 2: and 8 KiB of user stack
 *       (BPF: clamped to the stack mapping's end; perf: PERF_SAMPLE_STACK_USER 8192)
 *   -A  wake the drainer at every record (BPF: the ringbuf's default; perf: wakeup_events 1)
 *       instead of past the watermark -w (default ring / 4)
 *   -C  (r) coalesce: a syscall's kernel-mode faults (read() into a fresh buffer) and GUP
 *       growth (MAP_POPULATE, mlock...) extend a per-thread run, written as one record when it
 *       breaks, before the thread's next record, or at the syscall's exit (raw_syscalls:sys_exit)
 *   -D  (BPF, -s 2) no stack copy when (ip, sp, bp) equal the thread's previous record's
 *   -k  (p) kernel-mode faults too (exclude_kernel = 0: needs perf_event_paranoid < 2 or
 *       CAP_PERFMON); without it the event counts user-mode faults only
 *   -U  unwind every K-th stack record of the launched process in the drainer (libunwind over
 *       the copy and the module files) and print the time per unwind
 *   -p  attach to the running process PID instead of launching PROG (its threads as they are, and
 *       what it forks from now on) for -d SECONDS (5), then detach; it runs on unharmed
 *   -B  back-pressure: the program is ptraced (PTRACE_SEIZE, TRACECLONE); the BPF program
 *       sends SIGSTOP to the faulting thread past BP unread bytes; the drainer drains and
 *       restarts the thread with the signal suppressed. (p) BP is a count K instead: a second
 *       perf event per CPU with sample_period K and sigtrap (opened at the exec stop, as
 *       sigtrap needs remove_on_exec) sends the thread a SIGTRAP every K faults; the drainer
 *       drains at that stop and suppresses the signal
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "fault.h"
#include "fault.skel.h"
#include "unwind.h"

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_anon_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static double cpu_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* ---- the drainer's ledger: a set of resident 4 KiB pages per process ---- */

#define SET_BITS 23
static uint64_t *pageset;
static long set_used;

/* Inserts (owner, page); 1 if it was new. */
static int page_insert(uint32_t owner, uint64_t addr)
{
	uint64_t key = ((uint64_t)owner << 40) ^ (addr >> 12) ^ (1ull << 63);
	uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - SET_BITS);
	for (;; h = (h + 1) & ((1 << SET_BITS) - 1)) {
		if (pageset[h] == key)
			return 0;
		if (!pageset[h]) {
			if (set_used > (1l << SET_BITS) * 3 / 4)
				return 0;	/* full: counted as a duplicate */
			pageset[h] = key;
			set_used++;
			return 1;
		}
	}
}

#define NOWNERS 16
static struct {
	uint32_t owner;
	uint64_t charged, records, released;
} owners[NOWNERS];

/* Charges size bytes at addr to owner, each page once; (r) a record without an address (GUP,
 * another process, khugepaged) is charged as it says, a negative one is a release. */
static void charge(uint32_t owner, uint64_t addr, int64_t size)
{
	int i;
	for (i = 0; i < NOWNERS && owners[i].owner && owners[i].owner != owner; i++)
		;
	if (i == NOWNERS)
		i = NOWNERS - 1;
	owners[i].owner = owner;
	owners[i].records++;
	if (size < 0) {
		owners[i].released += -size;
		return;
	}
	if (!addr) {
		owners[i].charged += size;
		return;
	}
	for (int64_t off = 0; off < size; off += 4096)
		if (page_insert(owner, (addr & ~4095ull) + off))
			owners[i].charged += 4096;
}

static int perf_stack, getenv_dump, stack_fail_dumped;
static long records, rec_bytes, dup_records, kind_n[8], stack_recs, stack_sum, stack_zero, same_stack, other_recs,
	kthread_recs, large_recs, nostack;

static void account(const struct fp_rec *r, size_t size)
{
	uint64_t before = 0, after = 0;
	records++;
	rec_bytes += size;
	kind_n[r->kind & 7]++;
	if (size > sizeof(struct fp_rec) || (r->info & FP_F_SAMESTACK) || (r->kind == FP_PERF && perf_stack)) {
		stack_recs++;
		stack_sum += r->stack_len;
		if (!r->stack_len)
			stack_zero++;
	}
	if (r->info & FP_F_SAMESTACK)
		same_stack++;
	if (r->info & FP_F_NOSTACK)
		nostack++;
	if ((r->info & FP_F_OTHER) && (int64_t)r->size > 0)
		other_recs++;
	if ((r->info & FP_F_KTHREAD) && (int64_t)r->size > 0)
		kthread_recs++;
	if ((int64_t)r->size > 4096)
		large_recs++;
	for (int i = 0; i < NOWNERS; i++)
		before += owners[i].charged;
	charge(r->owner, r->addr, r->size);
	for (int i = 0; i < NOWNERS; i++)
		after += owners[i].charged;
	if (after == before && (int64_t)r->size > 0)
		dup_records++;
	if (getenv_dump && (r->info & FP_F_NOSTACK) && stack_fail_dumped++ < 5)
		fprintf(stderr, "nostack tid=%u addr=%#llx sp=%#llx ip=%#llx\n", r->tid, (unsigned long long)r->addr,
			(unsigned long long)r->regs[FP_RSP], (unsigned long long)r->regs[FP_RIP]);
	if (getenv_dump && (r->info & (FP_F_OTHER | FP_F_KTHREAD)) && (int64_t)r->size > 0)
		fprintf(stderr, "rec kind=%u tid=%u tgid=%u owner=%u addr=%#llx size=%lld info=%#llx ip=%#llx\n", r->kind,
			r->tid, r->tgid, r->owner, (unsigned long long)r->addr, (long long)r->size,
			(unsigned long long)r->info, (unsigned long long)r->regs[FP_RIP]);
}

/* -U K: every K-th stack record of the launched process is unwound here, timed. */
static int unwind_every;
static pid_t unwind_pid;
static long unwind_seen, unwinds, unwind_frames;
static double unwind_s, unwind_first_s;

static void maybe_unwind(const struct fp_big *b, size_t size)
{
	if (!unwind_every || size < sizeof(*b) || !b->h.stack_len || b->h.tgid != (uint32_t)unwind_pid ||
	    (unwind_seen++ % unwind_every))
		return;
	uint64_t ips[64];
	struct timespec t0, t1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);	/* the drainer's CPU time: it shares the machine */
	int n = fu_unwind((const uint64_t *)b->h.regs, b->stack, b->h.stack_len, ips, 64);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	double d = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (!unwinds)
		unwind_first_s = d;	/* cold: module tables read, libunwind's caches empty */
	unwind_s += d;
	unwinds++;
	unwind_frames += n;
}

static int on_record(void *ctx, void *data, size_t size)
{
	(void)ctx;
	account(data, size);
	maybe_unwind(data, size);
	return 0;
}

/* ---- perf software page-fault events ---- */

struct perf_ring {
	int fd;
	struct perf_event_mmap_page *meta;
	char *data;
	uint64_t size;
};

static long perf_lost;
static uint64_t perf_regs_mask;

static void perf_copy(const struct perf_ring *r, uint64_t pos, void *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((char *)dst)[i] = r->data[(pos + i) & (r->size - 1)];
}

static void perf_drain(struct perf_ring *r)
{
	static unsigned char buf[65536];
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE), tail = r->meta->data_tail;
	while (tail < head) {
		struct perf_event_header h;
		perf_copy(r, tail, &h, sizeof(h));
		if (h.size < sizeof(h))
			break;
		perf_copy(r, tail, buf, h.size);
		if (h.type == PERF_RECORD_LOST) {
			perf_lost += ((uint64_t *)(buf + sizeof(h)))[1];
		} else if (h.type == PERF_RECORD_SAMPLE) {
			/* IP, TID (pid, tid), ADDR, REGS_USER (abi, regs), STACK_USER (size, data, dyn_size) */
			uint64_t *w = (uint64_t *)(buf + sizeof(h));
			struct fp_rec rec = { .kind = FP_PERF, .size = 4096 };
			uint32_t *pt = (uint32_t *)&w[1];
			rec.owner = rec.tgid = pt[0];
			rec.tid = pt[1];
			rec.addr = w[2];
			rec.regs[FP_RIP] = w[0];
			uint64_t abi = w[3], nregs = __builtin_popcountll(perf_regs_mask);
			uint64_t *sw = &w[4 + (abi ? nregs : 0)];
			if (perf_stack) {
				uint64_t sz = sw[0];
				rec.stack_len = sz ? (uint32_t)sw[1 + sz / 8] : 0;	/* dyn_size */
			}
			account(&rec, h.size);
		}
		tail += h.size;
	}
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

static uint64_t tracepoint_id(const char *group, const char *name)
{
	char dir[64], path[160];
	unsigned long long id = 0;
	const char *base = "/sys/kernel/tracing";
	snprintf(path, sizeof(path), "%s/events/%s/%s/id", base, group, name);
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(dir, sizeof(dir), "/tmp/fault-tracefs-%d", (int)getpid());
		if (mkdir(dir, 0700) || mount("nodev", dir, "tracefs", 0, NULL))
			die("mount tracefs");
		snprintf(path, sizeof(path), "%s/events/%s/%s/id", dir, group, name);
		f = fopen(path, "r");
		if (f && fscanf(f, "%llu", &id) != 1)
			id = 0;
		if (f)
			fclose(f);
		umount2(dir, MNT_DETACH);
		rmdir(dir);
		f = NULL;
	}
	if (f) {
		if (fscanf(f, "%llu", &id) != 1)
			id = 0;
		fclose(f);
	}
	if (!id)
		die("tracepoint id");
	return id;
}

int main(int argc, char **argv)
{
	const char *m = "t";
	int c, smode = 1, every = 0, dedup = 0, kmode = 0, coalesce = 0;
	uint64_t ring = 64 << 20, wake = 0, bp = 0;
	pid_t attach_pid = 0;
	double duration = 5;
	while ((c = getopt(argc, argv, "+m:s:ACDkr:w:B:U:p:d:")) != -1) {
		switch (c) {
		case 'm': m = optarg; break;
		case 's': smode = atoi(optarg); break;
		case 'A': every = 1; break;
		case 'C': coalesce = 1; break;
		case 'D': dedup = 1; break;
		case 'k': kmode = 1; break;
		case 'r': ring = strtoull(optarg, NULL, 0); break;
		case 'w': wake = strtoull(optarg, NULL, 0); break;
		case 'B': bp = strtoull(optarg, NULL, 0); break;
		case 'U': unwind_every = atoi(optarg); break;
		case 'p': attach_pid = atoi(optarg); break;
		case 'd': duration = atof(optarg); break;
		default:
			fprintf(stderr, "usage: fault [-m bare|t|r|f|p] [-s 0|1|2] [-A] [-C] [-D] [-k] [-r RING] [-w WAKE] [-B BP] [-U K] [-p PID [-d S]] [-- PROG ARGS]\n");
			return 2;
		}
	}
	if (optind >= argc && !attach_pid)
		return fprintf(stderr, "fault: no program\n"), 2;
	if (attach_pid && bp)
		return fprintf(stderr, "fault: no back-pressure under -p (the bench stops only threads it launched)\n"), 2;
	if (!wake)
		wake = ring / 4;
	int bare = !strcmp(m, "bare"), perf = !strcmp(m, "p"), traced = bp != 0;
	long rss_attach = 0;
	getenv_dump = getenv("FAULT_DUMP") != NULL;
	pageset = calloc(1ul << SET_BITS, sizeof(*pageset));
	if (!pageset)
		die("calloc");

	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	int go[2];
	if (sfd < 0 || pipe2(go, O_CLOEXEC))
		die("signalfd/pipe");
	pid_t pid = attach_pid ? attach_pid : fork();
	if (pid < 0)
		die("fork");
	if (attach_pid) {
		close(go[0]);
	} else if (pid == 0) {
		char b;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigprocmask(SIG_UNBLOCK, &chld, NULL);
		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(126);
		execv(argv[optind], argv + optind);
		_exit(127);
	}
	if (!attach_pid)
		close(go[0]);
	unwind_pid = pid;
	if (unwind_every)
		fu_init(pid);
	if (traced && ptrace(PTRACE_SEIZE, pid, 0,
			     PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL | (perf ? PTRACE_O_TRACEEXEC : 0)))
		die("PTRACE_SEIZE");
	int trap_fds[256], ntrap = 0;

	struct fault_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	static struct perf_ring pr[256];
	int npr = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = 0 };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &e))
		die("epoll");
	if (perf) {
		/* Per-task events with inherit cannot be mmap'd (perf_mmap refuses an inherited
		 * per-task event: every child would write into one ring); so one event per CPU for
		 * the task and its descendants, each with its ring, as `perf record` does. */
		struct perf_event_attr a;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = PERF_TYPE_SOFTWARE;
		a.config = PERF_COUNT_SW_PAGE_FAULTS;
		a.sample_period = 1;
		a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_ADDR;
		if (smode >= 1) {
			a.sample_type |= PERF_SAMPLE_REGS_USER;
			/* AX BX CX DX SI DI BP SP IP, R8-R15 (asm/perf_regs.h) */
			perf_regs_mask = 0xff | (1ull << 8) | (0xffull << 16);
			a.sample_regs_user = perf_regs_mask;
		}
		if (smode >= 2) {
			a.sample_type |= PERF_SAMPLE_STACK_USER;
			a.sample_stack_user = FP_STACK;
			perf_stack = 1;
		}
		a.disabled = 1;
		a.enable_on_exec = 1;
		a.inherit = 1;
		a.exclude_kernel = !kmode;
		a.exclude_hv = 1;
		if (every) {
			a.wakeup_events = 1;
		} else {
			a.watermark = 1;
			a.wakeup_watermark = wake < ring ? wake : ring / 4;
		}
		npr = libbpf_num_possible_cpus();
		if (npr > 256)
			npr = 256;
		pid_t tids[1024];
		int ntids = 0;
		if (attach_pid) {
			/* A perf event follows one thread (and, with inherit, what it creates from
			 * now on): one per thread that exists, each CPU's into that CPU's ring. */
			a.enable_on_exec = 0;
			a.disabled = 0;
			char dir[64];
			snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
			DIR *d = opendir(dir);
			struct dirent *de;
			while (d && (de = readdir(d)) && ntids < 1024)
				if (de->d_name[0] != '.')
					tids[ntids++] = atoi(de->d_name);
			if (d)
				closedir(d);
		} else {
			tids[ntids++] = pid;
		}
		/* One ring per (thread, CPU): an inherited event's output cannot be redirected into
		 * another thread's event's ring (PERF_EVENT_IOC_SET_OUTPUT: EINVAL). */
		int ncpu = npr;
		npr = 0;
		for (int t = 0; t < ntids; t++) {
			for (int cpu = 0; cpu < ncpu && npr < 256; cpu++) {
				struct perf_ring *r = &pr[npr++];
				r->fd = (int)syscall(SYS_perf_event_open, &a, tids[t], cpu, -1, PERF_FLAG_FD_CLOEXEC);
				if (r->fd < 0)
					die("perf_event_open");
				r->size = ring;
				r->meta = mmap(NULL, ring + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
				if (r->meta == MAP_FAILED)
					die("mmap perf ring");
				r->data = (char *)r->meta + 4096;
				e.data.u32 = 1;
				if (epoll_ctl(ep, EPOLL_CTL_ADD, r->fd, &e))
					die("epoll perf");
			}
		}
		if (attach_pid)
			rss_attach = rss_anon_kb(pid);
	} else if (!bare) {
		skel = fault_bpf__open();
		if (!skel)
			die("fault_bpf__open");
		skel->rodata->target_tgid = pid;
		skel->rodata->mode = smode;
		skel->rodata->dedup = dedup;
		skel->rodata->coalesce = coalesce;
		skel->rodata->attach_mode = attach_pid != 0;
		skel->rodata->wake_bytes = every ? 0 : wake;
		skel->rodata->bp_bytes = bp;
		if (bpf_map__set_max_entries(skel->maps.rb, ring))
			die("ring size");
		int t = !strcmp(m, "t") || !strcmp(m, "r"), r = !strcmp(m, "r");
		skel->rodata->mech = (unsigned char)m[0];
		bpf_program__set_autoload(skel->progs.fault_user, t);
		bpf_program__set_autoload(skel->progs.fault_kernel, t);
		bpf_program__set_autoload(skel->progs.rss, r);
		bpf_program__set_autoload(skel->progs.on_sys_exit, r && coalesce);
		bpf_program__set_autoload(skel->progs.new_anon, !t);
		if (fault_bpf__load(skel))
			die("fault_bpf__load");
		if (r)
			bpf_program__set_autoattach(skel->progs.rss, false);
		if (fault_bpf__attach(skel))
			die("fault_bpf__attach");
		if (r) {
			/* A classic tracepoint: its id is only in tracefs, which this machine does not
			 * mount; mount it privately for the look-up. One perf event carries the
			 * program for every task on every CPU. */
			struct perf_event_attr a;
			memset(&a, 0, sizeof(a));
			a.size = sizeof(a);
			a.type = PERF_TYPE_TRACEPOINT;
			a.config = tracepoint_id("kmem", "rss_stat");
			a.sample_period = 1;
			int fd = (int)syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
			if (fd < 0)
				die("perf_event_open rss_stat");
			if (!bpf_program__attach_perf_event(skel->progs.rss, fd))
				die("attach rss_stat");
		}
		if (attach_pid) {
			uint32_t k = pid, one = 1;
			if (bpf_map_update_elem(bpf_map__fd(skel->maps.tracked), &k, &one, BPF_ANY))
				die("tracked");
			rss_attach = rss_anon_kb(pid);	/* nothing was recorded before this */
		}
		rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), on_record, NULL, NULL);
		if (!rb)
			die("ring_buffer__new");
		e.data.u32 = 1;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb), &e))
			die("epoll ring");
	}

	double c0 = cpu_self(), t0 = now(), t1 = 0;
	long stops = 0, rss_detach = 0;
	if (!attach_pid && write(go[1], "x", 1) != 1)
		die("write");
	close(go[1]);
	int status = 0;
	struct rusage ru = { 0 };
	for (;;) {
		struct epoll_event got[2];
		int n = epoll_wait(ep, got, 2, 1000);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		if (rb)
			ring_buffer__consume(rb);
		for (int i = 0; i < npr; i++)
			perf_drain(&pr[i]);
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof(si)) == sizeof(si))
			;
		pid_t w;
		while (traced && (w = waitpid(-1, &status, __WALL | WNOHANG)) > 0) {
			if (w == pid && !WIFSTOPPED(status)) {
				t1 = now();
				getrusage(RUSAGE_CHILDREN, &ru);
				break;
			}
			if (!WIFSTOPPED(status))
				continue;
			int sig = WSTOPSIG(status);
			if (perf && status >> 16 == PTRACE_EVENT_EXEC && !ntrap) {
				/* The watchdog: K faults per thread at most between two drains. */
				struct perf_event_attr a;
				memset(&a, 0, sizeof(a));
				a.size = sizeof(a);
				a.type = PERF_TYPE_SOFTWARE;
				a.config = PERF_COUNT_SW_PAGE_FAULTS;
				a.sample_period = bp;
				a.inherit = 1;
				a.inherit_thread = 1;
				a.remove_on_exec = 1;
				a.sigtrap = 1;
				a.sig_data = 0xfa17;
				a.exclude_kernel = !kmode;
				a.exclude_hv = 1;
				for (int cpu = 0; cpu < npr; cpu++) {
					int fd = (int)syscall(SYS_perf_event_open, &a, w, cpu, -1, PERF_FLAG_FD_CLOEXEC);
					if (fd < 0)
						die("perf_event_open sigtrap");
					trap_fds[ntrap++] = fd;
				}
			}
			if (status >> 16) {
				ptrace(PTRACE_CONT, w, 0, 0);
				continue;
			}
			if (perf && sig == SIGTRAP) {
				siginfo_t si;
				if (!ptrace(PTRACE_GETSIGINFO, w, 0, &si) && si.si_code == 6 /* TRAP_PERF */) {
					stops++;
					for (int i = 0; i < npr; i++)
						perf_drain(&pr[i]);
					sig = 0;
				}
			}
			if (sig == SIGSTOP) {
				stops++;
				if (rb)
					ring_buffer__consume(rb);
				sig = 0;
			}
			ptrace(PTRACE_CONT, w, 0, sig);
		}
		if (attach_pid && (now() - t0 >= duration || kill(pid, 0))) {
			/* Detach first, then read the count: every record drained after is older. */
			if (skel)
				fault_bpf__detach(skel);
			for (int i = 0; i < npr; i++)
				ioctl(pr[i].fd, PERF_EVENT_IOC_DISABLE, 0);
			rss_detach = rss_anon_kb(pid);
			t1 = now();
			break;
		}
		while (!traced && !attach_pid && (w = wait4(pid, &status, WNOHANG, &ru)) == pid) {
			t1 = now();
			break;
		}
		if (t1)
			break;
	}
	if (rb)
		ring_buffer__consume(rb);
	for (int i = 0; i < npr; i++)
		perf_drain(&pr[i]);
	double drain_cpu = cpu_self() - c0, wall = t1 - t0;
	/* perf writes a PERF_RECORD_LOST only before a later sample that fits: what was lost at
	 * the end is only seen as the count of events (children's folded in at their exit) less
	 * the samples read. */
	uint64_t perf_count = 0;
	for (int i = 0; i < npr; i++) {
		uint64_t v;
		if (read(pr[i].fd, &v, sizeof(v)) == sizeof(v))
			perf_count += v;
	}
	if (npr && perf_count > (uint64_t)kind_n[FP_PERF] && perf_count - kind_n[FP_PERF] > (uint64_t)perf_lost)
		perf_lost = perf_count - kind_n[FP_PERF];

	uint64_t cnt[FP_NCOUNTERS] = { 0 };
	if (skel) {
		int ncpu = libbpf_num_possible_cpus();
		uint64_t *vals = calloc(ncpu, sizeof(*vals));
		for (uint32_t k = 0; k < FP_NCOUNTERS; k++) {
			if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &k, vals))
				continue;
			for (int i = 0; i < ncpu; i++)
				cnt[k] += vals[i];
		}
		free(vals);
	}
	double tcpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	printf("probe=%s mode=%d%s%s%s%s status=%d wall_s=%.4f target_cpu_s=%.3f drainer_cpu_s=%.3f records=%ld rec_bytes=%ld "
	       "dup_records=%ld user=%ld kernel=%ld folio=%ld perf=%ld rssrec=%ld stack_recs=%ld stack_avg=%.0f stack_zero=%ld "
	       "same_stack=%ld other=%ld kthread=%ld large=%ld events=%llu reads=%llu lost=%llu perf_lost=%ld "
	       "runs=%llu run_folded=%llu stackfail=%llu holes=%llu findvma=%llu findvma_err=%llu clamped=%llu signals=%llu stops=%ld rss=%llu rss_fault=%llu rss_neg=%llu "
	       "stale=%llu",
	       m, smode, every ? "A" : "", coalesce ? "C" : "", dedup ? "D" : "", kmode ? "k" : "",
	       WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), wall, tcpu, drain_cpu, records, rec_bytes,
	       dup_records, kind_n[FP_FAULT_USER], kind_n[FP_FAULT_KERNEL], kind_n[FP_FOLIO], kind_n[FP_PERF], kind_n[FP_RSS], stack_recs,
	       stack_recs ? (double)stack_sum / stack_recs : 0.0, stack_zero, same_stack, other_recs, kthread_recs,
	       large_recs, (unsigned long long)cnt[FP_C_EVENTS], (unsigned long long)cnt[FP_C_READ],
	       (unsigned long long)cnt[FP_C_LOST], perf_lost, (unsigned long long)cnt[FP_C_RUN_FLUSH],
	       (unsigned long long)cnt[FP_C_RUN_EXTEND], (unsigned long long)cnt[FP_C_STACKFAIL],
	       (unsigned long long)cnt[FP_C_HOLE], (unsigned long long)cnt[FP_C_FINDVMA], (unsigned long long)cnt[FP_C_FINDVMA_ERR],
	       (unsigned long long)cnt[FP_C_CLAMPED],
	       (unsigned long long)cnt[FP_C_SIGNAL], stops, (unsigned long long)cnt[FP_C_RSS],
	       (unsigned long long)cnt[FP_C_RSS_FAULT], (unsigned long long)cnt[FP_C_RSS_NEG],
	       (unsigned long long)cnt[FP_C_STALE]);
	if (unwind_every)
		printf(" unwinds=%ld unwind_cpu_us=%.2f first_unwind_cpu_us=%.1f frames_avg=%.1f remote_reads=%ld", unwinds,
		       unwinds ? unwind_s * 1e6 / unwinds : 0.0, unwind_first_s * 1e6, unwinds ? (double)unwind_frames / unwinds : 0.0,
		       fu_remote_reads);
	if (attach_pid)
		printf(" attached_s=%.2f rss_anon_attach_kb=%ld rss_anon_detach_kb=%ld", t1 - t0, rss_attach, rss_detach);
	printf(" charged_kb=");
	for (int i = 0; i < NOWNERS && owners[i].owner; i++)
		printf("%s%u:%llu", i ? "," : "", owners[i].owner, (unsigned long long)owners[i].charged / 1024);
	printf(" released_kb=");
	for (int i = 0; i < NOWNERS && owners[i].owner; i++)
		printf("%s%u:%llu", i ? "," : "", owners[i].owner, (unsigned long long)owners[i].released / 1024);
	printf("\n");
	for (int i = 0; i < npr; i++) {
		munmap(pr[i].meta, pr[i].size + 4096);
		close(pr[i].fd);
	}
	for (int i = 0; i < ntrap; i++)
		close(trap_fds[i]);

	if (rb)
		ring_buffer__free(rb);
	fault_bpf__destroy(skel);
	return 0;
}
