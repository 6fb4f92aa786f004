/* Reading /proc/PID status fields, state, comm and cmdline while tracing (tracer/core/procfs.h). */
#include "tracer/core/procfs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int procfs_status(pid_t pid, const char *const *name, unsigned long long *val, int n, int base)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = 0;
		for (int i = 0; i < n; i++)
			if (strcmp(line, name[i]) == 0)
				val[i] = strtoull(colon + 1, NULL, base);
	}
	fclose(f);
	return 0;
}

char procfs_state(pid_t tid, pid_t *tracer)
{
	static const char *const name[] = { "TracerPid" };
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: the state follows the last ')'. */
	char *rp = strrchr(buf, ')');
	if (!rp || rp[1] != ' ')
		return 0;
	if (tracer) {
		unsigned long long tp = 0;
		procfs_status(tid, name, &tp, 1, 10);
		*tracer = (pid_t)tp;
	}
	return rp[2];
}

void procfs_comm(pid_t pid, char *buf, size_t n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, (int)n, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

char **procfs_argv(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	if (n == 0)
		return NULL;
	if (buf[n - 1] != '\0')
		buf[n++] = '\0';
	size_t argc = 0;
	for (size_t i = 0; i < n; i++)
		argc += buf[i] == '\0';
	char **argv = calloc(argc + 1, sizeof(*argv));
	if (!argv)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n && k < argc; i += strlen(buf + i) + 1)
		if (!(argv[k++] = strdup(buf + i)))
			break;
	return argv;
}

int procfs_signal(pid_t pid, const char *field, int sig)
{
	const char *const name[] = { field };
	unsigned long long mask = 0;
	if (procfs_status(pid, name, &mask, 1, 16))
		return -1;
	return (int)((mask >> (sig - 1)) & 1);
}
