/*
 * Heap events through the kernel (tracer/kernel/kheap.h): choosing the path, the
 * probes of each process, and the records applied to the ledger in the order
 * the program made the calls.
 */
#include "tracer/kernel/kheap.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/grow.h"
#include "symbols/maps.h"
#include "symbols/sym.h"
#include "tracer/memory/alloc.h"
#include "tracer/ptrace/breakpoints.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/ptrace/mapcalls.h"
#include "tracer/stacks/modules.h"
#include "tracer/stacks/capture.h"
#include "tracer/core/session.h"
#include "tracer/kernel/kheap_rec.h"
#include "tracer/kernel/kwait.h"
#include "tracer/kernel/pyread.h"
#include "tracer/kernel/pyread_rec.h"
#include "tracer/core/procfs.h"
#include "tracer/core/remote.h"
#ifdef HAVE_BPF
#include "tracer/kernel/uprobes.h"
#include "tracer/stacks/unwind.h"
#include "tracer/kernel/faults.h"
#endif

_Static_assert(KH_FN_POSIX_MEMALIGN == (int)ALLOC_POSIX_MEMALIGN, "kheap_rec.h and memory/alloc.h disagree");
_Static_assert(KH_FN_DL_DEBUG == HOOK_DL_DEBUG && KH_FN_MMAP == HOOK_MMAP && KH_FN_MUNMAP == HOOK_MUNMAP &&
	       KH_FN_MREMAP == HOOK_MREMAP && KH_FN_MADVISE == HOOK_MADVISE && KH_FN_BRK == HOOK_BRK &&
	       KH_FN_SIGALTSTACK == HOOK_SIGALTSTACK, "kheap_rec.h and ptrace/hooks.h disagree");

int kheap_parse(const char *s, enum heap_events *out)
{
	static const char *const names[] = { "auto", "uprobe", "ptrace" };
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum heap_events)i;
			return 0;
		}
	return -1;
}

#ifdef HAVE_BPF

struct kheap {
	int open;                /* the programs are loaded: the kernel path runs */
	struct kheap_stats stats;
	struct kprobes kp;
	int started;             /* waits through kwait (kernel/kwait.h) */
	size_t marked_threads;   /* the thread count the stop mark was set for */
	int stop_signal;         /* what the programs send past the stop mark (kheap_start) */
	int ended;               /* read no more (kheap_end): under launch the links wait for kernel_close_later */
};

/* The one tracer of this process, for the probe callback hooks.c calls with a process. */
static struct tracer *tracer_of_probes;

/* The ring's size: PTFIL_RING_KIB, a power of two of at least 64 KiB, else 64 MiB. */
static size_t ring_bytes(void)
{
	const char *s = getenv("PTFIL_RING_KIB");
	if (!s || !*s)
		return KPROBES_DEFAULT_RING;
	char *end;
	unsigned long long kib = strtoull(s, &end, 10);
	size_t b = (size_t)kib << 10;
	if (*end || kib == 0 || kib > (1ull << 30) || (b & (b - 1)) || b < KPROBES_MIN_RING) {
		warning("PTFIL_RING_KIB=%s is not a power of two of at least 64; using %u", s, KPROBES_DEFAULT_RING >> 10);
		return KPROBES_DEFAULT_RING;
	}
	return b;
}

static int open_kernel_path(struct tracer *T, char *why, size_t whylen)
{
	struct kheap *k = calloc(1, sizeof(*k));
	if (!k) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	if (kprobes_open(&k->kp, ring_bytes(), why, whylen)) {
		free(k);
		return -1;
	}
	k->open = 1;
	T->kh = k;
	tracer_of_probes = T;
	T->on_sigaltstack = kheap_sigaltstack;
	return 0;
}

#else

struct kheap {
	int open;
	struct kheap_stats stats;
};

static int open_kernel_path(struct tracer *T, char *why, size_t whylen)
{
	(void)T;
	snprintf(why, whylen, "ptfil was built without BPF (configure found no clang or libbpf-dev)");
	return -1;
}

#endif

int kheap_on(const struct tracer *T)
{
	return T->kh && T->kh->open;
}

const struct kheap_stats *kheap_stats(const struct tracer *T)
{
	static const struct kheap_stats none;
	return T->kh ? &T->kh->stats : &none;
}

