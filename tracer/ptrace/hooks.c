/* Writing and finding the int3 hooks of the malloc family and the load hook. */
#include "tracer/ptrace/hooks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include "common/error.h"
#include "common/grow.h"
#include "symbols/exits.h"
#include "symbols/maps.h"
#include "symbols/sym.h"
#include "tracer/core/remote.h"
#include "tracer/core/rescue.h"

const char *const hook_names[HOOK__COUNT] = {
	[HOOK_MALLOC] = "malloc", [HOOK_CALLOC] = "calloc", [HOOK_REALLOC] = "realloc",
	[HOOK_REALLOCARRAY] = "reallocarray", [HOOK_FREE] = "free",
	[HOOK_POSIX_MEMALIGN] = "posix_memalign", [HOOK_ALIGNED_ALLOC] = "aligned_alloc",
	[HOOK_MEMALIGN] = "memalign", [HOOK_VALLOC] = "valloc", [HOOK_PVALLOC] = "pvalloc",
	[HOOK_DL_DEBUG] = "_dl_debug_state",
	[HOOK_MMAP] = "mmap", [HOOK_MUNMAP] = "munmap", [HOOK_MREMAP] = "mremap",
	[HOOK_MADVISE] = "madvise", [HOOK_BRK] = "brk", [HOOK_SIGALTSTACK] = "sigaltstack",
};

void hooks_init(struct hooks *h)
{
	memset(h, 0, sizeof(*h));
	u64map_init(&h->by_addr);
}

void hooks_fin(struct hooks *h)
{
	free(h->v);
	free(h->scanned);
	free(h->exit_fn);
	u64map_fin(&h->by_addr);
	memset(h, 0, sizeof(*h));
}

static void forget_all(struct hooks *h)
{
	int wrappers = h->wrappers, no_heap = h->no_heap, exact = h->exact_sizes;
	hooks_probe_fn probe = h->probe, call_probe = h->call_probe;
	void *ctx = h->probe_ctx;
	hooks_fin(h);
	hooks_init(h);
	h->wrappers = wrappers;
	h->no_heap = no_heap;
	h->exact_sizes = exact;
	h->probe = probe;
	h->call_probe = call_probe;
	h->probe_ctx = ctx;
}

int hooks_copy(struct hooks *dst, const struct hooks *src)
{
	forget_all(dst);
	dst->trampoline = src->trampoline;
	dst->trampoline_armed = src->trampoline_armed;
	dst->trampoline_orig = src->trampoline_orig;
	dst->wrappers = src->wrappers;
	dst->no_heap = src->no_heap;
	dst->exact_sizes = src->exact_sizes;
	dst->curbrk = src->curbrk;
	for (size_t i = 0; i < src->n_exit_fn; i++) {
		if (grow_array(&dst->exit_fn, &dst->cap_exit_fn, dst->n_exit_fn + 1, sizeof(*dst->exit_fn), 4))
			return -1;
		dst->exit_fn[dst->n_exit_fn++] = src->exit_fn[i];
	}
	/* The kernel's probes are the parent's alone: the child's own are made when its modules are scanned. */
	dst->probe = src->probe;
	dst->call_probe = src->call_probe;
	for (size_t i = 0; i < src->n; i++) {
		if (grow_array(&dst->v, &dst->cap, dst->n + 1, sizeof(*dst->v), 32))
			return -1;
		dst->v[dst->n] = src->v[i];
		if (u64map_put(&dst->by_addr, src->v[i].addr, (uint32_t)dst->n))
			return -1;
		dst->n++;
	}
	return 0;
}

const struct hook_bp *hooks_find(const struct hooks *h, uint64_t addr)
{
	uint32_t i = u64map_get(&h->by_addr, addr);
	return i == U64MAP_NONE || h->v[i].addr != addr ? NULL : &h->v[i];
}

const struct hooks_exit_fn *hooks_exit_fn_at(const struct hooks *h, uint64_t ip)
{
	for (size_t i = 0; i < h->n_exit_fn; i++)
		if (ip >= h->exit_fn[i].lo && ip < h->exit_fn[i].hi)
			return &h->exit_fn[i];
	return NULL;
}

/* Through a stopped thread (tracer/core/remote.c). */
static int tid_read(const struct hooks_mem *m, uint64_t addr, void *buf, size_t n)
{
	return remote_read(m->tid, addr, buf, n);
}

