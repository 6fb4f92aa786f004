/*
 * Taking a stopped thread's call stack (tracer/stacks/capture.h): the native unwind
 * (remembered per thread, so a stack seen just before is not unwound again),
 * the Python frames read from the interpreter in place of its eval loop, and
 * the stack that started the thread put outward of the thread's own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <time.h>

#include "common/error.h"
#include "tracer/core/session.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/stacks.h"

void capture_init(struct capture *c)
{
	memset(c, 0, sizeof(*c));
	c->new_thread_frame = STACKS_FAILED;
	c->py_cut_frame = STACKS_FAILED;
	c->py_failed_frame = STACKS_FAILED;
	const char *np = getenv("PTFIL_NO_PYTHON");
	c->no_python = np && *np && strcmp(np, "0") != 0;
	pynames_init(&c->pynames);
}

void capture_fin(struct capture *c)
{
	pynames_fin(&c->pynames);
	c->unw_owner = NULL;
}

int capture_load_maps(struct tracer *T, struct proc *p)
{
	if (modmap_load(p->mm, T->reg, p->pid))
		return -1;
	p->mm->loaded_at = tracer_now(T);
	p->mm->dirty = 0;
	unwind_flush(T->unw);
	return 0;
}

static uint32_t frame_of(struct tracer *T, struct proc *p, uint64_t ip, int caller)
{
	/* A caller's return address points after the call: ip - 1 lies in the call itself. */
	uint64_t at = caller ? ip - 1 : ip;
	const struct modrange *r = modmap_find(p->mm, at);
	if (!r)
		return stacks_frame(T->stacks, STACKS_NO_MODULE, at);
	return stacks_frame(T->stacks, r->gid, at - T->reg->v[r->gid].base);
}

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

#define STACKS_PENDING (STACKS_FAILED - 1) /* native_begin: still to unwind */

/*
 * The first half of a native stack, while the thread is stopped: its registers
 * and a copy of its stack (regs must stay valid until native_finish). The same
 * call from the same place with the same frames is the same stack: returned,
 * no unwinding. Otherwise STACKS_PENDING, for native_finish.
 */
static uint32_t native_begin(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs,
			     const void *stack, size_t len)
{
	if (stack)
		unwind_begin_copy(T->unw, t->tid, regs, t->p->mm, T->reg, stack, len);
	else
		unwind_begin(T->unw, t->tid, regs, t->p->mm, T->reg);
	for (size_t i = 0; i < TRACEE_MEMOS; i++)
		if (unwind_memo_match(T->unw, &t->st->memo[i]))
			return t->st->memo[i].stack;
	return STACKS_PENDING;
}

/* The unwind itself, from what native_begin took: the thread may be running again. */
static uint32_t native_finish(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	uint64_t ips[UNWIND_MAX_FRAMES];
	uint32_t frames[UNWIND_MAX_FRAMES];
	size_t n = unwind_run(T->unw, ips, UNWIND_MAX_FRAMES);
	/*
	 * An address in no known object means new objects were mapped: read the maps
	 * again if a file was mapped or anything unmapped since the last reading, and
	 * otherwise (code mapped in ways we do not stop for) at a bounded rate.
	 */
	int missing = 0;
	for (size_t i = 0; i < n && !missing; i++)
		missing = !modmap_find(p->mm, ips[i]);
	double now = tracer_now(T);
	if (missing && (p->mm->dirty || now - p->mm->loaded_at > 0.05)) {
		p->mm->loaded_at = now;
		p->mm->dirty = 0;
		if (capture_load_maps(T, p) == 0) {
			n = unwind_run(T->unw, ips, UNWIND_MAX_FRAMES);
			missing = 0;
			for (size_t i = 0; i < n && !missing; i++)
				missing = !modmap_find(p->mm, ips[i]);
		}
	}
	for (size_t i = 0; i < n; i++) {
		frames[i] = frame_of(T, p, ips[i], i > 0);
		if (frames[i] == STACKS_FAILED)
			return STACKS_ROOT;
	}
	uint32_t node = stacks_intern(T->stacks, frames, n);
	if (node == STACKS_FAILED)
		return STACKS_ROOT;
	/* A stack with frames in unknown code may read better once the maps are read again: not kept. */
	if (!missing)
		unwind_memo_store(T->unw, &t->st->memo[t->st->memo_next++ % TRACEE_MEMOS], node);
	return node;
}

