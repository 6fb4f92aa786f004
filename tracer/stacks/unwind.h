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

#include "tracer/stacks/modules.h"

#define UNWIND_MAX_FRAMES 128
#define UNWIND_STACK_COPY (256 * 1024) /* the most copied; the first copy is smaller */
#define UNWIND_FIRST_COPY (8 * 1024)

#define UNWIND_MEMO_READS 96
#define UNWIND_RS_CACHE 16384   /* libunwind's register-state cache, in entries (ips) */

/*
 * What one unwind read: every register and stack word, with its value. Given
 * the same values the unwinder would find the same frames (module code and
 * unwind tables do not change while gen stays the same), so a thread that
 * stops again with the same values can skip the unwind.
 */
struct unwind_memo {
	unsigned gen;                    /* 0: empty */
	uint32_t regs_read;              /* bit n: register n of reg_offset's numbering */
	uint64_t reg_val[17];
	uint32_t n;
	uint64_t addr[UNWIND_MEMO_READS];
	uint64_t val[UNWIND_MEMO_READS];
	uint32_t stack;                  /* the interned result */
};

/*
 * One frame of an unwind: where it is and the callee-saved registers the
 * unwinder recovered for it, which with the stack above sp decide every frame
 * further out.
 */
#define UNWIND_SAVED_REGS 6     /* rbx rbp r12 r13 r14 r15 */
struct unwind_frame {
	uint64_t ip, sp;
	uint64_t saved[UNWIND_SAVED_REGS];
	uint8_t saved_ok;           /* bit n: saved[n] is known */
};

/*
 * The last complete unwind, kept so that the next one can stop stepping at the
 * first frame it shares with it: same ip, sp and callee-saved registers, and
 * the same stack bytes from sp up to the end of what the last one read. The
 * frames further out are then the same too, and are copied.
 */
struct unwind_last {
	int valid;
	unsigned gen;
	uint8_t *stack;                  /* UNWIND_STACK_COPY bytes, owned */
	uint64_t stack_lo;
	size_t stack_len;
	struct unwind_frame f[UNWIND_MAX_FRAMES];
	size_t n;
	struct unwind_memo log;          /* its reads, for the memo of a spliced unwind */
	int uncacheable;
};

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
	/* what the current unwind read, for its memo */
	struct unwind_memo log;
	int uncacheable;                 /* it read memory a memo cannot check again */
	unsigned gen;                    /* bumped by unwind_flush */
	struct unwind_frame cur[UNWIND_MAX_FRAMES];  /* the frames of the current unwind */
	size_t n_cur;
	int cur_done;                    /* unwind_run completed since unwind_begin */
	int quiet;                       /* reads are not logged (they do not decide the result) */
	int given;                       /* the stack copy came with the event (unwind_begin_copy) */
	struct unwind_last last;
	/* counters */
	uint64_t unwinds, frames, remote_reads, stack_copies, memo_hits;
	uint64_t late_copies;              /* reads past a copy taken at the event, from the live stack */
	uint64_t splices, spliced_frames;  /* unwinds that reused the last one's outer frames, and how many */
	int verify;                      /* PTFIL_UNWIND_VERIFY set: every splice is checked by a full unwind */
	uint64_t splice_mismatches;      /* splices that a full unwind contradicted (verify only; 0 expected) */
};

/* Storage is the caller's; unwind_fin frees the address space and buffer. Returns 0 or -1 after error(). */
int unwind_init(struct unwind *u);
void unwind_fin(struct unwind *u);
/* Forget cached unwind info (after an exec or when objects were unmapped). */
void unwind_flush(struct unwind *u);

/* Takes the registers and a first copy of the stack of stopped thread tid. */
void unwind_begin(struct unwind *u, pid_t tid, const struct user_regs_struct *regs,
		  const struct modmap *mm, struct modreg *reg);
/*
 * The same from a copy of the stack taken at the event (the kernel path):
 * len bytes from regs->rsp up. Reads past them go to the live stack.
 */
void unwind_begin_copy(struct unwind *u, pid_t tid, const struct user_regs_struct *regs,
		       const struct modmap *mm, struct modreg *reg, const void *stack, size_t len);
/* True when memo m was recorded from the same values the current stop shows. */
int unwind_memo_match(struct unwind *u, const struct unwind_memo *m);
/*
 * Unwinds from what unwind_begin took: writes up to max instruction pointers,
 * innermost first, to ips, and returns how many (at least 1: the current ip).
 */
size_t unwind_run(struct unwind *u, uint64_t *ips, size_t max);
/* Records the last unwind_run into m with its result; does nothing if it cannot be checked again. */
void unwind_memo_store(struct unwind *u, struct unwind_memo *m, uint32_t stack);

/* A word of the stack copy unwind_begin took of thread tid. Returns 0, or -1 when addr is outside it or the copy is another thread's. */
int unwind_copied_word(const struct unwind *u, pid_t tid, uint64_t addr, uint64_t *val);

#endif