static int tid_write(const struct hooks_mem *m, uint64_t addr, const void *buf, size_t n)
{
	return remote_write(m->tid, addr, buf, n);
}

struct hooks_mem hooks_mem_tid(pid_t tid)
{
	struct hooks_mem m = { tid_read, tid_write, tid, NULL };
	return m;
}

/*
 * Writes byte over the byte at addr (an int3, or the original back), keeping
 * the old one in *old when old is not NULL. Returns 0, or -1 after error():
 * a hook that did not go in (or out) matters.
 */
static int write_byte(const struct hooks_mem *mem, uint64_t addr, uint8_t byte, uint8_t *old)
{
	uint8_t was;
	if (mem->read(mem, addr, &was, 1))
		return error_errno("cannot read the code at %#llx", (unsigned long long)addr);
	/* The crash rescue knows of every int3 before it is in, and forgets it only once the code is back. */
	if (byte == 0xcc && mem->tid)
		rescue_byte_note(mem->tid, addr, was);
	if (mem->write(mem, addr, &byte, 1))
		return error_errno("cannot write %s at %#llx", byte == 0xcc ? "a breakpoint" : "back the code",
				   (unsigned long long)addr);
	if (byte != 0xcc && mem->tid)
		rescue_byte_forget(mem->tid, addr);
	if (old)
		*old = was;
	return 0;
}

static int reindex(struct hooks *h)
{
	u64map_fin(&h->by_addr);
	u64map_init(&h->by_addr);
	for (size_t i = 0; i < h->n; i++)
		if (u64map_put(&h->by_addr, h->v[i].addr, (uint32_t)i))
			return error("out of memory");
	return 0;
}

/* A function to hook, checked but not yet written. */
struct pending {
	uint64_t addr;
	enum hook_fn fn;
	uint8_t at_exit;
	struct emu_insn insn;
};

/*
 * Whether the function fn at addr can be hooked: its first instruction is one
 * ptfil emulates (so the breakpoint never has to be lifted) and no int3 is
 * there already. Fills *p. Returns 1, 0 when it cannot be, or -1 after
 * error() when its code cannot be read.
 */
static int hookable(const struct hooks_mem *mem, uint64_t addr, enum hook_fn fn, const char *path, struct pending *p)
{
	uint8_t code[16];
	if (mem->read(mem, addr, code, sizeof(code)))
		return error_errno("cannot read %s in %s", hook_names[fn], path);
	if (code[0] == 0xcc || emu_decode(code, sizeof(code), &p->insn))
		return 0;
	p->addr = addr;
	p->fn = fn;
	p->at_exit = 0;
	return 1;
}

/* Writes the int3 of p and enters it in the table. Returns 0, or -1 after error() (nothing written then). */
static int arm(struct hooks *h, const struct hooks_mem *mem, const struct pending *p, uint32_t gid)
{
	if (grow_array(&h->v, &h->cap, h->n + 1, sizeof(*h->v), 32))
		return error("out of memory");
	struct hook_bp *b = &h->v[h->n];
	if (write_byte(mem, p->addr, 0xcc, &b->orig))
		return -1;
	b->addr = p->addr;
	b->gid = gid;
	b->fn = p->fn;
	b->at_exit = p->at_exit;
	b->insn = p->insn;
	if (u64map_put(&h->by_addr, p->addr, (uint32_t)h->n)) {
		/* Not findable, so not kept: its byte goes back. */
		write_byte(mem, p->addr, b->orig, NULL);
		return error("out of memory");
	}
	h->n++;
	return 0;
}

/* Takes back the last breakpoints from index `from` on: their bytes go back, they leave the table if they did. */
static void disarm_from(struct hooks *h, const struct hooks_mem *mem, size_t from)
{
	size_t k = from;
	for (size_t i = from; i < h->n; i++)
		if (write_byte(mem, h->v[i].addr, h->v[i].orig, NULL))
			h->v[k++] = h->v[i];
	if (k != h->n) {
		h->n = k;
		reindex(h);
	}
}

/*
 * The malloc family of module e to the kernel path: all of it or none, said
 * once. Returns 0, or 1 when the process declined (it keeps breakpoints).
 */
