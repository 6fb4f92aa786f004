/* Residency of address ranges in a live target, from /proc/PID/pagemap. */
#include "tracer/memory/resid.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/core/procfs.h"

/* Debian 12's kernel headers predate PAGEMAP_SCAN (Linux 6.7); the ABI is fixed. */
#ifndef PAGEMAP_SCAN
#define PAGE_IS_FILE (1 << 2)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_PFNZERO (1 << 5)
struct page_region {
	uint64_t start, end, categories;
};
struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

#define PM_PRESENT (1ULL << 63)
#define PM_FILE (1ULL << 61)
#define PM_EXCLUSIVE (1ULL << 56)
#define PM_PFN_MASK ((1ULL << 55) - 1)

static long page_size;

/*
 * How zero pages are told apart, learnt once from two pages of our own that
 * were only read: PAGEMAP_SCAN's PAGE_IS_PFNZERO where the kernel has it
 * (Linux 6.7+, no privilege needed: the same answer for root and any user),
 * else the zero page's frame number where pagemap shows frame numbers
 * (CAP_SYS_ADMIN), else not at all (zero pages count as resident).
 */
static int probed;
static int scan_ok;      /* PAGEMAP_SCAN works */
static int scan_zero_ok; /* ... and reports the zero page */
static uint64_t zero_pfn;
/*
 * Neither: a page mapped but not exclusive to the process may be the zero
 * page. Such pages are charged within what the kernel counts of the mapping
 * (smaps Rss, which leaves the zero page out) beyond its exclusive pages.
 */
static int rss_cap;

static uint64_t scan_range(int fd, uint64_t start, uint64_t end, int skip_zero, struct resid *by_frame, int *failed);

static void probe(void)
{
	probed = 1;
	/* Two separate mappings, only read: with a zero page both show the same frame. */
	size_t len = 2 * (size_t)page_size;
	char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return;
	(void)((volatile char *)m)[0];
	(void)((volatile char *)m)[page_size];
	int no_zero_page = 0;
	/* PTFIL_PAGEMAP=plain: pagemap as a kernel before 6.7 has it (no PAGEMAP_SCAN), for the tests. */
	const char *knob = getenv("PTFIL_PAGEMAP");
	int plain = knob && !strcmp(knob, "plain");
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		uint64_t e[2];
		uintptr_t a = (uintptr_t)m;
		if (pread(fd, e, 16, (off_t)(a / page_size) * 8) == 16 && (e[0] & PM_PRESENT) && (e[1] & PM_PRESENT)) {
			uint64_t p0 = e[0] & PM_PFN_MASK, p1 = e[1] & PM_PFN_MASK;
			if (p0 && p0 == p1)
				zero_pfn = p0;
			else if (p0 && p1)
				no_zero_page = 1; /* reads allocate real pages here (e.g. pvm_no_zero_page) */
		}
		int failed = plain;
		uint64_t all = plain ? 0 : scan_range(fd, a, a + len, 0, NULL, &failed);
		scan_ok = !failed && all == len;
		/* Both pages were only read: with PAGE_IS_PFNZERO reported, none of them is left. Frame
		 * numbers are not needed for this, so a user who is not root is told the same as root. */
		uint64_t left = scan_ok ? scan_range(fd, a, a + len, 1, NULL, &failed) : len;
		scan_zero_ok = scan_ok && !failed && left == 0;
		close(fd);
	}
	munmap(m, len);
	rss_cap = !scan_zero_ok && !zero_pfn && !no_zero_page;
	if (rss_cap)
		warning("/proc/PID/pagemap does not say here which pages are the shared zero page "
			"(PAGEMAP_SCAN's zero-page flag needs Linux 6.7; frame numbers need CAP_SYS_ADMIN): "
			"pages that are not the process's alone are charged only up to the kernel's count of each "
			"mapping (smaps Rss, without the zero page), so a mapping's charge is right but may go to the "
			"wrong block within it; run as root for the exact charge");
}

