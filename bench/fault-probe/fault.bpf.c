/*
 * The BPF side of the fault-path measurement (docs/fault-path.md): one record per page that
 * becomes resident in a traced process, from one of two hooks chosen before load:
 *   (t) the exceptions:page_fault_user / page_fault_kernel tracepoints, write faults only;
 *   (f) fentry on folio_add_new_anon_rmap, which every newly mapped anonymous folio passes
 *       through (faults, GUP populate, COW, khugepaged/MADV_COLLAPSE, swap-in of a new folio);
 *   (r) the fault tracepoints and the kmem:rss_stat tracepoint together: a write fault on a
 *       missing page is held per thread until the mm's anonymous page count moves in that
 *       thread, which gives its size (4 KiB, 2 MiB); a count that moves without a fault in
 *       flight (GUP populate, mlock, another process's process_vm_writev, khugepaged, a
 *       release) is a record of its own.
 * Each in three modes: count only, a record with the user registers, a record with up to
 * 8 KiB of user stack clamped to the end of the stack's mapping.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "fault.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by fault.c before load. */
const volatile __u32 target_tgid = 0;
const volatile __u32 mode = 1;		/* 0: count, 1: record, 2: record + stack */
const volatile __u32 dedup = 0;		/* 1: no stack copy when (ip, sp, bp) equal the thread's last */
const volatile __u64 wake_bytes = 1 << 20;	/* 0: the ringbuf's default wakeups */
const volatile __u64 bp_bytes = 0;	/* back-pressure: stop the writing thread past this */
const volatile __u32 bp_signal = 19;	/* SIGSTOP */
const volatile __u32 mech = 't';	/* 't', 'r' (the fault programs' behaviour) */
const volatile __u32 coalesce = 0;
const volatile __u32 attach_mode = 0;	/* the target was running before: learn its mm at its events */	/* (r) 1: a syscall's kernel-mode faults and GUP growth as runs */

#define PG_HEAD_BIT 6			/* enum pageflags PG_head on 6.18 (vmlinux.h) */
#define USER_END 0x00007ffffffff000ull	/* TASK_SIZE_MAX with 4-level paging */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);	/* resized by fault.c */
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Traced processes (tgid), and their address spaces (mm -> tgid): the launched program from
 * its exec, and every process forked from a traced one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} tracked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u32);
} mms SEC(".maps");

/* Per thread: its stack's mapping [lo, hi), from bpf_find_vma once, and the last stack key. */
struct stk {
	__u64 lo, hi;
	__u64 ip, sp, bp;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct stk);
} stacks SEC(".maps");

/* (r) per mm, by the tracepoint's mm_id (a hash of the mm pointer): its MM_ANONPAGES bytes as
 * last seen, and whose it is (0 while only its size is known: a fork child being copied). */
struct rss_seen {
	__s64 last;
	__u32 owner;
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct rss_seen);
} rss_last SEC(".maps");

/* (r) per mm pointer: its mm_id, to forget both when the mm goes (a new mm may reuse the memory,
 * and so the pointer and its hash). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u32);
} mm_ids SEC(".maps");

/* (r) per thread: the write fault in flight on a missing page. */
struct inflight {
	__u64 addr;
	__u64 err;
	__u64 emitted;	/* a fault on a present page (COW), already recorded */
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct inflight);
} pending SEC(".maps");

/* (r, -C) per thread: the pages of one syscall not yet written as a record, continuing the
 * thread's last record (same user ip and sp: the same call). */
struct run {
	__u64 ip, sp;
	__u64 start;	/* first page of the run, 0 for GUP growth (no address) */
	__u64 next;	/* the address that continues it */
	__u64 size;
	__u64 info;
	__u32 owner;
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct run);
} runs SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		(*c)++;
}

#define MM_ANON 1	/* MM_ANONPAGES */

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid, one = 1;
	__u64 mm = (__u64)p->mm;
	if (tgid != target_tgid && !bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	bpf_map_update_elem(&tracked, &tgid, &one, BPF_ANY);
	bpf_map_update_elem(&mms, &mm, &tgid, BPF_ANY);
	return 0;
}

/* An address space of a traced process is torn down (mm/mmap.c, after its pages are unmapped):
 * forget it before its memory serves another process's mm. */
