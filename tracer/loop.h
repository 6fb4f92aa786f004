/* The event loop of tracer/: waits for stops and dispatches them. */
#ifndef PTFIL_LOOP_H
#define PTFIL_LOOP_H

#include <signal.h>
#include <sys/types.h>

struct tracer;

/* Set from a SIGALRM handler: time for a residency poll. */
extern volatile sig_atomic_t loop_tick;

/*
 * Set from ptfil's own signal handlers: signal N was sent to ptfil (by kill,
 * not by the terminal) from process loop_forward_from[N]. The loop passes it
 * on to the program unless the same send reached the program already.
 */
extern volatile sig_atomic_t loop_forward[65];
extern volatile sig_atomic_t loop_forward_from[65];
extern volatile sig_atomic_t loop_forward_any;

/* Handles one waitpid result and restarts the thread as the stop requires. */
void loop_dispatch(struct tracer *T, pid_t tid, int status);
/* Runs until no traced thread is left. */
void loop_run(struct tracer *T);

#endif