/*
 * The first mapping of r's process that ends above addr, from its smaps: its
 * bounds and Rss. Returns 0, or -1 when there is none (or smaps cannot be read).
 */
static int smaps_vma(struct resid *r, uint64_t addr, uint64_t *lo, uint64_t *hi, uint64_t *rss)
{
	char path[96], line[512];
	snprintf(path, sizeof(path), "/proc/%s/smaps", r->dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int in = 0, rc = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, kib;
		if (sscanf(line, "%llx-%llx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break; /* its Rss line was missing */
			in = addr < b;
			*lo = a;
			*hi = b;
		} else if (in && sscanf(line, "Rss: %llu kB", &kib) == 1) {
			*rss = (uint64_t)kib * 1024;
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

static int open_proc_path(const char *rel)
{
	char path[128];
	snprintf(path, sizeof(path), "/proc/%s", rel);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		error_errno("cannot open %s", path);
	return fd;
}

static int open_proc(pid_t pid, const char *what)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		error_errno("cannot open %s", path);
	return fd;
}

/*
 * Where process pid's memory can be read: "PID" itself, or "PID/task/TID" of
 * a live thread when the main thread is a zombie (it called pthread_exit:
 * its own files show no memory any more while the process runs on).
 */
static void memory_dir(pid_t pid, char *dir, size_t n)
{
	snprintf(dir, n, "%d", (int)pid);
	if (procfs_state(pid, NULL) != 'Z')
		return;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		char st = tid > 0 && tid != pid ? procfs_state(tid, NULL) : 0;
		if (st && st != 'Z' && st != 'X') {
			snprintf(dir, n, "%d/task/%d", (int)pid, (int)tid);
			break;
		}
	}
	closedir(d);
}

int resid_open(struct resid *r, pid_t pid)
{
	if (!page_size)
		page_size = sysconf(_SC_PAGESIZE);
	resid_close(r);
	r->pid = pid;
	char what[96];
	memory_dir(pid, r->dir, sizeof(r->dir));
	snprintf(what, sizeof(what), "%s/pagemap", r->dir);
	r->pagemap_fd = open_proc_path(what);
	/* The process's fault count (its threads' summed) stays in the main thread's stat. */
	r->stat_fd = open_proc(pid, "stat");
	snprintf(what, sizeof(what), "%s/statm", r->dir);
	r->statm_fd = open_proc_path(what);
	if (r->pagemap_fd < 0 || r->stat_fd < 0 || r->statm_fd < 0) {
		resid_close(r);
		return -1;
	}
	if (!probed)
		probe();
	r->use_scan = scan_ok;
	return 0;
}

void resid_close(struct resid *r)
{
	if (r->pagemap_fd >= 0)
		close(r->pagemap_fd);
	if (r->stat_fd >= 0)
		close(r->stat_fd);
	if (r->statm_fd >= 0)
		close(r->statm_fd);
	r->pagemap_fd = r->stat_fd = r->statm_fd = -1;
}

static uint64_t read_range(struct resid *r, uint64_t start, uint64_t end);

/*
 * Bytes in present pages of [start, end), by PAGEMAP_SCAN, not counting zero
 * pages when skip_zero. With by_frame, the present regions the scan finds in
 * a sparse range are read entry by entry to leave out the zero page's frame.
 */
static uint64_t scan_range(int fd, uint64_t start, uint64_t end, int skip_zero, struct resid *by_frame, int *failed)
{
	struct page_region regs[32];
	uint64_t bytes = 0;
	while (start < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a), .start = start, .end = end,
			.vec = (uintptr_t)regs, .vec_len = 32,
			.category_inverted = skip_zero ? PAGE_IS_PFNZERO : 0,
			.category_mask = PAGE_IS_PRESENT | (skip_zero ? PAGE_IS_PFNZERO : 0),
			.return_mask = PAGE_IS_PRESENT,
		};
		int n = ioctl(fd, PAGEMAP_SCAN, &a);
		if (n < 0) {
			*failed = 1;
			return 0;
		}
		for (int i = 0; i < n; i++)
			bytes += by_frame ? read_range(by_frame, regs[i].start, regs[i].end) : regs[i].end - regs[i].start;
		if (a.walk_end <= start)
			break;
		start = a.walk_end;
	}
	return bytes;
}


