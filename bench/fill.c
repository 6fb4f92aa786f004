/*
 * The one-thread fill of the touch view's cost target: `fill [MIB]` maps MIB MiB (default 512) of
 * anonymous memory with 4 KiB pages (transparent huge pages off for the process by
 * prctl(PR_SET_THP_DISABLE) and for the range by madvise(MADV_NOHUGEPAGE)), writes one byte in
 * every page, and unmaps it: one page fault per page. It prints, measured over the writing loop
 * alone (not the program's start or exit), one line on standard output:
 *
 *     fill: pages N minflt F cpu S user S sys S wall S
 *
 * its own minor faults, CPU time (user + system, getrusage(RUSAGE_SELF): the fault path's BPF
 * programs run in the faulting thread, so their cost is in it) and wall time. bench/run runs it
 * bare and under `ptfil launch --charge touch`, alternating, and divides the difference by F.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

static double tv(struct timeval t)
{
	return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
	size_t len = mib << 20, page = 4096;
	if (!mib || prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)) {
		perror("fill: prctl(PR_SET_THP_DISABLE)");
		return 1;
	}
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || madvise(p, len, MADV_NOHUGEPAGE)) {
		perror("fill: mmap");
		return 1;
	}
	struct rusage r0, r1;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	getrusage(RUSAGE_SELF, &r0);
	for (size_t off = 0; off < len; off += page)
		((volatile char *)p)[off] = 1;
	getrusage(RUSAGE_SELF, &r1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double user = tv(r1.ru_utime) - tv(r0.ru_utime), sys = tv(r1.ru_stime) - tv(r0.ru_stime);
	printf("fill: pages %zu minflt %ld cpu %.6f user %.6f sys %.6f wall %.6f\n", len / page,
	       r1.ru_minflt - r0.ru_minflt, user + sys, user, sys,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	munmap(p, len);
	return 0;
}
