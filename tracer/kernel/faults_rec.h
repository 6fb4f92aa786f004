/*
 * The records the fault path's BPF programs (tracer/kernel/faults.bpf.c)
 * write into their ring buffer, and their configuration: one layout, read by
 * both sides (docs/fault-path.md, "Recommendation"). Plain C types of fixed
 * width, so that the BPF target and the host agree.
 */
#ifndef PTFIL_FAULTS_REC_H
#define PTFIL_FAULTS_REC_H

/* What a record is. */
enum {
	KF_FAULT = 1,   /* a write fault on a missing page of the thread's own process completed: size says what it made resident */
	KF_COW,         /* a write fault on a present page (copy-on-write, the zero page written): 4 KiB made the thread's */
	KF_GROW,        /* the anonymous page count rose with no fault in flight (a syscall's GUP, another process, a kernel thread) */
	KF_SHRINK,      /* it fell (a release, reclaim, exit): size is the (negative) change */
	KF_MOVE,        /* mremap succeeded: [addr, addr + size) is now [regs[KF_MOVE_TO], + regs[KF_MOVE_LEN]) */
};

/* A KF_MOVE record's other fields: where the range went, its new length, and its number (struct kf_moves.moved). */
#define KF_MOVE_TO 0
#define KF_MOVE_LEN 1
#define KF_MOVE_SEQ 2

/*
 * Per process (by tgid): its mremap calls begun and finished, and the
 * KF_MOVE records written. ptfil compares its pages with the kernel's only
 * while none is in flight and every move written has been applied: a page
 * a move took away is not a page released.
 */
struct kf_moves {
	unsigned long long begun;
	unsigned long long finished;
	unsigned long long moved;
};

/* flags */
#define KF_SELF      0x1   /* current is a thread of the owner process: regs are its own */
#define KF_OTHER     0x2   /* current is another process (process_vm_writev, a debugger's write) */
#define KF_KTHREAD   0x4   /* current is a kernel thread (khugepaged, kswapd), or the owner in its own exit */
#define KF_STACK     0x8   /* a stack copy follows (struct kf_big) */
#define KF_SAME      0x10  /* the stack is the one of this thread's previous stack record: not copied again */
#define KF_NOSTACK   0x20  /* the copy failed (a page of it was not resident) */
#define KF_KERNEL    0x40  /* the fault was in kernel mode (copy_to_user into a fresh buffer) */
#define KF_PY        0x80  /* the thread's Python frames were written just before (pyread_rec.h) */
#define KF_FIRST     0x100 /* the address space's first count change seen: what the fault made resident (a page, a
                              huge page) is not known from the count, and is read from the pages (faults.c) */

/* Register slots, in kheap_rec.h's order (KH_RIP ... KH_R11), so one conversion serves both paths. */
#define KF_NREGS 17
#define KF_STACK_MAX 8192

struct kf_rec {
	unsigned int kind;
	unsigned int tid;               /* current */
	unsigned int tgid;              /* current's process */
	unsigned int owner;             /* the process whose memory it is */
	unsigned long long addr;        /* the fault address (page-aligned), 0 when not known */
	long long size;                 /* bytes: 4 KiB, 2 MiB, a rise or a fall of the count */
	unsigned long long flags;
	unsigned long long time;        /* CLOCK_MONOTONIC, nanoseconds */
	unsigned long long rss;         /* the owner's anonymous bytes after the change */
	unsigned long long regs[KF_NREGS];
	unsigned int stack_len;         /* bytes in stack[] of struct kf_big */
	unsigned int pad;
};

struct kf_big {
	struct kf_rec h;
	unsigned char stack[KF_STACK_MAX];
};

/* Counters the programs keep (a per-CPU array, summed by ptfil). */
enum {
	KF_C_LOST,          /* records that did not fit in the ring: must stay 0 */
	KF_C_STOPS,         /* back-pressure signals sent */
	KF_C_READS,         /* read faults of a traced process, ignored (the zero page costs nothing) */
	KF_C_STACKFAIL,     /* stack copies that failed */
	KF_C_SAME,          /* stacks not copied: the thread's previous one */
	KF_C_STALE,         /* write faults on a missing page that made no anonymous page (retried, or file-backed) */
	KF_C_RETRIES,       /* records the ring refused with room, tried again (ring.bpf.h) */
	KF_C_PYSTOPS,       /* threads stopped to name a code object ptfil had not named (pyread.bpf.h) */
	KF_NCOUNTERS
};

/* Set by ptfil at any time (an array map of one entry). */
struct kf_config {
	unsigned long long stop_bytes;   /* unread bytes past which the writing thread is sent stop_signal (0: never) */
	unsigned long long wake_bytes;   /* unread bytes past which ptfil is woken */
	unsigned long long stop_signal;  /* SIGSTOP under launch; under attach SIGURG or SIGWINCH (kwait.c) */
};

#endif
