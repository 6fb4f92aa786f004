/*
 * The fault path (kernel/faults.h): loading and attaching the programs of
 * faults.bpf.c, the processes they follow, and their records applied to the
 * touch view in the order the kernel wrote them.
 */
#include "tracer/kernel/faults.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/snap.h"
#include "symbols/maps.h"
#include "tracer/core/procfs.h"
#include "tracer/core/session.h"
#include "tracer/kernel/faults_rec.h"
#include "tracer/kernel/kwait.h"
#include "tracer/kernel/pyread.h"
#include "tracer/kernel/pyread_rec.h"
#include "tracer/memory/alloc.h"
#include "tracer/memory/resid.h"
#include "tracer/ptrace/mapcalls.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/pystack.h"
#include "tracer/stacks/stacks.h"

#ifdef HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>

extern const unsigned char faults_bpf_obj[];
extern const size_t faults_bpf_obj_len;
#endif

/*
 * The ring: 16 MiB hold over a thousand of the largest records (an 8 KiB
 * stack, 256 Python frames), and no bench workload filled it (bench/fill 512
 * and linked_list: touch.backpressure 0, as at 64 MiB). Creating and mapping
 * 64 MiB cost every run about 40 ms more.
 */
#define FAULTS_DEFAULT_RING (16u << 20)
/* Records applied between two looks for a waiting stop: a look is a system call, a record a few microseconds. */
#define YIELD_EVERY 8
/* How often at most a process's pages are compared with the ledger for a rise no fault explained. */
#define GROW_SCAN_SECONDS 0.005
/* ... and for pages that went with no stop of ptfil's (a heap's brk shrink under launch). */
#define RELEASE_SCAN_SECONDS 0.01

struct faults {
	int open;
	int started;
	struct faults_stats stats;
#ifdef HAVE_BPF
	struct bpf_object *obj;
	struct bpf_link *links[5];
	int perf_fd;
	struct ring_buffer *rb;
	int tracked_fd, counters_fd, config_fd, moves_fd;
	size_t ring_size;
	size_t marked_threads;
	int stop_signal;
	/* A drain between stops (faults_drain_between) ends early for a stop waiting, checked every YIELD_EVERY records. */
	int yielding, yielded;
	unsigned yield_count;
#endif
	int pyprocs_fd, pycodes_fd;   /* the Python reader's processes and code objects named (pyread.bpf.h), -1 when none */
	/* Pseudo frames of memory made resident from outside, made when first needed. */
	uint32_t other_node, kthread_node, nostack_node, stackgrow_node;
};

int faults_on(const struct tracer *T)
{
	return T->kf && T->kf->open;
}

const struct faults_stats *faults_stats(struct tracer *T)
{
	static const struct faults_stats none;
	return T->kf ? &T->kf->stats : &none;
}

#ifdef HAVE_BPF

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	const char *d = getenv("PTFIL_BPF_DEBUG");
	if (!d || !*d || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int read_id(const char *path, unsigned long long *id)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int ok = fscanf(f, "%llu", id) == 1;
	fclose(f);
	return ok ? 0 : -1;
}

/*
 * The id of tracepoint kmem:rss_stat, which only tracefs says. Where it is
 * not mounted, a child of ptfil's mounts it in a mount namespace of its own
 * for the look-up (nothing changes for anyone else), and says the id
 * through a pipe.
 */
static int rss_stat_id(unsigned long long *id)
{
	static const char *const where[] = { "/sys/kernel/tracing/events/kmem/rss_stat/id",
					     "/sys/kernel/debug/tracing/events/kmem/rss_stat/id" };
	for (size_t i = 0; i < 2; i++)
		if (read_id(where[i], id) == 0)
			return 0;
	int fd[2];
	if (pipe2(fd, O_CLOEXEC))
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return -1;
	}
	if (pid == 0) {
		unsigned long long v = 0;
		if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		    mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0)
			read_id(where[0], &v);
		_exit(write(fd[1], &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 1);
	}
	close(fd[1]);
	unsigned long long v = 0;
	ssize_t got = read(fd[0], &v, sizeof(v));
	close(fd[0]);
	int status;
	waitpid(pid, &status, 0);
	if (got != (ssize_t)sizeof(v) || !v)
		return -1;
	*id = v;
	return 0;
}

static void say_errno(char *why, size_t n, const char *what, int err)
{
	if (err == EACCES && getenv("PTFIL_BPF_DEBUG") == NULL && geteuid() == 0)
		snprintf(why, n, "%s failed: the kernel's verifier refused them (PTFIL_BPF_DEBUG=1 shows why)", what);
	else if (err == EPERM || err == EACCES)
		snprintf(why, n, "%s needs CAP_BPF and CAP_PERFMON (or root): %s", what, strerror(err));
	else
		snprintf(why, n, "%s failed: %s", what, strerror(err));
}

