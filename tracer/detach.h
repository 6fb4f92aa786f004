/*
 * Leaving a traced process tree as it was (detach.c).
 */
#ifndef PTFIL_DETACH_H
#define PTFIL_DETACH_H

struct tracer;

/* stops every thread, takes every breakpoint out, restores hijacked returns, detaches. */
void tracer_leave(struct tracer *T);

#endif
