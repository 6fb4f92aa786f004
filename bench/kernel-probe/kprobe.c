/*
 * Measures what BPF uprobes on malloc/free cost a launched program (docs/heap-events.md): loads
 * kprobe.bpf.c in one variant, attaches it to the child before it execs, drains the ring buffer on
 * this process's CPU, and prints one line of key=value results.
 *
 * Usage: kprobe [-v bare|a|b|c|d|e|f|g|y|p|P] [-n PAIRS] [-r RING] [-w WAKE] [-B BP] [-L] [-M] [-K] [-A] [-T] [-Y OFF] -- PROG ARGS
 *   -v  variant (docs/heap-events.md; f = b with the size kept in a map until the return, so that
 *       a malloc is one record; g = b with the kernel's frame-pointer user callchain (32 frames,
 *       bpf_get_stack) in each malloc record; y = b with CPython 3.11's frame chain (code
 *       object and last instruction per frame, 32 frames) read at each malloc; p = perf_event_open uprobes with ID|TID|TIME|REGS, no BPF,
 *       one thread only: per-task events without inherit; P = the same through tracefs-defined
 *       probes with inherit, one ring per CPU, every thread)
 *   -n  malloc/free pairs the program makes (for the per-pair figure)
 *   -r  ring bytes (power of two), -w wake the drainer at this many unread bytes,
 *   -A  wake the drainer as the ringbuf does by default (whenever it had caught up), not at -w
 *   -B  back-pressure: the BPF program SIGSTOPs the target past this many unread bytes and the
 *       drainer continues it once the ring is empty (0: off)
 *   -M  attach through a uprobe_multi link (bpf(BPF_LINK_CREATE), 6.6+) instead of the per-probe
 *       perf event libbpf 1.1 opens (uprobe PMU)
 *   -K  keep the program running when this process dies (no PR_SET_PDEATHSIG): for the kill -9 test
 *   -T  with -B: ptrace the program (PTRACE_SEIZE, every thread) and stop only the thread that
 *       passed the watermark; its SIGSTOP is suppressed after the drain, as ptfil would do
 *   -Y  (y) the offset of _PyRuntime in the program's executable (CPython 3.11, not PIE-relative
 *       to anything else): the program's frames are read from base + offset after its exec
 *   -L  keep the live-block ledger in the drainer (b, c, d, f) and print its peak
 */
#define _GNU_SOURCE
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
#include "kprobe.h"
#include "kprobe.skel.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

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

static double cpu_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* The drainer's ledger: live blocks by pointer (open addressing), the size in flight per thread. */
#define LEDGER_BITS 20
static struct {
	uint64_t ptr, size;
} ledger[1 << LEDGER_BITS];
static uint64_t inflight_size[65536];
static int64_t ledger_total, ledger_peak;
static long ledger_unknown;
static int use_ledger;

static uint64_t *ledger_slot(uint64_t ptr, int insert)
{
	uint64_t h = (ptr * 0x9E3779B97F4A7C15ull) >> (64 - LEDGER_BITS);
	for (;; h = (h + 1) & ((1 << LEDGER_BITS) - 1)) {
		if (ledger[h].ptr == ptr)
			return &ledger[h].size;
		if (ledger[h].ptr == 0) {
			if (!insert)
				return NULL;
			ledger[h].ptr = ptr;
			return &ledger[h].size;
		}
	}
}

/* Deletion by backward shift, so that probing chains stay intact. */
static void ledger_delete(uint64_t ptr)
{
	uint64_t mask = (1 << LEDGER_BITS) - 1, i = (ptr * 0x9E3779B97F4A7C15ull) >> (64 - LEDGER_BITS);
	while (ledger[i].ptr != ptr)
		i = (i + 1) & mask;
	for (uint64_t j = i;;) {
		j = (j + 1) & mask;
		if (!ledger[j].ptr)
			break;
		uint64_t k = (ledger[j].ptr * 0x9E3779B97F4A7C15ull) >> (64 - LEDGER_BITS);
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			ledger[i] = ledger[j];
			i = j;
		}
	}
	ledger[i].ptr = 0;
}

