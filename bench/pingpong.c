/* A pipe round trip between two processes: the unit ptfil's per-stop costs are expressed in. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	int a[2], b[2];
	if (pipe(a) || pipe(b))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(a[1]);
		close(b[0]);
		while (read(a[0], &c, 1) == 1 && write(b[1], &c, 1) == 1)
			;
		_exit(0);
	}
	close(a[0]);
	close(b[1]);
	struct timespec t0, t1;
	char c = 'x';
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(a[1]);
	waitpid(pid, NULL, 0);
	double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / n;
	printf("%.3f\n", us);
	return 0;
}
