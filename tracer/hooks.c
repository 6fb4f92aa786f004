/* Writing and finding the int3 hooks of the malloc family and the load hook. */
#include "tracer/hooks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include "common/error.h"
#include "symbols/maps.h"
#include "symbols/sym.h"

const char *const hook_names[HOOK__COUNT] = {
	[HOOK_MALLOC] = "malloc", [HOOK_CALLOC] = "calloc", [HOOK_REALLOC] = "realloc",
	[HOOK_REALLOCARRAY] = "reallocarray", [HOOK_FREE] = "free",
	[HOOK_POSIX_MEMALIGN] = "posix_memalign", [HOOK_ALIGNED_ALLOC] = "aligned_alloc",
	[HOOK_MEMALIGN] = "memalign", [HOOK_VALLOC] = "valloc", [HOOK_PVALLOC] = "pvalloc",
	[HOOK_DL_DEBUG] = "_dl_debug_state",
	[HOOK_MMAP] = "mmap", [HOOK_MUNMAP] = "munmap", [HOOK_MREMAP] = "mremap",
	[HOOK_MADVISE] = "madvise", [HOOK_BRK] = "brk",
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
	u64map_fin(&h->by_addr);
	memset(h, 0, sizeof(*h));
}

static void forget_all(struct hooks *h)
{
	int wrappers = h->wrappers, no_heap = h->no_heap;
	hooks_fin(h);
	hooks_init(h);
	h->wrappers = wrappers;
	h->no_heap = no_heap;
}