void kheap_free(struct tracer *T)
{
	kheap_end(T);
	free(T->kh);
	T->kh = NULL;
}

int kheap_choose(struct tracer *T)
{
	enum heap_events mode = (enum heap_events)T->opts.heap_events;
	/* --mappings-only: no malloc family to see on either path. The touch view alone sees faults, not calls. */
	if (mode == HEAP_EVENTS_PTRACE || T->opts.no_heap || (faults_on(T) && T->opts.charge != CHARGE_BOTH))
		return 0;
	char why[512];
	if (open_kernel_path(T, why, sizeof(why)) == 0)
		return 0;
	if (mode == HEAP_EVENTS_UPROBE)
		return error("cannot use kernel uprobes for heap events: %s; --heap-events=ptrace works without them", why);
	notice("heap events through ptrace: %s", why);
	return 0;
}

#ifdef HAVE_BPF

static void set_marks(struct tracer *T);

int kheap_start(struct tracer *T)
{
	struct kheap *k = T->kh;
	if (!kheap_on(T) || k->started)
		return 0;
	if (kwait_start(T))
		return -1;
	k->started = 1;
	k->stop_signal = kwait_stop_signal();
	k->marked_threads = (size_t)-1;
	if (kwait_add(k->kp.ring_fd))
		return -1;
	set_marks(T);
	return 0;
}

/*
 * The stop mark: each thread can write one record past it before its SIGSTOP
 * stops it, so the ring must hold that many more. The programs are told again
 * when the number of threads changes.
 */
static void set_marks(struct tracer *T)
{
	struct kheap *k = T->kh;
	if (k->marked_threads == T->n_threads)
		return;
	k->marked_threads = T->n_threads;
	uint64_t ring = k->kp.ring_size,
		 room = (uint64_t)(T->n_threads + 4) * (sizeof(struct kh_entry) + sizeof(struct kpy_rec) + 32);
	/* A ring too small for one record past the mark per thread (a test's 64 KiB) stops them early. */
	uint64_t stop = ring > 2 * room ? ring - room : ring / 8;
	if (kprobes_config(&k->kp, stop, ring / 8, k->stop_signal))
		warning_errno("cannot set the ring buffer's marks");
}

static void to_regs(const struct kh_entry *e, struct user_regs_struct *r)
{
	memset(r, 0, sizeof(*r));
	r->rip = e->regs[KH_RIP];
	r->rsp = e->regs[KH_RSP];
	r->rbp = e->regs[KH_RBP];
	r->rbx = e->regs[KH_RBX];
	r->r12 = e->regs[KH_R12];
	r->r13 = e->regs[KH_R13];
	r->r14 = e->regs[KH_R14];
	r->r15 = e->regs[KH_R15];
	r->rax = e->regs[KH_RAX];
	r->rcx = e->regs[KH_RCX];
	r->rdx = e->regs[KH_RDX];
	r->rsi = e->regs[KH_RSI];
	r->rdi = e->regs[KH_RDI];
	r->r8 = e->regs[KH_R8];
	r->r9 = e->regs[KH_R9];
	r->r10 = e->regs[KH_R10];
	r->r11 = e->regs[KH_R11];
}

/*
 * What the kernel says of the return slot of thread t's call in flight, at an
 * event whose stack pointer is sp and whose return address is ret: at the
 * call's own stack pointer, a function it jumped to in its place
 * (reallocarray's tail call of realloc) returns through the kernel's return
 * trampoline, which lies in no module, while a new call from the program (the
 * outer one was left by siglongjmp) returns into the program. Anywhere else
 * the slot was not read: a call from inside runs below, and above it the call
 * was left (memory/alloc.h).
 */
static enum alloc_slot return_slot(struct tracee *t, uint64_t sp, uint64_t ret)
{
	if (!alloc_active(t) || sp != t->call->sp)
		return ALLOC_SLOT_UNKNOWN;
	return modmap_find(t->p->mm, ret) ? ALLOC_SLOT_OVERWRITTEN : ALLOC_SLOT_OURS;
}

