/*
 * What ptfil must undo if it crashes while attached (SIGSEGV, SIGBUS,
 * SIGABRT...), kept where an async-signal-safe handler can read it: every
 * byte an int3 replaced, every hijacked return address, every traced thread.
 * The handler puts the bytes and returns back through /proc/PID/mem, undoes
 * the int3 stop of any thread caught in one, detaches every thread it can
 * stop within a second or two, and then lets the signal end ptfil.
 *
 * The tables are static arrays: noting and forgetting never allocates, and an
 * entry is complete before the handler can see it.
 */
#ifndef PTFIL_RESCUE_H
#define PTFIL_RESCUE_H

#include <stdint.h>
#include <sys/types.h>

#define RESCUE_BYTES 16384
#define RESCUE_THREADS 16384
#define RESCUE_NONE (-1)

/* Installs the handlers (on an alternate stack, so a stack overflow is caught too). Attach mode only. */
void rescue_install(void);

/* A traced thread of process pid: its slot (for the calls below), or RESCUE_NONE when the table is full. */
int rescue_thread_add(pid_t tid, pid_t pid);
void rescue_thread_del(int slot);
/*
 * A hooked call of the thread is in flight: the word at slot holds
 * trampoline where ret was. rescue_return_done when it came back.
 */
void rescue_return(int slot, uint64_t slot_addr, uint64_t ret, uint64_t trampoline);
void rescue_return_done(int slot);

/* An int3 is about to replace byte orig at addr in the process of thread tid. */
void rescue_byte_note(pid_t tid, uint64_t addr, uint8_t orig);
/* The original byte at addr is back (or the image is gone). */
void rescue_byte_forget(pid_t tid, uint64_t addr);
/* Every byte of process pid (an exec, or the process is gone). */
void rescue_bytes_forget_pid(pid_t pid);

#endif
