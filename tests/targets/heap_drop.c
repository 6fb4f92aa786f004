/*
 * A peak of small blocks, then a lower plateau with one large block:
 *   drop_small   100,000 blocks of 200 bytes (20,000,000 bytes), written
 *   then every other one freed (10,000,000 live)
 *   drop_large   one 8 MiB block, written in full: 10,000,000 + 8,388,608 < 20,000,000
 * The first peak (20,000,000 bytes through drop_small) is the one to report.
 */
#include "target.h"

#define SMALL_N 100000
#define SMALL_SIZE 200
#define LARGE_SIZE (8 * MiB)

static void *small[SMALL_N];

NOINLINE static void *drop_small(void)
{
	void *p = malloc(SMALL_SIZE);
	if (!p) {
		perror("malloc");
		exit(10);
	}
	memset(p, 1, SMALL_SIZE);
	return p;
}

NOINLINE static void *drop_large(void)
{
	void *p = malloc(LARGE_SIZE);
	if (!p) {
		perror("malloc");
		exit(10);
	}
	memset(p, 1, LARGE_SIZE);
	return p;
}

int main(void)
{
	printf("start\n");
	for (int i = 0; i < SMALL_N; i++)
		small[i] = drop_small();
	for (int i = 0; i < SMALL_N; i += 2)
		free(small[i]);
	void *big = drop_large();
	keep(big);
	free(big);
	for (int i = 1; i < SMALL_N; i += 2)
		free(small[i]);
	printf("done\n");
	return 0;
}
