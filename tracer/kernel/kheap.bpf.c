/*
 * The kernel path's probes (docs/heap-events.md): the BPF programs the kernel
 * runs at ptfil's uprobes on the malloc family of a traced process. They only
 * write records into one ring buffer shared by every traced process, in the
 * order the calls happened; ptfil keeps the ledger. Built for the BPF target
 * by clang (Makefile.am) and embedded in ptfil. They touch no kernel
 * structure except the registers the probe gives them, so they need neither
 * BTF of the running kernel nor CO-RE.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "tracer/kernel/kheap_rec.h"

char LICENSE[] SEC("license") = "GPL";

/* The user registers at a uprobe, as the kernel saves them on x86-64. */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
	unsigned long ip, cs, flags, sp, ss;
};

#define RING_CONFIG kh_config
#define RING_NCOUNTERS KH_NCOUNTERS
#define RING_C_STOPS KH_C_STOPS
#define RING_C_RETRIES KH_C_RETRIES
#include "tracer/kernel/ring.bpf.h"
#include "tracer/kernel/pyread.bpf.h"

/* posix_memalign's first argument, per thread, from its entry to its return (where the block is stored). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} memptr SEC(".maps");

static __always_inline void head(struct pt_regs *ctx, struct kh_rec *r, __u32 kind, __u64 a0, __u64 a1, __u64 a2)
{
	__u64 id = bpf_get_current_pid_tgid();
	r->kind = kind;
	r->tid = (__u32)id;
	r->tgid = (__u32)(id >> 32);
	r->fn = (__u32)bpf_get_attach_cookie(ctx);
	r->a[0] = a0;
	r->a[1] = a1;
	r->a[2] = a2;
	r->chunk = 0;
}

/*
 * Per thread, an address up to which its stack is known to be readable (its
 * top, to within 128 bytes): a read that crosses the end of the stack
 * mapping fails as a whole, so a thread near the top of its stack (the main
 * thread in main) would fault at every call without it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} stacktop SEC(".maps");

/* The user stack from sp up, as much of KH_STACK as is mapped. */
static __always_inline __u64 copy_stack(unsigned char *dst, __u64 sp, __u32 tid)
{
	__u64 *known = bpf_map_lookup_elem(&stacktop, &tid);
	if (known && *known > sp && *known - sp < KH_STACK) {
		__u64 n = (*known - sp) & (KH_STACK - 1);
		if (n && !bpf_probe_read_user(dst, n, (void *)sp))
			return n;
	}
	if (!bpf_probe_read_user(dst, KH_STACK, (void *)sp))
		return KH_STACK;
	/* Shorter: found by halving (6 reads, once per thread), then remembered. */
	count(KH_C_SHORT_STACK);
	__u64 lo = 0, hi = KH_STACK;
#pragma unroll
	for (int i = 0; i < 6; i++) {
		__u64 mid = ((lo + hi) / 2) & (KH_STACK - 8);
		if (mid && !bpf_probe_read_user(dst, mid, (void *)sp))
			lo = mid;
		else
			hi = mid;
	}
	lo &= KH_STACK - 8;
	if (!lo || bpf_probe_read_user(dst, lo, (void *)sp))
		return 0;
	__u64 top = sp + lo;
	bpf_map_update_elem(&stacktop, &tid, &top, BPF_ANY);
	return lo;
}

/*
 * The calling thread's signal stack, read from the kernel's task (its field
 * offsets relocated from the running kernel's BTF by libbpf): whether it lies
 * above the stack pointer sp, where a handler's probed call would make the
 * kernel drop the return probe of a call in flight below it.
 */
struct task_struct___kh {
	unsigned long sas_ss_sp;
	unsigned long sas_ss_size;
} __attribute__((preserve_access_index));

static __always_inline int altstack_above(__u64 sp)
{
	struct task_struct___kh *task = (void *)bpf_get_current_task();
	unsigned long base = BPF_CORE_READ(task, sas_ss_sp);
	unsigned long size = BPF_CORE_READ(task, sas_ss_size);
	return size && base > sp;
}

