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

/* Set from ptfil's handlers in attach mode (SIGINT, SIGTERM, SIGHUP) and by --duration: time to detach. */
extern volatile sig_atomic_t loop_leave;
/* Set by SIGUSR1: write what is live now. */
extern volatile sig_atomic_t loop_dump;

/* Handles one waitpid result and restarts the thread as the stop requires. */
void loop_dispatch(struct tracer *T, pid_t tid, int status);
/* Runs until no traced thread is left, or, in attach mode, until loop_leave. */
void loop_run(struct tracer *T);
/*
 * Handles one waitpid result while ptfil stops everything (to attach or to
 * leave): the thread stays stopped, marked parked, with the signal it was
 * about to receive; ptfil's own breakpoint stops are undone (calls_park_trap).
 */
void loop_park(struct tracer *T, pid_t tid, int status);

#endif