static void on_entry(struct tracer *T, struct tracee *t, const struct kh_entry *e, size_t len)
{
	if (len < offsetof(struct kh_entry, stack) || e->stack_len > len - offsetof(struct kh_entry, stack))
		return;
	uint64_t ret = 0, sp = e->regs[KH_RSP];
	if (e->stack_len >= sizeof(ret))
		memcpy(&ret, e->stack, sizeof(ret));
	alloc_left_behind(t, sp, return_slot(t, sp, ret));
	/* realloc calling malloc, say: the outer call counts, as on the ptrace path. */
	if (!alloc_follow(T, t))
		return;
	uint64_t args[3] = { e->h.a[0], e->h.a[1], e->h.a[2] };
	const struct modrange *in = modmap_find(t->p->mm, e->regs[KH_RIP]);
	alloc_enter(T, t, (enum alloc_fn)e->h.fn, args, sp,
		    !T->opts.exact_sizes && in && modreg_is_glibc(T->reg, in->gid));
	struct user_regs_struct regs;
	to_regs(e, &regs);
	uint64_t late = T->unw->late_copies;
	alloc_set_stack(t, capture_copied(T, t, &regs, e->stack, (size_t)e->stack_len, (e->h.kind & KH_PY) != 0));
	T->kh->stats.late_copies += T->unw->late_copies != late;
}

static void on_return(struct tracer *T, struct tracee *t, const struct kh_rec *r)
{
	/* Its stack pointer is past the entry's once the outer call returned; a nested one's is below. */
	if (!alloc_active(t) || r->a[1] <= t->call->sp)
		return;
	uint64_t block = 0;
	if (t->call->fn == ALLOC_POSIX_MEMALIGN && r->a[0] == 0) {
		/* The block it stored, as the kernel read it at the return; else as it is now. */
		if (r->kind & KH_STORED)
			block = r->a[2];
		else if (remote_read(t->tid, t->call->args[0], &block, 8))
			block = 0;
	}
	alloc_exit(T, t, r->a[0], block, t->call->usable ? r->chunk : 0);
}

static void on_free(struct tracer *T, struct tracee *t, const struct kh_rec *r)
{
	alloc_left_behind(t, r->a[1], return_slot(t, r->a[1], r->a[2]));
	if (alloc_follow(T, t))
		alloc_free(T, t, r->a[0]);
}

/* A probed call's record: kept for the thread's stop, which comes next. */
static void on_call(struct tracee *t, const struct kh_call *c, size_t len)
{
	if (len < sizeof(*c))
		return;
	struct sc_call *sc = t->sc;
	sc->kpending = 1;
	sc->kfn = (int)c->h.fn;
	to_regs((const struct kh_entry *)c, &sc->kregs);
}

static void on_record(void *ctx, const void *rec, size_t len)
{
	struct tracer *T = ctx;
	const struct kh_rec *r = rec;
	if (len >= sizeof(uint32_t) && r->kind == KPY_REC) {
		/* The Python frames of the entry that follows. */
		if (pyread_keep(T, rec, len, T->kh->kp.pycodes_fd))
			T->kh->stats.unknown_thread++;
		return;
	}
	if (len < sizeof(*r))
		return;
	struct tracee *t = tracer_find(T, (pid_t)r->tid);
	if (!t || t->p->pid != (pid_t)r->tgid) {
		T->kh->stats.unknown_thread++;
		return;
	}
	if (!t->p->profiled || !t->p->ready)
		return;
	t->p->kp->records++;
	/* A thread on a signal stack above its stack: its process leaves at its next stop (kheap_leave_pending). */
	if (r->kind & KH_ALTSTACK)
		t->p->kp->leave = 1;
	switch (KH_KIND(r->kind)) {
	case KH_ENTRY:
		on_entry(T, t, rec, len);
		break;
	case KH_RETURN:
		on_return(T, t, r);
		break;
	case KH_FREE:
		on_free(T, t, r);
		break;
	case KH_CALL:
		on_call(t, rec, len);
		break;
	case KH_CALLRET:
		/* The system call of a probed wrapper returned (its thread runs on). */
		bp_kernel_return(T, t, r->a[0]);
		break;
	}
}

int kheap_call_stop(struct tracer *T, struct tracee *t)
{
	struct sc_call *sc = t->sc;
	if (!kheap_on(T) || !sc->kpending)
		return STOP_BACKPRESSURE;
	sc->kpending = 0;
	return bp_kernel_call(T, t, sc->kfn, &sc->kregs);
}

