/*
 * The fault path's programs (docs/fault-path.md): the kernel runs them at
 * every page fault and every change of a process's anonymous page count; for
 * the processes ptfil traces they write one record per page (or huge page)
 * made resident, with the faulting thread's registers and a copy of its
 * stack, into one ring buffer, in the order it happened. ptfil keeps the
 * ledger (tracer/kernel/faults.c). Built for the BPF target by clang
 * (Makefile.am) and embedded in ptfil; the few kernel structures read are
 * declared here with their field names only, relocated by CO-RE against the
 * running kernel's BTF.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "tracer/kernel/faults_rec.h"

char LICENSE[] SEC("license") = "GPL";

struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax;
	unsigned long ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));

struct mm_struct;

struct task_struct {
	struct mm_struct *mm;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	unsigned long vm_start, vm_end;
} __attribute__((preserve_access_index));

#define USER_END 0x00007ffffffff000ull  /* the end of user space with 4-level page tables */
#define MM_ANONPAGES 1
#define HUGE (2ull << 20)
#define X86_PF_PROT 1
#define X86_PF_WRITE 2

#define RING_CONFIG kf_config
#define RING_NCOUNTERS KF_NCOUNTERS
#define RING_C_STOPS KF_C_STOPS
#define RING_C_RETRIES KF_C_RETRIES
#include "tracer/kernel/ring.bpf.h"
#include "tracer/kernel/pyread.bpf.h"

/* The processes whose faults are recorded (tgid -> 1), kept by ptfil. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} tracked SEC(".maps");

/*
 * Per address space, by rss_stat's mm_id (a hash of the mm): its anonymous
 * bytes as last seen, and whose it is (learnt from its own threads' events).
 */
struct rss_seen {
	__s64 last;
	__u32 owner;
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct rss_seen);
} rss_last SEC(".maps");

/* Per thread: the write fault in flight on a missing page, waiting for the count to say what it brought. */
struct inflight {
	__u64 addr;
	__u64 err;   /* KF_KERNEL, and INFLIGHT_COW */
};
/*
 * A copy-on-write fault, written at once: the one-page rise of the count it
 * makes (a file's page or the zero page becoming anonymous) is its own, not
 * a rise for a scan to explain (a scan per relocated page of every library).
 */
#define INFLIGHT_COW (1ull << 63)
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct inflight);
} pending SEC(".maps");

/* Per process: its mremap calls (struct kf_moves); per thread: the one it is in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct kf_moves);
} moves SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} moving SEC(".maps");

/* Per thread: its stack's mapping [lo, hi), and the key of its last stack copy (with its Python frames' hash). */
struct stk {
	__u64 lo, hi;
	__u64 ip, sp, bp, top, py;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct stk);
} stacks SEC(".maps");

/* One record with its stack, built here (too big for the BPF stack) before it is copied into the ring. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kf_big);
} scratch SEC(".maps");

static long vma_bounds(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct stk *s = data;
	s->lo = BPF_CORE_READ(vma, vm_start);
	s->hi = BPF_CORE_READ(vma, vm_end);
	return 0;
}

/*
 * Up to KF_STACK_MAX bytes of stack from sp, clamped to the end of the
 * mapping that holds sp (looked up once per thread, again when sp leaves it),
 * and cut at the first page that is not resident (the main thread's stack
 * has an untouched gap below its strings). Returns the bytes copied, or 0.
 */
static __always_inline __u32 copy_stack(struct kf_big *r, struct stk *s, __u64 sp)
{
	__u64 len = s->hi > sp ? s->hi - sp : 0;
	if (len > KF_STACK_MAX)
		len = KF_STACK_MAX;
	len &= 2 * KF_STACK_MAX - 1;
	if (len > KF_STACK_MAX)
		len = KF_STACK_MAX;
	if (len && !bpf_probe_read_user(r->stack, len, (void *)sp))
		return (__u32)len;
	__u64 page = sp & ~4095ull;
	__u8 probe;
#pragma unroll
	for (int k = 1; k <= 2; k++) {
		__u64 p = page + k * 4096ull;
		if (p >= sp + len)
			break;
		if (bpf_probe_read_user(&probe, 1, (void *)p)) {
			len = (p - sp) & (2 * KF_STACK_MAX - 1);
			if (len > KF_STACK_MAX)
				len = KF_STACK_MAX;
			if (len && !bpf_probe_read_user(r->stack, len, (void *)sp)) {
				s->hi = p;
				return (__u32)len;
			}
			break;
		}
	}
	return 0;
}

