/* The kernel path's BPF programs, links and ring buffer (tracer/kernel/uprobes.h). */
#include "tracer/kernel/uprobes.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>



/* The programs, built by clang for the BPF target and embedded at build time (Makefile.am). */
extern const unsigned char kheap_bpf_obj[];
extern const size_t kheap_bpf_obj_len;

/*
 * bpf(BPF_LINK_CREATE) of a uprobe_multi link (Linux 6.6), made by hand:
 * Debian 12's libbpf (1.1) and kernel headers predate it. The layout is the
 * kernel's union bpf_attr, link_create member.
 */
#define KP_BPF_LINK_CREATE 28
#define KP_TRACE_UPROBE_MULTI 48
#define KP_UPROBE_MULTI_RETURN 1
struct uprobe_multi_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid, pad;
};

static int link_uprobe_multi(int prog_fd, pid_t pid, const char *path, const uint64_t *offsets,
			     const uint64_t *cookies, size_t n, int ret)
{
	struct uprobe_multi_attr a;
	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = KP_TRACE_UPROBE_MULTI;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offsets;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = (uint32_t)n;
	a.multi_flags = ret ? KP_UPROBE_MULTI_RETURN : 0;
	a.pid = (uint32_t)pid;
	return (int)syscall(SYS_bpf, KP_BPF_LINK_CREATE, &a, sizeof(a));
}