void kheap_drain(struct tracer *T)
{
	struct kheap *k = T->kh;
	if (!kheap_on(T))
		return;
	set_marks(T);
	/* Records written while the last ones were applied are read too, up to a bound (the caller comes back). */
	for (int round = 0; round < 4 && kprobes_drain(&k->kp, on_record, T); round++) {
	}
}

int kheap_owns_stop(struct tracer *T, struct tracee *t, int status)
{
	return kheap_on(T) && kwait_owns_stop(t, status);
}

static int add_links(struct proc *p, const int *fds, size_t n)
{
	struct kproc *kp = p->kp;
	if (grow_array(&kp->links, &kp->cap_links, kp->n_links + n, sizeof(*kp->links), 8))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			kp->links[kp->n_links++] = fds[i];
	return 0;
}

/* Whether the kernel runs the instruction at code itself at a probe hit (x86: a push or a branch), not single-stepped. */
static int kernel_emulates(const uint8_t *c)
{
	return (c[0] >= 0x50 && c[0] <= 0x57) || (c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57) ||
	       c[0] == 0xeb || c[0] == 0xe9 || c[0] == 0xe8 || (c[0] >= 0x70 && c[0] <= 0x7f) ||
	       (c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f);
}

/*
 * Where in a function to put its probe: its first instruction, unless the
 * kernel would have to single-step it (several times the cost of a hit) and
 * the next one is a push or a branch that it runs itself while the first only
 * sets flags (glibc's free starts with test rdi,rdi; je). Arguments, stack
 * pointer and return address are the same there. Returns the bytes to skip.
 */
static uint64_t probe_offset(pid_t pid, uint64_t addr)
{
	uint8_t code[32];
	struct emu_insn in;
	if (remote_read(pid, addr, code, sizeof(code)) || kernel_emulates(code) || emu_decode(code, 16, &in))
		return 0;
	switch (in.op) {
	case EMU_NOP:
	case EMU_TEST_RR:
	case EMU_CMP_RI:
	case EMU_CMPB_RIP:
	case EMU_CMP_RIP:
		return kernel_emulates(code + in.len) ? in.len : 0;
	default:
		return 0;
	}
}

/*
 * A process running Python: its CPython described to the kernel path's
 * Python reader, which reads its frames at each entry. Returns -1 when they
 * cannot be read by the kernel: its heap events then go through ptrace,
 * whose reader reads them live (said in one line under -e uprobe).
 */
static int kernel_python(struct tracer *T, struct proc *p)
{
	if (T->cap->no_python)
		return 0;
	pystack_detect(p->py, p->mm, T->reg, p->pid);
	if (p->py->state != PY_READY)
		return 0;                 /* not a version ptfil reads: native frames, as on every path */
	char why[256];
	if (pyread_describe(T->kh->kp.pyprocs_fd, p->py, p->pid, why, sizeof(why)) == 0) {
		p->kpy_described |= KPY_DESCRIBED_KHEAP;
		return 0;
	}
	if (p->pid == T->main_pid && T->opts.heap_events == HEAP_EVENTS_UPROBE)
		notice("process %d: its Python frames cannot be read by the kernel (%s): its heap events go "
		       "through ptrace", (int)p->pid, why);
	return -1;
}

/*
 * Kernel probes on the n sites of module e in process p: the malloc family
 * (an entry and a return probe each, free's entry) and the calls a thread
 * stops at (KH_CALL). All or none. Returns 0 or -1.
 */
