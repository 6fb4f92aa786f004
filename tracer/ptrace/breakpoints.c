/*
 * The malloc family as seen at its breakpoints: an entry stop (note the
 * arguments, point the return address at the trampoline, let the call run
 * and unwind its stack meanwhile), a return stop
 * (the result), the linker's load event (arm new objects). glibc's malloc
 * takes one stop, on its own ret instructions: block, usable size and stack
 * at once (tracer/ptrace/hooks.h). Each displaced instruction is emulated, so no
 * thread ever runs past a hook unseen.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/error.h"
#include "tracer/core/remote.h"
#include "tracer/core/rescue.h"
#include "tracer/core/session.h"
#include "tracer/memory/alloc.h"
#include "tracer/ptrace/breakpoints.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/ptrace/mapcalls.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/stacks.h"
#include "tracer/stacks/unwind.h"

static int mem_read(void *arg, uint64_t addr, void *buf, size_t n)
{
	return remote_read(*(pid_t *)arg, addr, buf, n);
}

static int mem_write(void *arg, uint64_t addr, const void *buf, size_t n)
{
	return remote_write(*(pid_t *)arg, addr, buf, n);
}

/*
 * Writes the emulated instruction makes, held back so that they go into the
 * target with the trampoline's in one system call.
 */
struct held {
	pid_t tid;
	int n;
	uint64_t addr[2];
	uint64_t val[2];
	size_t len[2];
};

static int held_write(void *arg, uint64_t addr, const void *buf, size_t n)
{
	struct held *h = arg;
	if (h->n == 2 || n > 8)
		return mem_write(&h->tid, addr, buf, n);
	h->addr[h->n] = addr;
	h->len[h->n] = n;
	memcpy(&h->val[h->n], buf, n);
	h->n++;
	return 0;
}

static int held_read(void *arg, uint64_t addr, void *buf, size_t n)
{
	return mem_read(&((struct held *)arg)->tid, addr, buf, n);
}

static int held_flush(struct held *h)
{
	if (!h->n)
		return 0;
	struct iovec l[2], r[2];
	size_t total = 0;
	for (int i = 0; i < h->n; i++) {
		l[i].iov_base = &h->val[i];
		l[i].iov_len = h->len[i];
		r[i].iov_base = (void *)(uintptr_t)h->addr[i];
		r[i].iov_len = h->len[i];
		total += h->len[i];
	}
	if (process_vm_writev(h->tid, l, (unsigned long)h->n, r, (unsigned long)h->n, 0) == (ssize_t)total)
		return 0;
	for (int i = 0; i < h->n; i++)
		if (mem_write(&h->tid, h->addr[i], &h->val[i], h->len[i]))
			return -1;
	return 0;
}

/*
 * Runs the displaced instruction for the thread, with h's writes (if any)
 * going in at the same time, and restarts it.
 */
static void emulate_and_go(struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs, struct held *h)
{
	struct held local = { .tid = t->tid };
	if (!h)
		h = &local;
	struct emu_mem mem = { held_read, held_write, h };
	regs->rip = b->addr;
	if (emu_apply(&b->insn, b->addr, regs, &mem) || held_flush(h)) {
		/* The thread cannot go on correctly: let it meet the int3 as the program would. */
		error("cannot emulate the instruction at %#llx for thread %d; the program gets SIGTRAP",
		      (unsigned long long)b->addr, (int)t->tid);
		ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)SIGTRAP);
		return;
	}
	if (ptrace(PTRACE_SETREGS, t->tid, 0, regs) && errno != ESRCH)
		error_errno("cannot set the registers of thread %d", (int)t->tid);
	if (ptrace(PTRACE_CONT, t->tid, 0, 0) && errno != ESRCH)
		error_errno("cannot restart thread %d", (int)t->tid);
}

/*
 * Points the return address of the call now entering b at the trampoline, so
 * that its return stops, notes the call, and runs the displaced instruction.
 */
