/* The tracing session's set-up and end (session.c), whether it launches its program or attaches to it. */
#ifndef PTFIL_TRACER_SESSION_H
#define PTFIL_TRACER_SESSION_H

struct tracer;
struct tracer_opts;

/* T's tables and every module's state of the run, from o. Returns 0, or -1 after error() (session_fin still frees). */
int session_init(struct tracer *T, const struct tracer_opts *o);
/* Frees what session_init made and every process and thread left in the tables. */
void session_fin(struct tracer *T);

#endif