static int attach_sites(struct tracer *T, struct proc *p, const struct modreg_entry *e,
			const struct hooks_site *sites, size_t n)
{
	struct maps maps;
	if (proc_maps_read(p->pid, &maps))
		return -1;
	struct kprobe_site ks[HOOK__COUNT];
	const struct maps_entry *where = NULL;
	int rc = -1, family = 0;
	for (size_t i = 0; i < n && i < HOOK__COUNT; i++) {
		const struct maps_entry *m = maps_find(&maps, sites[i].addr);
		if (!m || m->inode != e->inode || !(m->perms & MAPS_X))
			goto out;
		where = m;
		family |= sites[i].fn < HOOK_DL_DEBUG;
		ks[i].kind = sites[i].fn == HOOK_FREE ? KPS_FREE : sites[i].fn >= HOOK_DL_DEBUG ? KPS_CALL : KPS_ALLOC;
		/* A call's stop reads its registers as at the entry: probed there. */
		uint64_t skip = ks[i].kind == KPS_CALL ? 0 : probe_offset(p->pid, sites[i].addr);
		if (sites[i].addr + skip >= m->end)
			skip = 0;
		ks[i].offset = sites[i].addr + skip - m->start + m->offset;
		ks[i].fn = sites[i].fn;
	}
	if (!where)
		goto out;
	/* The file as the kernel can open it: the mapping itself, else the path in the process's root. */
	char path[2][4200];
	snprintf(path[0], sizeof(path[0]), "/proc/%d/map_files/%llx-%llx", (int)p->pid,
		 (unsigned long long)where->start, (unsigned long long)where->end);
	snprintf(path[1], sizeof(path[1]), "/proc/%d/root%s", (int)p->pid, e->path);
	for (int k = 0; k < 2 && rc; k++) {
		int fds[KPROBES_LINKS];
		if (kprobes_attach(&T->kh->kp, p->pid, path[k], ks, n, fds) == 0) {
			if (add_links(p, fds, KPROBES_LINKS)) {
				kprobes_detach(fds, KPROBES_LINKS);
				break;
			}
			rc = 0;
		}
	}
	if (rc == 0 && family)
		p->kp->used = 1;
out:
	maps_fin(&maps);
	return rc;
}

/* hooks_probe_fn: the kernel probes module e's malloc family in process ctx. */
static int probe_module(void *ctx, const struct modreg_entry *e, const struct hooks_site *sites, size_t n)
{
	struct proc *p = ctx;
	struct tracer *T = tracer_of_probes;
	if (!T || !kheap_on(T))
		return -1;
	if (!p->kp->checked) {
		p->kp->checked = 1;
		/*
		 * The kernel installs a process's probes through its main thread's
		 * address space: once that thread has exited (a zombie leader),
		 * none would go in.
		 */
		pid_t tracer = 0;
		char st = procfs_state(p->pid, &tracer);
		if (st == 'Z' || st == 'X') {
			p->hooks->probe = NULL;
			return 1;
		}
		if (pystack_runs_python(p->mm, T->reg) && kernel_python(T, p)) {
			p->hooks->probe = NULL;
			return 1;
		}
	}
	return attach_sites(T, p, e, sites, n);
}

/*
 * hooks_probe_fn for the calls a thread must stop at (the loader's load
 * hook, and under attach the mapping calls' wrappers and sigaltstack): kernel probes that
 * stop it with the back-pressure signal, nothing written into the target.
 * Returns 1 (breakpoints after all) for a process whose main thread is gone,
 * where the kernel would install none.
 */
static int probe_calls(void *ctx, const struct modreg_entry *e, const struct hooks_site *sites, size_t n)
{
	struct proc *p = ctx;
	struct tracer *T = tracer_of_probes;
	if (!T || !kheap_on(T))
		return 1;
	pid_t tracer = 0;
	char st = procfs_state(p->pid, &tracer);
	if (st == 'Z' || st == 'X')
		return 1;
	return attach_sites(T, p, e, sites, n) ? 1 : 0;
}

void kheap_proc_setup(struct tracer *T, struct proc *p)
{
	if (!kheap_on(T))
		return;
	p->hooks->probe = probe_module;
	/*
	 * The calls a thread stops at are the kernel's probes too: under attach
	 * so that nothing is written into it, and the loader's hook under launch
	 * too, where an int3 of ptfil's at an address the kernel has a probe for
	 * (another tool's, or one a killed ptfil left registered) is the
	 * kernel's to take in a process that has uprobes: it would take it out
	 * unseen, and ptfil miss every library loaded after.
	 */
	p->hooks->call_probe = probe_calls;
	p->hooks->probe_ctx = p;
	/* A new image, or a new process: its Python, if any, is described again at its first probe. */
	pyread_forget(T->kh->kp.pyprocs_fd, p->pid);
	p->kpy_described &= ~KPY_DESCRIBED_KHEAP;
	p->kp->checked = 0;
	p->kp->used = 0;
}

