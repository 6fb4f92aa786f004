/* Small helpers shared by the unit suites. */
#ifndef PTFIL_TESTUTIL_H
#define PTFIL_TESTUTIL_H

/* The whole output of a shell command (it must succeed and print something); the caller frees it. */
char *test_run_command(const char *cmd);

/* Runs fn(arg) with stderr sent to a temporary file and returns what it wrote; the caller frees it. */
char *test_capture_stderr(void (*fn)(void *), void *arg);

#endif
