/*
 * The BPF side of the heap-event measurement (docs/heap-events.md): uprobes on libc's malloc
 * (entry and return) and free of one process, in five variants chosen before load, from counting
 * only to live-block state kept in maps so that most calls emit nothing.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kprobe.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by kprobe.c before load (the rodata section of the skeleton). */
const volatile __u32 variant = 'a';
const volatile __u32 target_tgid = 0;
const volatile __u64 wake_bytes = 1 << 20;	/* wake the drainer when this much is unread (0: the
						 * ringbuf's default, a wakeup whenever it caught up) */
const volatile __u64 bp_bytes = 0;		/* back-pressure: SIGSTOP the target past this (0: off) */
const volatile __u32 bp_thread = 0;		/* SIGSTOP the thread alone (its tracer suppresses it) */

/* (y) the address of CPython 3.11's _PyRuntime in the target, set by kprobe.c after the exec. */
__u64 py_runtime = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);	/* resized by kprobe.c */
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KP_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Per thread: how many bytes above sp the stack copy can read (a shrinking cache, 8192 >> idx). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} stklen SEC(".maps");

/* (d), (e): user stacks walked by the kernel through frame pointers, deduplicated by it. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 64 * sizeof(__u64));
} stacks SEC(".maps");

/* (d), (e): fingerprint (stack id + the caller's return address at [sp]) -> small number. */
struct fp_key {
	__s64 stackid;
	__u64 ra;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KP_MAX_FP);
	__type(key, struct fp_key);
	__type(value, __u32);
} seen SEC(".maps");

/* (e): the allocation in flight per thread (size and fingerprint from the entry). */
struct pending {
	__u64 size;
	__u32 fp;
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pending);
} inflight SEC(".maps");

/* (e): live blocks, pointer -> (size, fingerprint). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 18);
	__type(key, __u64);
	__type(value, struct pending);
} live SEC(".maps");

/* (e): per fingerprint, the bytes live now and at the peak (lazy snapshot, see kprobe.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KP_MAX_FP);
	__type(key, __u32);
	__type(value, struct kp_stat);
} stat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kp_global);
} global SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		(*c)++;
}

static __always_inline int ours(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

/* Wakes the drainer only past a watermark (a wakeup per record would cost an irq_work each),
 * and stops the target with SIGSTOP past the back-pressure watermark: the whole group (no tracer),
 * or under ptrace the calling thread alone, before it runs another instruction. */
static __always_inline __u64 submit_flags(void)
{
	__u64 avail = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA);
	if (bp_bytes && avail >= bp_bytes) {
		if (bp_thread)
			bpf_send_signal_thread(19 /* SIGSTOP */);
		else
			bpf_send_signal(19 /* SIGSTOP */);
		count(KP_C_SIGNAL);
	}
	if (!wake_bytes)
		return 0;
	return avail >= wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void emit(__u32 kind, __u64 a, __u64 b)
{
	struct kp_rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r) {
		count(KP_C_LOST);
		submit_flags();
		return;
	}
	r->kind = kind;
	r->tid = (__u32)bpf_get_current_pid_tgid();
	r->a = a;
	r->b = b;
	bpf_ringbuf_submit(r, submit_flags());
}

/* Copies the user stack from sp into dst, as many of 8192/4096/.../512 bytes as are readable;
 * remembers per thread what worked so that a shallow stack faults once, not at every call. */
static __always_inline __u64 copy_stack(void *dst, __u64 sp)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 *pi = bpf_map_lookup_elem(&stklen, &tid);
	__u32 i = pi ? *pi : 0, i0 = i;
	__u64 n = 0;

	if (i == 0) {
		if (!bpf_probe_read_user(dst, 8192, (void *)sp))
			n = 8192;
		else
			i = 1;
	}
	if (!n && i == 1) {
		if (!bpf_probe_read_user(dst, 4096, (void *)sp))
			n = 4096;
		else
			i = 2;
	}
	if (!n && i == 2) {
		if (!bpf_probe_read_user(dst, 2048, (void *)sp))
			n = 2048;
		else
			i = 3;
	}
	if (!n && i == 3) {
		if (!bpf_probe_read_user(dst, 1024, (void *)sp))
			n = 1024;
		else
			i = 4;
	}
	if (!n && i == 4) {
		if (!bpf_probe_read_user(dst, 512, (void *)sp))
			n = 512;
		else
			count(KP_C_STACKFAIL);
	}
	if (i != i0 || !pi)
		bpf_map_update_elem(&stklen, &tid, &i, BPF_ANY);
	return n;
}