/* The registers at the probe, in the record's slots (kheap_rec.h). */
static __always_inline void copy_regs(struct pt_regs *ctx, unsigned long long *regs)
{
	regs[KH_RIP] = ctx->ip;
	regs[KH_RSP] = ctx->sp;
	regs[KH_RBP] = ctx->bp;
	regs[KH_RBX] = ctx->bx;
	regs[KH_R12] = ctx->r12;
	regs[KH_R13] = ctx->r13;
	regs[KH_R14] = ctx->r14;
	regs[KH_R15] = ctx->r15;
	regs[KH_RAX] = ctx->ax;
	regs[KH_RCX] = ctx->cx;
	regs[KH_RDX] = ctx->dx;
	regs[KH_RSI] = ctx->si;
	regs[KH_RDI] = ctx->di;
	regs[KH_R8] = ctx->r8;
	regs[KH_R9] = ctx->r9;
	regs[KH_R10] = ctx->r10;
	regs[KH_R11] = ctx->r11;
}

/*
 * An allocating function entered: its arguments, its registers and its stack,
 * for ptfil to unwind; in a Python process, its Python frames in a record of
 * their own just before (pyread.bpf.h).
 */
SEC("uprobe")
int kh_entry(struct pt_regs *ctx)
{
	__u64 flags = pressure();
	struct kpy_scratch *py = kpy_walk();
	int with_py = py && kpy_emit(py, KH_C_LOST, KH_C_PYSTOPS);
	struct kh_entry *r = ring_reserve(sizeof(*r));
	if (!r) {
		count(KH_C_LOST);
		return 0;
	}
	head(ctx, &r->h, KH_ENTRY, ctx->di, ctx->si, ctx->dx);
	copy_regs(ctx, r->regs);
	r->stack_len = copy_stack(r->stack, ctx->sp, r->h.tid);
	if (with_py)
		r->h.kind |= KH_PY;
	if (altstack_above(ctx->sp)) {
		/* Stopped before it runs on, until ptfil has moved its process to breakpoints. */
		__u32 zero = 0;
		struct kh_config *c = bpf_map_lookup_elem(&config, &zero);
		r->h.kind |= KH_ALTSTACK;
		if (c)
			bpf_send_signal_thread((__u32)c->stop_signal);
	}
	if (r->h.fn == KH_FN_POSIX_MEMALIGN) {
		__u32 tid = r->h.tid;
		__u64 where = ctx->di;
		bpf_map_update_elem(&memptr, &tid, &where, BPF_ANY);
	}
	bpf_ringbuf_submit(r, flags);
	return 0;
}

static __always_inline int small(struct pt_regs *ctx, __u32 kind, __u64 a0)
{
	__u64 flags = pressure();
	struct kh_rec *r = ring_reserve(sizeof(*r));
	if (!r) {
		count(KH_C_LOST);
		return 0;
	}
	head(ctx, r, kind, a0, ctx->sp, 0);
	if (kind == KH_FREE)
		bpf_probe_read_user(&r->a[2], sizeof(r->a[2]), (void *)ctx->sp);
	if (kind == KH_RETURN && r->fn == KH_FN_POSIX_MEMALIGN) {
		/* The block as stored now: the program may store another there before ptfil reads it. */
		__u32 tid = r->tid;
		__u64 *where = bpf_map_lookup_elem(&memptr, &tid);
		__u64 block = 0;
		if (where && !bpf_probe_read_user(&block, sizeof(block), (void *)*where)) {
			r->a[2] = block;
			r->kind |= KH_STORED;
		}
		if (where)
			bpf_map_delete_elem(&memptr, &tid);
	}
	if (kind == KH_RETURN) {
		__u64 block = r->fn == KH_FN_POSIX_MEMALIGN ? ((r->kind & KH_STORED) && !a0 ? r->a[2] : 0) : a0;
		if (block >= 8)
			bpf_probe_read_user(&r->chunk, sizeof(r->chunk), (void *)(block - 8));
	}
	bpf_ringbuf_submit(r, flags);
	return 0;
}