int hooks_copy(struct hooks *dst, const struct hooks *src)
{
	forget_all(dst);
	dst->trampoline = src->trampoline;
	dst->trampoline_armed = src->trampoline_armed;
	dst->trampoline_orig = src->trampoline_orig;
	dst->wrappers = src->wrappers;
	dst->no_heap = src->no_heap;
	dst->curbrk = src->curbrk;
	for (size_t i = 0; i < src->n; i++) {
		if (dst->n == dst->cap) {
			size_t cap = dst->cap ? dst->cap * 2 : 32;
			struct hook_bp *v = realloc(dst->v, cap * sizeof(*v));
			if (!v)
				return -1;
			dst->v = v;
			dst->cap = cap;
		}
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

/*
 * Writes byte over the byte at addr (an int3, or the original back), keeping
 * the old one in *old when old is not NULL. Returns 0, or -1 after error():
 * a hook that did not go in (or out) matters.
 */
static int write_byte(pid_t tid, uint64_t addr, uint8_t byte, uint8_t *old)
{
	uint64_t word_addr = addr & ~7ULL;
	errno = 0;
	long word = ptrace(PTRACE_PEEKTEXT, tid, (void *)(uintptr_t)word_addr, NULL);
	if (errno)
		return error_errno("cannot read the code at %#llx in thread %d", (unsigned long long)addr, (int)tid);
	unsigned shift = (unsigned)(addr - word_addr) * 8;
	if (old)
		*old = (uint8_t)((unsigned long)word >> shift);
	word = (long)(((unsigned long)word & ~(0xffUL << shift)) | ((unsigned long)byte << shift));
	if (ptrace(PTRACE_POKETEXT, tid, (void *)(uintptr_t)word_addr, (void *)word))
		return error_errno("cannot write a breakpoint at %#llx in thread %d", (unsigned long long)addr, (int)tid);
	return 0;
}

static int add_bp(struct hooks *h, pid_t tid, uint64_t addr, uint32_t gid, enum hook_fn fn, const char *path)
{
	if (hooks_find(h, addr))
		return 0; /* an alias (memalign and aligned_alloc share code) */
	uint8_t code[16];
	struct iovec l = { code, sizeof(code) }, r = { (void *)(uintptr_t)addr, sizeof(code) };
	if (process_vm_readv(tid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(code))
		return error_errno("cannot read %s in %s", hook_names[fn], path);
	struct emu_insn insn;
	if (code[0] == 0xcc || emu_decode(code, sizeof(code), &insn)) {
		/* Without emulation the hook would need single-stepping: leave the function alone, say so once. */
		if (!h->unhookable++)
			warning("%s in %s starts with an instruction ptfil cannot emulate; its calls are not seen",
				hook_names[fn], path);
		return 0;
	}
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 32;
		struct hook_bp *v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return error("out of memory");
		h->v = v;
		h->cap = cap;
	}
	struct hook_bp *b = &h->v[h->n];
	if (write_byte(tid, addr, 0xcc, &b->orig))
		return -1;
	b->addr = addr;
	b->gid = gid;
	b->fn = fn;
	b->insn = insn;
	if (u64map_put(&h->by_addr, addr, (uint32_t)h->n))
		return error("out of memory");
	h->n++;
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
	if (h->n_scanned == h->cap_scanned) {
		size_t cap = h->cap_scanned ? h->cap_scanned * 2 : 16;
		uint32_t *v = realloc(h->scanned, cap * sizeof(*v));
		if (!v)
			return -1;
		h->scanned = v;
		h->cap_scanned = cap;
	}
	h->scanned[h->n_scanned++] = gid;
	return 0;
}

int hooks_exec(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg)
{
	forget_all(h);
	for (size_t i = 0; i < mm->n; i++) {
		struct modreg_entry *e = &reg->v[mm->v[i].gid];
		uint64_t off, entry;
		if (!e->sym || scanned(h, mm->v[i].gid) || sym_dynamic(e->sym, hook_names[HOOK_DL_DEBUG], &off))
			continue;
		if (mark_scanned(h, mm->v[i].gid))
			return error("out of memory");
		/* The linker's entry code ran once, before its first load event: a safe place for the trampoline. */
		if (sym_entry(e->sym, &entry) == 0)
			h->trampoline = e->base + entry;
		if (add_bp(h, tid, e->base + off, mm->v[i].gid, HOOK_DL_DEBUG, e->path))
			return -1;
	}
	/* Forget the mark: the linker is scanned again for malloc-family functions at the first load event. */
	h->n_scanned = 0;
	return 0;
}

int hooks_scan(struct hooks *h, pid_t tid, const struct modmap *mm, struct modreg *reg)
{
	/* Breakpoints of unloaded objects would misfire on whatever is mapped there next. */
	size_t k = 0;
	for (size_t i = 0; i < h->n; i++) {
		const struct modrange *r = modmap_find(mm, h->v[i].addr);
		if (r && r->gid == h->v[i].gid)
			h->v[k++] = h->v[i];
	}
	if (k != h->n) {
		h->n = k;
		u64map_fin(&h->by_addr);
		u64map_init(&h->by_addr);
		for (size_t i = 0; i < h->n; i++)
			if (u64map_put(&h->by_addr, h->v[i].addr, (uint32_t)i))
				return error("out of memory");
	}
	int rc = 0;
	for (size_t i = 0; i < mm->n; i++) {
		uint32_t gid = mm->v[i].gid;
		struct modreg_entry *e = &reg->v[gid];
		if (!(mm->v[i].perms & MAPS_X) || scanned(h, gid))
			continue;
		if (mark_scanned(h, gid))
			return error("out of memory");
		if (!e->sym)
			continue;
		for (int fn = 0; fn < HOOK__COUNT; fn++) {
			uint64_t off;
			if (fn == HOOK_DL_DEBUG || (HOOK_IS_WRAPPER(fn) ? !h->wrappers : h->no_heap))
				continue;
			if (sym_dynamic(e->sym, hook_names[fn], &off) == 0 && add_bp(h, tid, e->base + off, gid, fn, e->path))
				rc = -1;
		}
		/* The break brk moves, which the brk wrapper does not take as an argument. */
		uint64_t off;
		if (h->wrappers && !h->curbrk && sym_dynamic_data(e->sym, "__curbrk", &off) == 0)
			h->curbrk = e->base + off;
	}
	if (h->trampoline && !h->trampoline_armed) {
		if (write_byte(tid, h->trampoline, 0xcc, &h->trampoline_orig))
			return -1;
		h->trampoline_armed = 1;
	}
	return rc;
}

int hooks_remove(struct hooks *h, pid_t tid)
{
	int rc = 0;
	for (size_t i = 0; i < h->n; i++)
		if (write_byte(tid, h->v[i].addr, h->v[i].orig, NULL))
			rc = -1;
	if (h->trampoline_armed && write_byte(tid, h->trampoline, h->trampoline_orig, NULL))
		rc = -1;
	forget_all(h);
	return rc;
}
