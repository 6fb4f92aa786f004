/* The tracer's face to ptfil's main: run a program under ptrace and write its snapshot. */
#ifndef PTFIL_TRACER_H
#define PTFIL_TRACER_H

#include "tracer/core/options.h"



/* The default snapshot name for a program and pid: "ptfil-NAME-PID.gz". Caller frees. */
char *tracer_default_output(const char *prog, int pid);

/*
 * Runs opts->argv under ptrace from its first instruction until it and every
 * process it started have exited, then writes the snapshot. Returns the
 * program's status as a shell reports it (128+N for signal N), 127/126 when it
 * cannot be run, or -1 after error() when ptfil itself failed (the child is
 * killed then).
 */
int tracer_launch(const struct tracer_opts *opts);

/*
 * Attaches to the running process opts->attach_pid, profiles it until
 * SIGINT/SIGTERM/SIGHUP, --duration or its exit, writes the snapshot and
 * leaves it as it was. Returns ptfil's exit status: 0, a REFUSE_* status
 * (tracer/refuse.h) when the target cannot be traced, 1 when ptfil failed.
 */
int tracer_attach(const struct tracer_opts *opts);

#endif