static void ledger_malloc(uint32_t tid, uint64_t size)
{
	inflight_size[tid & 65535] = size;
}

static void ledger_ret(uint32_t tid, uint64_t ptr)
{
	if (!ptr)
		return;
	uint64_t size = inflight_size[tid & 65535];
	*ledger_slot(ptr, 1) = size;
	ledger_total += size;
	if (ledger_total > ledger_peak)
		ledger_peak = ledger_total;
}

static void ledger_free(uint64_t ptr)
{
	uint64_t *s = ptr ? ledger_slot(ptr, 0) : NULL;
	if (!s) {
		ledger_unknown += ptr != 0;
		return;
	}
	ledger_total -= *s;
	ledger_delete(ptr);
}

static long records, rec_bytes, big_records, stack_bytes, py_records, py_frames;

static int on_record(void *ctx, void *data, size_t size)
{
	const struct kp_rec *r = data;
	(void)ctx;
	records++;
	rec_bytes += size;
	if (r->kind == KP_MALLOC_STACK || r->kind == KP_FP_NEW) {
		big_records++;
		stack_bytes += ((const struct kp_big *)data)->len;
	}
	if (r->kind == KP_MALLOC_PY) {
		py_records++;
		py_frames += r->b;
	}
	if (!use_ledger)
		return 0;
	switch (r->kind) {
	case KP_MALLOC:
	case KP_MALLOC_STACK:
	case KP_MALLOC_FP:
	case KP_MALLOC_CHAIN:
	case KP_MALLOC_PY:
		ledger_malloc(r->tid, r->a);
		break;
	case KP_FP_NEW:
		ledger_malloc(r->tid, r->a);
		break;
	case KP_RET:
		ledger_ret(r->tid, r->a);
		break;
	case KP_RET_SIZE:
		ledger_malloc(r->tid, r->b);
		ledger_ret(r->tid, r->a);
		break;
	case KP_FREE:
		ledger_free(r->a);
		break;
	}
	return 0;
}

/* ---- the perf_event_open comparison (variant p): ID|TID|TIME|REGS_USER(ax, di) ---- */

struct perf_ring {
	int fd;
	struct perf_event_mmap_page *meta;
	char *data;
	uint64_t size;
};

static long perf_lost;

/* One sampling event: the uprobe PMU (config = is_return, config1 = path, config2 = offset) per
 * task, or a tracefs-defined probe (PERF_TYPE_TRACEPOINT, config = its id) per CPU with inherit. */
