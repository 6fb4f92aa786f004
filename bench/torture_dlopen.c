/*
 * Torture target: loads and unloads a library in a loop. torture_lib.so stays loaded from the
 * start (its code is in every copy bench/torture takes before an attach); torture_lib2.so is
 * loaded, used and unloaded every round. Both export the malloc family, so that every load
 * grows a tracer's table of hooks past the size it had (32 or more) and every unload shrinks it.
 * Usage: torture_dlopen [--int] [--replay ROUNDS]   (bench/torture.h says the rest)
 */
#include <dlfcn.h>
#include <limits.h>

#include "torture.h"

#define STREAM 50

typedef uint64_t (*work_fn)(uint64_t);

static void *load(const char *dir, const char *name, work_fn *work)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h || !(*work = (work_fn)dlsym(h, "torture_lib_work"))) {
		fprintf(stderr, "torture_dlopen: %s: %s\n", path, dlerror());
		exit(1);
	}
	return h;
}

int main(int argc, char **argv)
{
	int replay = torture_setup(argc, argv, "torture_dlopen") >= 0;
	char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n < 0) {
		perror("torture_dlopen: readlink");
		return 1;
	}
	dir[n] = 0;
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	work_fn kept, loaded;
	load(dir, "torture_lib.so", &kept);
	long rounds = 0, end = replay ? torture_count(0) : -1;
	uint64_t sum = 0;
	if (replay) {
		/* The same work without the loads, which the checksum does not depend on. */
		load(dir, "torture_lib2.so", &loaded);
		for (; rounds < end; rounds++)
			sum += loaded((uint64_t)rounds) + kept((uint64_t)rounds) + torture_unit(STREAM, (uint64_t)rounds);
		torture_print("torture_dlopen", &rounds, 1, sum);
		return 0;
	}
	torture_ready();
	while (!torture_stop) {
		void *h = load(dir, "torture_lib2.so", &loaded);
		sum += loaded((uint64_t)rounds);
		dlclose(h);
		sum += kept((uint64_t)rounds) + torture_unit(STREAM, (uint64_t)rounds);
		rounds++;
		torture_sleep_us(2000);
	}
	torture_print("torture_dlopen", &rounds, 1, sum);
	return 0;
}
