/*
 * A program with a malloc of its own (as a heap profiler or a debugging
 * allocator has) that unwinds its stack from inside the call, with glibc's
 * backtrace(): 2,000 blocks allocated through main -> f1 -> f2 -> f3 ->
 * malloc, each freed at once. Prints how many calls it unwound and how deep
 * it saw, fewest and most frames: the same every run.
 */
#include <execinfo.h>

#include "target.h"

extern void *__libc_malloc(size_t);
/* volatile: the compiler takes malloc for one that touches no memory of the program. */
static volatile int depth_min = 1000, depth_max, inside, calls;

void *malloc(size_t n)
{
	void *p = __libc_malloc(n);
	if (!inside && calls >= 0) {
		inside = 1;
		void *frames[64];
		int d = backtrace(frames, 64);
		depth_min = d < depth_min ? d : depth_min;
		depth_max = d > depth_max ? d : depth_max;
		calls++;
		inside = 0;
	}
	return p;
}

NOINLINE static void *f3(size_t n) { return malloc(n); }
NOINLINE static void *f2(size_t n) { return f3(n); }
NOINLINE static void *f1(size_t n) { return f2(n); }

int main(void)
{
	void *warm[1];
	/* backtrace() loads libgcc_s (mallocs of its own) before anything is counted. */
	calls = -1;
	backtrace(warm, 1);
	calls = 0;
	for (int i = 0; i < 2000; i++)
		free(f1(100 + (size_t)(i % 50)));
	printf("calls=%d depth_min=%d depth_max=%d\n", calls, depth_min, depth_max);
	return 0;
}