static __always_inline void regs_of(struct kf_rec *h, struct pt_regs *u)
{
	h->regs[0] = BPF_CORE_READ(u, ip);
	h->regs[1] = BPF_CORE_READ(u, sp);
	h->regs[2] = BPF_CORE_READ(u, bp);
	h->regs[3] = BPF_CORE_READ(u, bx);
	h->regs[4] = BPF_CORE_READ(u, r12);
	h->regs[5] = BPF_CORE_READ(u, r13);
	h->regs[6] = BPF_CORE_READ(u, r14);
	h->regs[7] = BPF_CORE_READ(u, r15);
	h->regs[8] = BPF_CORE_READ(u, ax);
	h->regs[9] = BPF_CORE_READ(u, cx);
	h->regs[10] = BPF_CORE_READ(u, dx);
	h->regs[11] = BPF_CORE_READ(u, si);
	h->regs[12] = BPF_CORE_READ(u, di);
	h->regs[13] = BPF_CORE_READ(u, r8);
	h->regs[14] = BPF_CORE_READ(u, r9);
	h->regs[15] = BPF_CORE_READ(u, r10);
	h->regs[16] = BPF_CORE_READ(u, r11);
}

/*
 * Writes one record. With want_stack, the current thread's registers and,
 * unless its stack is the one it had at its previous record (same ip, sp, bp
 * and return address at sp: a loop filling memory, a read() faulting page
 * after page; in a Python process, the same Python frames too), a copy of it,
 * and its Python frames in a record of their own just before (pyread.bpf.h).
 */
static __always_inline void emit(__u32 kind, __u32 owner, __u64 addr, __s64 size, __u64 flags, __u64 rss,
				 int want_stack)
{
	__u32 zero = 0;
	struct kf_big *r = bpf_map_lookup_elem(&scratch, &zero);
	if (!r)
		return;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct kpy_scratch *py = NULL;
	r->h.kind = kind;
	r->h.tid = tid;
	r->h.tgid = (__u32)(id >> 32);
	r->h.owner = owner;
	r->h.addr = addr;
	r->h.size = size;
	r->h.time = bpf_ktime_get_ns();
	r->h.rss = rss;
	r->h.stack_len = 0;
	r->h.pad = 0;
	__builtin_memset(r->h.regs, 0, sizeof(r->h.regs));
	if (want_stack) {
		struct task_struct *task = bpf_get_current_task_btf();
		struct pt_regs *u = (struct pt_regs *)bpf_task_pt_regs(task);
		regs_of(&r->h, u);
		__u64 sp = r->h.regs[1], top = 0;
		bpf_probe_read_user(&top, sizeof(top), (void *)sp);
		/* The same native stack may run other Python code: its frames are part of the key. */
		py = (flags & KF_SELF) ? kpy_walk() : NULL;
		__u64 pyhash = py ? kpy_hash(py) : 0;
		struct stk *s = bpf_map_lookup_elem(&stacks, &tid);
		if (s && s->ip == r->h.regs[0] && s->sp == sp && s->bp == r->h.regs[2] && s->top == top && s->py == pyhash) {
			flags |= KF_SAME;
			count(KF_C_SAME);
		} else {
			struct stk n = {};
			if (!s || sp < s->lo || sp >= s->hi) {
				long err = bpf_find_vma(task, sp, vma_bounds, &n, 0);
				if (err || sp < n.lo || sp >= n.hi) {
					/* Not found (the lock was busy): try the whole window once, remember nothing. */
					n.lo = sp;
					n.hi = sp + KF_STACK_MAX;
				}
			} else {
				n.lo = s->lo;
				n.hi = s->hi;
			}
			__u32 len = copy_stack(r, &n, sp);
			if (len) {
				r->h.stack_len = len;
				flags |= KF_STACK;
				n.ip = r->h.regs[0];
				n.sp = sp;
				n.bp = r->h.regs[2];
				n.top = top;
				n.py = pyhash;
				bpf_map_update_elem(&stacks, &tid, &n, BPF_ANY);
				if (py && kpy_emit(py, KF_C_LOST, KF_C_PYSTOPS))
					flags |= KF_PY;
			} else {
				flags |= KF_NOSTACK;
				count(KF_C_STACKFAIL);
				bpf_map_delete_elem(&stacks, &tid);
			}
		}
	}
	r->h.flags = flags;
	__u64 n = sizeof(struct kf_rec) + (__u64)r->h.stack_len;
	if (n > sizeof(*r))
		n = sizeof(*r);
	__u64 wake = pressure_of((flags & KF_SELF) != 0);
	if (ring_output(r, n, wake))
		count(KF_C_LOST);
}