/* A record with the full user stack copy. */
static __always_inline void emit_stack(struct pt_regs *ctx, __u32 kind, __u64 a, __u64 b)
{
	struct kp_big *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r) {
		count(KP_C_LOST);
		submit_flags();
		return;
	}
	r->h.kind = kind;
	r->h.tid = (__u32)bpf_get_current_pid_tgid();
	r->h.a = a;
	r->h.b = b;
	r->len = copy_stack(r->stack, PT_REGS_SP(ctx));
	bpf_ringbuf_submit(r, submit_flags());
}

/* The stack fingerprint of this malloc call: a small number, new ones announced with a full
 * stack copy (so that the drainer can unwind each distinct stack once). Returns KP_MAX_FP when
 * no fingerprint could be made (the caller then falls back to a full record). */
static __always_inline __u32 fingerprint(struct pt_regs *ctx, __u64 size)
{
	struct fp_key k = {};
	__u32 *v, zero = 0, id;
	struct kp_global *g;

	k.stackid = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	if (k.stackid < 0) {
		count(KP_C_STACKIDERR);
		return KP_MAX_FP;
	}
	bpf_probe_read_user(&k.ra, sizeof(k.ra), (void *)PT_REGS_SP(ctx));
	v = bpf_map_lookup_elem(&seen, &k);
	if (v)
		return *v;
	g = bpf_map_lookup_elem(&global, &zero);
	if (!g)
		return KP_MAX_FP;
	id = (__u32)__sync_fetch_and_add(&g->nfp, 1);
	if (id >= KP_MAX_FP || bpf_map_update_elem(&seen, &k, &id, BPF_NOEXIST))
		return KP_MAX_FP;
	count(KP_C_NEWFP);
	emit_stack(ctx, KP_FP_NEW, size, ((__u64)id << 32) | (__u32)k.stackid);
	return id;
}

/* (e): moves a fingerprint's live bytes by delta, keeping its value at the last peak (lazy
 * snapshot: an entry last changed before the latest peak still holds its value at that peak). */
static __always_inline void account(struct kp_global *g, __u32 fp, __s64 delta)
{
	struct kp_stat *s = bpf_map_lookup_elem(&stat, &fp);
	if (!s)
		return;
	if (s->gen != g->peak_gen) {
		s->snap = s->cur;
		s->gen = g->peak_gen;
	}
	__sync_fetch_and_add(&s->cur, delta);
	if (delta > 0) {
		__u64 t = __sync_fetch_and_add(&g->total, delta) + delta;
		if (t > g->peak) {
			g->peak = t;
			__sync_fetch_and_add(&g->peak_gen, 1);
		}
	} else {
		__sync_fetch_and_add(&g->total, delta);
	}
}

