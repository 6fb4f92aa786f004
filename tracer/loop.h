/* The event loop of tracer/: waits for stops and dispatches them. */
#ifndef PTFIL_LOOP_H
#define PTFIL_LOOP_H

#include <signal.h>
#include <sys/types.h>

struct tracer;

/* Set from a SIGALRM handler: time for a residency poll. */
extern volatile sig_atomic_t loop_tick;

/* Handles one waitpid result and restarts the thread as the stop requires. */
void loop_dispatch(struct tracer *T, pid_t tid, int status);
/* Runs until no traced thread is left. */
void loop_run(struct tracer *T);

#endif
