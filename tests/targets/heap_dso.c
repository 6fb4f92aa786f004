/*
 * Allocations made in shared objects: libheapctor.so (linked, found through the rpath
 * $ORIGIN) allocates 3,000,000 bytes in its constructor, before main; then main dlopens
 * libheapdl.so (the path on argv, else beside this program) and calls heapdl_hold,
 * which allocates 2,000,000 bytes through dl_alloc. Both are live at the peak
 * (5,000,000 bytes), then freed.
 */
#include <dlfcn.h>
#include <limits.h>

#include "target.h"

void heapctor_release(void);

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	if (argc > 1) {
		snprintf(path, sizeof(path), "%s", argv[1]);
	} else {
		ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
		if (n < 0) {
			perror("readlink");
			return 1;
		}
		path[n] = 0;
		char *slash = strrchr(path, '/');
		strcpy(slash ? slash + 1 : path, "libheapdl.so");
	}
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	void (*hold)(void) = (void (*)(void))dlsym(h, "heapdl_hold");
	void (*release)(void) = (void (*)(void))dlsym(h, "heapdl_release");
	if (!hold || !release) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	hold();
	release();
	heapctor_release();
	printf("done\n");
	return 0;
}
