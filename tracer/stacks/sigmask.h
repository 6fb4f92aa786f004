/*
 * ptfil's own sigprocmask (sigmask.c), which does nothing while the calling
 * thread is inside libunwind: Debian's libunwind blocks every signal around
 * each lock it takes, two system calls each time, about 60 per unwind of an
 * interpreter's stack (a third of the tracer's time on a NumPy script).
 */
#ifndef PTFIL_SIGMASK_H
#define PTFIL_SIGMASK_H

/* The calling thread enters (1) or leaves (0) libunwind. */
void sigmask_unwinding(int on);

#endif