static __always_inline int fault(__u64 address, unsigned long error_code, __u64 mode)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = (__u32)(id >> 32), tid = (__u32)id;
	if (!bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	if (!(error_code & X86_PF_WRITE)) {
		count(KF_C_READS);
		return 0;
	}
	if (address >= USER_END)
		return 0;
	if (error_code & X86_PF_PROT) {
		/* A present page written: copy-on-write, or the zero page replaced. The count may not move (a copy). */
		emit(KF_COW, tgid, address & ~4095ull, 4096, KF_SELF | mode, 0, 1);
		struct inflight c = { .addr = address & ~4095ull, .err = mode | INFLIGHT_COW };
		bpf_map_update_elem(&pending, &tid, &c, BPF_ANY);
		return 0;
	}
	/* A missing page: the count's next move in this thread says what the fault brought in. */
	struct inflight f = { .addr = address & ~4095ull, .err = mode };
	struct inflight *old = bpf_map_lookup_elem(&pending, &tid);
	if (old && !(old->err & INFLIGHT_COW))
		count(KF_C_STALE);
	bpf_map_update_elem(&pending, &tid, &f, BPF_ANY);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(kf_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	return fault(address, error_code, 0);
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(kf_fault_kernel, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	return fault(address, error_code, KF_KERNEL);
}

/* kmem:rss_stat as the kernel writes it for a classic tracepoint (include/trace/events/kmem.h). */
struct rss_stat_args {
	__u64 common;
	__u32 mm_id;
	__u32 curr;
	__s32 member;
	__s32 pad;
	__s64 size;
};

/*
 * An address space's counter moved, in the context of the task that moved
 * it, after the change. A change in a thread with a fault in flight completes
 * that fault (4 KiB, or a huge page when it rose by 2 MiB or more: with
 * threads faulting at once one event may see another's page too); any other
 * rise, or a fall, is a record of its own.
 */
SEC("tracepoint/kmem/rss_stat")
int kf_rss(struct rss_stat_args *ctx)
{
	/* Each field read once: the verifier refuses a context pointer the compiler moved. */
	__s32 member = ctx->member;
	__u32 mm_id = ctx->mm_id, curr = ctx->curr;
	__s64 now = ctx->size;
	if (member != MM_ANONPAGES)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = (__u32)(id >> 32), tid = (__u32)id, owner;
	__u64 flags;
	struct rss_seen *seen = bpf_map_lookup_elem(&rss_last, &mm_id);
	if (curr) {
		if (!bpf_map_lookup_elem(&tracked, &tgid))
			return 0;
		owner = tgid;
		flags = KF_SELF;
		if (!seen || seen->owner != tgid) {
			/*
			 * First sight of this address space in its own process (after exec, a
			 * new process, an attach): no count before it, so no size. The fault
			 * may have made a huge page resident; ptfil reads which (KF_FIRST).
			 */
			struct rss_seen n = { .last = now, .owner = tgid };
			bpf_map_update_elem(&rss_last, &mm_id, &n, BPF_ANY);
			struct inflight *f = bpf_map_lookup_elem(&pending, &tid);
			if (f) {
				if (!(f->err & INFLIGHT_COW))
					emit(KF_FAULT, owner, f->addr, 4096, KF_SELF | KF_FIRST | f->err, (__u64)now, 1);
				bpf_map_delete_elem(&pending, &tid);
			}
			return 0;
		}
	} else {
		/* Another task moved it: a writer from outside, a kernel thread, the process's own exit. */
		if (!seen || !seen->owner)
			return 0;
		owner = seen->owner;
		struct task_struct *task = bpf_get_current_task_btf();
		flags = BPF_CORE_READ(task, mm) ? KF_OTHER : KF_KTHREAD;
	}
	__s64 delta = now - __sync_lock_test_and_set(&seen->last, now);
	if (flags & KF_SELF) {
		/*
		 * The count is the process's and the event this thread's: with threads
		 * faulting at once, another's event may have taken this one's rise (its
		 * delta 0, or less with a release meanwhile). The fault in flight made its
		 * page resident all the same.
		 */
		struct inflight *f = bpf_map_lookup_elem(&pending, &tid);
		if (f && (f->err & INFLIGHT_COW)) {
			bpf_map_delete_elem(&pending, &tid);
			if (delta == 4096)
				return 0;
			f = NULL;
		}
		if (f) {
			__s64 size = delta >= (__s64)HUGE ? (__s64)HUGE : 4096;
			__u64 addr = size == (__s64)HUGE ? f->addr & ~(HUGE - 1) : f->addr;
			__u64 err = f->err;
			bpf_map_delete_elem(&pending, &tid);
			emit(KF_FAULT, owner, addr, size, KF_SELF | err, (__u64)now, 1);
			return 0;
		}
	}
	if (!delta)
		return 0;
	if (delta < 0) {
		emit(KF_SHRINK, owner, 0, delta, flags, (__u64)now, 0);
		return 0;
	}
	/* A rise with no fault: the thread's own syscall (MAP_POPULATE, mlock, MADV_POPULATE_WRITE), or from outside. */
	emit(KF_GROW, owner, 0, delta, flags, (__u64)now, (flags & KF_SELF) != 0);
	return 0;
}

/*
 * mremap, at its entry and its return: a move is written into the ring in
 * its place among the faults, and counted, so that ptfil never takes the
 * pages it moved for pages released (faults.c, scan_released). The raw
 * syscall tracepoints, as this kernel lets a program attach to no syscall's
 * own function: every syscall of the machine passes a compare of its number.
 */
#define NR_MREMAP 25

SEC("tp_btf/sys_enter")
int BPF_PROG(kf_sys_enter, struct pt_regs *regs, long nr)
{
	if (nr != NR_MREMAP)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = (__u32)(id >> 32), tid = (__u32)id, one = 1;
	if (!bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	struct kf_moves zero = {};
	bpf_map_update_elem(&moves, &tgid, &zero, BPF_NOEXIST);
	struct kf_moves *m = bpf_map_lookup_elem(&moves, &tgid);
	if (!m || bpf_map_update_elem(&moving, &tid, &one, BPF_ANY))
		return 0;
	__sync_fetch_and_add(&m->begun, 1);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(kf_sys_exit, struct pt_regs *regs, long ret)
{
	if (BPF_CORE_READ(regs, orig_ax) != NR_MREMAP)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = (__u32)(id >> 32), tid = (__u32)id;
	if (!bpf_map_lookup_elem(&moving, &tid))
		return 0;
	bpf_map_delete_elem(&moving, &tid);
	struct kf_moves *m = bpf_map_lookup_elem(&moves, &tgid);
	if (!m)
		return 0;
	/* The arguments are still in the saved registers; the result is ret. */
	__u64 old = BPF_CORE_READ(regs, di), oldlen = (BPF_CORE_READ(regs, si) + 4095) & ~4095ull;
	__u64 newlen = (BPF_CORE_READ(regs, dx) + 4095) & ~4095ull;
	/* An error is -4095 ... -1; a user address is positive. */
	if (oldlen && (ret >= 0 || ret < -4095)) {
		__u32 zero = 0;
		struct kf_big *r = bpf_map_lookup_elem(&scratch, &zero);
		if (r) {
			__builtin_memset(&r->h, 0, sizeof(r->h));
			r->h.kind = KF_MOVE;
			r->h.tid = tid;
			r->h.tgid = tgid;
			r->h.owner = tgid;
			r->h.addr = old;
			r->h.size = (__s64)oldlen;
			r->h.flags = KF_SELF;
			r->h.time = bpf_ktime_get_ns();
			r->h.regs[KF_MOVE_TO] = (__u64)ret;
			r->h.regs[KF_MOVE_LEN] = newlen;
			r->h.regs[KF_MOVE_SEQ] = __sync_fetch_and_add(&m->moved, 1) + 1;
			if (ring_output(&r->h, sizeof(r->h), pressure_of(1))) {
				/* Lost (counted, and said at the end): not waited for. */
				__sync_fetch_and_add(&m->moved, -1);
				count(KF_C_LOST);
			}
		}
	}
	__sync_fetch_and_add(&m->finished, 1);
	return 0;
}