static size_t ring_bytes(void)
{
	const char *s = getenv("PTFIL_FAULT_RING_KIB");
	if (!s || !*s)
		return FAULTS_DEFAULT_RING;
	char *end;
	unsigned long long kib = strtoull(s, &end, 10);
	size_t b = (size_t)kib << 10;
	if (*end || kib < 64 || kib > (1ull << 30) || (b & (b - 1))) {
		warning("PTFIL_FAULT_RING_KIB=%s is not a power of two of at least 64; using %u", s,
			FAULTS_DEFAULT_RING >> 10);
		return FAULTS_DEFAULT_RING;
	}
	return b;
}

static void close_bpf(struct faults *f)
{
	if (f->rb)
		ring_buffer__free(f->rb);
	f->rb = NULL;
	for (size_t i = 0; i < sizeof(f->links) / sizeof(f->links[0]); i++)
		if (f->links[i])
			bpf_link__destroy(f->links[i]);
	memset(f->links, 0, sizeof(f->links));
	if (f->perf_fd >= 0)
		close(f->perf_fd);
	f->perf_fd = -1;
	if (f->obj)
		bpf_object__close(f->obj);
	f->obj = NULL;
}

static int on_ring(void *ctx, void *data, size_t len);

static int open_fault_path(struct tracer *T, struct faults *f, char *why, size_t n)
{
	f->perf_fd = -1;
	libbpf_set_print(quiet_print);
	f->obj = bpf_object__open_mem(faults_bpf_obj, faults_bpf_obj_len, NULL);
	if (!f->obj) {
		snprintf(why, n, "cannot read ptfil's fault programs: %s", strerror(errno));
		return -1;
	}
	f->ring_size = ring_bytes();
	struct bpf_map *ring = bpf_object__find_map_by_name(f->obj, "ring");
	if (!ring || bpf_map__set_max_entries(ring, (uint32_t)f->ring_size)) {
		snprintf(why, n, "cannot size the fault ring");
		return -1;
	}
	/* The syscall tracepoints' programs serve attach alone (below): under launch they are not even verified. */
	if (!T->attach)
		for (const char *const *name = (const char *const[]){ "kf_sys_enter", "kf_sys_exit", NULL }; *name; name++) {
			struct bpf_program *p = bpf_object__find_program_by_name(f->obj, *name);
			if (p)
				bpf_program__set_autoload(p, false);
		}
	int err = bpf_object__load(f->obj);
	if (err) {
		say_errno(why, n, "loading the fault programs", err < 0 ? -err : err);
		return -1;
	}
	/*
	 * links[0, 1]: the page-fault tracepoints; [2]: rss_stat; [3, 4] the
	 * syscall tracepoints, which cost every syscall of the machine a compare
	 * (docs/fault-path.md): only under attach, where no mremap stops.
	 */
	static const char *const tp[4] = { "kf_fault_user", "kf_fault_kernel", "kf_sys_enter", "kf_sys_exit" };
	static const int slot[4] = { 0, 1, 3, 4 };
	for (int i = 0; i < (T->attach ? 4 : 2); i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(f->obj, tp[i]);
		if (!p || !(f->links[slot[i]] = bpf_program__attach(p))) {
			say_errno(why, n, i < 2 ? "attaching to the page-fault tracepoints" : "attaching to the syscall tracepoints",
				  errno);
			return -1;
		}
	}
	unsigned long long id;
	if (rss_stat_id(&id)) {
		snprintf(why, n, "the tracepoint kmem:rss_stat cannot be found (tracefs cannot be mounted)");
		return -1;
	}
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_TRACEPOINT;
	a.config = id;
	a.sample_period = 1;
	/* One event carries the program: it runs at every hit of the tracepoint, on every CPU. */
	f->perf_fd = (int)syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	struct bpf_program *rss = bpf_object__find_program_by_name(f->obj, "kf_rss");
	if (f->perf_fd < 0 || !rss || !(f->links[2] = bpf_program__attach_perf_event(rss, f->perf_fd))) {
		say_errno(why, n, "attaching to kmem:rss_stat", errno);
		return -1;
	}
	f->tracked_fd = bpf_object__find_map_fd_by_name(f->obj, "tracked");
	f->counters_fd = bpf_object__find_map_fd_by_name(f->obj, "counters");
	f->config_fd = bpf_object__find_map_fd_by_name(f->obj, "config");
	f->moves_fd = bpf_object__find_map_fd_by_name(f->obj, "moves");
	f->pyprocs_fd = bpf_object__find_map_fd_by_name(f->obj, "pyprocs");
	f->pycodes_fd = bpf_object__find_map_fd_by_name(f->obj, "pycodes");
	int ring_fd = bpf_map__fd(ring);
	if (f->tracked_fd < 0 || f->counters_fd < 0 || f->config_fd < 0 || f->moves_fd < 0 || f->pyprocs_fd < 0 || f->pycodes_fd < 0 ||
	    ring_fd < 0) {
		snprintf(why, n, "ptfil's fault programs lack a map");
		return -1;
	}
	f->rb = ring_buffer__new(ring_fd, on_ring, T, NULL);
	if (!f->rb) {
		snprintf(why, n, "cannot read the fault ring: %s", strerror(errno));
		return -1;
	}
	f->marked_threads = (size_t)-1;
	return 0;
}

