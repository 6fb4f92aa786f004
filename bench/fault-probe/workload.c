/*
 * The targets of the fault-path measurement (docs/fault-path.md): one program, the workload
 * named by its first argument. Each prints one line at its end:
 *   wl=NAME role=main|child pid=PID work_s=SECONDS cpu_s=SECONDS minflt=N rss_anon_kb=END rss_anon0_kb=START
 * work_s (wall), cpu_s (user + system time of every thread: where the kernel's probes run, and
 * not the time spent waiting for a CPU that other programs hold) and minflt cover the
 * workload's core only (after start-up, before the report);
 * rss_anon_kb is /proc/self/status's RssAnon just before exit, rss_anon0_kb at the start.
 *
 *   fill4k [MiB]    one thread writes one byte per 4 KiB page of a fresh mapping, THP off (512)
 *   churn [MiB] [N] N rounds (16) of: map MiB (64), write one byte per 4 KiB page, unmap; THP
 *                   off. The pages come back from the kernel's free lists, already backed by the
 *                   host, so the per-fault cost is steadier than a first fill's (the cost runs)
 *   churn4 [MiB] [N] the same on 4 threads at once, each with MiB/4
 *   fillthp [MiB]   the same on a 2 MiB-aligned mapping with MADV_HUGEPAGE (512)
 *   threads4 [MiB]  4 threads, each fills its own mapping of MiB/4, THP off (512)
 *   malloc3m        3,000,000 malloc/free pairs of 16 to 512 bytes, 10,000 live
 *   populate        mmap(MAP_POPULATE) of 64 MiB
 *   popwrite        mmap 64 MiB, madvise(MADV_POPULATE_WRITE)
 *   mlock           mmap 64 MiB, mlock it
 *   maplocked       mmap(MAP_LOCKED) of 64 MiB
 *   readfile        read() of a 64 MiB file (page cache warm) into a fresh mapping, one call
 *   pvw             a child process writes 64 MiB into this process's fresh mapping with
 *                   process_vm_writev, 1 MiB per call
 *   forkcow         fill 100 MiB, fork; the child writes half of it, then both report
 *   zeroread        read one byte per page of a fresh 100 MiB (the zero page)
 *   stacktop        a new thread fills 64 MiB from its start routine, near the top of its stack
 *   khugepaged      as collapse, but leaves the collapse to khugepaged: waits up to 60 s for
 *                   AnonHugePages to reach 8 MiB
 *   syscalls        1,000,000 getppid() calls (what a syscall-exit hook costs)
 *   deep            fill 64 MiB 20 calls deep (for the unwind timing, fault -U)
 *   collapse        write every other 4 KiB page of 8 MiB (THP off), then MADV_COLLAPSE it into 4
 *                   huge pages: the collapse makes the other half resident
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define MiB (1ul << 20)
static const char *wl;
static double t0, cpu0;
static long flt0, rss0;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);	/* every thread, the exited ones too */
	return ru.ru_minflt;
}

static long rss_anon_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void begin(void)
{
	rss0 = rss_anon_kb();
	flt0 = minflt();
	cpu0 = cpu();
	t0 = now();
}

static void report(const char *role)
{
	double t = now() - t0, c = cpu() - cpu0;
	long f = minflt() - flt0;
	printf("wl=%s role=%s pid=%d work_s=%.6f cpu_s=%.6f minflt=%ld rss_anon_kb=%ld rss_anon0_kb=%ld\n", wl, role,
	       (int)getpid(), t, c, f, rss_anon_kb(), rss0);
	fflush(stdout);
}

static char *map(size_t len, int flags)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static void touch(char *p, size_t len)
{
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
}

static size_t churn_len;
static int churn_n;

static void *churner(void *arg)
{
	(void)arg;
	for (int i = 0; i < churn_n; i++) {
		char *p = map(churn_len, 0);
		touch(p, churn_len);
		munmap(p, churn_len);
	}
	return NULL;
}

static void *filler(void *arg)
{
	size_t len = (size_t)arg;
	char *p = map(len, 0);
	madvise(p, len, MADV_NOHUGEPAGE);
	touch(p, len);
	return NULL;
}

/* The start routine itself touches: its frame is the first below glibc's thread descriptor,
 * so less than 8 KiB of stack lies above its stack pointer. */
static void *top_filler(void *arg)
{
	size_t len = (size_t)arg;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	return NULL;
}

static long anon_huge_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static int deep(int d, char *p, size_t len)
{
	if (d)
		return deep(d - 1, p, len) + 1;
	touch(p, len);
	return 0;
}