/* libbpf's own messages stay quiet (ptfil says what failed in its own words) unless PTFIL_BPF_DEBUG is set. */
static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	const char *d = getenv("PTFIL_BPF_DEBUG");
	if (!d || !*d || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void say(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

/* Why a bpf() call failed, for a user who can grant what is missing. */
static void say_errno(char *why, size_t whylen, const char *what, int err)
{
	if (err == EPERM)
		say(why, whylen, "%s needs CAP_BPF and CAP_PERFMON (or root): %s", what, strerror(err));
	else
		say(why, whylen, "%s failed: %s", what, strerror(err));
}

/*
 * Whether the kernel takes uprobe_multi links from ptfil, asked without
 * probing anything: a link on "/" passes every check of the link's kind and
 * of ptfil's rights and is refused with EBADF only because "/" is no regular
 * file. A real probe (ptfil's own code, once) cost about 30 ms here: the
 * kernel registers a uprobe, then waits for a grace period to take it out.
 */
static int self_test(struct kprobes *k, char *why, size_t whylen)
{
	uint64_t off = 0, cookie = 0;
	int fd = link_uprobe_multi(k->prog_free, 0, "/", &off, &cookie, 1, 0);
	int err = errno;
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (err == EBADF)
		return 0;
	if (err == EINVAL || err == EOPNOTSUPP)
		say(why, whylen, "this kernel has no uprobe_multi links (Linux 6.6 or later has them): %s", strerror(err));
	else
		say_errno(why, whylen, "attaching a uprobe", err);
	return -1;
}

static int prog_fd(struct bpf_object *obj, const char *name, int *fd)
{
	struct bpf_program *p = bpf_object__find_program_by_name(obj, name);
	if (!p)
		return -1;
	*fd = bpf_program__fd(p);
	return *fd < 0 ? -1 : 0;
}

static int map_fd(struct bpf_object *obj, const char *name, int *fd)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
	if (!m)
		return -1;
	*fd = bpf_map__fd(m);
	return *fd < 0 ? -1 : 0;
}

int kprobes_open(struct kprobes *k, size_t ring_bytes, char *why, size_t whylen)
{
	memset(k, 0, sizeof(*k));
	k->prog_entry = k->prog_return = k->prog_free = k->prog_call = k->prog_sys_exit = k->sys_exit_link = k->ring_fd =
		k->counters_fd = k->config_fd = k->pyprocs_fd = k->pycodes_fd = -1;
	k->page = (size_t)sysconf(_SC_PAGESIZE);
	if (ring_bytes < k->page || (ring_bytes & (ring_bytes - 1))) {
		say(why, whylen, "the ring size must be a power of two of at least %zu bytes", k->page);
		return -1;
	}
	libbpf_set_print(quiet_print);
	struct bpf_object *obj = bpf_object__open_mem(kheap_bpf_obj, kheap_bpf_obj_len, NULL);
	if (!obj) {
		say(why, whylen, "cannot read ptfil's BPF programs: %s", strerror(errno));
		return -1;
	}
	k->obj = obj;
	struct bpf_map *ring = bpf_object__find_map_by_name(obj, "ring");
	struct bpf_program *p;
	bpf_object__for_each_program(p, obj)
		if (bpf_program__type(p) != BPF_PROG_TYPE_RAW_TRACEPOINT)
			bpf_program__set_expected_attach_type(p, KP_TRACE_UPROBE_MULTI);
	if (!ring || bpf_map__set_max_entries(ring, (uint32_t)ring_bytes)) {
		say(why, whylen, "cannot size the ring buffer");
		goto fail;
	}
	int err = bpf_object__load(obj);
	if (err) {
		say_errno(why, whylen, "loading BPF programs", err < 0 ? -err : err);
		goto fail;
	}
	if (prog_fd(obj, "kh_entry", &k->prog_entry) || prog_fd(obj, "kh_return", &k->prog_return) ||
	    prog_fd(obj, "kh_free", &k->prog_free) || prog_fd(obj, "kh_call", &k->prog_call) ||
	    prog_fd(obj, "kh_sys_exit", &k->prog_sys_exit) || map_fd(obj, "ring", &k->ring_fd) ||
	    map_fd(obj, "counters", &k->counters_fd) || map_fd(obj, "config", &k->config_fd) ||
	    map_fd(obj, "pyprocs", &k->pyprocs_fd) || map_fd(obj, "pycodes", &k->pycodes_fd)) {
		say(why, whylen, "ptfil's BPF object lacks a program or map");
		goto fail;
	}
	k->ring_size = ring_bytes;
	k->cons = mmap(NULL, k->page, PROT_READ | PROT_WRITE, MAP_SHARED, k->ring_fd, 0);
	if (k->cons == MAP_FAILED) {
		k->cons = NULL;
		say(why, whylen, "cannot map the ring buffer: %s", strerror(errno));
		goto fail;
	}
	k->prod = mmap(NULL, k->page + 2 * ring_bytes, PROT_READ, MAP_SHARED, k->ring_fd, (off_t)k->page);
	if (k->prod == MAP_FAILED) {
		k->prod = NULL;
		say(why, whylen, "cannot map the ring buffer: %s", strerror(errno));
		goto fail;
	}
	if (kprobes_config(k, 0, ring_bytes / 8, SIGSTOP)) {
		say_errno(why, whylen, "configuring the BPF programs", errno);
		goto fail;
	}
	if (self_test(k, why, whylen))
		goto fail;
	return 0;
fail:
	kprobes_close(k);
	return -1;
}

void kprobes_close(struct kprobes *k)
{
	if (k->sys_exit_link >= 0)
		close(k->sys_exit_link);
	if (k->prod)
		munmap(k->prod, k->page + 2 * k->ring_size);
	if (k->cons)
		munmap(k->cons, k->page);
	if (k->obj)
		bpf_object__close(k->obj);
	memset(k, 0, sizeof(*k));
	k->prog_entry = k->prog_return = k->prog_free = k->prog_call = k->prog_sys_exit = k->sys_exit_link = k->ring_fd =
		k->counters_fd = k->config_fd = k->pyprocs_fd = k->pycodes_fd = -1;
}

/* Whether one of the m call sites is a mapping call's wrapper, whose result is its system call's. */
static int wants_exit(const uint64_t *cookie, size_t m)
{
	for (size_t i = 0; i < m; i++)
		if (cookie[i] >= KH_FN_MMAP && cookie[i] <= KH_FN_BRK)
			return 1;
	return 0;
}

int kprobes_attach(struct kprobes *k, pid_t pid, const char *path, const struct kprobe_site *sites, size_t n,
		   int fds[KPROBES_LINKS])
{
	uint64_t *off = calloc(n ? n : 1, 2 * sizeof(uint64_t));
	if (!off)
		return -1;
	uint64_t *cookie = off + (n ? n : 1);
	for (int i = 0; i < KPROBES_LINKS; i++)
		fds[i] = -1;
	int rc = 0;
	for (int pass = KPS_ALLOC; pass <= KPS_CALL && rc == 0; pass++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if ((int)sites[i].kind == pass) {
				off[m] = sites[i].offset;
				cookie[m++] = sites[i].fn;
			}
		if (!m)
			continue;
		switch (pass) {
		case KPS_ALLOC:
			/* An entry link and a return link. */
			fds[0] = link_uprobe_multi(k->prog_entry, pid, path, off, cookie, m, 0);
			if (fds[0] >= 0)
				fds[1] = link_uprobe_multi(k->prog_return, pid, path, off, cookie, m, 1);
			rc = fds[0] < 0 || fds[1] < 0 ? -1 : 0;
			break;
		case KPS_FREE:
			fds[2] = link_uprobe_multi(k->prog_free, pid, path, off, cookie, m, 0);
			rc = fds[2] < 0 ? -1 : 0;
			break;
		default:
			/* A wrapper's result comes from the return of its system call: its tracepoint first. */
			if (wants_exit(cookie, m)) {
				if (k->sys_exit_link < 0)
					k->sys_exit_link = bpf_raw_tracepoint_open("sys_exit", k->prog_sys_exit);
				if (k->sys_exit_link < 0) {
					rc = -1;
					break;
				}
			}
			fds[3] = link_uprobe_multi(k->prog_call, pid, path, off, cookie, m, 0);
			rc = fds[3] < 0 ? -1 : 0;
			break;
		}
	}
	free(off);
	if (rc) {
		int err = errno;
		kprobes_detach(fds, KPROBES_LINKS);
		errno = err;
	}
	return rc;
}

void kprobes_detach(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* The ring's positions (the kernel's layout: one unsigned long at the start of each page). */
static uint64_t producer_pos(const struct kprobes *k)
{
	return __atomic_load_n((const unsigned long *)k->prod, __ATOMIC_ACQUIRE);
}

static uint64_t consumer_pos(const struct kprobes *k)
{
	return __atomic_load_n((const unsigned long *)k->cons, __ATOMIC_ACQUIRE);
}

uint64_t kprobes_unread(const struct kprobes *k)
{
	return k->prod ? producer_pos(k) - consumer_pos(k) : 0;
}

#define RB_BUSY (1u << 31)
#define RB_DISCARD (1u << 30)
#define RB_HDR 8

size_t kprobes_drain(struct kprobes *k, kprobes_record_fn cb, void *ctx)
{
	if (!k->prod)
		return 0;
	const unsigned char *data = (const unsigned char *)k->prod + k->page;
	uint64_t end = producer_pos(k), pos = consumer_pos(k), mask = k->ring_size - 1;
	size_t n = 0;
	unsigned spins = 0;
	while (pos < end) {
		const uint32_t *hdr = (const uint32_t *)(data + (pos & mask));
		uint32_t len = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);
		if (len & RB_BUSY) {
			/* Reserved by a thread still in its probe (microseconds): wait for it, not for ever. */
			if (spins++ == 0)
				k->waits++;
			if (spins > 200000)
				break;
			sched_yield();
			continue;
		}
		spins = 0;
		uint32_t size = len & ~(RB_BUSY | RB_DISCARD);
		if (!(len & RB_DISCARD)) {
			cb(ctx, hdr + 2, size);
			k->records++;
			n++;
		}
		pos += (size + RB_HDR + 7) & ~(uint64_t)7;
		__atomic_store_n((unsigned long *)k->cons, pos, __ATOMIC_RELEASE);
	}
	return n;
}

int kprobes_config(struct kprobes *k, uint64_t stop_bytes, uint64_t wake_bytes, int stop_signal)
{
	struct kh_config c = { stop_bytes, wake_bytes, (unsigned long long)stop_signal };
	uint32_t zero = 0;
	return bpf_map_update_elem(k->config_fd, &zero, &c, BPF_ANY);
}

void kprobes_counters(const struct kprobes *k, uint64_t out[KH_NCOUNTERS])
{
	memset(out, 0, KH_NCOUNTERS * sizeof(*out));
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0 || k->counters_fd < 0)
		return;
	uint64_t *v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return;
	for (uint32_t i = 0; i < KH_NCOUNTERS; i++)
		if (bpf_map_lookup_elem(k->counters_fd, &i, v) == 0)
			for (int c = 0; c < ncpu; c++)
				out[i] += v[c];
	free(v);
}