#else

static int open_fault_path(struct tracer *T, struct faults *f, char *why, size_t n)
{
	(void)T;
	(void)f;
	snprintf(why, n, "ptfil was built without BPF (configure found no clang or libbpf-dev)");
	return -1;
}

#endif

int faults_choose(struct tracer *T)
{
	int mode = T->opts.charge;
	/* --mappings-only asks for the alloc view of mappings alone. */
	if (mode == CHARGE_ALLOC || (mode == CHARGE_AUTO && T->opts.no_heap))
		return 0;
	struct faults *f = calloc(1, sizeof(*f));
	if (!f)
		return error("out of memory");
	f->other_node = f->kthread_node = f->nostack_node = f->stackgrow_node = STACKS_FAILED;
	f->pyprocs_fd = f->pycodes_fd = -1;
	T->kf = f;
	char why[512] = "";
	if (open_fault_path(T, f, why, sizeof(why)) == 0) {
		f->open = 1;
		return 0;
	}
#ifdef HAVE_BPF
	close_bpf(f);
#endif
	if (mode != CHARGE_AUTO)
		return error("cannot charge memory to the code that made it resident (--charge %s): %s; "
			     "--charge alloc works without it", mode == CHARGE_BOTH ? "both" : "touch", why);
	notice("memory is charged to the code that allocated it (--charge alloc): the fault path cannot run: %s", why);
	return 0;
}

int faults_python(struct tracer *T, struct proc *p)
{
	if (!faults_on(T) || (p->kpy_described & KPY_DESCRIBED_FAULTS) || T->cap->no_python)
		return 0;
	pystack_detect(p->py, p->mm, T->reg, p->pid);
	if (p->py->state != PY_READY)
		return 0;
	p->kpy_described |= KPY_DESCRIBED_FAULTS;
	char why[256];
	if (pyread_describe(T->kf->pyprocs_fd, p->py, p->pid, why, sizeof(why)) == 0)
		return 0;
	if (T->opts.charge != CHARGE_AUTO)
		notice("process %d: its Python frames cannot be read by the kernel (%s): its stacks show native "
		       "frames only; --charge alloc -e ptrace reads them", (int)p->pid, why);
	return -1;
}

void faults_python_forget(struct tracer *T, struct proc *p)
{
	if (T->kf && (p->kpy_described & KPY_DESCRIBED_FAULTS))
		pyread_forget(T->kf->pyprocs_fd, p->pid);
	p->kpy_described &= ~KPY_DESCRIBED_FAULTS;
}

int faults_view(struct tracer *T, struct proc *p)
{
	if (!faults_on(T))
		return CHARGE_ALLOC;
	/* A new image: whatever Python the old one ran is read no more. */
	pyread_forget(T->kf->pyprocs_fd, p->pid);
	p->kpy_described &= ~KPY_DESCRIBED_FAULTS;
	int mode = T->opts.charge;
	if (pystack_runs_python(p->mm, T->reg) && faults_python(T, p) && mode == CHARGE_AUTO) {
		/* Its frames are read at each call instead, on the ptrace path. */
		if (p->pid == T->main_pid)
			notice("process %d runs a Python whose frames the kernel cannot read: memory is charged to the "
			       "code that allocated it (--charge alloc)", (int)p->pid);
		return CHARGE_ALLOC;
	}
	return mode == CHARGE_AUTO ? CHARGE_TOUCH : mode;
}

#ifdef HAVE_BPF

/* The stop mark: each thread can write one record past it before its signal stops it. */
static void set_marks(struct tracer *T)
{
	struct faults *f = T->kf;
	if (f->marked_threads == T->n_threads)
		return;
	f->marked_threads = T->n_threads;
	uint64_t ring = f->ring_size,
		 room = (uint64_t)(T->n_threads + 4) * (sizeof(struct kf_big) + sizeof(struct kpy_rec) + 32);
	struct kf_config c = { ring > 2 * room ? ring - room : ring / 4, ring / 4, (unsigned long long)f->stop_signal };
	uint32_t zero = 0;
	if (bpf_map_update_elem(f->config_fd, &zero, &c, BPF_ANY))
		warning_errno("cannot set the fault ring's marks");
}