int main(int argc, char **argv)
{
	wl = argc > 1 ? argv[1] : "fill4k";
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 0) : 0;
	int thp = !strcmp(wl, "fillthp") || !strcmp(wl, "collapse") || !strcmp(wl, "khugepaged");
	if (!thp)
		prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);	/* every mapping of the process, MAP_POPULATE's too */
	setvbuf(stdout, NULL, _IOLBF, 0);
	rss_anon_kb();	/* stdio's buffers, once, before the baseline */

	if (!strcmp(wl, "fill4k")) {
		size_t len = (mib ? mib : 512) * MiB;
		begin();
		char *p = map(len, 0);
		madvise(p, len, MADV_NOHUGEPAGE);
		touch(p, len);
	} else if (!strcmp(wl, "churn")) {
		size_t len = (mib ? mib : 64) * MiB;
		int n = argc > 3 ? atoi(argv[3]) : 16;
		char *p = map(len, 0);	/* one round before the clock: the host backs these pages */
		touch(p, len);
		munmap(p, len);
		begin();
		for (int i = 0; i < n; i++) {
			p = map(len, 0);
			touch(p, len);
			munmap(p, len);
		}
	} else if (!strcmp(wl, "churn4")) {
		pthread_t t[4];
		churn_len = (mib ? mib : 64) * MiB / 4;
		churn_n = 1;
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, churner, NULL);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		churn_n = argc > 3 ? atoi(argv[3]) : 16;
		begin();
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, churner, NULL);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	} else if (!strcmp(wl, "fillthp")) {
		size_t len = (mib ? mib : 512) * MiB;
		begin();
		char *raw = map(len + 2 * MiB, 0);
		char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(2 * MiB - 1));
		madvise(p, len, MADV_HUGEPAGE);
		touch(p, len);
	} else if (!strcmp(wl, "threads4")) {
		size_t len = (mib ? mib : 512) * MiB / 4;
		pthread_t t[4];
		begin();
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, filler, (void *)len);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	} else if (!strcmp(wl, "malloc3m")) {
		static void *live[10000];
		unsigned x = 1;
		begin();
		for (long i = 0; i < 3000000; i++) {
			x = x * 1103515245 + 12345;
			unsigned k = (x >> 8) % 10000;
			free(live[k]);
			live[k] = malloc(16 + (x >> 20) % 497);
			((char *)live[k])[0] = 1;
		}
	} else if (!strcmp(wl, "populate")) {
		begin();
		map(64 * MiB, MAP_POPULATE);
	} else if (!strcmp(wl, "popwrite")) {
		begin();
		char *p = map(64 * MiB, 0);
		if (madvise(p, 64 * MiB, MADV_POPULATE_WRITE))
			perror("MADV_POPULATE_WRITE");
	} else if (!strcmp(wl, "mlock")) {
		begin();
		char *p = map(64 * MiB, 0);
		if (mlock(p, 64 * MiB))
			perror("mlock");
	} else if (!strcmp(wl, "maplocked")) {
		begin();
		map(64 * MiB, MAP_LOCKED);
	} else if (!strcmp(wl, "readfile")) {
		char path[64];
		snprintf(path, sizeof(path), "/tmp/fault-probe-read-%d", (int)getpid());
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		static char buf[1 << 20];
		memset(buf, 7, sizeof(buf));
		for (int i = 0; i < 64; i++)
			if (write(fd, buf, sizeof(buf)) != sizeof(buf))
				return perror("write"), 1;
		unlink(path);
		begin();
		char *p = map(64 * MiB, 0);
		if (pread(fd, p, 64 * MiB, 0) != (ssize_t)(64 * MiB))
			perror("read");
		close(fd);
	} else if (!strcmp(wl, "pvw")) {
		char *p = map(64 * MiB, 0);
		begin();
		pid_t parent = getpid(), c = fork();
		if (c == 0) {
			static char buf[1 << 20];
			memset(buf, 3, sizeof(buf));
			for (int i = 0; i < 64; i++) {
				struct iovec l = { buf, sizeof(buf) }, r = { p + i * MiB, MiB };
				if (process_vm_writev(parent, &l, 1, &r, 1, 0) != (ssize_t)MiB)
					return perror("process_vm_writev"), 1;
			}
			_exit(0);
		}
		waitpid(c, NULL, 0);
	} else if (!strcmp(wl, "forkcow")) {
		size_t len = 100 * MiB;
		char *p = map(len, 0);
		madvise(p, len, MADV_NOHUGEPAGE);
		touch(p, len);
		begin();
		pid_t c = fork();
		if (c == 0) {
			begin();
			touch(p, len / 2);
			report("child");
			_exit(0);
		}
		waitpid(c, NULL, 0);
	} else if (!strcmp(wl, "zeroread")) {
		size_t len = 100 * MiB;
		volatile char sum = 0;
		begin();
		char *p = map(len, 0);
		for (size_t i = 0; i < len; i += 4096)
			sum += p[i];
	} else if (!strcmp(wl, "stacktop")) {
		pthread_t t;
		begin();
		pthread_create(&t, NULL, top_filler, (void *)(64 * MiB));
		pthread_join(t, NULL);
	} else if (!strcmp(wl, "khugepaged")) {
		size_t len = 8 * MiB;
		char *raw = map(len + 2 * MiB, 0);
		char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(2 * MiB - 1));
		madvise(p, len, MADV_NOHUGEPAGE);
		begin();
		for (size_t i = 0; i < len; i += 8192)
			p[i] = 1;
		madvise(p, len, MADV_HUGEPAGE);
		for (int i = 0; i < 600 && anon_huge_kb() < 8192; i++)
			usleep(100000);
	} else if (!strcmp(wl, "syscalls")) {
		begin();
		for (int i = 0; i < 1000000; i++)
			syscall(SYS_getppid);
	} else if (!strcmp(wl, "deep")) {
		begin();
		char *p = map(64 * MiB, 0);
		deep(20, p, 64 * MiB);
	} else if (!strcmp(wl, "collapse")) {
		size_t len = 8 * MiB;
		char *raw = map(len + 2 * MiB, 0);
		char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(2 * MiB - 1));
		madvise(p, len, MADV_NOHUGEPAGE);
		begin();
		for (size_t i = 0; i < len; i += 8192)
			p[i] = 1;
		madvise(p, len, MADV_HUGEPAGE);
		if (madvise(p, len, MADV_COLLAPSE))
			perror("MADV_COLLAPSE");
	} else {
		fprintf(stderr, "workload: unknown %s\n", wl);
		return 2;
	}
	report("main");
	return 0;
}
