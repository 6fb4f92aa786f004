/* Error reporting shared by ptfil and ptfil-view: one format, one place. */
#include "common/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *progname = "ptfil";
static void (*die_hook)(void);
static int quiet;

void error_set_progname(const char *name) { progname = name; }
const char *error_progname(void) { return progname; }
static int notices_off;

void error_set_quiet(int q) { quiet = q; }
void notice_set_quiet(int q) { notices_off = q; }
void error_set_die_hook(void (*hook)(void)) { die_hook = hook; }

static void vreport(const char *prefix, const char *fmt, va_list ap, int err)
{
	if (quiet)
		return;
	char buf[4096];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (err)
		fprintf(stderr, "%s: %s%s: %s\n", progname, prefix, buf, strerror(err));
	else
		fprintf(stderr, "%s: %s%s\n", progname, prefix, buf);
}

int error(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap, 0);
	va_end(ap);
	errno = saved;
	return -1;
}

int error_errno(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap, saved);
	va_end(ap);
	errno = saved;
	return -1;
}

void warning(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap, 0);
	va_end(ap);
	errno = saved;
}

void warning_errno(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap, saved);
	va_end(ap);
	errno = saved;
}

void notice(const char *fmt, ...)
{
	if (quiet || notices_off)
		return;
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", progname);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	errno = saved;
}

void die_status(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap, 0);
	va_end(ap);
	void (*hook)(void) = die_hook;
	die_hook = NULL;
	if (hook)
		hook();
	exit(status);
}
