/* fault -U: the drainer's unwind of a record's stack copy (unwind.c). */
#ifndef FAULT_UNWIND_H
#define FAULT_UNWIND_H
#include <stdint.h>
#include <sys/types.h>
void fu_init(pid_t pid);
int fu_unwind(const uint64_t *regs, const unsigned char *stack, uint64_t len, uint64_t *ips, int max);
extern long fu_remote_reads;
#endif
