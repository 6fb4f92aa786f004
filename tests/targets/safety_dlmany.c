/*
 * One dlopen that brings in the malloc family many times over: `safety_dlmany`.
 *
 * It mallocs and frees some blocks, dlopens libsafety_mallocs_all.so (from beside the
 * program, RTLD_LOCAL), which loads libsafety_mallocs1.so, 2 and 3 with it: each exports
 * malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc, memalign,
 * valloc and pvalloc, 30 more functions to hook in one load event. Then it calls into the
 * library, mallocs, checks and frees blocks again (libc's: the libraries' are local),
 * prints "loaded", "errors N" and exits 8.
 */
#include <dlfcn.h>
#include <limits.h>

#include "target.h"

NOINLINE static int blocks_work(unsigned seed)
{
	static const size_t sizes[] = { 24, 300, 5000, 150 * 1024 };
	unsigned char *b[sizeof(sizes) / sizeof(sizes[0])];
	int bad = 0;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		b[i] = calloc(1, sizes[i]);
		if (!b[i])
			exit(10);
		memset(b[i], (int)(seed + i), sizes[i]);
		b[i] = realloc(b[i], sizes[i] * 2);
		if (!b[i])
			exit(10);
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (b[i][0] != (unsigned char)(seed + i) || b[i][sizes[i] - 1] != (unsigned char)(seed + i))
			bad++;
		free(b[i]);
	}
	return bad;
}

int main(void)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	if (n < 0) {
		perror("readlink");
		return 1;
	}
	path[n] = 0;
	char *slash = strrchr(path, '/');
	strcpy(slash ? slash + 1 : path, "libsafety_mallocs_all.so");

	int bad = 0;
	for (unsigned k = 0; k < 20; k++)
		bad += blocks_work(k);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	int (*which)(void) = (int (*)(void))dlsym(h, "safety_mallocs_all");
	if (!which) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	int lib = which();
	for (unsigned k = 0; k < 100; k++)
		bad += blocks_work(k);
	printf("loaded %s\n", lib >= 1 && lib <= 3 ? "yes" : "no");
	printf("errors %d\n", bad);
	return 8;
}