int faults_start(struct tracer *T)
{
	struct faults *f = T->kf;
	if (!faults_on(T) || f->started)
		return 0;
	if (kwait_start(T))
		return -1;
	f->started = 1;
	T->apply_faults = faults_drain;
	f->stop_signal = kwait_stop_signal();
	if (kwait_add(ring_buffer__epoll_fd(f->rb)))
		return -1;
	set_marks(T);
	return 0;
}

int faults_track(struct tracer *T, struct proc *p)
{
	if (!faults_on(T) || !p->touch)
		return 0;
	uint32_t pid = (uint32_t)p->pid, one = 1;
	if (bpf_map_update_elem(T->kf->tracked_fd, &pid, &one, BPF_ANY))
		return error_errno("cannot follow the page faults of process %d", (int)p->pid);
	/* Moves written before (a previous image, a previous run's process) are not waited for. */
	struct kf_moves m;
	p->touch->moves_applied = bpf_map_lookup_elem(T->kf->moves_fd, &pid, &m) == 0 ? m.moved : 0;
	return 0;
}

void faults_untrack(struct tracer *T, struct proc *p)
{
	if (!T->kf || T->kf->tracked_fd <= 0)
		return;
	uint32_t pid = (uint32_t)p->pid;
	bpf_map_delete_elem(T->kf->tracked_fd, &pid);
	bpf_map_delete_elem(T->kf->moves_fd, &pid);
	pyread_forget(T->kf->pyprocs_fd, p->pid);
	p->kpy_described &= ~KPY_DESCRIBED_FAULTS;
}

/*
 * Whether p's pages may be compared with the ledger now: no mremap of p in
 * flight (seen at its stops under launch, by the kernel's syscall
 * tracepoints under attach), every move it made applied. *m is what the kernel said, for
 * moves_unchanged after the comparison.
 */
static int moves_settled(struct tracer *T, struct proc *p, struct kf_moves *m)
{
	uint32_t pid = (uint32_t)p->pid;
	/* Under launch an mremap stops at its entry and its exit, where the move is applied. */
	if (sysc_moving(T, p))
		return 0;
	if (bpf_map_lookup_elem(T->kf->moves_fd, &pid, m))
		memset(m, 0, sizeof(*m));
	return m->begun == m->finished && p->touch->moves_applied >= m->moved;
}

/* ... and whether no mremap began since. */
static int moves_unchanged(struct tracer *T, struct proc *p, const struct kf_moves *before)
{
	struct kf_moves m;
	return moves_settled(T, p, &m) && m.begun == before->begun;
}

static void to_regs(const struct kf_rec *r, struct user_regs_struct *u)
{
	memset(u, 0, sizeof(*u));
	u->rip = r->regs[0];
	u->rsp = r->regs[1];
	u->rbp = r->regs[2];
	u->rbx = r->regs[3];
	u->r12 = r->regs[4];
	u->r13 = r->regs[5];
	u->r14 = r->regs[6];
	u->r15 = r->regs[7];
	u->rax = r->regs[8];
	u->rcx = r->regs[9];
	u->rdx = r->regs[10];
	u->rsi = r->regs[11];
	u->rdi = r->regs[12];
	u->r8 = r->regs[13];
	u->r9 = r->regs[14];
	u->r10 = r->regs[15];
	u->r11 = r->regs[16];
}

static uint32_t pseudo(struct tracer *T, uint32_t *node, const char *name)
{
	if (*node == STACKS_FAILED) {
		uint32_t fr = stacks_pseudo_frame(T->stacks, name);
		*node = fr == STACKS_FAILED ? STACKS_ROOT : stacks_intern(T->stacks, &fr, 1);
	}
	return *node;
}