static long perf_open(pid_t pid, int cpu, uint32_t type, uint64_t config, uint64_t offset, int inherit,
		      uint64_t ring, uint64_t wake)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = type;
	a.config = config;
	if (type != PERF_TYPE_TRACEPOINT) {
		a.config1 = (uint64_t)(uintptr_t)LIBC;
		a.config2 = offset;
	}
	a.sample_period = 1;
	a.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER;
	a.sample_regs_user = (1ull << 0) /* AX */ | (1ull << 5) /* DI */;
	a.disabled = 1;
	a.enable_on_exec = 1;
	a.inherit = inherit;
	a.watermark = 1;
	a.wakeup_watermark = wake < ring ? wake : ring / 4;
	return syscall(SYS_perf_event_open, &a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* tracefs, mounted on a private directory when it is not mounted already (this VM has it not). */
static char tracefs[64] = "/sys/kernel/tracing";
static int tracefs_mounted;
static char probe_group[32];

static void tracefs_write(const char *what)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/uprobe_events", tracefs);
	int fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, what, strlen(what)) != (ssize_t)strlen(what))
		fprintf(stderr, "kprobe: %s: %s: %s\n", path, what, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Every perf event fd: a probe definition cannot be removed while an event on it is open. */
static int perf_fds[1024], nperf_fds;

static void tracefs_cleanup(void)
{
	for (int i = 0; i < nperf_fds; i++)
		close(perf_fds[i]);
	nperf_fds = 0;
	if (!probe_group[0])
		return;
	static const char *names[] = { "malloc", "mret", "free" };
	char buf[96];
	for (int i = 0; i < 3; i++) {
		snprintf(buf, sizeof(buf), "-:%s/%s\n", probe_group, names[i]);
		tracefs_write(buf);
	}
	if (tracefs_mounted) {
		umount2(tracefs, MNT_DETACH);
		rmdir(tracefs);
	}
}

static uint64_t tracefs_probe(const char *def, const char *name)
{
	char buf[160];
	snprintf(buf, sizeof(buf), "%s:%s/%s %s\n", def[0] == 'r' ? "r" : "p", probe_group, name, def + 1);
	tracefs_write(buf);
	snprintf(buf, sizeof(buf), "%s/events/%s/%s/id", tracefs, probe_group, name);
	FILE *f = fopen(buf, "r");
	unsigned long long id = 0;
	if (!f || fscanf(f, "%llu", &id) != 1)
		die("tracefs probe id");
	fclose(f);
	return id;
}

static void perf_drain(struct perf_ring *r)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE), tail = r->meta->data_tail;
	while (tail < head) {
		/* Records are 8-byte aligned, so a header never wraps; only a body can. */
		struct perf_event_header *h = (void *)(r->data + (tail & (r->size - 1)));
		records++;
		rec_bytes += h->size;
		if (h->type == PERF_RECORD_LOST) {
			uint64_t body[2];
			for (unsigned i = 0; i < sizeof(body); i++)
				((char *)body)[i] = r->data[(tail + sizeof(*h) + i) & (r->size - 1)];
			perf_lost += body[1];
		}
		tail += h->size;
	}
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

/* bpf(BPF_LINK_CREATE) for a uprobe_multi link, by hand: libbpf 1.1 (Debian 12) predates it. */
#define KP_TRACE_UPROBE_MULTI 48
struct link_create_uprobe_multi {
	__u32 prog_fd, target_fd, attach_type, flags;
	__u64 path, offsets, ref_ctr_offsets, cookies;
	__u32 cnt, mflags, pid, pad;
};

static int uprobe_multi(int prog_fd, pid_t pid, uint64_t offset, int ret)
{
	struct link_create_uprobe_multi a;
	memset(&a, 0, sizeof(a));
	a.prog_fd = prog_fd;
	a.attach_type = KP_TRACE_UPROBE_MULTI;
	a.path = (uint64_t)(uintptr_t)LIBC;
	a.offsets = (uint64_t)(uintptr_t)&offset;
	a.cnt = 1;
	a.mflags = ret;	/* BPF_F_UPROBE_MULTI_RETURN */
	a.pid = pid;
	return (int)syscall(SYS_bpf, 28 /* BPF_LINK_CREATE */, &a, sizeof(a));
}