static int probe_group(struct hooks *h, const struct modreg_entry *e)
{
	struct hooks_site s[HOOK__COUNT];
	size_t n = 0;
	for (int fn = HOOK_MALLOC; fn <= HOOK_PVALLOC; fn++) {
		uint64_t off;
		if (sym_dynamic(e->sym, hook_names[fn], &off))
			continue;
		int alias = 0;
		for (size_t i = 0; i < n && !alias; i++)
			alias = s[i].addr == e->base + off; /* memalign and aligned_alloc share code: one probe */
		if (alias)
			continue;
		s[n].addr = e->base + off;
		s[n++].fn = (enum hook_fn)fn;
	}
	int rc = n ? h->probe(h->probe_ctx, e, s, n) : 0;
	if (rc > 0)
		return 1; /* declined: the process stays on breakpoints */
	if (rc < 0) {
		h->unhookable++;
		warning("the kernel cannot probe %s's malloc family, so its heap blocks are not charged", e->path);
	}
	return 0;
}

/*
 * The calls of [first, last] that module e defines, to kernel probes that
 * stop the thread (call_probe). Returns 0 when done (or none is defined),
 * else non-zero: int3s then.
 */
static int probe_calls(struct hooks *h, const struct modreg_entry *e, enum hook_fn first, enum hook_fn last)
{
	struct hooks_site s[HOOK__COUNT];
	size_t n = 0;
	for (int fn = first; fn <= (int)last; fn++) {
		uint64_t off;
		if (sym_dynamic(e->sym, hook_names[fn], &off))
			continue;
		s[n].addr = e->base + off;
		s[n++].fn = (enum hook_fn)fn;
	}
	return n ? h->call_probe(h->probe_ctx, e, s, n) : 0;
}

/*
 * glibc's malloc and calloc can be hooked at their returns: every way out is
 * a ret (symbols/exits.h), and the usable size of a block is in its chunk
 * header (tracer/ptrace/breakpoints.c reads it). Another allocator's headers say nothing
 * ptfil knows, so only the module that is glibc is hooked so.
 */
static int exits_here(const struct hooks_mem *mem, const struct modreg_entry *e, enum hook_fn fn,
		      struct pending *p, size_t *n, struct hooks_exit_fn *xf)
{
	uint64_t off, size, at[EXITS_MAX];
	if ((fn != HOOK_MALLOC && fn != HOOK_CALLOC) || !sym_is_glibc(e->sym) ||
	    sym_dynamic_extent(e->sym, hook_names[fn], &off, &size))
		return 0;
	size_t k = exits_of(e->sym, hook_names[fn], at, EXITS_MAX);
	if (k == 0)
		return 0;
	for (size_t i = 0; i < k; i++) {
		struct pending *q = &p[*n + i];
		/* Each return must be one the emulator runs (a ret it decodes), with no int3 there yet. */
		if (hookable(mem, e->base + at[i], fn, e->path, q) != 1 || q->insn.op != EMU_RET)
			return 0;
		q->at_exit = 1;
	}
	*n += k;
	xf->lo = e->base + off;
	xf->hi = e->base + off + size;
	return 1;
}

/*
 * Hooks the functions of [first, last] that module gid defines, all or none:
 * a family half hooked (malloc seen, free not) would charge every block for
 * ever. Returns 0 (also when none could be hooked: said once), or -1 after error().
 */