/*
 * Process p (thread t stopped) leaves the kernel path for breakpoints: every
 * record so far applied, its probes out (calls in flight return normally:
 * the kernel keeps their return addresses), then breakpoints. A call in
 * flight now is not seen to return: its block is not charged.
 */
static void leave_kernel_path(struct tracer *T, struct tracee *t, const char *why)
{
	struct proc *p = t->p;
	p->kp->leave = 0;
	kheap_drain(T);
	kheap_proc_release(p);
	kheap_drain(T);
	p->kp->leave = 0;
	p->hooks->probe = NULL;
	p->kp->used = 0;
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *o = T->threads[h]; o; o = o->hnext)
			if (o->p == p)
				alloc_forget(o);
	p->hooks->n_scanned = 0;
	/* Its calls' probes went with the links: int3s for everything now, the loader's hook first. */
	int had_calls = p->hooks->call_probe != NULL;
	p->hooks->call_probe = NULL;
	/* A call already recorded is still seen: its stop and its return come from the kernel as before. */
	if ((had_calls && hooks_arm_loader(p->hooks, t->tid, p->mm, T->reg)) ||
	    hooks_scan(p->hooks, t->tid, p->mm, T->reg))
		warning("process %d: some malloc-family hooks are missing", (int)p->pid);
	notice("process %d %s: its heap events go through ptrace from now on%s", (int)p->pid, why,
	       had_calls && T->attach ? ", with breakpoints in its code while attached" : "");
}

#define WHY_ALTSTACK "has a signal stack above its stack, where kernel uprobes cannot return"

void kheap_sigaltstack(struct tracer *T, struct tracee *t, uint64_t ss, uint64_t sp)
{
	struct proc *p = t->p;
	stack_t st;
	if (!kheap_on(T) || !p->kp->used || !ss || remote_read(t->tid, ss, &st, sizeof(st)) ||
	    (st.ss_flags & SS_DISABLE) || (uint64_t)(uintptr_t)st.ss_sp <= sp)
		return;
	leave_kernel_path(T, t, WHY_ALTSTACK);
}

void kheap_leave_pending(struct tracer *T, struct tracee *t)
{
	if (kheap_on(T) && t && t->p->kp->leave && t->p->kp->used)
		leave_kernel_path(T, t, WHY_ALTSTACK);
}

void kheap_leader_exit(struct tracer *T, struct tracee *t)
{
	struct proc *p = t->p;
	if (!kheap_on(T) || t->tid != p->pid || p->nthreads < 2 || !p->kp->n_links)
		return;
	/*
	 * Once the main thread is gone the kernel's filter of the process's probe
	 * links (the main thread's address space) rejects the process: when any
	 * consumer of the same probed code goes (another ptfil's, another tool's,
	 * anywhere on the machine), the kernel takes the process's int3s out, and
	 * its allocations go unseen from then on. Breakpoints do not depend on that.
	 * Only pthread_exit's exit(2) counts: an exit_group or a fatal signal ends
	 * every thread anyway. Under attach, where breakpoints are what a kill -9
	 * of ptfil makes fatal, the process stays on the kernel path, and the
	 * user is told what may be lost.
	 */
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, t->tid, 0, &regs) || regs.orig_rax != SYS_exit)
		return;
	if (T->attach) {
		/* Breakpoints would be in its code while attached: nothing is written, and the user told. */
		warning("process %d ended its main thread (pthread_exit), to which the kernel ties ptfil's probes of it: "
			"when another program's probes of the same library go (another ptfil, bpftrace), the kernel takes "
			"them out and its allocations go unseen; -e ptrace does not depend on that", (int)p->pid);
		return;
	}
	leave_kernel_path(T, t, "ended its main thread (pthread_exit), to which the kernel ties its probes");
}

void kheap_python_forget(struct tracer *T, struct proc *p)
{
	if (kheap_on(T) && (p->kpy_described & KPY_DESCRIBED_KHEAP))
		pyread_forget(T->kh->kp.pyprocs_fd, p->pid);
	p->kpy_described &= ~KPY_DESCRIBED_KHEAP;
}

void kheap_proc_release(struct proc *p)
{
	if (p->kp->n_links)
		kprobes_detach(p->kp->links, p->kp->n_links);
	p->kp->n_links = 0;
}

void kheap_proc_fin(struct proc *p)
{
	kheap_proc_release(p);
	free(p->kp->links);
	p->kp->links = NULL;
	p->kp->cap_links = 0;
}