/* The stack a record is charged to: its thread's, from its copy, the last one's, or a pseudo frame. */
static uint32_t record_stack(struct tracer *T, struct proc *p, const struct kf_rec *r, size_t len)
{
	struct faults *f = T->kf;
	if (r->flags & KF_KTHREAD)
		return pseudo(T, &f->kthread_node, "[made resident by a kernel thread]");
	if (r->flags & KF_OTHER)
		return pseudo(T, &f->other_node, "[written by another process]");
	struct tracee *t = tracer_find(T, (pid_t)r->tid);
	if (!t || t->p != p)
		return pseudo(T, &f->other_node, "[written by another process]");
	if ((r->flags & KF_SAME) && t->st->fault_stack != STACKS_FAILED)
		return t->st->fault_stack;
	if (!(r->flags & KF_STACK) || len < sizeof(struct kf_rec) + r->stack_len) {
		/* The copy fails when the page that holds the stack pointer is the one faulting in: the stack growing. */
		uint64_t sp = r->regs[1];
		if (r->addr <= sp + 4096 && r->addr + (1u << 20) > sp)
			return pseudo(T, &f->stackgrow_node, "[thread stack growing]");
		return pseudo(T, &f->nostack_node, "[stack not readable]");
	}
	struct user_regs_struct regs;
	to_regs(r, &regs);
	const struct kf_big *b = (const struct kf_big *)(const void *)r;
	/* libpython loaded since (dlopen, a program embedding Python): its later faults get Python frames. */
	faults_python(T, p);
	uint32_t stack = capture_copied(T, t, &regs, b->stack, r->stack_len, (r->flags & KF_PY) != 0);
	t->st->fault_stack = stack;
	return stack;
}

/* A rise no fault explains, and a fall: what changed is found by comparing the pages with the ledger. */
struct scan {
	struct tracer *T;
	struct proc *p;
	uint32_t stack;
	double time;
	uint64_t bytes;
};

static void add_present(void *ctx, uint64_t start, uint64_t end)
{
	struct scan *s = ctx;
	/* Only pages not charged yet are: the others keep their stacks. */
	uint64_t before = s->p->touch->l.charged;
	alloc_resident(s->T, s->p, start, end, s->stack, s->time, s->p->touch->rss_seen + s->p->touch->file_rss, 0);
	s->bytes += s->p->touch->l.charged - before;
}

/* A region's pages found resident (a bitmap of its 512), by resid_present. */
struct present {
	uint64_t base;
	uint64_t bits[PAGES_PER_REGION / 64];
};

static void mark_present(void *ctx, uint64_t start, uint64_t end)
{
	struct present *pr = ctx;
	for (uint64_t a = start; a < end; a += 4096) {
		uint64_t i = (a - pr->base) >> PAGES_SHIFT;
		if (i < PAGES_PER_REGION)
			pr->bits[i / 64] |= 1ull << (i % 64);
	}
}

/* Adds [start, end) to p's ranges found gone (struct touch's gone). Returns 0, or -1 out of memory. */
static int gone_add(struct touch *tv, uint64_t start, uint64_t end)
{
	if (tv->n_gone && tv->gone[tv->n_gone - 1].end == start) {
		tv->gone[tv->n_gone - 1].end = end;
		return 0;
	}
	if (tv->n_gone == tv->cap_gone) {
		size_t cap = tv->cap_gone ? 2 * tv->cap_gone : 64;
		struct touch_range *v = realloc(tv->gone, cap * sizeof(*v));
		if (!v)
			return -1;
		tv->gone = v;
		tv->cap_gone = cap;
	}
	tv->gone[tv->n_gone++] = (struct touch_range){ start, end };
	return 0;
}

/* The ranges a look found gone released, the peak settled first (alloc_released). */
static void gone_apply(struct tracer *T, struct proc *p)
{
	struct touch *tv = p->touch;
	uint64_t released = 0;
	for (size_t k = 0; k < tv->n_gone; k++) {
		uint64_t charged = tv->l.charged;
		alloc_released(T, p, tv->gone[k].start, tv->gone[k].end);
		released += charged - tv->l.charged;
	}
	tv->n_gone = 0;
	T->kf->stats.scan_released += released;
}

/*
 * The pages the ledger charges that are not resident any more (unmapped with
 * no stop seen, reclaimed, swapped out, MADV_FREE'd and taken back). Not
 * while an mremap of p is in flight or its record unread, nor when one began
 * during the look: the pages it moved are not gone, and its record moves
 * their charges.
 *
 * They are not released at once: faults made before the look may still be in
 * the ring, and charged after a release they preceded they would rise from a
 * ledger already lowered, a peak missed. The ranges wait in tv->gone, with
 * the time of the look, for the first record after it (apply_record) or for
 * the ring read to its end (gone_settle): the records' order, as the peak
 * needs it.
 */