SEC("tp_btf/exit_mmap")
int BPF_PROG(on_exit_mmap, struct mm_struct *mm)
{
	__u64 key = (__u64)mm;
	__u32 *id = bpf_map_lookup_elem(&mm_ids, &key);
	if (id) {
		__u32 i = *id;
		bpf_map_delete_elem(&rss_last, &i);
		bpf_map_delete_elem(&mm_ids, &key);
	}
	bpf_map_delete_elem(&mms, &key);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, one = 1;
	__u64 mm = (__u64)child->mm;
	if (child->pid != ctgid || !bpf_map_lookup_elem(&tracked, &ptgid))
		return 0;	/* a thread, or not ours */
	bpf_map_update_elem(&tracked, &ctgid, &one, BPF_ANY);
	bpf_map_update_elem(&mms, &mm, &ctgid, BPF_NOEXIST);	/* CLONE_VM without a thread: the parent's */
	return 0;
}

/* Past the wake mark the drainer is woken; past the back-pressure mark the writing thread is
 * sent a signal that stops it (under ptrace, a suppressible signal-delivery-stop). */
static __always_inline __u64 submit_flags(void)
{
	__u64 avail = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA);
	if (bp_bytes && avail >= bp_bytes) {
		bpf_send_signal_thread(bp_signal);
		count(FP_C_SIGNAL);
	}
	if (!wake_bytes)
		return 0;
	return avail >= wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static long vma_bounds(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	struct stk *s = data;
	s->lo = vma->vm_start;
	s->hi = vma->vm_end;
	return 0;
}

/* Copies the user stack from sp up to 8 KiB, clamped to the end of the mapping that holds sp
 * (found once per thread with bpf_find_vma, re-found when sp leaves it: a signal stack, a
 * coroutine). A read crossing the end would fail as a whole. Returns the bytes copied, or 0. */
static __always_inline __u32 copy_stack(struct fp_big *r, __u64 sp, __u64 ip, __u64 bp)
{
	__u32 tid = r->h.tid;
	struct stk *s = bpf_map_lookup_elem(&stacks, &tid);
	struct stk n = {};
	__u64 len;

	if (!s || sp < s->lo || sp >= s->hi) {
		count(FP_C_FINDVMA);
		n.ip = ip;
		n.sp = sp;
		n.bp = bp;
		long err = bpf_find_vma(bpf_get_current_task_btf(), sp, vma_bounds, &n, 0);
		if (err)
			count(FP_C_FINDVMA_ERR);
		if (err || sp < n.lo || sp >= n.hi) {
			/* Not found (the lock was busy, or the registers are not this mm's: an
			 * exec in progress): try the whole window once, remember nothing. */
			n.lo = sp;
			n.hi = sp + FP_STACK;
			s = &n;
		} else {
			bpf_map_update_elem(&stacks, &tid, &n, BPF_ANY);
			s = bpf_map_lookup_elem(&stacks, &tid);
			if (!s)
				return 0;
		}
	} else {
		s->ip = ip;
		s->sp = sp;
		s->bp = bp;
	}
	len = s->hi - sp;
	if (len >= FP_STACK)
		len = FP_STACK;
	else
		count(FP_C_CLAMPED);
	len &= (2 * FP_STACK - 1);
	if (len > FP_STACK)
		len = FP_STACK;
	if (len && !bpf_probe_read_user(r->stack, len, (void *)sp))
		return (__u32)len;
	/* A page in the window is not resident: the main thread's stack has a hole between its
	 * argument tables and its strings (the kernel's random offset, up to 8 KiB), never
	 * touched. Copy up to the first missing page, and take that as the thread's top from
	 * now on (the frames are all below it). */
	__u64 page = sp & ~4095ull;
	__u8 probe;
#pragma unroll
	for (int k = 1; k <= 2; k++) {
		__u64 p = page + k * 4096;
		if (p >= sp + len)
			break;
		if (bpf_probe_read_user(&probe, 1, (void *)p)) {
			len = (p - sp) & (2 * FP_STACK - 1);
			if (len > FP_STACK)
				len = FP_STACK;
			if (len && !bpf_probe_read_user(r->stack, len, (void *)sp)) {
				count(FP_C_HOLE);
				if (s != &n)
					s->hi = p;
				return (__u32)len;
			}
			break;
		}
	}
	/* The stack pointer's own page is missing (being faulted in), or the mapping
	 * changed: look it up again next time. */
	bpf_map_delete_elem(&stacks, &tid);
	count(FP_C_STACKFAIL);
	r->h.info |= FP_F_NOSTACK;
	return 0;
}