static int hook_group(struct hooks *h, const struct hooks_mem *mem, const struct modreg_entry *e, uint32_t gid,
		      enum hook_fn first, enum hook_fn last)
{
	struct pending p[HOOK__COUNT + 2 * EXITS_MAX];
	struct hooks_exit_fn xf[2];
	size_t n = 0, nx = 0;
	if (first == HOOK_MALLOC && h->probe && probe_group(h, e) == 0)
		return 0;
	if (first != HOOK_MALLOC && h->call_probe && probe_calls(h, e, first, last) == 0)
		return 0;
	for (int fn = first; fn <= (int)last; fn++) {
		uint64_t off;
		if (fn == HOOK_DL_DEBUG || sym_dynamic(e->sym, hook_names[fn], &off))
			continue;
		uint64_t addr = e->base + off;
		int alias = hooks_find(h, addr) != NULL;
		for (size_t i = 0; i < n && !alias; i++)
			alias = p[i].addr == addr; /* memalign and aligned_alloc share code: one breakpoint */
		if (alias)
			continue;
		if (!h->exact_sizes && exits_here(mem, e, (enum hook_fn)fn, p, &n, &xf[nx]) == 1) {
			nx++;
			continue;
		}
		int ok = hookable(mem, addr, (enum hook_fn)fn, e->path, &p[n]);
		if (ok < 0)
			return -1;
		if (!ok) {
			/* Without emulation the hook would need single-stepping: the module's family is left alone. */
			h->unhookable++;
			if (first == HOOK_SIGALTSTACK)
				warning("sigaltstack in %s starts with an instruction ptfil cannot emulate: a signal stack "
					"the program puts above its stack is not seen", e->path);
			else
				warning("%s in %s starts with an instruction ptfil cannot emulate: none of %s's %s is "
					"hooked, so %s", hook_names[fn], e->path, e->path,
					HOOK_IS_WRAPPER(first) ? "mapping call wrappers" : "malloc-family functions",
					HOOK_IS_WRAPPER(first) ? "mappings it makes are charged from /proc only"
							       : "its heap blocks are not charged");
			return 0;
		}
		n++;
	}
	size_t from = h->n;
	for (size_t i = 0; i < n; i++) {
		if (arm(h, mem, &p[i], gid)) {
			disarm_from(h, mem, from);
			return -1;
		}
	}
	for (size_t i = 0; i < nx; i++) {
		if (grow_array(&h->exit_fn, &h->cap_exit_fn, h->n_exit_fn + 1, sizeof(*h->exit_fn), 4)) {
			disarm_from(h, mem, from);
			return error("out of memory");
		}
		xf[i].gid = gid;
		h->exit_fn[h->n_exit_fn++] = xf[i];
	}
	return 0;
}

static int scanned(const struct hooks *h, uint32_t gid)
{
	for (size_t i = 0; i < h->n_scanned; i++)
		if (h->scanned[i] == gid)
			return 1;
	return 0;
}

static int mark_scanned(struct hooks *h, uint32_t gid)
{
	if (grow_array(&h->scanned, &h->cap_scanned, h->n_scanned + 1, sizeof(*h->scanned), 16))
		return -1;
	h->scanned[h->n_scanned++] = gid;
	return 0;
}

/* Arms the linker's load hook in every module of mm that defines it and has none yet. */
static int arm_loader(struct hooks *h, const struct hooks_mem *mem, const struct modmap *mm, struct modreg *reg)
{
	for (size_t i = 0; i < mm->n; i++) {
		struct modreg_entry *e = &reg->v[mm->v[i].gid];
		uint64_t off, entry;
		if (!e->sym || e->copy || scanned(h, mm->v[i].gid) || sym_dynamic(e->sym, hook_names[HOOK_DL_DEBUG], &off))
			continue;
		if (mark_scanned(h, mm->v[i].gid))
			return error("out of memory");
		/* The linker's entry code ran once, before its first load event: a safe place for the trampoline. */
		if (sym_entry(e->sym, &entry) == 0)
			h->trampoline = e->base + entry;
		struct hooks_site site = { e->base + off, HOOK_DL_DEBUG };
		if (h->call_probe && h->call_probe(h->probe_ctx, e, &site, 1) == 0)
			continue; /* the kernel's probe: nothing written */
		struct pending p;
		if (hooks_find(h, e->base + off))
			continue;
		int ok = hookable(mem, e->base + off, HOOK_DL_DEBUG, e->path, &p);
		if (ok < 0)
			return -1;
		if (!ok) {
			warning("%s in %s starts with an instruction ptfil cannot emulate; libraries loaded later are not seen",
				hook_names[HOOK_DL_DEBUG], e->path);
			continue;
		}
		if (arm(h, mem, &p, mm->v[i].gid))
			return -1;
	}
	return 0;
}

int hooks_exec_mem(struct hooks *h, const struct hooks_mem *mem, const struct modmap *mm, struct modreg *reg)
{
	forget_all(h);
	if (arm_loader(h, mem, mm, reg))
		return -1;
	/* Forget the mark: the linker is scanned again for malloc-family functions at the first load event. */
	h->n_scanned = 0;
	return 0;
}

int hooks_arm_loader(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg)
{
	struct hooks_mem mem = hooks_mem_tid(tid);
	h->n_scanned = 0;
	int rc = arm_loader(h, &mem, mm, reg);
	/* The marks go: every module is looked at again for the malloc family at the next scan. */
	h->n_scanned = 0;
	return rc;
}

/* Whether breakpoint b's byte is known to be gone with its module: mm maps another object there, or nothing. */
static int unmapped(const struct hook_bp *b, const struct modmap *mm, const struct modreg *reg)
{
	if (mm->n == 0)
		return 0; /* a reading that found nothing mapped proves nothing */
	const struct modrange *r = modmap_find(mm, b->addr);
	return !r || !modreg_same(reg, r->gid, b->gid);
}

