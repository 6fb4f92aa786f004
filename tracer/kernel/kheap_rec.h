/*
 * The records the kernel path's BPF programs (tracer/kernel/kheap.bpf.c) write into
 * their ring buffer, and the configuration ptfil gives them: one layout, read
 * by both sides. Plain C types of fixed width, so that the BPF target and the
 * host agree.
 */
#ifndef PTFIL_KHEAP_REC_H
#define PTFIL_KHEAP_REC_H

/* What a record is. */
enum {
	KH_ENTRY = 1,   /* an allocating call entered: struct kh_entry */
	KH_RETURN,      /* an allocating call returned: a[0] = its result */
	KH_FREE,        /* free entered: a[0] = the pointer */
	/*
	 * The loader's load hook or, under attach, a mapping call's libc
	 * wrapper or sigaltstack entered (struct kh_call); the thread was sent the stop
	 * signal and stops before its next instruction (kheap.c, kheap_call_stop).
	 */
	KH_CALL,
	/* The system call of a wrapper that KH_CALL recorded returned: a[0] = its result, a[1] = its number. */
	KH_CALLRET,
};
#define KH_STORED 0x100 /* KH_RETURN of posix_memalign: a[2] holds the block it stored */
/*
 * KH_ENTRY of a thread whose signal stack lies above the stack it runs on:
 * the kernel's return probes cannot return across it (docs/heap-events.md),
 * so its process leaves the kernel path; the thread was sent the stop signal.
 */
#define KH_ALTSTACK 0x200
/* KH_ENTRY whose thread's Python frames were written just before it (pyread_rec.h). */
#define KH_PY 0x400
#define KH_KIND(k) ((k) & 0xff)

/* enum hook_fn's posix_memalign (tracer/ptrace/hooks.h; kheap.c checks they agree): its block is returned through memory. */
#define KH_FN_POSIX_MEMALIGN 5
/* The loader's load hook and the mapping calls' wrappers, probed as calls that stop (KH_CALL). */
#define KH_FN_DL_DEBUG 10
#define KH_FN_MMAP 11
#define KH_FN_MUNMAP 12
#define KH_FN_MREMAP 13
#define KH_FN_MADVISE 14
#define KH_FN_BRK 15
#define KH_FN_SIGALTSTACK 16

/* Register slots of struct kh_entry, the ones an unwind can ask for. */
enum {
	KH_RIP, KH_RSP, KH_RBP, KH_RBX, KH_R12, KH_R13, KH_R14, KH_R15,
	KH_RAX, KH_RCX, KH_RDX, KH_RSI, KH_RDI, KH_R8, KH_R9, KH_R10, KH_R11,
	KH_NREGS
};

/* Bytes of the user stack, from the stack pointer up, copied with each entry (less where the stack is shorter). */
#define KH_STACK 8192

struct kh_rec {
	unsigned int kind;
	unsigned int tid;
	unsigned int tgid;
	unsigned int fn;                 /* enum hook_fn of the function (the probe's cookie) */
	/*
	 * KH_ENTRY: the arguments; KH_FREE: the pointer, the stack pointer, the
	 * word there (the return address);
	 * KH_RETURN: the result, the stack pointer, and for posix_memalign the
	 * block it stored (a[2] is then that block, and the record's kind has
	 * KH_STORED set).
	 */
	unsigned long long a[3];
	/*
	 * KH_RETURN: the word before the block (glibc's chunk size word, which
	 * gives its usable size: memory/alloc.h), read at the return; 0 when
	 * unread. The block may be freed and its memory reused before ptfil
	 * reads the record.
	 */
	unsigned long long chunk;
};

struct kh_entry {
	struct kh_rec h;
	unsigned long long regs[KH_NREGS];
	unsigned long long stack_len;    /* bytes of stack[] copied */
	unsigned char stack[KH_STACK];
};

/* KH_CALL: the registers at the probe, the function's first instruction (the stop comes one later). */
struct kh_call {
	struct kh_rec h;
	unsigned long long regs[KH_NREGS];
};

/* Counters the programs keep (a per-CPU array, summed by ptfil). */
enum {
	KH_C_LOST,          /* records that did not fit in the ring: must stay 0 */
	KH_C_STOPS,         /* back-pressure: SIGSTOPs the programs sent */
	KH_C_SHORT_STACK,   /* a thread's stack found shorter than KH_STACK (its end then remembered) */
	KH_C_RETRIES,       /* reservations the ring refused with room, tried again (ring.bpf.h) */
	KH_C_PYSTOPS,       /* threads stopped to name a code object ptfil had not named (pyread.bpf.h) */
	KH_NCOUNTERS
};

/* Set by ptfil at any time (an array map of one entry). */
struct kh_config {
	unsigned long long stop_bytes;   /* unread bytes past which the writing thread is sent stop_signal */
	unsigned long long wake_bytes;   /* unread bytes past which ptfil is woken */
	unsigned long long stop_signal;  /* SIGSTOP under launch; under attach SIGURG or SIGWINCH (kwait.c) */
};

#endif