static __always_inline void fill(struct fp_rec *h, __u32 kind, __u32 owner, __u64 addr, __u64 size, __u64 info,
				 struct pt_regs *u)
{
	__u64 id = bpf_get_current_pid_tgid();
	h->kind = kind;
	h->tid = (__u32)id;
	h->tgid = (__u32)(id >> 32);
	h->owner = owner;
	h->addr = addr;
	h->size = size;
	h->info = info;
	h->stack_len = 0;
	h->pad = 0;
	if (!u) {
		__builtin_memset(h->regs, 0, sizeof(h->regs));
		return;
	}
	h->regs[FP_RIP] = BPF_CORE_READ(u, ip);
	h->regs[FP_RSP] = BPF_CORE_READ(u, sp);
	h->regs[FP_RBP] = BPF_CORE_READ(u, bp);
	h->regs[FP_RBX] = BPF_CORE_READ(u, bx);
	h->regs[FP_R12] = BPF_CORE_READ(u, r12);
	h->regs[FP_R13] = BPF_CORE_READ(u, r13);
	h->regs[FP_R14] = BPF_CORE_READ(u, r14);
	h->regs[FP_R15] = BPF_CORE_READ(u, r15);
	h->regs[FP_RAX] = BPF_CORE_READ(u, ax);
	h->regs[FP_RCX] = BPF_CORE_READ(u, cx);
	h->regs[FP_RDX] = BPF_CORE_READ(u, dx);
	h->regs[FP_RSI] = BPF_CORE_READ(u, si);
	h->regs[FP_RDI] = BPF_CORE_READ(u, di);
	h->regs[FP_R8] = BPF_CORE_READ(u, r8);
	h->regs[FP_R9] = BPF_CORE_READ(u, r9);
	h->regs[FP_R10] = BPF_CORE_READ(u, r10);
	h->regs[FP_R11] = BPF_CORE_READ(u, r11);
}

/* (D) whether this thread's previous stack record had the same (ip, sp, bp): then the stack is
 * taken to be the same and not copied again (a loop filling memory, a syscall faulting page
 * after page). Updates the remembered key. */
static __always_inline int same_stack(struct pt_regs *u)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct stk *s = bpf_map_lookup_elem(&stacks, &tid);
	__u64 ip = BPF_CORE_READ(u, ip), sp = BPF_CORE_READ(u, sp), bp = BPF_CORE_READ(u, bp);
	if (!s)
		return 0;	/* copy_stack makes the entry */
	if (s->ip == ip && s->sp == sp && s->bp == bp)
		return 1;
	return 0;
}

static __always_inline void emit(__u32 kind, __u32 owner, __u64 addr, __u64 size, __u64 info, struct pt_regs *u)
{
	count(FP_C_EVENTS);
	if (mode == 0)
		return;
	if (mode == 2 && u && dedup && same_stack(u)) {
		count(FP_C_SAME);
		info |= FP_F_SAMESTACK;
	} else if (mode == 2 && u) {
		struct fp_big *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
		if (!r) {
			count(FP_C_LOST);
			submit_flags();
			return;
		}
		fill(&r->h, kind, owner, addr, size, info, u);
		r->h.stack_len = copy_stack(r, r->h.regs[FP_RSP], r->h.regs[FP_RIP], r->h.regs[FP_RBP]);
		bpf_ringbuf_submit(r, submit_flags());
		return;
	}
	struct fp_rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
	if (!r) {
		count(FP_C_LOST);
		submit_flags();
		return;
	}
	fill(r, kind, owner, addr, size, info, u);
	bpf_ringbuf_submit(r, submit_flags());
}

static __always_inline void run_flush(__u32 tid);

static __always_inline int fault(__u64 address, unsigned long error_code, __u32 kind)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	if (!(error_code & 2)) {	/* X86_PF_WRITE */
		count(FP_C_READ);
		return 0;
	}
	if (address >= USER_END)
		return 0;
	if (attach_mode) {
		__u64 mm = (__u64)bpf_get_current_task_btf()->mm;
		if (!bpf_map_lookup_elem(&mms, &mm))
			bpf_map_update_elem(&mms, &mm, &tgid, BPF_NOEXIST);
	}
	if (kind == FP_FAULT_KERNEL)
		count(FP_C_KERNEL_MODE);
	/* The thread's user registers: for a user-mode fault the tracepoint's regs are those;
	 * for a kernel-mode one they are the kernel's, and the user's are at the top of its
	 * kernel stack (the syscall's entry). Both are what bpf_task_pt_regs returns. */
	struct pt_regs *u = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (mech == 'r') {
		/* A missing page: wait for the rss count to say what the fault made resident. A
		 * present one (X86_PF_PROT: copy-on-write, the zero page written): record it now,
		 * it changes whose the page is but maybe not the count. */
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct inflight f = { .addr = address, .err = error_code, .emitted = error_code & 1 };
		struct inflight *old = bpf_map_lookup_elem(&pending, &tid);
		if (old && !old->emitted)
			count(FP_C_STALE);	/* retried, or it made no anonymous page */
		bpf_map_update_elem(&pending, &tid, &f, BPF_ANY);
		if (!(error_code & 1))
			return 0;
		if (coalesce)
			run_flush(tid);
	}
	emit(kind, tgid, address, 4096, error_code, u);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	return fault(address, error_code, FP_FAULT_USER);
}