static void scan_released(struct tracer *T, struct proc *p)
{
	struct touch *tv = p->touch;
	struct kf_moves before;
	if (!moves_settled(T, p, &before))
		return;
	/* A look found its ranges before this one began: they go first. */
	if (tv->n_gone)
		gone_apply(T, p);
	/* Regions first (the table changes as pages go). */
	size_t n = 0;
	uint64_t *idx = malloc((tv->pages.n ? tv->pages.n : 1) * sizeof(*idx));
	if (!idx)
		return;
	for (size_t i = 0; i < tv->pages.cap && n < tv->pages.n; i++)
		if (tv->pages.slot[i])
			idx[n++] = tv->pages.slot[i]->index;
	/* Before the look: a record stamped earlier is of a fault that the look saw, or that came before a release it saw. */
	double at = tracer_now(T);
	int failed = 0;
	for (size_t k = 0; k < n && !failed; k++) {
		struct present pr;
		memset(&pr, 0, sizeof(pr));
		pr.base = idx[k] << PAGES_REGION_SHIFT;
		if (resid_present(p->resid, pr.base, pr.base + (1ull << PAGES_REGION_SHIFT), mark_present, &pr))
			break;
		for (uint64_t i = 0; i < PAGES_PER_REGION;) {
			uint64_t a = pr.base + (i << PAGES_SHIFT);
			if ((pr.bits[i / 64] >> (i % 64)) & 1 || pages_stack(&tv->pages, a) == PAGES_NONE) {
				i++;
				continue;
			}
			uint64_t j = i + 1;
			while (j < PAGES_PER_REGION && !((pr.bits[j / 64] >> (j % 64)) & 1))
				j++;
			if (gone_add(tv, a, pr.base + (j << PAGES_SHIFT))) {
				failed = 1;
				break;
			}
			i = j;
		}
	}
	free(idx);
	if (failed || !moves_unchanged(T, p, &before))
		tv->n_gone = 0;
	tv->gone_at = at;
	T->kf->stats.scans++;
}

/*
 * Every look's ranges released, once the records stamped before it have been
 * applied: the ring is read once more (not when a stop cut the reading short:
 * the ranges then wait for the next record or drain).
 */
static void gone_settle(struct tracer *T)
{
	struct faults *f = T->kf;
	int pending = 0;
	for (struct proc *p = T->procs; p && !pending; p = p->next)
		pending = p->touch && p->touch->n_gone;
	if (!pending)
		return;
	ring_buffer__consume(f->rb);
	if (f->yielded)
		return;
	for (struct proc *p = T->procs; p; p = p->next)
		if (p->touch && p->touch->n_gone)
			gone_apply(T, p);
}

/* Charges to stack every resident anonymous or private page of p that the ledger has not: a GUP, another writer. */
static void scan_grown(struct tracer *T, struct proc *p, uint32_t stack, double time)
{
	struct maps maps;
	if (proc_maps_read(p->pid, &maps)) {
		maps_fin(&maps);
		return;
	}
	struct scan s = { T, p, stack, time, 0 };
	for (size_t i = 0; i < maps.n; i++) {
		const struct maps_entry *e = &maps.v[i];
		/*
		 * Private writable memory: anonymous, or a file's pages written (its
		 * copies are anonymous; the file's own pages are left out by resid_present).
		 */
		if (!(e->perms & MAPS_W) || (e->perms & MAPS_SHARED))
			continue;
		resid_present(p->resid, e->start, e->end, add_present, &s);
	}
	maps_fin(&maps);
	T->kf->stats.scans++;
	T->kf->stats.scan_added += s.bytes;
}

void faults_charge_resident(struct tracer *T, struct proc *p, uint32_t stack)
{
	if (faults_on(T) && p->touch)
		scan_grown(T, p, stack, tracer_now(T));
}

/*
 * The first fault recorded in an address space (KF_FIRST: after an attach,
 * the first write to a new page) had no count before it to say its size: a
 * huge page's 2 MiB would be charged as 4 KiB, the rest never. The pages of
 * the huge page that can hold addr, resident and charged to no one (the
 * process was stopped and its pages charged when it was first tracked), are
 * this fault's.
 */
static void first_fault_extent(struct tracer *T, struct proc *p, uint64_t addr, uint32_t stack, double time)
{
	struct scan s = { T, p, stack, time, 0 };
	uint64_t base = addr & ~((2ull << 20) - 1);
	resid_present(p->resid, base, base + (2ull << 20), add_present, &s);
	T->kf->stats.first_extent += s.bytes;
}

static void apply_record(struct tracer *T, const struct kf_rec *r, size_t len);

/* True when a ptrace stop waits to be reported (it stays reported: WNOWAIT). */
static int stop_waiting(void)
{
	siginfo_t si;
	si.si_pid = 0;
	return waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT | __WALL) == 0 && si.si_pid != 0;
}

static int on_ring(void *ctx, void *data, size_t len)
{
	struct tracer *T = ctx;
	struct faults *f = T->kf;
	const struct kf_rec *r = data;
	if (len >= sizeof(uint32_t) && r->kind == KPY_REC) {
		/* Its event's record follows: the two are applied together. */
		pyread_keep(T, data, len, f->pycodes_fd);
		return 0;
	}
	if (len < sizeof(*r))
		return 0;
	apply_record(T, r, len);
	/* Between stops, a stop that comes is seen to before the rest of the batch (faults_drain_between). */
	if (f->yielding && ++f->yield_count % YIELD_EVERY == 0 && stop_waiting()) {
		f->yielded = 1;
		return -EINTR;
	}
	return 0;
}