/* Bytes of [start, end) in pages whose pagemap entry has every bit of need, the zero page left out. */
static uint64_t count_pages(struct resid *r, uint64_t start, uint64_t end, uint64_t need)
{
	uint64_t buf[4096];
	uint64_t pages = 0;
	uint64_t first = start / page_size, last = end / page_size;
	while (first < last) {
		size_t n = last - first < 4096 ? last - first : 4096;
		ssize_t got = pread(r->pagemap_fd, buf, n * 8, (off_t)(first * 8));
		if (got <= 0)
			break;
		size_t k = (size_t)got / 8;
		for (size_t i = 0; i < k; i++) {
			if ((buf[i] & need) != need)
				continue;
			uint64_t pfn = buf[i] & PM_PFN_MASK;
			/* Hidden frame numbers (no CAP_SYS_ADMIN) read as 0: then a zero page cannot be told apart. */
			if (pfn && zero_pfn && pfn == zero_pfn)
				continue;
			pages++;
		}
		first += k;
	}
	return pages * page_size;
}

static uint64_t read_range(struct resid *r, uint64_t start, uint64_t end)
{
	return count_pages(r, start, end, PM_PRESENT);
}

uint64_t resid_range_exclusive(struct resid *r, uint64_t start, uint64_t end)
{
	if (r->pagemap_fd < 0 || start >= end)
		return 0;
	r->scans++;
	return count_pages(r, start, end, PM_PRESENT | PM_EXCLUSIVE);
}

/*
 * resid_range where the zero page cannot be told apart (rss_cap): in each
 * mapping [start, end) overlaps, its exclusive pages, and of its other present
 * pages (the zero page, or pages shared with a parent or child) no more than
 * the mapping's Rss leaves beyond the exclusive pages of the whole mapping.
 */
static uint64_t capped_range(struct resid *r, uint64_t start, uint64_t end)
{
	/* Only pages that are not the process's alone need smaps (read whole at each measure). */
	uint64_t excl = count_pages(r, start, end, PM_PRESENT | PM_EXCLUSIVE);
	uint64_t other = read_range(r, start, end) - excl;
	if (!other)
		return excl;
	uint64_t bytes = 0;
	while (start < end) {
		uint64_t lo, hi, rss;
		if (smaps_vma(r, start, &lo, &hi, &rss) || lo >= end)
			break; /* nothing mapped there (or the process is gone) */
		if (start < lo)
			start = lo;
		uint64_t e = end < hi ? end : hi;
		excl = count_pages(r, start, e, PM_PRESENT | PM_EXCLUSIVE);
		other = read_range(r, start, e) - excl;
		if (other) {
			uint64_t excl_all = start == lo && e == hi ? excl : count_pages(r, lo, hi, PM_PRESENT | PM_EXCLUSIVE);
			uint64_t left = rss > excl_all ? rss - excl_all : 0;
			excl += other < left ? other : left;
		}
		bytes += excl;
		start = e;
	}
	return bytes;
}

uint64_t resid_range(struct resid *r, uint64_t start, uint64_t end)
{
	if (r->pagemap_fd < 0 || start >= end)
		return 0;
	r->scans++;
	if (rss_cap)
		return capped_range(r, start, end);
	if (r->use_scan) {
		int failed = 0;
		uint64_t b = scan_range(r->pagemap_fd, start, end, scan_zero_ok, scan_zero_ok || !zero_pfn ? NULL : r,
					&failed);
		if (!failed)
			return b;
		if (errno == ESRCH)
			return 0;
	}
	return read_range(r, start, end);
}