SEC("tp_btf/page_fault_kernel")
int BPF_PROG(fault_kernel, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	return fault(address, error_code, FP_FAULT_KERNEL);
}

/* Every new anonymous folio mapped into a process (mm/rmap.c): called with the page table
 * lock held (spinning, preemption off) from do_anonymous_page, wp_page_copy, do_cow_fault's
 * set_pte_range, the huge-PMD fault, collapse_huge_page, do_swap_page (a folio that bypassed
 * the swap cache), userfaultfd's copy. */
SEC("fentry/folio_add_new_anon_rmap")
int BPF_PROG(new_anon, struct folio *folio, struct vm_area_struct *vma, unsigned long address, int flags)
{
	__u64 mm = (__u64)vma->vm_mm;
	__u32 *owner = bpf_map_lookup_elem(&mms, &mm);
	if (!owner)
		return 0;
	__u32 own = *owner;
	__u64 size = 4096, info = (__u32)flags;
	if (folio->flags.f & (1ull << PG_HEAD_BIT)) {
		size = (__u64)folio->_nr_pages * 4096;
		count(FP_C_LARGE);
	}
	struct task_struct *cur = bpf_get_current_task_btf();
	struct pt_regs *u = NULL;
	if (!cur->mm) {
		info |= FP_F_KTHREAD;
		count(FP_C_KTHREAD);
	} else if ((__u64)cur->mm == mm) {
		info |= FP_F_SELF;
		u = (struct pt_regs *)bpf_task_pt_regs(cur);
	} else {
		info |= FP_F_OTHER;
		count(FP_C_OTHER);
		u = (struct pt_regs *)bpf_task_pt_regs(cur);	/* the writer's, for its pid and ip */
	}
	emit(FP_FOLIO, own, address, size, info, u);
	return 0;
}

/* (-C) Writes the thread's run, if it has one, as a record: before any other record of the
 * thread, and at the end of its syscall. */
static __always_inline void run_flush(__u32 tid)
{
	struct run *rn = bpf_map_lookup_elem(&runs, &tid);
	if (!rn)
		return;
	if (rn->size) {
		struct fp_rec *r = bpf_ringbuf_reserve(&rb, sizeof(*r), 0);
		if (r) {
			fill(r, FP_RUN, rn->owner, rn->start, rn->size, rn->info | FP_F_SAMESTACK, NULL);
			r->regs[FP_RIP] = rn->ip;
			r->regs[FP_RSP] = rn->sp;
			bpf_ringbuf_submit(r, submit_flags());
			count(FP_C_RUN_FLUSH);
		} else {
			count(FP_C_LOST);
		}
	}
	bpf_map_delete_elem(&runs, &tid);
}

/* (-C) Folds a kernel-mode fault or a GUP growth into the thread's run when it continues it;
 * else flushes the run and starts a new one after this record (which the caller emits).
 * Returns 1 when folded. */
static __always_inline int run_fold(__u32 tid, __u32 own, struct pt_regs *u, __u64 addr, __u64 size, __u64 info)
{
	__u64 ip = BPF_CORE_READ(u, ip), sp = BPF_CORE_READ(u, sp);
	struct run *rn = bpf_map_lookup_elem(&runs, &tid);
	if (rn && rn->ip == ip && rn->sp == sp && rn->owner == own && (addr ? addr == rn->next : !rn->next)) {
		if (!rn->size)
			rn->start = addr;
		rn->size += size;
		rn->next = addr ? addr + size : 0;
		count(FP_C_RUN_EXTEND);
		return 1;
	}
	run_flush(tid);
	struct run n = { .ip = ip, .sp = sp, .next = addr ? addr + size : 0, .info = info, .owner = own };
	bpf_map_update_elem(&runs, &tid, &n, BPF_ANY);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&tracked, &tgid))
		return 0;
	run_flush((__u32)bpf_get_current_pid_tgid());
	return 0;
}

/* (r) An mm's rss counter moved (include/linux/mm.h add_mm_counter, after the update, in the
 * context of the task that moved it). A classic tracepoint program: its record carries the
 * counter's exact value (percpu_counter_sum_positive), which a tp_btf program would have to
 * add up from every CPU's part itself; but it names the mm only by a hash (mm_id), and
 * whether it is current's (curr). */