static void hijack_and_go(struct tracer *T, struct tracee *t, const struct hook_bp *b,
			  struct user_regs_struct *regs, uint32_t stack)
{
	struct proc *p = t->p;
	struct bp_return *r = t->ret;
	uint64_t ret;
	/* The return address is in the stack copy the unwinder took at this stop, if it took one. */
	int copied = stack != STACKS_FAILED && unwind_copied_word(T->unw, t->tid, regs->rsp, &ret) == 0;
	if (r->armed || !p->hooks->trampoline_armed || (!copied && mem_read(&t->tid, regs->rsp, &ret, 8))) {
		/* No way to see the return: the call goes uncounted, the program unharmed. */
		if (!HOOK_IS_WRAPPER(b->fn))
			alloc_forget(t);
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	struct held h = { .tid = t->tid, .n = 1, .addr = { regs->rsp }, .val = { p->hooks->trampoline }, .len = { 8 } };
	r->armed = 1;
	r->fn = b->fn;
	r->ret = ret;
	r->rsp = regs->rsp;
	rescue_return(t->rescue, regs->rsp, ret, p->hooks->trampoline);
	emulate_and_go(t, b, regs, &h);
}

/*
 * What the return slot of thread t's allocating call in flight holds (the
 * sink's test of whether a longjmp left it: memory/alloc.h), when that call's
 * return is ours to take. The slot holds the trampoline while the call can
 * return through it; any call made since from that depth or above has
 * overwritten it. The stack pointer alone cannot say: a signal handler on an
 * alternate stack mapped above the thread's stack runs at a higher address
 * while the outer call waits. A call whose return the kernel took (the
 * kernel path, whose mapping calls still stop here under attach) is not
 * read: the stack pointer decides.
 */
static enum alloc_slot return_slot(struct tracee *t)
{
	uint64_t slot;
	if (!alloc_active(t) || !t->ret->armed || HOOK_IS_WRAPPER(t->ret->fn))
		return ALLOC_SLOT_UNKNOWN;
	if (mem_read(&t->tid, t->call->sp, &slot, 8))
		return ALLOC_SLOT_OVERWRITTEN; /* unmapped: nothing can return through it */
	return slot == t->p->hooks->trampoline ? ALLOC_SLOT_OURS : ALLOC_SLOT_OVERWRITTEN;
}

/* A hooked call entered or returned at stack pointer sp: the allocating call in flight, if its frame is gone, is forgotten. */
static void check_left_behind(struct tracee *t, uint64_t sp)
{
	int ours = t->ret->armed && !HOOK_IS_WRAPPER(t->ret->fn);
	if (alloc_left_behind(t, sp, return_slot(t)) && ours) {
		t->ret->armed = 0;
		rescue_return_done(t->rescue);
	}
}

/*
 * Whether the call entering at b is followed. The malloc family asks the
 * sink (a call inside the one in flight is nested). A mapping call's wrapper
 * or sigaltstack is followed unless a return of ours is armed (then it is
 * the allocator's, nested as the sink counts it): inside a call the kernel
 * path follows, the mapping calls decide themselves (ptrace/mapcalls.h).
 */
static int follow_entry(struct tracer *T, struct tracee *t, const struct hook_bp *b)
{
	if (!HOOK_IS_WRAPPER(b->fn) || t->ret->armed)
		return alloc_follow(T, t) && !t->ret->armed;
	return t->p->profiled && t->p->ready;
}

static void on_wrapper(struct tracer *T, struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs);

/* glibc's chunk size word of the block at ptr (the word before it), or 0 when it cannot be read. */
static uint64_t chunk_word(struct tracee *t, uint64_t ptr)
{
	uint64_t word;
	if (ptr < 8 || mem_read(&t->tid, ptr - 8, &word, 8))
		return 0;
	return word;
}

/* The usable size of glibc's block at ptr (memory/alloc.h), 0 when its chunk header cannot be read or makes no sense. */
static uint64_t usable_size(struct tracee *t, uint64_t ptr)
{
	return alloc_chunk_usable(chunk_word(t, ptr));
}

/* A function hooked at its returns (glibc's malloc, calloc) returns: its block is charged, with the stack as it is. */
static void on_exit_bp(struct tracer *T, struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	check_left_behind(t, regs->rsp);
	uint64_t ptr = regs->rax;
	if (!alloc_follow(T, t) || !ptr) {
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	uint64_t size = usable_size(t, ptr);
	uint32_t stack = STACKS_ROOT;
	if (size) {
		/*
		 * At a ret, as at the entry, the return address is at the stack
		 * pointer and every callee-saved register is the caller's: the
		 * unwind from the entry is the same, and the stack then reads as
		 * the entry hook's did, whichever ret was taken.
		 */
		const struct hooks_exit_fn *xf = hooks_exit_fn_at(p->hooks, b->addr);
		regs->rip = xf ? xf->lo : b->addr;
		stack = capture_stack(T, t, regs);
	}
	alloc_block(T, t, ptr, size, stack);
	emulate_and_go(t, b, regs, NULL);
}

static void on_entry(struct tracer *T, struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs)
{
	/* The outer call's frame may be gone (a longjmp out of it): it will never return through us. */
	check_left_behind(t, regs->rsp);
	if (!follow_entry(T, t, b)) {
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	if (b->fn == HOOK_SIGALTSTACK) {
		/* Attach on the kernel path: a signal stack above the stack moves the process to breakpoints. */
		const struct hook_bp copy = *b; /* hooks_scan may move the table */
		if (T->on_sigaltstack)
			T->on_sigaltstack(T, t, regs->rdi, regs->rsp);
		emulate_and_go(t, &copy, regs, NULL);
		return;
	}
	if (HOOK_IS_WRAPPER(b->fn)) {
		on_wrapper(T, t, b, regs);
		return;
	}
	if (b->fn == HOOK_FREE) {
		/* One stop: the block goes now (its memory is still there to measure). */
		alloc_free(T, t, regs->rdi);
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	uint64_t args[3] = { regs->rdi, regs->rsi, regs->rdx };
	alloc_enter(T, t, (enum alloc_fn)b->fn, args, regs->rsp,
		    !t->p->hooks->exact_sizes && modreg_is_glibc(T->reg, b->gid));
	regs->rip = b->addr;
	/*
	 * The stack is copied now and unwound once the thread runs again: the
	 * unwind overlaps the call, whose return waits for it. The call leaves
	 * the frames above its entry stack pointer alone.
	 */
	struct user_regs_struct at_entry = *regs;
	capture_begin(T, t, &at_entry);
	hijack_and_go(T, t, b, regs, STACKS_ROOT); /* copied; its stack follows */
	if (alloc_active(t))
		alloc_set_stack(t, capture_finish(T, t));
}

/* The syscall each wrapper makes. */
static long wrapper_nr(enum hook_fn fn)
{
	switch (fn) {
	case HOOK_MMAP: return SYS_mmap;
	case HOOK_MUNMAP: return SYS_munmap;
	case HOOK_MREMAP: return SYS_mremap;
	case HOOK_MADVISE: return SYS_madvise;
	default: return SYS_brk;
	}
}

/* libc's idea of the break, which is the kernel's after any brk call. 0 when unknown. */
static uint64_t read_curbrk(struct tracee *t)
{
	uint64_t cur = 0;
	if (!t->p->hooks->curbrk || mem_read(&t->tid, t->p->hooks->curbrk, &cur, 8))
		return 0;
	return cur;
}

/* A mapping call's libc wrapper (attach mode): what a seccomp stop and a syscall exit do in launch mode. */
static void on_wrapper(struct tracer *T, struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	/* The C calling convention: the fourth argument is in rcx, not r10 as for the syscall. */
	uint64_t a[6] = { regs->rdi, regs->rsi, regs->rdx, regs->rcx, regs->r8, regs->r9 };
	if (b->fn == HOOK_BRK) {
		uint64_t cur = read_curbrk(t);
		if (!cur) {
			emulate_and_go(t, b, regs, NULL);
			return;
		}
		long ps = sysconf(_SC_PAGESIZE);
		p->brk_cur = (cur + (uint64_t)ps - 1) & ~((uint64_t)ps - 1);
	}
	t->sc->stack = STACKS_FAILED;
	if (!sysc_begin(T, t, wrapper_nr(b->fn), a, regs)) {
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	regs->rip = b->addr;
	uint32_t stack = STACKS_FAILED;
	if ((b->fn == HOOK_MMAP && (a[3] & MAP_ANONYMOUS)) || b->fn == HOOK_MREMAP || b->fn == HOOK_BRK)
		stack = t->sc->stack = capture_stack(T, t, regs);
	hijack_and_go(T, t, b, regs, stack);
}

/* The hooked call returned to the trampoline (regs as there): notes its result and sends it where it was going. */
static void finish_call(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	struct bp_return *r = t->ret;
	r->armed = 0;
	if (HOOK_IS_WRAPPER(r->fn)) {
		/* brk's wrapper returns 0 or -1; the break it reached is in __curbrk. */
		uint64_t ret = regs->rax;
		if (r->fn == HOOK_BRK) {
			uint64_t cur = read_curbrk(t);
			ret = cur ? cur : (uint64_t)-ENOMEM;
		}
		sysc_end(T, t, ret, regs);
		t->sc->stack = STACKS_FAILED;
	} else if (alloc_active(t)) {
		/* posix_memalign returns 0 and its block through its first argument. */
		uint64_t block = 0;
		if (t->call->fn == ALLOC_POSIX_MEMALIGN && regs->rax == 0 && mem_read(&t->tid, t->call->args[0], &block, 8))
			block = 0;
		uint64_t ptr = t->call->fn == ALLOC_POSIX_MEMALIGN ? block : regs->rax;
		alloc_exit(T, t, regs->rax, block, t->call->usable && ptr ? chunk_word(t, ptr) : 0);
	}
	regs->rip = r->ret;
}

static void on_return(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	if (!t->ret->armed) {
		/* Only a hijacked return comes here; without one the program would fault. */
		error("thread %d reached ptfil's return trampoline with no call in progress", (int)t->tid);
		ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)SIGTRAP);
		return;
	}
	finish_call(T, t, regs);
	if (ptrace(PTRACE_SETREGS, t->tid, 0, regs) && errno != ESRCH)
		error_errno("cannot set the registers of thread %d", (int)t->tid);
	rescue_return_done(t->rescue);
	if (ptrace(PTRACE_CONT, t->tid, 0, 0) && errno != ESRCH)
		error_errno("cannot restart thread %d", (int)t->tid);
}

static void on_load(struct tracer *T, struct tracee *t, const struct hook_bp *bp, struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	/* hooks_scan may grow (move) the table bp points into. */
	const struct hook_bp copy = *bp, *b = &copy;
	if (p->profiled && p->ready) {
		if (capture_load_maps(T, p) == 0) {
			if (hooks_scan(p->hooks, t->tid, p->mm, T->reg))
				warning("process %d: some malloc-family hooks are missing", (int)p->pid);
		}
	}
	emulate_and_go(t, b, regs, NULL);
}

/*
 * A probed wrapper's call begins: what a breakpoint's entry did. stopped:
 * the thread waits at its probe's stop, so its stack is unwound now; else
 * (its stop came too late, the call done) it is charged to no stack.
 */
static void begin_kernel_call(struct tracer *T, struct tracee *t, int fn, struct user_regs_struct *entry, int stopped)
{
	struct proc *p = t->p;
	uint64_t a[6] = { entry->rdi, entry->rsi, entry->rdx, entry->rcx, entry->r8, entry->r9 };
	t->sc->stack = STACKS_FAILED;
	t->sc->kawait = 0;
	if (fn == HOOK_BRK) {
		uint64_t cur = read_curbrk(t);
		if (!cur)
			return;
		long ps = sysconf(_SC_PAGESIZE);
		p->brk_cur = (cur + (uint64_t)ps - 1) & ~((uint64_t)ps - 1);
	}
	/* Inside a call the kernel path follows, the mapping calls decide themselves (ptrace/mapcalls.h). */
	if (!sysc_begin(T, t, wrapper_nr((enum hook_fn)fn), a, entry))
		return;
	/*
	 * The stack now, the thread stopped one instruction in: that
	 * instruction left everything above the entry's stack pointer as it was.
	 * The result comes while the thread runs on: nothing is unwound then.
	 */
	if (stopped && ((fn == HOOK_MMAP && (a[3] & MAP_ANONYMOUS)) || fn == HOOK_MREMAP || fn == HOOK_BRK))
		t->sc->stack = capture_stack(T, t, entry);
	if (t->sc->stack == STACKS_FAILED)
		t->sc->stack = STACKS_ROOT;
	t->sc->kawait = 1;
}

int bp_kernel_call(struct tracer *T, struct tracee *t, int fn, struct user_regs_struct *entry)
{
	struct proc *p = t->p;
	if (!p->profiled || !p->ready)
		return STOP_BACKPRESSURE;
	if (fn == HOOK_DL_DEBUG) {
		/* A library came or went: its functions are probed before the thread runs on into its code. */
		if (capture_load_maps(T, p) == 0 && hooks_scan(p->hooks, t->tid, p->mm, T->reg))
			warning("process %d: some malloc-family hooks are missing", (int)p->pid);
		return STOP_DL_DEBUG;
	}
	if (fn == HOOK_SIGALTSTACK) {
		if (T->on_sigaltstack)
			T->on_sigaltstack(T, t, entry->rdi, entry->rsp);
		return STOP_BP_WRAPPER;
	}
	if (fn < HOOK_MMAP || fn > HOOK_BRK)
		return STOP_BACKPRESSURE;
	begin_kernel_call(T, t, fn, entry, 1);
	return STOP_BP_WRAPPER;
}

void bp_kernel_return(struct tracer *T, struct tracee *t, uint64_t ret)
{
	struct sc_call *sc = t->sc;
	if (sc->kpending) {
		/*
		 * The call ran before its stop (the stop signal blocked by the
		 * thread): what it released was not measured first; it is charged
		 * and released as it came.
		 */
		sc->kpending = 0;
		if (sc->kfn >= HOOK_MMAP && sc->kfn <= HOOK_BRK)
			begin_kernel_call(T, t, sc->kfn, &sc->kregs, 0);
	}
	if (!sc->kawait)
		return;
	sc->kawait = 0;
	/* The raw system call's result: brk's is the break it reached, the wrapper's 0 or -1. */
	sysc_end(T, t, ret, &sc->kregs);
	sc->stack = STACKS_FAILED;
}

int bp_owns(const struct tracee *t, const struct user_regs_struct *regs)
{
	uint64_t at = regs->rip - 1;
	const struct hooks *h = t->p->hooks;
	if (h->trampoline_armed && at == h->trampoline)
		return t->ret->armed;
	return hooks_find(h, at) != NULL;
}

void bp_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	uint64_t at = regs->rip - 1;
	struct hooks *h = t->p->hooks;
	if (h->trampoline_armed && at == h->trampoline) {
		/* The mapping calls' wrappers (attach) are counted apart: the malloc family's stops have a budget. */
		tracer_count_stop(T, t, t->ret->armed && HOOK_IS_WRAPPER(t->ret->fn) ? STOP_BP_WRAPPER : STOP_BP_RETURN);
		on_return(T, t, regs);
		return;
	}
	const struct hook_bp *b = hooks_find(h, at);
	if (b->fn == HOOK_DL_DEBUG) {
		tracer_count_stop(T, t, STOP_DL_DEBUG);
		on_load(T, t, b, regs);
	} else if (b->at_exit) {
		tracer_count_stop(T, t, STOP_BP_RETURN);
		on_exit_bp(T, t, b, regs);
	} else {
		tracer_count_stop(T, t, HOOK_IS_WRAPPER(b->fn) ? STOP_BP_WRAPPER : STOP_BP_ENTRY);
		on_entry(T, t, b, regs);
	}
}

void bp_park_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	uint64_t at = regs->rip - 1;
	struct hooks *h = t->p->hooks;
	if (h->trampoline_armed && at == h->trampoline)
		finish_call(T, t, regs);
	else
		regs->rip = at; /* the original instruction goes back in: the thread runs it as if never stopped */
	if (ptrace(PTRACE_SETREGS, t->tid, 0, regs) && errno != ESRCH)
		error_errno("cannot set the registers of thread %d", (int)t->tid);
	rescue_return_done(t->rescue);
}

void bp_restore_return(struct tracee *t)
{
	struct bp_return *r = t->ret;
	if (!r->armed)
		return;
	r->armed = 0;
	if (!HOOK_IS_WRAPPER(r->fn))
		alloc_forget(t);
	rescue_return_done(t->rescue);
	uint64_t slot = 0;
	if (remote_read(t->tid, r->rsp, &slot, 8) || slot != t->p->hooks->trampoline)
		return; /* already returned (a longjmp, or the frame reused) */
	if (remote_write(t->tid, r->rsp, &r->ret, 8))
		error_errno("thread %d: cannot restore a return address", (int)t->tid);
}