static void apply_record(struct tracer *T, const struct kf_rec *r, size_t len)
{
	struct faults *f = T->kf;
	f->stats.records++;
	struct proc *p = tracer_proc(T, (pid_t)r->owner);
	/* A move is counted as seen even where it is not applied, so that the comparison with the pages is not held up. */
	if (r->kind == KF_MOVE && p && p->touch && r->regs[KF_MOVE_SEQ] > p->touch->moves_applied)
		p->touch->moves_applied = r->regs[KF_MOVE_SEQ];
	if (!p || !p->touch || !p->profiled || !p->ready) {
		f->stats.unknown++;
		return;
	}
	double time = (double)r->time / 1e9 - T->t0;
	struct touch *tv = p->touch;
	/* The first record after a look that found pages gone: their release comes before it. */
	if (tv->n_gone && time > tv->gone_at)
		gone_apply(T, p);
	switch (r->kind) {
	case KF_FAULT:
	case KF_COW: {
		f->stats.faults += r->kind == KF_FAULT;
		f->stats.cows += r->kind == KF_COW;
		uint64_t size = r->size > 0 ? (uint64_t)r->size : 4096;
		uint32_t stack = record_stack(T, p, r, len);
		tv->rss_seen = r->rss;
		alloc_resident(T, p, r->addr, r->addr + size, stack, time, r->rss + tv->file_rss, r->kind == KF_FAULT);
		if (r->flags & KF_FIRST)
			first_fault_extent(T, p, r->addr, stack, time);
		break;
	}
	case KF_GROW:
		f->stats.grows++;
		/* Where: not said. Found by a scan, soon, charged to the stack of what caused it. */
		if (!tv->grow_pending || tv->grow_stack != record_stack(T, p, r, len)) {
			if (tv->grow_pending)
				scan_grown(T, p, tv->grow_stack, time);
			tv->grow_stack = record_stack(T, p, r, len);
			tv->grow_pending = 1;
		}
		tv->rss_seen = r->rss;
		break;
	case KF_SHRINK:
		f->stats.shrinks++;
		tv->rss_seen = r->rss;
		/*
		 * Under attach a release stops nothing: the pages that went are found
		 * by comparing with the kernel's. Compared here, in the records'
		 * order, before the faults after it are charged (else a batch read
		 * late would charge both, a peak that never was), at most every
		 * RELEASE_SCAN_SECONDS of the program's time.
		 */
		if (tv->release_scans && tv->rss_seen < tv->l.charged &&
		    time - tv->released_scanned_rec >= RELEASE_SCAN_SECONDS) {
			tv->released_scanned_rec = time;
			tv->released_scanned_at = tracer_now(T);
			scan_released(T, p);
		}
		break;
	case KF_MOVE: {
		/* In its place among the faults: the pages before it were charged at the old addresses. */
		f->stats.moves++;
		alloc_remapped(T, p, r->addr, (uint64_t)r->size, r->regs[KF_MOVE_LEN], r->regs[KF_MOVE_TO]);
		break;
	}
	default:
		break;
	}
}

static void refresh_counters(struct tracer *T)
{
	struct faults *f = T->kf;
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return;
	uint64_t *v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return;
	uint64_t sum[KF_NCOUNTERS] = { 0 };
	for (uint32_t k = 0; k < KF_NCOUNTERS; k++)
		if (bpf_map_lookup_elem(f->counters_fd, &k, v) == 0)
			for (int c = 0; c < ncpu; c++)
				sum[k] += v[c];
	free(v);
	f->stats.lost = sum[KF_C_LOST];
	f->stats.stops = sum[KF_C_STOPS];
	f->stats.reads = sum[KF_C_READS];
	f->stats.stack_fails = sum[KF_C_STACKFAIL];
	f->stats.same_stacks = sum[KF_C_SAME];
	f->stats.stale = sum[KF_C_STALE];
	f->stats.retries = sum[KF_C_RETRIES];
	f->stats.python_stops = sum[KF_C_PYSTOPS];
}

void faults_drain_between(struct tracer *T)
{
	struct faults *f = T->kf;
	if (!faults_on(T))
		return;
	f->yielding = 1;
	faults_drain(T);
	f->yielding = 0;
}