SEC("uprobe")
int BPF_KPROBE(malloc_enter, __u64 size)
{
	if (!ours())
		return 0;
	count(KP_C_MALLOC);
	switch (variant) {
	case 'b':
		emit(KP_MALLOC, size, 0);
		break;
	case 'c':
		emit_stack(ctx, KP_MALLOC_STACK, size, 0);
		break;
	case 'd': {
		__u32 fp = fingerprint(ctx, size);
		if (fp == KP_MAX_FP)
			emit_stack(ctx, KP_MALLOC_STACK, size, 0);
		else
			emit(KP_MALLOC_FP, size, fp);
		break;
	}
	case 'g': {
		/* The kernel's frame-pointer walk of the user stack (as perf's callchain), 32 frames. */
		struct kp_chain *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
		if (!r) {
			count(KP_C_LOST);
			submit_flags();
			break;
		}
		r->h.kind = KP_MALLOC_CHAIN;
		r->h.tid = (__u32)bpf_get_current_pid_tgid();
		r->h.a = size;
		r->h.b = bpf_get_stack(ctx, r->ip, sizeof(r->ip), BPF_F_USER_STACK);
		bpf_ringbuf_submit(r, submit_flags());
		break;
	}
	case 'y': {
		/* CPython 3.11's frame chain, read at the event (the interpreter overwrites it as it
		 * runs on): _PyRuntime.gilstate.tstate_current -> cframe -> current_frame, then
		 * (f_code, prev_instr) per frame through ->previous. Offsets of Debian's 3.11.2. */
		struct kp_py *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
		__u64 ts = 0, cf = 0, fr = 0, f[4];
		if (!r) {
			count(KP_C_LOST);
			submit_flags();
			break;
		}
		r->h.kind = KP_MALLOC_PY;
		r->h.tid = (__u32)bpf_get_current_pid_tgid();
		r->h.a = size;
		r->h.b = 0;
		if (py_runtime && !bpf_probe_read_user(&ts, 8, (void *)(py_runtime + 576)) && ts &&
		    !bpf_probe_read_user(&cf, 8, (void *)(ts + 56)) && cf &&
		    !bpf_probe_read_user(&fr, 8, (void *)(cf + 8))) {
			for (int i = 0; i < KP_PY_FRAMES && fr; i++) {
				/* f_code, frame_obj, previous, prev_instr at +32..+63 */
				if (bpf_probe_read_user(f, sizeof(f), (void *)(fr + 32)))
					break;
				r->code[i] = f[0];
				r->instr[i] = f[3];
				r->h.b = i + 1;
				fr = f[2];
			}
		}
		bpf_ringbuf_submit(r, submit_flags());
		break;
	}
	case 'f': {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct pending p = { .size = size };
		bpf_map_update_elem(&inflight, &tid, &p, BPF_ANY);
		break;
	}
	case 'e': {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct pending p = { .size = size, .fp = fingerprint(ctx, size) };
		bpf_map_update_elem(&inflight, &tid, &p, BPF_ANY);
		break;
	}
	}
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(malloc_exit, __u64 ptr)
{
	if (!ours())
		return 0;
	count(KP_C_RET);
	switch (variant) {
	case 'b':
	case 'c':
	case 'd':
	case 'g':
	case 'y':
		emit(KP_RET, ptr, 0);
		break;
	case 'f': {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct pending *p = bpf_map_lookup_elem(&inflight, &tid);
		emit(KP_RET_SIZE, ptr, p ? p->size : ~0ull);
		break;
	}
	case 'e': {
		__u32 tid = (__u32)bpf_get_current_pid_tgid(), zero = 0;
		struct pending *p = bpf_map_lookup_elem(&inflight, &tid);
		struct kp_global *g = bpf_map_lookup_elem(&global, &zero);
		if (!p || !g || p->fp >= KP_MAX_FP || !ptr) {
			emit(KP_RET_UNTRACKED, ptr, p ? p->size : 0);
			break;
		}
		if (bpf_map_update_elem(&live, &ptr, p, BPF_ANY)) {
			count(KP_C_MAPFULL);
			emit(KP_RET_UNTRACKED, ptr, p->size);
			break;
		}
		account(g, p->fp, (__s64)p->size);
		break;
	}
	}
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(free_enter, __u64 ptr)
{
	if (!ours())
		return 0;
	count(KP_C_FREE);
	switch (variant) {
	case 'b':
	case 'c':
	case 'd':
	case 'f':
	case 'g':
	case 'y':
		emit(KP_FREE, ptr, 0);
		break;
	case 'e': {
		__u32 zero = 0;
		struct pending *p = bpf_map_lookup_elem(&live, &ptr);
		struct kp_global *g = bpf_map_lookup_elem(&global, &zero);
		if (!p || !g) {
			if (ptr)
				emit(KP_FREE_UNKNOWN, ptr, 0);
			break;
		}
		account(g, p->fp, -(__s64)p->size);
		bpf_map_delete_elem(&live, &ptr);
		break;
	}
	}
	return 0;
}