/* An allocating function returned (a uretprobe): its result. */
SEC("uretprobe")
int kh_return(struct pt_regs *ctx)
{
	return small(ctx, KH_RETURN, ctx->ax);
}

/* free entered: the pointer, and its return address (a tail call from an allocating call returns through a uretprobe's). */
SEC("uprobe")
int kh_free(struct pt_regs *ctx)
{
	return small(ctx, KH_FREE, ctx->di);
}

/*
 * The calls ptfil must see while the thread waits, written nowhere in the
 * target: the loader's load hook and, under attach, the mapping calls'
 * libc wrappers and sigaltstack. The registers go into the ring
 * and the thread is sent the stop signal, which stops it in ptrace's
 * signal-delivery-stop before its next instruction in user mode, so before
 * the system call. The system call's result is the raw tracepoint's below.
 * When ptfil is gone the probe is too; a signal still queued is SIGURG or
 * SIGWINCH, which a target that does not catch it ignores (kwait.c).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} awaiting SEC(".maps");

/* enum hook_fn's wrappers (tracer/ptrace/hooks.h; kheap.c checks they agree) and the system call each makes. */
static __always_inline long wrapper_nr(__u32 fn)
{
	switch (fn) {
	case KH_FN_MMAP: return 9;
	case KH_FN_MUNMAP: return 11;
	case KH_FN_MREMAP: return 25;
	case KH_FN_MADVISE: return 28;
	case KH_FN_BRK: return 12;
	default: return -1;
	}
}

SEC("uprobe")
int kh_call(struct pt_regs *ctx)
{
	__u32 zero = 0;
	struct kh_config *c = bpf_map_lookup_elem(&config, &zero);
	struct kh_call *r = ring_reserve(sizeof(*r));
	if (!r) {
		count(KH_C_LOST);
		return 0;
	}
	head(ctx, &r->h, KH_CALL, ctx->di, ctx->si, ctx->dx);
	copy_regs(ctx, r->regs);
	long nr = wrapper_nr(r->h.fn);
	if (nr >= 0) {
		__u32 tid = r->h.tid;
		__u64 v = (__u64)nr;
		bpf_map_update_elem(&awaiting, &tid, &v, BPF_ANY);
	}
	/*
	 * No wake-up of its own: the stop wakes ptfil, which drains the ring
	 * before it handles any stop (a wake-up too cost a second switch to
	 * ptfil per call: bench/README.md).
	 */
	bpf_ringbuf_submit(r, pressure_of(0));
	if (c)
		bpf_send_signal_thread((__u32)c->stop_signal);
	return 0;
}

/*
 * Every system call's return on the machine passes here while a process is
 * attached on the kernel path: one lookup for a thread that is not in a
 * wrapper's call ptfil follows. The kernel's pt_regs: the same layout as the
 * user registers above.
 */
SEC("raw_tracepoint/sys_exit")
int kh_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 *want = bpf_map_lookup_elem(&awaiting, &tid);
	if (!want)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	unsigned long nr = 0;
	bpf_probe_read_kernel(&nr, sizeof(nr), &regs->orig_ax);
	if (nr != *want)
		return 0;
	bpf_map_delete_elem(&awaiting, &tid);
	struct kh_rec *r = ring_reserve(sizeof(*r));
	if (!r) {
		count(KH_C_LOST);
		return 0;
	}
	r->kind = KH_CALLRET;
	r->tid = (__u32)id;
	r->tgid = (__u32)(id >> 32);
	r->fn = 0;
	r->a[0] = (__u64)ctx->args[1];
	r->a[1] = nr;
	r->a[2] = 0;
	r->chunk = 0;
	bpf_ringbuf_submit(r, pressure_of(0));
	return 0;
}