void faults_drain(struct tracer *T)
{
	struct faults *f = T->kf;
	if (!faults_on(T))
		return;
	set_marks(T);
	f->yielded = 0;
	/* Records written while the last ones were applied are read too, up to a bound (the caller comes back). */
	for (int round = 0; round < 4 && !f->yielded && ring_buffer__consume(f->rb) > 0; round++) {
	}
	/* Cut short: the scans compare the pages with a ledger that has records still to apply; the next drain runs them. */
	if (f->yielded)
		return;
	double now = tracer_now(T);
	for (struct proc *p = T->procs; p; p = p->next) {
		struct touch *tv = p->touch;
		if (!tv || !p->ready || !p->nthreads)
			continue;
		/*
		 * What the count lost and no stop explained (attach has none; brk, a
		 * shrink of the heap, does not stop; a stop's own release follows its
		 * exit) is found in the pages, at most every few milliseconds.
		 */
		if (tv->rss_seen < tv->l.charged && (tv->release_scans || now - tv->released_scanned_at >= RELEASE_SCAN_SECONDS)) {
			tv->released_scanned_at = now;
			scan_released(T, p);
		}
		if (!tv->grow_pending || now - tv->grow_scanned_at < GROW_SCAN_SECONDS)
			continue;
		tv->grow_pending = 0;
		tv->grow_scanned_at = now;
		scan_grown(T, p, tv->grow_stack, now);
	}
	gone_settle(T);
}

void faults_poll(struct tracer *T, struct proc *p)
{
	struct touch *tv = p->touch;
	if (!faults_on(T) || !tv || !p->ready || !p->nthreads)
		return;
	faults_drain(T);
	/* Pages that went with no call ptfil stops at: reclaimed, swapped out, MADV_FREE'd and taken back. */
	uint64_t anon = resid_anon(p->resid), rss = resid_rss(p->resid);
	if (rss >= anon)
		tv->file_rss = rss - anon;
	if (anon && anon < tv->l.charged) {
		scan_released(T, p);
		gone_settle(T);
	}
}

int faults_owns_stop(struct tracer *T, struct tracee *t, int status)
{
	return faults_on(T) && T->kf->started && kwait_owns_stop(t, status);
}

static void faults_untrack_all(struct tracer *T)
{
	for (struct proc *p = T->procs; p; p = p->next)
		faults_untrack(T, p);
}

int faults_leave(struct tracer *T)
{
	struct faults *f = T->kf;
	if (!faults_on(T))
		return 0;
	faults_untrack_all(T);
	faults_drain(T);
	int n = 0;
	for (size_t h = 0; h < TRACER_HASH; h++)
		for (struct tracee *t = T->threads[h]; t; t = t->hnext)
			/* As kheap_leave: a queued back-pressure signal is reported (and suppressed) before the thread is let go. */
			if (t->parked && !t->exiting && !t->group_stop &&
			    procfs_signal(t->tid, "SigPnd", f->stop_signal) == 1 && ptrace(PTRACE_CONT, t->tid, 0, 0) == 0) {
				t->parked = 0;
				n++;
			}
	return n;
}

void faults_end(struct tracer *T)
{
	struct faults *f = T->kf;
	if (!faults_on(T))
		return;
	faults_drain(T);
	refresh_counters(T);
	if (f->stats.lost)
		warning("%llu page fault records did not fit in the ring buffer: the touch view is not exact "
			"(a larger PTFIL_FAULT_RING_KIB keeps them)", (unsigned long long)f->stats.lost);
	if (f->started)
		kwait_end();
	f->started = 0;
	T->apply_faults = NULL;
	/* The ring is read no more; the programs and links go with faults_free (kernel_close_later). */
	faults_untrack_all(T);
	f->open = 0;
}

#else

int faults_start(struct tracer *T) { (void)T; return 0; }
void faults_charge_resident(struct tracer *T, struct proc *p, uint32_t stack) { (void)T; (void)p; (void)stack; }
void faults_poll(struct tracer *T, struct proc *p) { (void)T; (void)p; }
int faults_track(struct tracer *T, struct proc *p) { (void)T; (void)p; return 0; }
void faults_untrack(struct tracer *T, struct proc *p) { (void)T; (void)p; }
void faults_drain(struct tracer *T) { (void)T; }
void faults_drain_between(struct tracer *T) { (void)T; }
int faults_owns_stop(struct tracer *T, struct tracee *t, int status) { (void)T; (void)t; (void)status; return 0; }
int faults_leave(struct tracer *T) { (void)T; return 0; }
void faults_end(struct tracer *T) { (void)T; }

#endif

void faults_free(struct tracer *T)
{
	faults_end(T);
#ifdef HAVE_BPF
	if (T->kf)
		close_bpf(T->kf);
#endif
	free(T->kf);
	T->kf = NULL;
}