int main(int argc, char **argv)
{
	const char *v = "a";
	long pairs = 2000000;
	uint64_t ring = 16 << 20, wake = 0, bp = 0, py_off = 0;
	int c, multi = 0, orphan = 0, adaptive = 0, traced = 0;
	while ((c = getopt(argc, argv, "+v:n:r:w:B:LMKATY:")) != -1) {
		switch (c) {
		case 'v': v = optarg; break;
		case 'n': pairs = atol(optarg); break;
		case 'r': ring = strtoull(optarg, NULL, 0); break;
		case 'w': wake = strtoull(optarg, NULL, 0); break;
		case 'B': bp = strtoull(optarg, NULL, 0); break;
		case 'L': use_ledger = 1; break;
		case 'M': multi = 1; break;
		case 'K': orphan = 1; break;
		case 'A': adaptive = 1; break;
		case 'T': traced = 1; break;
		case 'Y': py_off = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: kprobe [-v bare|a|b|c|d|e|f|g|y|p|P] [-n PAIRS] [-r RING] [-w WAKE] [-B BP] [-L] [-M] [-K] [-A] [-T] [-Y OFF] -- PROG ARGS\n");
			return 2;
		}
	}
	if (optind >= argc || pairs < 1)
		return fprintf(stderr, "kprobe: no program\n"), 2;
	if (!wake)
		wake = ring / 4;
	int bare = !strcmp(v, "bare"), perf = !strcmp(v, "p"), tracefs_perf = !strcmp(v, "P");

	/* SIGCHLD through a signalfd: the exit and each back-pressure stop wake the loop at once. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	int go[2];
	if (sfd < 0 || pipe2(go, O_CLOEXEC))
		die("signalfd/pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char b;
		if (!orphan)
			prctl(PR_SET_PDEATHSIG, SIGKILL);	/* a killed drainer takes the program with it */
		sigprocmask(SIG_UNBLOCK, &chld, NULL);
		close(go[1]);
		if (read(go[0], &b, 1) != 1)
			_exit(126);
		execv(argv[optind], argv + optind);
		_exit(127);
	}
	close(go[0]);
	if (traced && ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL))
		die("PTRACE_SEIZE");

	struct kprobe_bpf *skel = NULL;
	struct ring_buffer *rb = NULL;
	struct perf_ring pr[256];
	int npr = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN, .data.u32 = 0 };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &e))
		die("epoll");
	if (perf || tracefs_perf) {
		/* p: uprobe PMU events on the task alone (inherit would make the target's fork and
		 * pthread_create fail with EFAULT, docs/heap-events.md), one ring.
		 * P: tracefs probes, inherit, one event per (probe, CPU) and one ring per CPU. */
		uint32_t type = PERF_TYPE_TRACEPOINT;
		uint64_t config[3] = { 0, 1, 0 }, off[3] = { 0x98930, 0x98930, 0x98ef3 };
		int ncpu = tracefs_perf ? libbpf_num_possible_cpus() : 1;
		if (perf) {
			FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
			if (!f || fscanf(f, "%u", &type) != 1)
				die("uprobe pmu type");
			fclose(f);
		} else {
			if (access("/sys/kernel/tracing/uprobe_events", W_OK)) {
				snprintf(tracefs, sizeof(tracefs), "/tmp/kprobe-tracefs-%d", (int)getpid());
				if (mkdir(tracefs, 0700) || mount("nodev", tracefs, "tracefs", 0, NULL))
					die("mount tracefs");
				tracefs_mounted = 1;
			}
			snprintf(probe_group, sizeof(probe_group), "kprobe%d", (int)getpid());
			atexit(tracefs_cleanup);
			config[0] = tracefs_probe("p" LIBC ":0x98930", "malloc");
			config[1] = tracefs_probe("r" LIBC ":0x98930", "mret");
			config[2] = tracefs_probe("p" LIBC ":0x98ef3", "free");
		}
		for (int cpu = 0; cpu < ncpu && cpu < 256; cpu++) {
			int first = -1;
			for (int i = 0; i < 3; i++) {
				long fd = perf_open(pid, perf ? -1 : cpu, type, config[i], off[i], tracefs_perf, ring, wake);
				if (fd < 0)
					die("perf_event_open");
				if (nperf_fds < 1024)
					perf_fds[nperf_fds++] = (int)fd;
				if (first >= 0) {
					if (ioctl((int)fd, PERF_EVENT_IOC_SET_OUTPUT, first))
						die("PERF_EVENT_IOC_SET_OUTPUT");
					continue;
				}
				struct perf_ring *r = &pr[npr++];
				r->fd = first = (int)fd;
				r->size = ring;
				r->meta = mmap(NULL, ring + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, first, 0);
				if (r->meta == MAP_FAILED)
					die("mmap perf ring");
				r->data = (char *)r->meta + 4096;
				e.data.u32 = 1;
				if (epoll_ctl(ep, EPOLL_CTL_ADD, first, &e))
					die("epoll perf");
			}
		}
	} else if (!bare) {
		skel = kprobe_bpf__open();
		if (!skel)
			die("kprobe_bpf__open");
		skel->rodata->variant = (unsigned char)v[0];
		skel->rodata->target_tgid = pid;
		skel->rodata->wake_bytes = adaptive ? 0 : wake;
		skel->rodata->bp_bytes = bp;
		skel->rodata->bp_thread = traced;
		if (bpf_map__set_max_entries(skel->maps.rb, ring))
			die("ring size");
		if (multi) {
			bpf_program__set_expected_attach_type(skel->progs.malloc_enter, KP_TRACE_UPROBE_MULTI);
			bpf_program__set_expected_attach_type(skel->progs.malloc_exit, KP_TRACE_UPROBE_MULTI);
			bpf_program__set_expected_attach_type(skel->progs.free_enter, KP_TRACE_UPROBE_MULTI);
		}
		if (kprobe_bpf__load(skel))
			die("kprobe_bpf__load");
		if (multi) {
			/* Offsets of this glibc (2.36, checked with objdump): malloc, free+3. */
			if (uprobe_multi(bpf_program__fd(skel->progs.malloc_enter), pid, 0x98930, 0) < 0 ||
			    uprobe_multi(bpf_program__fd(skel->progs.malloc_exit), pid, 0x98930, 1) < 0 ||
			    uprobe_multi(bpf_program__fd(skel->progs.free_enter), pid, 0x98ef3, 0) < 0)
				die("BPF_LINK_CREATE uprobe_multi");
			goto attached;
		}
		LIBBPF_OPTS(bpf_uprobe_opts, om, .func_name = "malloc");
		LIBBPF_OPTS(bpf_uprobe_opts, or, .func_name = "malloc", .retprobe = true);
		/* free+3: the je after `test rdi,rdi`, which the kernel emulates (free+0 is single-stepped). */
		LIBBPF_OPTS(bpf_uprobe_opts, of, .func_name = "free");
		if (!bpf_program__attach_uprobe_opts(skel->progs.malloc_enter, pid, LIBC, 0, &om) ||
		    !bpf_program__attach_uprobe_opts(skel->progs.malloc_exit, pid, LIBC, 0, &or) ||
		    !bpf_program__attach_uprobe_opts(skel->progs.free_enter, pid, LIBC, 3, &of))
			die("attach uprobe");
attached:
		rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), on_record, NULL, NULL);
		if (!rb)
			die("ring_buffer__new");
		e.data.u32 = 1;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb), &e))
			die("epoll ring");
	}

	double c0 = cpu_self(), t0 = now(), t1 = 0;
	long stops = 0;
	if (write(go[1], "x", 1) != 1)
		die("write");
	close(go[1]);
	if (skel && py_off) {
		/* Wait for the exec (a few ms; /proc/PID/exe changes before the new image is mapped,
		 * so wait for the mapping itself) and take the executable's first mapping. */
		char maps[64], line[512];
		char *real = realpath(argv[optind], NULL);
		snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
		for (int i = 0; real && i < 50000 && !skel->bss->py_runtime; i++) {	/* 10 s at most */
			FILE *f = fopen(maps, "r");
			while (f && fgets(line, sizeof(line), f)) {
				unsigned long long lo;
				if (strstr(line, real) && sscanf(line, "%llx-", &lo) == 1) {
					skel->bss->py_runtime = lo + py_off;
					break;
				}
			}
			if (f)
				fclose(f);
			if (!skel->bss->py_runtime)
				usleep(200);
		}
		free(real);
		if (!skel->bss->py_runtime)
			fprintf(stderr, "kprobe: %s not mapped in %d: no Python frames\n", argv[optind], (int)pid);
	}
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
		/* Traced: every thread's stops come here. A SIGSTOP is back-pressure: drain, then
		 * restart the thread with the signal suppressed; anything else goes on as it was. */
		while (traced && (w = waitpid(-1, &status, __WALL | WNOHANG)) > 0) {
			if (w == pid && !WIFSTOPPED(status)) {
				t1 = now();
				getrusage(RUSAGE_CHILDREN, &ru);
				break;
			}
			if (!WIFSTOPPED(status))
				continue;
			int sig = WSTOPSIG(status);
			if (status >> 16) {	/* a clone event or a new thread's first stop */
				ptrace(PTRACE_CONT, w, 0, 0);
				continue;
			}
			if (sig == SIGSTOP) {
				stops++;
				if (rb)
					ring_buffer__consume(rb);
				sig = 0;
			}
			ptrace(PTRACE_CONT, w, 0, sig);
		}
		while (!traced && (w = wait4(pid, &status, WNOHANG | WUNTRACED, &ru)) == pid) {
			if (WIFSTOPPED(status)) {
				stops++;
				if (rb)
					ring_buffer__consume(rb);
				kill(pid, SIGCONT);
				continue;
			}
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

	uint64_t cnt[KP_NCOUNTERS] = { 0 };
	struct kp_global g = { 0 };
	long nstat = 0;
	int64_t kpeak_check = 0;
	if (skel) {
		int ncpu = libbpf_num_possible_cpus();
		uint64_t *vals = calloc(ncpu, sizeof(*vals));
		for (uint32_t k = 0; k < KP_NCOUNTERS; k++) {
			if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &k, vals))
				continue;
			for (int i = 0; i < ncpu; i++)
				cnt[k] += vals[i];
		}
		free(vals);
		uint32_t zero = 0;
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.global), &zero, &g);
		/* The per-fingerprint values at the peak must add up to the peak. */
		for (uint32_t k = 0; k < g.nfp && k < KP_MAX_FP; k++) {
			struct kp_stat s;
			if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.stat), &k, &s))
				continue;
			nstat++;
			kpeak_check += s.gen == g.peak_gen ? s.snap : s.cur;
		}
	}
	double tcpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	printf("variant=%s%s%s pairs=%ld ring=%llu status=%d wall_s=%.4f us_pair=%.4f target_cpu_s=%.3f target_sys_s=%.3f "
	       "drainer_cpu_s=%.3f records=%ld rec_bytes=%ld big=%ld stack_bytes_avg=%.0f lost=%llu perf_lost=%ld "
	       "mallocs=%llu rets=%llu frees=%llu newfp=%llu stackfail=%llu stackiderr=%llu signals=%llu stops=%ld "
	       "mapfull=%llu",
	       v, multi ? "M" : "", adaptive ? "A" : "", pairs, (unsigned long long)ring, WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), wall,
	       wall * 1e6 / pairs, tcpu, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, drain_cpu, records, rec_bytes,
	       big_records, big_records ? (double)stack_bytes / big_records : 0.0, (unsigned long long)cnt[KP_C_LOST],
	       perf_lost, (unsigned long long)cnt[KP_C_MALLOC], (unsigned long long)cnt[KP_C_RET],
	       (unsigned long long)cnt[KP_C_FREE], (unsigned long long)cnt[KP_C_NEWFP],
	       (unsigned long long)cnt[KP_C_STACKFAIL], (unsigned long long)cnt[KP_C_STACKIDERR],
	       (unsigned long long)cnt[KP_C_SIGNAL], stops, (unsigned long long)cnt[KP_C_MAPFULL]);
	if (use_ledger)
		printf(" ledger_peak=%lld ledger_live=%lld ledger_unknown_frees=%ld", (long long)ledger_peak,
		       (long long)ledger_total, ledger_unknown);
	if (py_records)
		printf(" py_records=%ld py_frames_avg=%.1f", py_records, (double)py_frames / py_records);
	if (v[0] == 'e')
		printf(" kernel_peak=%lld kernel_live=%lld peak_gen=%llu fingerprints=%ld peak_by_stacks=%lld",
		       (long long)g.peak, (long long)g.total, (unsigned long long)g.peak_gen, nstat,
		       (long long)kpeak_check);
	printf("\n");
	for (int i = 0; i < npr; i++)
		munmap(pr[i].meta, pr[i].size + 4096);
	tracefs_cleanup();
	probe_group[0] = 0;
	if (rb)
		ring_buffer__free(rb);
	kprobe_bpf__destroy(skel);
	return 0;
}
