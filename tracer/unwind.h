/*
 * Remote unwinding with libunwind: registers and a copy of the stack are taken
 * at the stop, unwind tables are read from the module files through symbols/,
 * and the target's memory is read directly only when neither holds a word.
 */
#ifndef PTFIL_UNWIND_H
#define PTFIL_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "tracer/modules.h"

#define UNWIND_MAX_FRAMES 128
#define UNWIND_STACK_COPY (256 * 1024) /* the most copied; the first copy is smaller */
#define UNWIND_FIRST_COPY (8 * 1024)

struct unwind {
	void *as;                /* unw_addr_space_t */
	uint8_t *stack;          /* UNWIND_STACK_COPY bytes, owned */
	/* per-unwind state the accessors read */
	pid_t tid;
	const struct user_regs_struct *regs;
	uint64_t stack_lo;
	size_t stack_len;
	const struct modmap *mm;
	struct modreg *reg;
	/* counters */
	uint64_t unwinds, frames, remote_reads, stack_copies;
};

/* Storage is the caller's; unwind_fin frees the address space and buffer. Returns 0 or -1 after error(). */
int unwind_init(struct unwind *u);
void unwind_fin(struct unwind *u);
/* Forget cached unwind info (after an exec or when objects were unmapped). */
void unwind_flush(struct unwind *u);

/*
 * Unwinds stopped thread tid from regs: writes up to max instruction pointers,
 * innermost first, to ips, and returns how many (at least 1: the current ip).
 */
size_t unwind_stack(struct unwind *u, pid_t tid, const struct user_regs_struct *regs,
		    const struct modmap *mm, struct modreg *reg, uint64_t *ips, size_t max);

/* A word of the stack copy the last unwind_stack took. Returns 0, or -1 when addr is outside it. */
int unwind_copied_word(const struct unwind *u, uint64_t addr, uint64_t *val);

#endif
