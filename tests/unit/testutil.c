/* Helpers shared by the unit suites: running a tool whose output a test compares against. */
#include "tests/unit/testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
