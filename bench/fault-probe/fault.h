/*
 * The records and counters shared by the fault-path probes (fault.bpf.c) and their drainer
 * (fault.c): docs/fault-path.md.
 */
#ifndef FAULT_H
#define FAULT_H

/* Record kinds. */
enum {
	FP_FAULT_USER = 1,	/* (t) a write fault in user mode: info = error code */
	FP_FAULT_KERNEL,	/* (t) a write fault in kernel mode on a user address (copy_to_user) */
	FP_FOLIO,		/* (f) a new anonymous folio mapped; info = rmap flags | FP_F_* */
	FP_PERF,		/* (p) a perf sample, converted by the drainer (never in the BPF ring) */
	FP_RSS,			/* (r) the mm's anonymous page count moved: size = bytes (signed), addr = the
				 * address of the thread's write fault in flight, 0 when none (GUP, another
				 * process, a kernel thread, a release) */
	FP_RUN,			/* (r, -C) more pages of the thread's previous record, same syscall:
				 * addr = first of them (0 for GUP), size = their bytes */
};

/* (f) who made the folio resident, in info's high bits. */
#define FP_F_SELF	(1ull << 32)	/* current is a thread of the mm's process: regs are its own */
#define FP_F_OTHER	(1ull << 33)	/* current is another process (process_vm_writev, GUP from outside) */
#define FP_F_KTHREAD	(1ull << 34)	/* current is a kernel thread (khugepaged) */
#define FP_F_NOSTACK	(1ull << 35)	/* the clamped stack copy failed (a page of it not resident) */
#define FP_F_SAMESTACK	(1ull << 36)	/* the stack was the same as this thread's previous record: not copied */

/* Per-CPU counters. */
enum {
	FP_C_EVENTS,		/* program runs that passed the filter */
	FP_C_READ,		/* (t) read faults of a traced process, ignored */
	FP_C_LOST,		/* ring reservations that failed */
	FP_C_STACKFAIL,		/* stack copies that failed */
	FP_C_FINDVMA,		/* bpf_find_vma calls (the stack's end, once per thread) */
	FP_C_CLAMPED,		/* stack copies shorter than 8 KiB (the stack ends closer) */
	FP_C_SIGNAL,		/* back-pressure signals sent */
	FP_C_OTHER,		/* (f) folios mapped by another process */
	FP_C_KTHREAD,		/* (f) folios mapped by a kernel thread */
	FP_C_LARGE,		/* (f) large folios (THP) */
	FP_C_KERNEL_MODE,	/* (t) kernel-mode write faults on user addresses */
	FP_C_SAME,		/* stacks not copied: same as the thread's previous record */
	FP_C_RSS,		/* (r) rss_stat events on a traced mm's MM_ANONPAGES */
	FP_C_RSS_FAULT,		/* (r) ... that completed a write fault in flight */
	FP_C_RSS_NEG,		/* (r) ... that decreased it (zap, reclaim) */
	FP_C_FINDVMA_ERR,	/* bpf_find_vma failed (EBUSY: lock or irq_work busy, ENOENT) */
	FP_C_HOLE,		/* stack copies cut at a missing page below the mapping's end */
	FP_C_RUN_EXTEND,	/* (-C) records folded into a run */
	FP_C_RUN_FLUSH,		/* (-C) runs emitted */
	FP_C_STALE,		/* (r) write faults on a missing page that made no anonymous page */
	FP_NCOUNTERS
};

#define FP_STACK 8192
#define FP_NREGS 17	/* the order of the regs[] below */
enum { FP_RIP, FP_RSP, FP_RBP, FP_RBX, FP_R12, FP_R13, FP_R14, FP_R15, FP_RAX, FP_RCX, FP_RDX, FP_RSI, FP_RDI,
       FP_R8, FP_R9, FP_R10, FP_R11 };

struct fp_rec {
	__u32 kind;
	__u32 tid;		/* current */
	__u32 tgid;		/* current's process */
	__u32 owner;		/* the process whose memory became resident */
	__u64 addr;		/* the fault address, or the folio's first address */
	__u64 size;		/* bytes made resident (t, p: 4096, as far as they know) */
	__u64 info;		/* error code (t), rmap flags | FP_F_* (f) */
	__u64 regs[FP_NREGS];	/* current's user registers (zero for a kernel thread) */
	__u32 stack_len;	/* bytes of stack that follow (struct fp_big), 0 in a small record */
	__u32 pad;
};

struct fp_big {
	struct fp_rec h;
	__u8 stack[FP_STACK];
};

#endif
