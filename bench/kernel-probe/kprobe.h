/*
 * The records and counters shared by the BPF programs (kprobe.bpf.c) and their drainer (kprobe.c).
 */
#ifndef KPROBE_H
#define KPROBE_H

/* Record kinds in the ring buffer. */
enum {
	KP_MALLOC = 1,		/* a = size */
	KP_RET,			/* a = pointer malloc returned */
	KP_FREE,		/* a = pointer */
	KP_MALLOC_STACK,	/* a = size, then the user stack copy (struct kp_big) */
	KP_MALLOC_FP,		/* a = size, b = fingerprint */
	KP_FP_NEW,		/* a = size, b = fingerprint << 32 | stack id, then the stack copy */
	KP_RET_UNTRACKED,	/* (e) a block the maps could not hold: a = pointer, b = size */
	KP_FREE_UNKNOWN,	/* (e) a free of a block the maps never saw: a = pointer */
	KP_RET_SIZE,		/* (f) one record per malloc: a = pointer, b = size from the entry */
	KP_MALLOC_CHAIN,	/* (g) a = size, b = bytes of ip[] filled (struct kp_chain) */
	KP_MALLOC_PY,		/* (y) a = size, b = Python frames read (struct kp_py) */
};

/* Per-CPU counters kept by the BPF programs. */
enum {
	KP_C_MALLOC,
	KP_C_RET,
	KP_C_FREE,
	KP_C_LOST,		/* ring reservations that failed: records lost */
	KP_C_NEWFP,
	KP_C_STACKFAIL,		/* not even 512 bytes of stack readable */
	KP_C_STACKIDERR,	/* bpf_get_stackid failed (bucket taken, map full) */
	KP_C_SIGNAL,		/* SIGSTOPs sent for back-pressure */
	KP_C_MAPFULL,
	KP_NCOUNTERS
};

#define KP_MAX_FP 65536

struct kp_rec {
	__u32 kind;
	__u32 tid;
	__u64 a;
	__u64 b;
};

struct kp_big {
	struct kp_rec h;
	__u64 len;		/* bytes of stack actually copied */
	__u8 stack[8192];
};

struct kp_chain {
	struct kp_rec h;
	__u64 ip[32];
};

#define KP_PY_FRAMES 32

struct kp_py {
	struct kp_rec h;
	__u64 code[KP_PY_FRAMES];	/* the frame's code object */
	__u64 instr[KP_PY_FRAMES];	/* its last instruction (the line, with the code's table) */
};

/* (e) per fingerprint: live bytes now; snap holds the value at the latest peak when gen equals
 * the global peak_gen (the entry changed after that peak), else cur is that value. */
struct kp_stat {
	__s64 cur;
	__s64 snap;
	__u64 gen;
};

struct kp_global {
	__s64 total;
	__s64 peak;
	__u64 peak_gen;
	__u64 nfp;
};

#endif