void kheap_refresh_stats(struct tracer *T)
{
	struct kheap *k = T->kh;
	if (!kheap_on(T))
		return;
	uint64_t c[KH_NCOUNTERS];
	kprobes_counters(&k->kp, c);
	T->kh->stats.lost = c[KH_C_LOST];
	T->kh->stats.short_stacks = c[KH_C_SHORT_STACK];
	T->kh->stats.retries = c[KH_C_RETRIES];
	T->kh->stats.python_stops = c[KH_C_PYSTOPS];
	T->kh->stats.waits = k->kp.waits;
}

/* Every record applied, every process's probes out, and what they wrote meanwhile applied too. */
static void release_all(struct tracer *T)
{
	kheap_drain(T);
	for (struct proc *p = T->procs; p; p = p->next)
		kheap_proc_release(p);
	kheap_drain(T);
}

int kheap_leave(struct tracer *T)
{
	struct kheap *k = T->kh;
	if (!kheap_on(T))
		return 0;
	release_all(T);
	int n = 0;
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *t = T->threads[h]; t; t = t->hnext)
			/*
			 * Not one held in a group-stop (kill -STOP): it must stay stopped,
			 * and the SIGCONT that ends it discards a queued SIGSTOP (a SIGURG
			 * is ignored).
			 */
			if (t->parked && !t->exiting && !t->group_stop &&
			    procfs_signal(t->tid, "SigPnd", k->stop_signal) == 1 &&
			    ptrace(PTRACE_CONT, t->tid, 0, 0) == 0) {
				t->parked = 0;
				n++;
			}
	return n;
}

void kheap_end(struct tracer *T)
{
	struct kheap *k = T->kh;
	if (!kheap_on(T))
		return;
	if (!k->ended) {
		kheap_drain(T);
		kheap_refresh_stats(T);
		if (T->kh->stats.lost)
			warning("%llu heap event records did not fit in the ring buffer: the heap figures are not exact "
				"(a larger PTFIL_RING_KIB keeps them)", (unsigned long long)T->kh->stats.lost);
		if (k->started)
			kwait_end();
		k->started = 0;
		k->ended = 1;
		/*
		 * Launched, every traced process is gone: removing the uprobes waits
		 * for the kernel (about 0.2 s for a program's libc and loader here),
		 * which the child that session.c leaves behind does after ptfil has
		 * exited (kernel_close_later). Until then no program signals anyone:
		 * a process that reused a traced pid is never stopped.
		 */
		if (!T->attach) {
			if (kprobes_config(&k->kp, 0, UINT64_MAX, 0))
				warning_errno("cannot disarm the heap probes' stop signal");
			else
				return;
		}
	}
	release_all(T);
	kprobes_close(&k->kp);
	k->open = 0;
	tracer_of_probes = NULL;
	T->on_sigaltstack = NULL;
}

#else

int kheap_start(struct tracer *T) { (void)T; return 0; }
void kheap_sigaltstack(struct tracer *T, struct tracee *t, uint64_t ss, uint64_t sp) { (void)T; (void)t; (void)ss; (void)sp; }
void kheap_leave_pending(struct tracer *T, struct tracee *t) { (void)T; (void)t; }
void kheap_leader_exit(struct tracer *T, struct tracee *t) { (void)T; (void)t; }
void kheap_drain(struct tracer *T) { (void)T; }
int kheap_owns_stop(struct tracer *T, struct tracee *t, int status) { (void)T; (void)t; (void)status; return 0; }
int kheap_call_stop(struct tracer *T, struct tracee *t) { (void)T; (void)t; return STOP_BACKPRESSURE; }
void kheap_refresh_stats(struct tracer *T) { (void)T; }
int kheap_leave(struct tracer *T) { (void)T; return 0; }
void kheap_proc_setup(struct tracer *T, struct proc *p) { (void)T; (void)p; }
void kheap_python_forget(struct tracer *T, struct proc *p) { (void)T; p->kpy_described &= ~KPY_DESCRIBED_KHEAP; }
void kheap_proc_release(struct proc *p) { (void)p; }
void kheap_proc_fin(struct proc *p) { (void)p; }
void kheap_end(struct tracer *T) { (void)T; }

#endif