struct rss_stat_args {
	__u64 common;
	__u32 mm_id;
	__u32 curr;
	__s32 member;
	__s32 pad;
	__s64 size;
};

SEC("tp/kmem/rss_stat")
int rss(struct rss_stat_args *ctx)
{
	if (ctx->member != MM_ANON)
		return 0;
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 id = ctx->mm_id, own = 0;
	__s64 size_now = ctx->size;
	__u64 info = 0, addr = 0;
	struct pt_regs *u = NULL;
	struct rss_seen *seen = bpf_map_lookup_elem(&rss_last, &id);
	if (ctx->curr) {
		__u64 mm = (__u64)cur->mm;
		__u32 *o = bpf_map_lookup_elem(&mms, &mm);
		if (!o && attach_mode) {
			__u32 tgid = bpf_get_current_pid_tgid() >> 32;
			if (!bpf_map_lookup_elem(&tracked, &tgid))
				return 0;
			bpf_map_update_elem(&mms, &mm, &tgid, BPF_NOEXIST);
			o = bpf_map_lookup_elem(&mms, &mm);
		}
		if (!o)
			return 0;
		own = *o;
		info |= FP_F_SELF;
		u = (struct pt_regs *)bpf_task_pt_regs(cur);
		if (!seen || !seen->owner) {
			/* First sight in its own process: an exec'd mm counts from 0, a fork
			 * child from what its parent's copy left (seen->last), an attached
			 * process from now (what it had is [before attach]). */
			struct rss_seen n = { .last = seen ? seen->last : attach_mode ? size_now : 0, .owner = own };
			bpf_map_update_elem(&rss_last, &id, &n, BPF_ANY);
			bpf_map_update_elem(&mm_ids, &mm, &id, BPF_ANY);
			seen = bpf_map_lookup_elem(&rss_last, &id);
			if (!seen)
				return 0;
		}
	} else {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;
		if (!seen) {
			/* Another mm changed by a traced process: its fork child being copied
			 * (dup_mmap), whose baseline this is; or memory it wrote elsewhere. */
			if (!bpf_map_lookup_elem(&tracked, &tgid))
				return 0;
			struct rss_seen n = { .last = ctx->size };
			bpf_map_update_elem(&rss_last, &id, &n, BPF_ANY);
			return 0;
		}
		if (!seen->owner) {
			seen->last = ctx->size;
			return 0;
		}
		own = seen->owner;
		/* current->mm is NULL in a kernel thread, and also in the process's own exit
		 * (exit_mmap runs after exit_mm): releases there look like a kernel thread's. */
		info |= cur->mm ? FP_F_OTHER : FP_F_KTHREAD;
	}
	__s64 delta = ctx->size - __sync_lock_test_and_set(&seen->last, ctx->size);
	struct inflight *f = NULL;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (info & FP_F_SELF)
		f = bpf_map_lookup_elem(&pending, &tid);
	if (f) {
		/* This thread's write fault made its page(s) resident. The count is the whole
		 * process's: with threads faulting at once, one event may see another's page
		 * too and the other then none (or a release's decrease), so the size is the
		 * fault's own: a huge page when the count rose by at least 2 MiB, else 4 KiB. */
		__u64 size = delta >= (2 << 20) ? (2 << 20) : 4096;
		int done = f->emitted && size == 4096;	/* the zero page written: charged already */
		addr = f->addr;
		info |= f->err;
		bpf_map_delete_elem(&pending, &tid);
		count(FP_C_RSS_FAULT);
		if (done)
			return 0;
		if (coalesce) {
			if (!(info & 4) && u) {	/* X86_PF_USER clear: a fault inside a syscall */
				if (run_fold(tid, own, u, addr & ~4095ull, size, info))
					return 0;
			} else {
				run_flush(tid);
			}
		}
		emit(FP_RSS, own, addr, size, info, u);
		return 0;
	}
	if (!delta)
		return 0;
	count(FP_C_RSS);
	if (delta < 0) {
		count(FP_C_RSS_NEG);
		u = NULL;	/* a release: no stack wanted */
	} else if (info & FP_F_KTHREAD) {
		count(FP_C_KTHREAD);
	} else if (info & FP_F_OTHER) {
		count(FP_C_OTHER);
	} else if (coalesce && u) {
		/* Growth in the thread's own syscall (GUP): no address, so the run is its size. */
		if (run_fold(tid, own, u, 0, (__u64)delta, info))
			return 0;
	}
	emit(FP_RSS, own, addr, (__u64)delta, info, u);
	return 0;
}