/* Whether some breakpoint of h is a function's entry whose return ptfil takes (not the load hook, not a return). */
static int trampoline_needed(const struct hooks *h)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->v[i].fn != HOOK_DL_DEBUG && !h->v[i].at_exit && h->v[i].fn != HOOK_FREE && h->v[i].fn != HOOK_SIGALTSTACK)
			return 1;
	return 0;
}

int hooks_scan_mem(struct hooks *h, const struct hooks_mem *mem, const struct modmap *mm, struct modreg *reg)
{
	/* Breakpoints of unloaded objects would misfire on whatever is mapped there next; their bytes went with them. */
	size_t k = 0;
	for (size_t i = 0; i < h->n; i++) {
		if (!unmapped(&h->v[i], mm, reg))
			h->v[k++] = h->v[i];
		else if (mem->tid)
			rescue_byte_forget(mem->tid, h->v[i].addr); /* a crash must not write it into what is there now */
	}
	if (k != h->n) {
		h->n = k;
		if (reindex(h))
			return -1;
	}
	k = 0;
	for (size_t i = 0; i < h->n_exit_fn; i++) {
		const struct modrange *r = mm->n ? modmap_find(mm, h->exit_fn[i].lo) : NULL;
		if (!mm->n || (r && modreg_same(reg, r->gid, h->exit_fn[i].gid)))
			h->exit_fn[k++] = h->exit_fn[i];
	}
	h->n_exit_fn = k;
	int rc = 0;
	for (size_t i = 0; i < mm->n; i++) {
		uint32_t gid = mm->v[i].gid;
		struct modreg_entry *e = &reg->v[gid];
		if (!(mm->v[i].perms & MAPS_X) || scanned(h, gid))
			continue;
		if (mark_scanned(h, gid))
			return error("out of memory");
		if (!e->sym || e->copy)
			continue; /* not verified to be the mapped image (modules.c said so), or a copy: never patched */
		if (!h->no_heap && hook_group(h, mem, e, gid, HOOK_MALLOC, HOOK_PVALLOC))
			rc = -1;
		if (h->wrappers && hook_group(h, mem, e, gid, HOOK_MMAP, HOOK_BRK))
			rc = -1;
		if (h->wrappers && h->probe && hook_group(h, mem, e, gid, HOOK_SIGALTSTACK, HOOK_SIGALTSTACK))
			rc = -1;
		/* The break brk moves, which the brk wrapper does not take as an argument. */
		uint64_t off;
		if (h->wrappers && !h->curbrk && sym_dynamic_data(e->sym, "__curbrk", &off) == 0)
			h->curbrk = e->base + off;
	}
	/* Only the int3s' calls return through it: with none, nothing is written. */
	if (h->trampoline && !h->trampoline_armed && trampoline_needed(h)) {
		if (write_byte(mem, h->trampoline, 0xcc, &h->trampoline_orig))
			return -1;
		h->trampoline_armed = 1;
	}
	return rc;
}

int hooks_remove_mem(struct hooks *h, const struct hooks_mem *mem)
{
	int rc = 0;
	size_t k = 0;
	for (size_t i = 0; i < h->n; i++) {
		if (write_byte(mem, h->v[i].addr, h->v[i].orig, NULL)) {
			h->v[k++] = h->v[i]; /* its int3 may still be there: not forgotten */
			rc = -1;
		}
	}
	if (h->trampoline_armed && write_byte(mem, h->trampoline, h->trampoline_orig, NULL))
		rc = -1;
	else
		h->trampoline_armed = 0;
	if (rc == 0) {
		forget_all(h);
		return 0;
	}
	h->n = k;
	h->n_scanned = 0;
	reindex(h);
	return rc;
}

int hooks_exec(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg)
{
	struct hooks_mem mem = hooks_mem_tid(tid);
	return hooks_exec_mem(h, &mem, mm, reg);
}

int hooks_scan(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg)
{
	struct hooks_mem mem = hooks_mem_tid(tid);
	return hooks_scan_mem(h, &mem, mm, reg);
}

int hooks_remove(struct hooks *h, pid_t tid)
{
	struct hooks_mem mem = hooks_mem_tid(tid);
	return hooks_remove_mem(h, &mem);
}