int resid_present(struct resid *r, uint64_t start, uint64_t end, resid_range_fn fn, void *ctx)
{
	if (r->pagemap_fd < 0 || start >= end)
		return -1;
	r->scans++;
	if (r->use_scan) {
		struct page_region regs[64];
		while (start < end) {
			struct pm_scan_arg a = {
				.size = sizeof(a), .start = start, .end = end,
				.vec = (uintptr_t)regs, .vec_len = 64,
				.category_inverted = PAGE_IS_FILE | (scan_zero_ok ? PAGE_IS_PFNZERO : 0),
				.category_mask = PAGE_IS_PRESENT | PAGE_IS_FILE | (scan_zero_ok ? PAGE_IS_PFNZERO : 0),
				.return_mask = PAGE_IS_PRESENT,
			};
			int n = ioctl(r->pagemap_fd, PAGEMAP_SCAN, &a);
			if (n < 0)
				return -1;
			for (int i = 0; i < n; i++)
				fn(ctx, regs[i].start, regs[i].end);
			if (a.walk_end <= start)
				break;
			start = a.walk_end;
		}
		return 0;
	}
	/* Plain pagemap, a chunk at a time: present entries, the zero page left out where its frame is known. */
	uint64_t e[512];
	uint64_t ps = (uint64_t)page_size;
	uint64_t run = 0, run_end = 0;
	for (uint64_t a = start & ~(ps - 1); a < end;) {
		size_t n = (size_t)((end - a + ps - 1) / ps);
		if (n > 512)
			n = 512;
		ssize_t got = pread(r->pagemap_fd, e, n * 8, (off_t)(a / ps) * 8);
		if (got <= 0)
			return -1;
		n = (size_t)got / 8;
		for (size_t i = 0; i < n; i++, a += ps) {
			int in = (e[i] & PM_PRESENT) && !(e[i] & PM_FILE) &&
				 !(zero_pfn && (e[i] & PM_PFN_MASK) == zero_pfn);
			if (in && run_end == a) {
				run_end = a + ps;
			} else if (in) {
				if (run_end > run)
					fn(ctx, run, run_end);
				run = a;
				run_end = a + ps;
			}
		}
	}
	if (run_end > run)
		fn(ctx, run, run_end);
	return 0;
}

static ssize_t read_fd(int fd, char *buf, size_t n)
{
	ssize_t got = pread(fd, buf, n - 1, 0);
	if (got < 0)
		return -1;
	buf[got] = 0;
	return got;
}

uint64_t resid_faults(struct resid *r)
{
	char buf[1024];
	if (r->stat_fd < 0 || read_fd(r->stat_fd, buf, sizeof(buf)) <= 0)
		return 0;
	/* The command name may hold spaces and parentheses: fields start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	/* fields 3.. : state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt */
	unsigned long long v[8];
	if (sscanf(p, " %*c %*d %*d %*d %*d %*d %*u %llu %llu %llu", &v[0], &v[1], &v[2]) != 3)
		return 0;
	return v[0] + v[2];
}

uint64_t resid_rss(struct resid *r)
{
	char buf[256];
	unsigned long long size, res;
	if (r->statm_fd < 0 || read_fd(r->statm_fd, buf, sizeof(buf)) <= 0)
		return 0;
	if (sscanf(buf, "%llu %llu", &size, &res) != 2)
		return 0;
	return (uint64_t)res * (uint64_t)page_size;
}

uint64_t resid_anon(struct resid *r)
{
	char buf[256];
	unsigned long long size, res, shared;
	if (r->statm_fd < 0 || read_fd(r->statm_fd, buf, sizeof(buf)) <= 0)
		return 0;
	if (sscanf(buf, "%llu %llu %llu", &size, &res, &shared) != 3 || shared > res)
		return 0;
	return (uint64_t)(res - shared) * (uint64_t)page_size;
}

uint64_t resid_vmhwm(pid_t pid)
{
	static const char *const name[] = { "VmHWM" };
	unsigned long long kib = 0;
	procfs_status(pid, name, &kib, 1, 10);
	return (uint64_t)kib * 1024;
}