/* pystack_word_fn over the stack copy the unwinder took of a thread. */
struct copied { const struct unwind *u; pid_t tid; };
static int stack_word(void *ctx, uint64_t addr, uint64_t *val)
{
	const struct copied *c = ctx;
	return unwind_copied_word(c->u, c->tid, addr, val);
}

/*
 * Stack node with the Python frames thread t is running in place of the
 * native eval loop frames that ran them, outermost group first. Unless
 * opts.native_frames, the native frames outside the innermost Python frame
 * are left out, so that a stack reads as Python code down to the native
 * calls that allocated. Returns node itself when no Python frame is read.
 */
static uint32_t with_python(struct tracer *T, struct tracee *t, uint32_t node, int kernel)
{
	struct proc *p = t->p;
	uint32_t in[UNWIND_MAX_FRAMES];
	size_t n = stacks_frames(T->stacks, node, in, UNWIND_MAX_FRAMES), evals = 0;
	for (size_t i = 0; i < n; i++)
		evals += pystack_is_eval(p->py, T->stacks->frames[in[i]].module, T->stacks->frames[in[i]].offset);
	if (!evals)
		return node;
	static struct pyframe py[PY_MAX_FRAMES];
	size_t np;
	int cut, failed = 0;
	if (kernel) {
		/* Read by the kernel at the event; named here. */
		const struct thread_stacks *st = t->st;
		if (st->kpy_flags & CAPTURE_PY_NO_THREAD) {
			p->py->stacks++;
			p->py->no_thread++;
			return node;
		}
		np = pystack_name(p->py, &T->cap->pynames, &T->cap->pystats, p->pid, st->kpy, st->n_kpy, py);
		cut = (st->kpy_flags & CAPTURE_PY_CUT) != 0;
		failed = (st->kpy_flags & CAPTURE_PY_FAILED) != 0;
		if (cut)
			T->cap->pystats.cut++;
		if (failed || (st->n_kpy && !np))
			T->cap->pystats.kernel_failed++;
		if (!np && !failed)
			return node;
	} else {
		struct copied copy = { T->unw, t->tid };
		uint64_t cut_before = T->cap->pystats.cut;
		np = pystack_read(p->py, &T->cap->pynames, &T->cap->pystats, p->pid, t->tid, stack_word, &copy, py,
				  PY_MAX_FRAMES);
		if (!np)
			return node;
		cut = T->cap->pystats.cut != cut_before;
	}
	/* Frames past PY_MAX_FRAMES are not read: a frame of its own says so where they would be; so do frames a read missed. */
	if (cut && T->cap->py_cut_frame == STACKS_FAILED)
		T->cap->py_cut_frame = stacks_pseudo_frame(T->stacks, "[outer Python frames not read: more than "
						      STRINGIFY(PY_MAX_FRAMES) "]");
	if (failed) {
		if (T->cap->py_failed_frame == STACKS_FAILED)
			T->cap->py_failed_frame = stacks_pseudo_frame(T->stacks, "[outer Python frames not read: a read failed]");
		if (T->cap->py_failed_frame == STACKS_FAILED)
			return node;
		cut = 1;
	}
	uint32_t cut_frame = failed ? T->cap->py_failed_frame : T->cap->py_cut_frame;
	uint32_t out[UNWIND_MAX_FRAMES + PY_MAX_FRAMES + 1];
	size_t m = 0, pi = 0, groups = 0;
	int seen = 0, all = T->opts.native_frames;
	for (size_t i = 0; i < n; i++) {
		const struct stacks_frame *f = &T->stacks->frames[in[i]];
		if (cut && pi == np && cut_frame != STACKS_FAILED && pystack_is_eval(p->py, f->module, f->offset)) {
			/* The first eval loop past the frames read: the ones cut off ran there and further out. */
			out[m++] = cut_frame;
			cut = 0;
		}
		if (pystack_is_eval(p->py, f->module, f->offset) && pi < np) {
			do {
				if (py[pi].name == PYFRAME_NONE)
					continue;
				out[m] = stacks_py_frame(T->stacks, py[pi].name, py[pi].line);
				if (out[m++] == STACKS_FAILED)
					return node;
			} while (!py[pi++].last_of_call && pi < np);
			groups++;
			seen = 1;
		} else if (all || !seen) {
			out[m++] = in[i];
		}
	}
	/* Python frames left over (a call being set up or torn down): outermost, where they belong. */
	for (; pi < np; pi++)
		if (py[pi].name != PYFRAME_NONE &&
		    (out[m++] = stacks_py_frame(T->stacks, py[pi].name, py[pi].line)) == STACKS_FAILED)
			return node;
	if (cut && cut_frame != STACKS_FAILED)
		out[m++] = cut_frame;
	if (groups != evals)
		T->cap->pystats.group_mismatch++;
	uint32_t merged = stacks_intern(T->stacks, out, m);
	return merged == STACKS_FAILED ? node : merged;
}

