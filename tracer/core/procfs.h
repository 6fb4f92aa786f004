/*
 * Reading the /proc/PID files that say what a process or thread is (status
 * fields, run state, command name, command line) while it is traced.
 * Residency is read by memory/resid.c, maps by symbols/maps.c; the refusal
 * checks before an attach (tracer/refuse.c) read the status file whole.
 */
#ifndef PTFIL_PROCFS_H
#define PTFIL_PROCFS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Reads fields of /proc/PID/status: for each name[i] ("Tgid", "ShdPnd"...)
 * found, val[i] gets its number (hexadecimal when base is 16, else decimal;
 * a "kB" unit is not applied). Fields not found keep their values. Returns 0,
 * or -1 when the file cannot be read (the process is gone).
 */
int procfs_status(pid_t pid, const char *const *name, unsigned long long *val, int n, int base);

/*
 * Whether signal sig is in the mask field of /proc/PID/status ("SigPnd": queued
 * for that thread alone, "ShdPnd", "SigCgt": caught...): 1 or 0, or -1 when
 * it cannot be read.
 */
int procfs_signal(pid_t pid, const char *field, int sig);

/*
 * The state letter of thread tid (R, S, t, Z...) from /proc/TID/stat, 0 when
 * it is gone; with tracer, its TracerPid too.
 */
char procfs_state(pid_t tid, pid_t *tracer);

/* The command name of pid into buf (n bytes); buf is left as it was when it cannot be read. */
void procfs_comm(pid_t pid, char *buf, size_t n);

/* Its command line from /proc/PID/cmdline, NULL-terminated; NULL when unreadable. Caller frees. */
char **procfs_argv(pid_t pid);

#endif
