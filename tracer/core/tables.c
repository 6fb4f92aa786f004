/* The process and thread tables (core/session.h): threads hashed by tid, processes in a list, the clock. */
#include <time.h>

#include "tracer/core/session.h"

double tracer_now(const struct tracer *T)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - T->t0;
}

struct tracee *tracer_find(struct tracer *T, pid_t tid)
{
	for (struct tracee *t = T->threads[(unsigned)tid % TRACER_HASH]; t; t = t->hnext)
		if (t->tid == tid)
			return t;
	return NULL;
}

struct proc *tracer_proc(struct tracer *T, pid_t pid)
{
	for (struct proc *p = T->procs; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

int tracer_retired(const struct tracer *T, pid_t tid)
{
	for (size_t i = 0; i < TRACER_RETIRED; i++)
		if (T->retired[i] == tid)
			return 1;
	return 0;
}

void tables_link_thread(struct tracer *T, struct tracee *t)
{
	/* A tid seen again is a new thread: no longer retired. */
	for (size_t i = 0; i < TRACER_RETIRED; i++)
		if (T->retired[i] == t->tid)
			T->retired[i] = 0;
	unsigned h = (unsigned)t->tid % TRACER_HASH;
	t->hnext = T->threads[h];
	T->threads[h] = t;
	T->n_threads++;
	t->p->nthreads++;
}

void tables_unlink_thread(struct tracer *T, struct tracee *t)
{
	T->retired[T->retired_next++ % TRACER_RETIRED] = t->tid;
	unsigned h = (unsigned)t->tid % TRACER_HASH;
	for (struct tracee **pp = &T->threads[h]; *pp; pp = &(*pp)->hnext)
		if (*pp == t) {
			*pp = t->hnext;
			break;
		}
	T->n_threads--;
	t->p->nthreads--;
}

void tables_link_proc(struct tracer *T, struct proc *p)
{
	p->next = T->procs;
	T->procs = p;
}

void tables_unlink_proc(struct tracer *T, struct proc *p)
{
	for (struct proc **pp = &T->procs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
}