#define ORIGIN_MAX_FRAMES 1024    /* a thread's stack and the stacks that started it, at most */

/* node extended outward by "[new thread]" and t->st->origin, remembered for the next stop. */
static uint32_t with_origin(struct tracer *T, struct tracee *t, uint32_t node)
{
	if (node == t->st->origin_in && t->st->origin_out)
		return t->st->origin_out;
	static uint32_t f[ORIGIN_MAX_FRAMES];
	size_t n = stacks_frames(T->stacks, node, f, ORIGIN_MAX_FRAMES);
	if (T->cap->new_thread_frame == STACKS_FAILED)
		T->cap->new_thread_frame = stacks_pseudo_frame(T->stacks, "[new thread]");
	if (T->cap->new_thread_frame == STACKS_FAILED || n == ORIGIN_MAX_FRAMES)
		return node;
	f[n++] = T->cap->new_thread_frame;
	n += stacks_frames(T->stacks, t->st->origin, f + n, ORIGIN_MAX_FRAMES - n);
	uint32_t out = stacks_intern(T->stacks, f, n);
	if (out == STACKS_FAILED)
		return node;
	t->st->origin_in = node;
	t->st->origin_out = out;
	return out;
}

static double seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void capture_account(struct tracer *T, struct proc *next)
{
	const struct unwind *u = T->unw;
	struct proc_counts *seen = &T->cap->unw_seen;
	if (T->cap->unw_owner) {
		struct proc_counts *c = &T->cap->unw_owner->counts;
		c->unwinds += u->unwinds - seen->unwinds;
		c->remote_reads += u->remote_reads - seen->remote_reads;
		c->stack_copies += u->stack_copies - seen->stack_copies;
		c->memo_hits += u->memo_hits - seen->memo_hits;
		c->splices += u->splices - seen->splices;
		c->spliced_frames += u->spliced_frames - seen->spliced_frames;
	}
	seen->unwinds = u->unwinds;
	seen->remote_reads = u->remote_reads;
	seen->stack_copies = u->stack_copies;
	seen->memo_hits = u->memo_hits;
	seen->splices = u->splices;
	seen->spliced_frames = u->spliced_frames;
	T->cap->unw_owner = next;
}

static void begin(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs, const void *stack, size_t len)
{
	struct capture_cur *c = &T->cap->cur;
	if (T->cap->unw_owner != t->p)
		capture_account(T, t->p);
	c->tid = t->tid;
	c->py = !T->cap->no_python && t->p->py->state == PY_READY;
	double t0 = c->py ? seconds() : 0;
	c->copied = stack != NULL;
	c->kpy = 0;
	c->native = native_begin(T, t, regs, stack, len);
	c->begin_s = c->py ? seconds() - t0 : 0;
}

void capture_begin(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs)
{
	begin(T, t, regs, NULL, 0);
}

