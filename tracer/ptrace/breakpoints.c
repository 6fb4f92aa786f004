/*
 * The malloc family as seen at its breakpoints: an entry stop (note the
 * arguments, point the return address at the trampoline, let the call run
 * and unwind its stack meanwhile), a return stop
 * (the result), the linker's load event (arm new objects). glibc's malloc
 * takes one stop, on its own ret instructions: block, usable size and stack
 * at once (tracer/hooks.h). Each displaced instruction is emulated, so no
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
#include "tracer/ptrace/breakpoints.h"
#include "tracer/stacks/capture.h"
#include "tracer/core/session.h"
#include "tracer/core/remote.h"
#include "tracer/core/rescue.h"
#include "tracer/ptrace/mapcalls.h"

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

static uint64_t mul_or_zero(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? 0 : r;
}

void calls_before_free(struct tracer *T, struct proc *p, uint64_t ptr)
{
	const struct heap_block *b = heap_find(&p->heap, ptr);
	if (!b)
		return;
	if (b->large)
		sysc_before_release(T, p, b->ptr, b->ptr + b->size);
	else
		sysc_before_small_release(T, p);
}

/*
 * Points the return address of the call now entering b at the trampoline, so
 * that its return stops, notes the call, and runs the displaced instruction.
 */
static void hijack_and_go(struct tracer *T, struct tracee *t, const struct hook_bp *b,
			  struct user_regs_struct *regs, uint32_t stack)
{
	struct proc *p = t->p;
	uint64_t ret;
	/* The return address is in the stack copy the unwinder took at this stop, if it took one. */
	int copied = stack != STACKS_FAILED && unwind_copied_word(&T->unw, t->tid, regs->rsp, &ret) == 0;
	if (!p->hooks.trampoline_armed || (!copied && mem_read(&t->tid, regs->rsp, &ret, 8))) {
		/* No way to see the return: the call goes uncounted, the program unharmed. */
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	struct held h = { .tid = t->tid, .n = 1, .addr = { regs->rsp }, .val = { p->hooks.trampoline }, .len = { 8 } };
	t->in_alloc = 1;
	t->call.fn = b->fn;
	t->call.args[0] = regs->rdi;
	t->call.args[1] = regs->rsi;
	t->call.args[2] = regs->rdx;
	t->call.stack = stack;
	t->call.ret = ret;
	t->call.rsp = regs->rsp;
	t->call.stored_known = 0;
	rescue_return(t->rescue, regs->rsp, ret, p->hooks.trampoline);
	emulate_and_go(t, b, regs, &h);
}

/*
 * A hooked call entered while the thread's outer hooked call is in flight:
 * is the outer one's frame gone (left by longjmp or siglongjmp)? Its return
 * slot still holds the trampoline while it can return through it; any call
 * made since from that depth or above has overwritten the slot. The stack
 * pointer alone cannot say: a signal handler on an alternate stack mapped
 * above the thread's stack runs at a higher address while the outer call
 * waits to return.
 */
static int outer_call_gone(struct tracee *t)
{
	uint64_t slot;
	if (mem_read(&t->tid, t->call.rsp, &slot, 8))
		return 1; /* unmapped: nothing can return through it */
	return slot != t->p->hooks.trampoline;
}

static void on_wrapper(struct tracer *T, struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs);

/*
 * The usable size of glibc's block at ptr, from its chunk's size word (the
 * word before it): the chunk less its header word, or less two for a chunk
 * of its own mapping. 0 when the word cannot be read or makes no sense.
 */
static uint64_t usable_size(struct tracee *t, uint64_t ptr)
{
	uint64_t word;
	if (ptr < 8 || mem_read(&t->tid, ptr - 8, &word, 8))
		return 0;
	uint64_t chunk = word & ~(uint64_t)7;
	uint64_t hdr = (word & 2) ? 16 : 8; /* IS_MMAPPED */
	if (chunk < 2 * hdr || chunk >= (1ULL << 47))
		return 0;
	return chunk - hdr;
}

/* A function hooked at its returns (glibc's malloc, calloc) returns: its block is charged, with the stack as it is. */
static void on_exit_bp(struct tracer *T, struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	if (t->in_alloc && outer_call_gone(t)) {
		t->in_alloc = 0;
		rescue_return_done(t->rescue);
	}
	uint64_t ptr = regs->rax, size;
	if (!p->profiled || !p->ready || t->in_alloc || !ptr) {
		if (t->in_alloc)
			T->nested_calls++, t->p->counts.nested_calls++;
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	size = usable_size(t, ptr);
	if (!size) {
		T->unsized_blocks++, p->counts.unsized_blocks++;
	} else {
		/*
		 * At a ret, as at the entry, the return address is at the stack
		 * pointer and every callee-saved register is the caller's: the
		 * unwind from the entry is the same, and the stack then reads as
		 * the entry hook's did, whichever ret was taken.
		 */
		const struct hooks_exit_fn *xf = hooks_exit_fn_at(&p->hooks, b->addr);
		regs->rip = xf ? xf->lo : b->addr;
		uint32_t stack = capture_stack(T, t, regs);
		if (heap_alloc(&p->heap, ptr, size, stack))
			warning("out of memory recording a block");
		else
			T->usable_blocks++, p->counts.usable_blocks++;
	}
	emulate_and_go(t, b, regs, NULL);
}

static void on_entry(struct tracer *T, struct tracee *t, const struct hook_bp *b, struct user_regs_struct *regs)
{
	struct proc *p = t->p;
	if (t->in_alloc && outer_call_gone(t)) {
		/* The outer call's frame is gone (a longjmp out of it): it will never return through us. */
		t->in_alloc = 0;
		rescue_return_done(t->rescue);
	}
	if (!p->profiled || !p->ready || t->in_alloc) {
		if (t->in_alloc)
			T->nested_calls++, t->p->counts.nested_calls++;
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	if (b->fn == HOOK_SIGALTSTACK) {
		/* Attach on the kernel path: a signal stack above the stack moves the process to breakpoints. */
		const struct hook_bp copy = *b; /* hooks_scan may move the table */
		kheap_sigaltstack(T, t, regs->rdi, regs->rsp);
		emulate_and_go(t, &copy, regs, NULL);
		return;
	}
	if (HOOK_IS_WRAPPER(b->fn)) {
		on_wrapper(T, t, b, regs);
		return;
	}
	uint64_t a0 = regs->rdi;
	if (b->fn == HOOK_FREE) {
		/* One stop: the block goes now (its memory is still there to measure). */
		if (a0) {
			calls_before_free(T, p, a0);
			heap_free(&p->heap, a0);
		}
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	if ((b->fn == HOOK_REALLOC || b->fn == HOOK_REALLOCARRAY) && a0)
		calls_before_free(T, p, a0);
	regs->rip = b->addr;
	/*
	 * The stack is copied now and unwound once the thread runs again: the
	 * unwind overlaps the call, whose return waits for it. The call leaves
	 * the frames above its entry stack pointer alone.
	 */
	struct user_regs_struct at_entry = *regs;
	capture_begin(T, t, &at_entry);
	hijack_and_go(T, t, b, regs, STACKS_ROOT); /* copied; its stack follows */
	if (t->in_alloc)
		t->call.stack = capture_finish(T, t);
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
	if (!t->p->hooks.curbrk || mem_read(&t->tid, t->p->hooks.curbrk, &cur, 8))
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
	t->sc_stack = STACKS_FAILED;
	if (!sysc_begin(T, t, wrapper_nr(b->fn), a, regs)) {
		emulate_and_go(t, b, regs, NULL);
		return;
	}
	regs->rip = b->addr;
	uint32_t stack = STACKS_FAILED;
	if ((b->fn == HOOK_MMAP && (a[3] & MAP_ANONYMOUS)) || b->fn == HOOK_MREMAP || b->fn == HOOK_BRK)
		stack = t->sc_stack = capture_stack(T, t, regs);
	hijack_and_go(T, t, b, regs, stack);
}

void calls_record(struct tracer *T, struct proc *p, struct tracee *t, uint64_t result)
{
	const uint64_t *a = t->call.args;
	uint64_t ptr = result, size = 0;
	switch (t->call.fn) {
	case HOOK_MALLOC: size = a[0]; break;
	case HOOK_CALLOC: size = mul_or_zero(a[0], a[1]); break;
	case HOOK_VALLOC: size = a[0]; break;
	case HOOK_PVALLOC: {
		uint64_t ps = p->heap.page_size;
		size = a[0] ? (a[0] + ps - 1) & ~(ps - 1) : ps;
		break;
	}
	case HOOK_ALIGNED_ALLOC:
	case HOOK_MEMALIGN: size = a[1]; break;
	case HOOK_POSIX_MEMALIGN:
		/* Returns 0 and the block through its first argument. */
		ptr = 0;
		if (t->call.stored_known)
			ptr = result == 0 ? t->call.stored : 0;
		else if (result == 0 && mem_read(&t->tid, a[0], &ptr, 8))
			ptr = 0;
		size = a[2];
		break;
	case HOOK_REALLOC:
	case HOOK_REALLOCARRAY:
		size = t->call.fn == HOOK_REALLOC ? a[1] : mul_or_zero(a[1], a[2]);
		/* realloc(p, 0) frees p and returns NULL; a failed realloc leaves p alone. */
		if (a[0] && (result || size == 0))
			heap_free(&p->heap, a[0]);
		break;
	default:
		return;
	}
	if (ptr && heap_alloc(&p->heap, ptr, size, t->call.stack))
		warning("out of memory recording a block");
	(void)T;
}

/* The hooked call returned to the trampoline (regs as there): notes its result and sends it where it was going. */
static void finish_call(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	t->in_alloc = 0;
	if (HOOK_IS_WRAPPER(t->call.fn)) {
		/* brk's wrapper returns 0 or -1; the break it reached is in __curbrk. */
		uint64_t ret = regs->rax;
		if (t->call.fn == HOOK_BRK) {
			uint64_t cur = read_curbrk(t);
			ret = cur ? cur : (uint64_t)-ENOMEM;
		}
		sysc_end(T, t, ret, regs);
		t->sc_stack = STACKS_FAILED;
	} else {
		calls_record(T, t->p, t, regs->rax);
	}
	regs->rip = t->call.ret;
}

static void on_return(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	if (!t->in_alloc) {
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
		if (modmap_load(&p->mm, &T->reg, p->pid) == 0) {
			p->maps_loaded_at = tracer_now(T);
			p->maps_dirty = 0;
			unwind_flush(&T->unw);
			if (hooks_scan(&p->hooks, t->tid, &p->mm, &T->reg))
				warning("process %d: some malloc-family hooks are missing", (int)p->pid);
		}
	}
	emulate_and_go(t, b, regs, NULL);
}

int calls_owns(const struct tracee *t, const struct user_regs_struct *regs)
{
	uint64_t at = regs->rip - 1;
	const struct hooks *h = &t->p->hooks;
	if (h->trampoline_armed && at == h->trampoline)
		return t->in_alloc;
	return hooks_find(h, at) != NULL;
}

void calls_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	uint64_t at = regs->rip - 1;
	struct hooks *h = &t->p->hooks;
	if (h->trampoline_armed && at == h->trampoline) {
		/* The mapping calls' wrappers (attach) are counted apart: the malloc family's stops have a budget. */
		tracer_count_stop(T, t, t->in_alloc && HOOK_IS_WRAPPER(t->call.fn) ? STOP_BP_WRAPPER : STOP_BP_RETURN);
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

void calls_park_trap(struct tracer *T, struct tracee *t, struct user_regs_struct *regs)
{
	uint64_t at = regs->rip - 1;
	struct hooks *h = &t->p->hooks;
	if (h->trampoline_armed && at == h->trampoline)
		finish_call(T, t, regs);
	else
		regs->rip = at; /* the original instruction goes back in: the thread runs it as if never stopped */
	if (ptrace(PTRACE_SETREGS, t->tid, 0, regs) && errno != ESRCH)
		error_errno("cannot set the registers of thread %d", (int)t->tid);
	rescue_return_done(t->rescue);
}
