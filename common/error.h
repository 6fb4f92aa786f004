/* One error module for all of ptfil: library code reports and returns -1, only mains die. */
#ifndef PTFIL_ERROR_H
#define PTFIL_ERROR_H

#include <stdarg.h>

#if defined(__GNUC__)
#define PTFIL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PTFIL_NORETURN __attribute__((noreturn))
#else
#define PTFIL_PRINTF(a, b)
#define PTFIL_NORETURN
#endif

/* Name printed before every message ("ptfil", "ptfil-view"); set once by main. */
void error_set_progname(const char *name);
const char *error_progname(void);

/* Prints "PROG: MSG\n" on stderr and returns -1, keeping errno. */
int error(const char *fmt, ...) PTFIL_PRINTF(1, 2);
/* As error(), with ": strerror(errno)" appended. */
int error_errno(const char *fmt, ...) PTFIL_PRINTF(1, 2);
/* Prints "PROG: warning: MSG\n"; never fails. */
void warning(const char *fmt, ...) PTFIL_PRINTF(1, 2);
/* As warning(), with ": strerror(errno)" appended; errno is kept. */
void warning_errno(const char *fmt, ...) PTFIL_PRINTF(1, 2);
/*
 * What ptfil tells the user as it goes ("PROG: MSG\n" on stderr: attached,
 * the peak, where the snapshot is): nothing with notice_set_quiet(1)
 * (--quiet), while errors and warnings still print. Never truncated.
 */
void notice(const char *fmt, ...) PTFIL_PRINTF(1, 2);
void notice_set_quiet(int quiet);

/*
 * Called by die() before exiting, so that a main can restore breakpoints,
 * detach or kill its child. Runs once; a die() from inside it exits at once.
 */
void error_set_die_hook(void (*hook)(void));
/* Reports like error() and exits with status. Only mains call it. */
void die_status(int status, const char *fmt, ...) PTFIL_PRINTF(2, 3) PTFIL_NORETURN;
#define die(...) die_status(1, __VA_ARGS__)

/* Quiet mode for unit tests that exercise error paths. */
void error_set_quiet(int quiet);

#endif
