/*
 * Reading and writing a stopped thread's memory: process_vm_readv/writev,
 * with ptrace's word-by-word access as the fallback for what they refuse
 * (code pages are not writable through process_vm_writev).
 */
#ifndef PTFIL_REMOTE_H
#define PTFIL_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* n bytes at addr in thread tid's memory into buf. Returns 0, or -1 with errno. */
int remote_read(pid_t tid, uint64_t addr, void *buf, size_t n);
/* n bytes of buf to addr in thread tid's memory (tid stopped for the ptrace fallback). 0, or -1 with errno. */
int remote_write(pid_t tid, uint64_t addr, const void *buf, size_t n);

#endif