/* The native stack begun by capture_begin, with the Python frames of a CPython process in it (with_python). */
static uint32_t program_finish(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	const struct capture_cur *c = &T->cap->cur;
	double t0 = c->py ? seconds() : 0;
	uint32_t node = c->native == STACKS_PENDING ? native_finish(T, t) : c->native;
	/*
	 * Python frames are read live, or by the kernel at the event: read now
	 * for an event the kernel recorded earlier they would be another moment's.
	 */
	if (T->cap->no_python || (c->copied && !c->kpy))
		return node;
	pystack_detect(p->py, p->mm, T->reg, p->pid);
	if (p->py->state != PY_READY || node == STACKS_ROOT)
		return node;
	/* What the Python frames cost against the native stack they complete, for the snapshot's counters. */
	double t1 = seconds();
	if (c->py) {
		T->cap->pystats.native_stacks++;
		T->cap->pystats.native_us += (uint64_t)((c->begin_s + t1 - t0) * 1e6 + 0.5);
	}
	node = with_python(T, t, node, c->kpy);
	T->cap->pystats.python_us += (uint64_t)((seconds() - t1) * 1e6 + 0.5);
	return node;
}

static uint32_t program_stack(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs)
{
	capture_begin(T, t, regs);
	return program_finish(T, t);
}

uint32_t capture_finish(struct tracer *T, struct tracee *t)
{
	if (T->cap->cur.tid != t->tid)
		return STACKS_ROOT;
	uint32_t node = program_finish(T, t);
	return t->st->origin != STACKS_ROOT && node != STACKS_ROOT ? with_origin(T, t, node) : node;
}

uint32_t capture_copied(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs,
			const void *stack, size_t len, int python)
{
	begin(T, t, regs, stack, len);
	T->cap->cur.kpy = python && t->st->kpy_kept;
	t->st->kpy_kept = 0;
	return capture_finish(T, t);
}

int capture_keep_python(struct tracee *t, const struct pyraw *raw, size_t n, unsigned flags)
{
	struct thread_stacks *st = t->st;
	st->kpy_kept = 0;
	if (!st->kpy && !(st->kpy = malloc(PY_MAX_FRAMES * sizeof(*st->kpy))))
		return -1;
	if (n > PY_MAX_FRAMES)
		n = PY_MAX_FRAMES;
	memcpy(st->kpy, raw, n * sizeof(*raw));
	st->n_kpy = (uint32_t)n;
	st->kpy_flags = flags;
	st->kpy_kept = 1;
	return 0;
}

uint32_t capture_stack(struct tracer *T, struct tracee *t, const struct user_regs_struct *regs)
{
	capture_begin(T, t, regs);
	return capture_finish(T, t);
}

void capture_thread_origin(struct tracer *T, struct tracee *t, struct tracee *child)
{
	struct proc *p = t->p;
	struct user_regs_struct regs;
	if (child->p != p || !p->profiled || !p->ready || child->st->origin != STACKS_ROOT ||
	    ptrace(PTRACE_GETREGS, t->tid, 0, &regs))
		return;
	uint32_t node = program_stack(T, t, &regs);
	/*
	 * glibc's clone and clone3 end their unwind information before the
	 * system call (the child would unwind wrong), so the unwind stops in
	 * them. They touch no stack of the parent's before it: the caller's
	 * return address is at the stack pointer, and the unwind goes on from
	 * there as if the call had returned.
	 */
	uint64_t ret;
	if (node != STACKS_ROOT && T->stacks->nodes[node].parent == STACKS_ROOT &&
	    unwind_copied_word(T->unw, t->tid, regs.rsp, &ret) == 0 && modmap_find(p->mm, ret)) {
		regs.rip = ret;
		regs.rsp += sizeof(ret);
		node = program_stack(T, t, &regs);
	}
	/* A thread started by a thread: its starter's stack goes on into its own starter's. */
	child->st->origin = t->st->origin != STACKS_ROOT && node != STACKS_ROOT ? with_origin(T, t, node) : node;
}
