/*
 * Two threads over the same addresses, made to meet in the moment between a
 * munmap's effect and its return. Each round churn maps 3 MiB, writes it and
 * unmaps its middle MiB; keeper, told the hole's address, maps 1 MiB there
 * with MAP_FIXED_NOREPLACE, retrying until the kernel has done the munmap
 * (until then it fails with EEXIST), so that its block exists while churn's
 * munmap may still be returning (for ptfil: both threads stopped at their
 * calls' exits, which ptfil hears of in any order). keeper writes and keeps
 * its block; churn then unmaps the rest of its 3 MiB. After KEEP rounds
 * keeper holds KEEP MiB and churn nothing. Prints "done"; exits 0 (4 when
 * the kernel ignores MAP_FIXED_NOREPLACE, before Linux 4.17).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "target.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define KEEP 64

enum { IDLE, ARMED, TAKEN };
static atomic_int state = IDLE;
static atomic_uintptr_t hole;
static char *held[KEEP];

NOINLINE static void *churn(void *arg)
{
	(void)arg;
	for (int i = 0; i < KEEP; i++) {
		char *p = map_anon(3 * MiB);
		touch(p, 3 * MiB);
		atomic_store(&hole, (uintptr_t)(p + MiB));
		atomic_store(&state, ARMED);
		/* A hole in the middle of a mapping: ptfil sees this munmap's exit, not only its entry. */
		munmap(p + MiB, MiB);
		while (atomic_load(&state) != TAKEN)
			;
		atomic_store(&state, IDLE);
		munmap(p, MiB);
		munmap(p + 2 * MiB, MiB);
	}
	return NULL;
}

NOINLINE static void keeper(void)
{
	for (int i = 0; i < KEEP; i++) {
		while (atomic_load(&state) != ARMED)
			;
		char *want = (char *)atomic_load(&hole), *q;
		while ((q = mmap(want, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
				 -1, 0)) == MAP_FAILED)
			if (errno != EEXIST) {
				perror("mmap");
				exit(10);
			}
		if (q != want)
			exit(4);
		touch(q, MiB);
		held[i] = q;
		atomic_store(&state, TAKEN);
	}
}

int main(void)
{
	pthread_t c;
	if (pthread_create(&c, NULL, churn, NULL)) {
		perror("pthread_create");
		return 1;
	}
	keeper();
	pthread_join(c, NULL);
	for (int i = 0; i < KEEP; i++)
		if (held[i][0] != 1 || held[i][MiB - 1] != 0)
			return 2;
	printf("done\n");
	return 0;
}
