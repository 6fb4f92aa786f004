/* Helpers shared by the unit suites: running a tool whose output a test compares against, catching stderr. */
#include "tests/unit/testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *test_run_command(const char *cmd)
{
	FILE *fp = popen(cmd, "r");
	char *out = NULL;
	size_t len = 0, n;
	char buf[4096];

	ck_assert_msg(fp != NULL, "cannot run %s", cmd);
	while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) {
		out = realloc(out, len + n + 1);
		ck_assert(out != NULL);
		memcpy(out + len, buf, n);
		len += n;
	}
	ck_assert_msg(pclose(fp) == 0, "command failed: %s", cmd);
	ck_assert_msg(out != NULL, "no output from %s", cmd);
	out[len] = '\0';
	return out;
}

char *test_capture_stderr(void (*fn)(void *), void *arg)
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	ck_assert(tmp != NULL && saved >= 0);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	long len = lseek(fileno(tmp), 0, SEEK_END);
	ck_assert_int_ge(len, 0);
	char *out = calloc(1, (size_t)len + 1);
	ck_assert(out != NULL);
	ck_assert_int_eq(pread(fileno(tmp), out, (size_t)len, 0), len);
	fclose(tmp);
	return out;
}
