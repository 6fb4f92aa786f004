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

/* Runs until no traced thread is left, or, in attach mode, until loop_leave. */
void loop_run(struct tracer *T);

/*
 * Stops every traced thread and holds it (parked), with the signal it was
 * about to receive; ptfil's own int3 stops are undone (bp_park_trap).
 * Threads that exit, turn zombie or are found not to be ours meanwhile are
 * dropped. Returns 0, or -1 after error() when some were still running after
 * timeout seconds.
 */
int loop_park_all(struct tracer *T, double timeout);

/*
 * For up to seconds: stops that still come in after everything was let go
 * (a child whose first stop was on its way) are parked. Returns 1 when any
 * came, so there is more to let go.
 */
int loop_stragglers(struct tracer *T, double seconds);

#endif
