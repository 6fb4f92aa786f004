/*
 * Allocations counted after a siglongjmp out of a hooked call: `safety_longjmp`.
 *
 * alloc_at_depth calls realloc on a pointer whose chunk header (8 bytes below it) lies in
 * a PROT_NONE page: glibc's realloc reads it first and faults, and the SIGSEGV handler
 * siglongjmps back into main, so the realloc never returns. Then main calls alloc_at_depth
 * again, at the same stack depth, for 40 blocks of 1 MiB that it writes and holds (the
 * peak, 40 MiB, all through alloc_at_depth), prints "held", frees them, prints "freed"
 * and exits 0.
 */
#include <setjmp.h>
#include <signal.h>

#include "target.h"

#define BLOCKS 40

static sigjmp_buf back;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(back, 1);
}

/* realloc(p, n) when p is given, else malloc(n): both called from this one frame. */
NOINLINE static void *alloc_at_depth(void *p, size_t n)
{
	return p ? realloc(p, n) : malloc(n);
}

int main(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	unsigned char *guard = map_anon(2 * (size_t)ps);
	if (mprotect(guard, (size_t)ps, PROT_NONE)) {
		perror("mprotect");
		return 10;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);

	void *blocks[BLOCKS];
	for (int k = -1; k < BLOCKS; k++) {
		if (k < 0) {
			if (!sigsetjmp(back, 1)) {
				alloc_at_depth(guard + ps, 100);
				printf("realloc returned\n");
				return 9;
			}
			printf("jumped out of realloc\n");
			continue;
		}
		blocks[k] = alloc_at_depth(NULL, MiB);
		if (!blocks[k])
			return 10;
		memset(blocks[k], k + 1, MiB);
	}
	printf("held\n");
	fflush(stdout);
	for (int k = 0; k < BLOCKS; k++)
		free(blocks[k]);
	printf("freed\n");
	return 0;
}
