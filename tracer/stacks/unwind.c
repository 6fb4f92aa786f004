/* libunwind's remote API over our own accessors: a stack copy and module files instead of word-by-word ptrace reads. */
#include "tracer/stacks/unwind.h"

#include <errno.h>
#include <libunwind.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common/error.h"
#include "symbols/maps.h"
#include "symbols/sym.h"
#include "tracer/stacks/sigmask.h"

/* Exported by libunwind (its ptrace accessors use it) but not declared in its public headers. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
					      unw_proc_info_t *pi, int need_unwind_info, void *arg);

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_udata8 0x04
#define DW_EH_PE_sdata8 0x0c
#define DW_EH_PE_datarel 0x30

static int enc_size(unsigned char enc)
{
	switch (enc & 0x0f) {
	case DW_EH_PE_udata4: case DW_EH_PE_sdata4: return 4;
	case DW_EH_PE_udata8: case DW_EH_PE_sdata8: return 8;
	default: return -1;
	}
}

/*
 * A table built from .eh_frame (an object without .eh_frame_hdr) lives in
 * ptfil's memory; libunwind reads tables through access_mem, so each is shown
 * at an address no process can map (past the canonical x86-64 user half),
 * one 4 GiB window per module id.
 */
#define SYNTH_BASE 0x8000000000000000ULL
#define SYNTH_WINDOW 32

static uint64_t synth_addr(uint32_t gid) { return SYNTH_BASE + ((uint64_t)gid << SYNTH_WINDOW); }

/* Finds the binary-search table of .eh_frame_hdr once per module; only the encoding every linker writes is used. */
static void load_eh_table(struct modreg_entry *e, uint32_t gid)
{
	uint64_t off, size;
	unsigned char h[4];
	e->eh_state = -1;
	if (!e->sym)
		return;
	if (sym_eh_frame_hdr(e->sym, &off, &size)) {
		/* No header (gcc -static links none): the same table, made from .eh_frame itself. */
		size_t n;
		if (sym_eh_frame_table(e->sym, &e->eh_own, &n) || n > UINT32_MAX / sizeof(*e->eh_own))
			return;
		e->eh_hdr = 0;
		e->eh_table = synth_addr(gid);
		e->eh_count = n;
		e->eh_state = 1;
		return;
	}
	if (size < 12 || sym_read(e->sym, off, h, 4))
		return;
	int ptr_size = enc_size(h[1]);
	if (h[0] != 1 || ptr_size < 0 || h[2] != DW_EH_PE_udata4 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return;
	uint32_t count;
	if (sym_read(e->sym, off + 4 + (uint64_t)ptr_size, &count, 4))
		return;
	e->eh_hdr = off;
	e->eh_table = off + 4 + (uint64_t)ptr_size + 4;
	e->eh_count = count;
	e->eh_state = 1;
}

/* A word of a table built from .eh_frame, when addr lies in one's window. Returns 0, or -1 when it does not. */
static int synth_word(const struct unwind *u, uint64_t addr, uint64_t *val)
{
	if (addr < SYNTH_BASE)
		return -1;
	uint64_t gid = (addr - SYNTH_BASE) >> SYNTH_WINDOW, off = addr & ((1ULL << SYNTH_WINDOW) - 1);
	if (gid >= u->reg->n || !u->reg->v[gid].eh_own)
		return -1;
	const struct modreg_entry *e = &u->reg->v[gid];
	uint64_t len = e->eh_count * sizeof(*e->eh_own);
	if (off >= len)
		return -1;
	/* libunwind reads whole words; the last one may reach past the table. */
	*val = 0;
	memcpy(val, (const char *)e->eh_own + off, len - off < sizeof(*val) ? len - off : sizeof(*val));
	return 0;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct unwind *u = arg;
	const struct modrange *r = modmap_find(u->mm, ip);
	if (!r)
		return -UNW_ENOINFO;
	struct modreg_entry *e = &u->reg->v[r->gid];
	if (!e->eh_state) {
		load_eh_table(e, r->gid);
		/* A module a stack passes through: the snapshot will want its source lines. */
		sym_prepare_lines(e->sym);
	}
	if (e->eh_state < 0)
		return -UNW_ENOINFO;
	unw_dyn_info_t di;
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = r->start;
	di.end_ip = r->end;
	/* A table of .eh_frame_hdr is relative to the header; one built from .eh_frame, to module offset 0. */
	di.u.rti.segbase = e->base + e->eh_hdr;
	di.u.rti.table_data = e->eh_own ? e->eh_table : e->base + e->eh_table;
	di.u.rti.table_len = e->eh_count * 8 / sizeof(unw_word_t);
	return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	/* libunwind frees table-format info itself; only dynamic info would come here. */
	(void)as; (void)pi; (void)arg;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as; (void)addr; (void)arg;
	return -UNW_ENOINFO;
}

/* A word of the thread's stack from the copy, copying more when the unwinder goes deeper. */
static int stack_word(struct unwind *u, uint64_t addr, uint64_t *val)
{
	if (addr < u->stack_lo)
		return -1;
	if (addr - u->stack_lo + sizeof(*val) > u->stack_len) {
		if (addr - u->stack_lo + sizeof(*val) > UNWIND_STACK_COPY || u->stack_len < UNWIND_FIRST_COPY)
			return -1;
		size_t want = u->stack_len * 2;
		while (want < addr - u->stack_lo + sizeof(*val))
			want *= 2;
		if (want > UNWIND_STACK_COPY)
			want = UNWIND_STACK_COPY;
		struct iovec l = { u->stack + u->stack_len, want - u->stack_len };
		struct iovec r = { (void *)(uintptr_t)(u->stack_lo + u->stack_len), want - u->stack_len };
		ssize_t got = process_vm_readv(u->tid, &l, 1, &r, 1, 0);
		u->stack_copies++;
		/* Past a copy taken at the event (the kernel path), the live stack: the thread may have run on. */
		u->late_copies += u->given;
		if (got <= 0)
			return -1;
		u->stack_len += (size_t)got;
		if (addr - u->stack_lo + sizeof(*val) > u->stack_len)
			return -1;
	}
	memcpy(val, u->stack + (addr - u->stack_lo), sizeof(*val));
	return 0;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct unwind *u = arg;
	(void)as;
	if (write)
		return -UNW_EINVAL;
	uint64_t v;
	if (stack_word(u, addr, &v) == 0) {
		*val = v;
		if (u->quiet) {
		} else if (u->log.n < UNWIND_MEMO_READS) {
			u->log.addr[u->log.n] = addr;
			u->log.val[u->log.n++] = v;
		} else {
			u->uncacheable = 1;
		}
		return 0;
	}
	if (synth_word(u, addr, &v) == 0) {
		*val = v;
		return 0;
	}
	/* Read-only module memory is the file's bytes: no system call needed. */
	const struct modrange *r = modmap_find(u->mm, addr);
	if (r && !(r->perms & MAPS_W) && addr + sizeof(*val) <= r->end) {
		struct modreg_entry *e = &u->reg->v[r->gid];
		if (e->sym && !sym_read(e->sym, addr - e->base, val, sizeof(*val)))
			return 0;
	}
	struct iovec l = { val, sizeof(*val) }, rem = { (void *)(uintptr_t)addr, sizeof(*val) };
	if (process_vm_readv(u->tid, &l, 1, &rem, 1, 0) == (ssize_t)sizeof(*val)) {
		u->remote_reads++;
		if (!u->quiet)
			u->uncacheable = 1;
		return 0;
	}
	return -UNW_EINVAL;
}

static int reg_offset(unw_regnum_t reg)
{
	switch (reg) {
	case UNW_X86_64_RAX: return offsetof(struct user_regs_struct, rax);
	case UNW_X86_64_RDX: return offsetof(struct user_regs_struct, rdx);
	case UNW_X86_64_RCX: return offsetof(struct user_regs_struct, rcx);
	case UNW_X86_64_RBX: return offsetof(struct user_regs_struct, rbx);
	case UNW_X86_64_RSI: return offsetof(struct user_regs_struct, rsi);
	case UNW_X86_64_RDI: return offsetof(struct user_regs_struct, rdi);
	case UNW_X86_64_RBP: return offsetof(struct user_regs_struct, rbp);
	case UNW_X86_64_RSP: return offsetof(struct user_regs_struct, rsp);
	case UNW_X86_64_R8: return offsetof(struct user_regs_struct, r8);
	case UNW_X86_64_R9: return offsetof(struct user_regs_struct, r9);
	case UNW_X86_64_R10: return offsetof(struct user_regs_struct, r10);
	case UNW_X86_64_R11: return offsetof(struct user_regs_struct, r11);
	case UNW_X86_64_R12: return offsetof(struct user_regs_struct, r12);
	case UNW_X86_64_R13: return offsetof(struct user_regs_struct, r13);
	case UNW_X86_64_R14: return offsetof(struct user_regs_struct, r14);
	case UNW_X86_64_R15: return offsetof(struct user_regs_struct, r15);
	case UNW_X86_64_RIP: return offsetof(struct user_regs_struct, rip);
	default: return -1;
	}
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	struct unwind *u = arg;
	(void)as;
	int off = reg_offset(reg);
	if (write || off < 0 || reg > UNW_X86_64_RIP)
		return -UNW_EBADREG;
	memcpy(val, (const char *)u->regs + off, sizeof(*val));
	if (!u->quiet) {
		u->log.regs_read |= 1u << reg;
		u->log.reg_val[reg] = *val;
	}
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as; (void)reg; (void)val; (void)write; (void)arg;
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as; (void)c; (void)arg;
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len, unw_word_t *off, void *arg)
{
	(void)as; (void)addr; (void)buf; (void)len; (void)off; (void)arg;
	return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = put_unwind_info,
	.get_dyn_info_list_addr = get_dyn_info_list_addr,
	.access_mem = access_mem,
	.access_reg = access_reg,
	.access_fpreg = access_fpreg,
	.resume = resume,
	.get_proc_name = get_proc_name,
};

int unwind_init(struct unwind *u)
{
	memset(u, 0, sizeof(*u));
	u->stack = malloc(UNWIND_STACK_COPY);
	u->last.stack = malloc(UNWIND_STACK_COPY);
	unw_addr_space_t as = unw_create_addr_space(&accessors, 0);
	if (!u->stack || !u->last.stack || !as) {
		free(u->stack);
		free(u->last.stack);
		return error("cannot set up the remote unwinder");
	}
	/*
	 * The register-state cache, by ip: with it, a step parses no unwind table
	 * and takes no lock. Without per-thread support (Debian's build), the
	 * per-thread policy is the global cache with no lock around it, which is
	 * right for a single-threaded tracer; the global one locks, blocking every
	 * signal with two system calls per step. Its default 128 entries are far
	 * too few for an interpreter's deep stacks.
	 */
	unw_set_caching_policy(as, UNW_CACHE_PER_THREAD);
	unw_set_cache_size(as, UNWIND_RS_CACHE, 0);
	const char *v = getenv("PTFIL_UNWIND_VERIFY");
	u->verify = v && *v && strcmp(v, "0") != 0;
	u->as = as;
	u->gen = 1; /* memos of generation 0 are empty */
	return 0;
}

void unwind_fin(struct unwind *u)
{
	if (u->as)
		unw_destroy_addr_space(u->as);
	free(u->stack);
	free(u->last.stack);
	memset(u, 0, sizeof(*u));
}

void unwind_flush(struct unwind *u)
{
	if (u->as)
		unw_flush_cache(u->as, 0, 0);
	/* Memos name code that may be gone: none of them holds any more. */
	u->gen++;
	u->last.valid = 0;
}

int unwind_copied_word(const struct unwind *u, pid_t tid, uint64_t addr, uint64_t *val)
{
	if (tid != u->tid || addr < u->stack_lo || addr - u->stack_lo + sizeof(*val) > u->stack_len)
		return -1;
	memcpy(val, u->stack + (addr - u->stack_lo), sizeof(*val));
	return 0;
}

/* What unwind_begin and unwind_begin_copy share: the last unwind kept, the new one's state set. */
static void begin(struct unwind *u, pid_t tid, const struct user_regs_struct *regs,
		  const struct modmap *mm, struct modreg *reg)
{
	if (u->cur_done) {
		/* The unwind just finished becomes the last one; its stack copy is kept, not copied. */
		struct unwind_last *l = &u->last;
		uint8_t *buf = l->stack;
		l->stack = u->stack;
		u->stack = buf;
		l->stack_lo = u->stack_lo;
		l->stack_len = u->stack_len;
		memcpy(l->f, u->cur, u->n_cur * sizeof(*l->f));
		l->n = u->n_cur;
		l->log = u->log;
		l->uncacheable = u->uncacheable;
		l->gen = u->gen;
		l->valid = 1;
		u->cur_done = 0;
	}
	u->tid = tid;
	u->regs = regs;
	u->mm = mm;
	u->reg = reg;
	u->stack_lo = regs->rsp;
}

void unwind_begin(struct unwind *u, pid_t tid, const struct user_regs_struct *regs,
		  const struct modmap *mm, struct modreg *reg)
{
	begin(u, tid, regs, mm, reg);
	u->given = 0;
	/* One copy of the live stack serves nearly every read the unwinder makes. */
	struct iovec l = { u->stack, UNWIND_FIRST_COPY }, r = { (void *)(uintptr_t)regs->rsp, UNWIND_FIRST_COPY };
	ssize_t got = process_vm_readv(tid, &l, 1, &r, 1, 0);
	u->stack_copies++;
	u->stack_len = got > 0 ? (size_t)got : 0;
}

void unwind_begin_copy(struct unwind *u, pid_t tid, const struct user_regs_struct *regs,
		       const struct modmap *mm, struct modreg *reg, const void *stack, size_t len)
{
	begin(u, tid, regs, mm, reg);
	u->given = 1;
	if (len > UNWIND_STACK_COPY)
		len = UNWIND_STACK_COPY;
	memcpy(u->stack, stack, len);
	u->stack_len = len;
}

int unwind_memo_match(struct unwind *u, const struct unwind_memo *m)
{
	if (m->gen != u->gen || !m->gen)
		return 0;
	for (int r = 0; r <= UNW_X86_64_RIP; r++) {
		if (!(m->regs_read >> r & 1))
			continue;
		uint64_t v;
		memcpy(&v, (const char *)u->regs + reg_offset(r), sizeof(v));
		if (v != m->reg_val[r])
			return 0;
	}
	for (uint32_t i = 0; i < m->n; i++) {
		uint64_t v;
		if (stack_word(u, m->addr[i], &v) || v != m->val[i])
			return 0;
	}
	u->memo_hits++;
	return 1;
}

void unwind_memo_store(struct unwind *u, struct unwind_memo *m, uint32_t stack)
{
	if (u->uncacheable)
		return;
	*m = u->log;
	m->gen = u->gen;
	m->stack = stack;
}

/*
 * The callee-saved registers of the cursor's frame, and which of them it
 * knows. With log unset, what this reads is not part of the memo: it decides
 * only whether to splice, and a frame that splices is read again with log set.
 */
static void frame_state(struct unwind *u, unw_cursor_t *c, struct unwind_frame *f, int log)
{
	static const unw_regnum_t saved[UNWIND_SAVED_REGS] = {
		UNW_X86_64_RBX, UNW_X86_64_RBP, UNW_X86_64_R12, UNW_X86_64_R13, UNW_X86_64_R14, UNW_X86_64_R15,
	};
	unw_word_t v;
	u->quiet = !log;
	f->saved_ok = 0;
	f->sp = unw_get_reg(c, UNW_REG_SP, &v) < 0 ? 0 : v;
	for (int i = 0; i < UNWIND_SAVED_REGS; i++) {
		f->saved[i] = 0;
		if (unw_get_reg(c, saved[i], &v) == 0) {
			f->saved[i] = v;
			f->saved_ok |= (uint8_t)(1u << i);
		}
	}
	u->quiet = 0;
}

/*
 * Whether frame f of the current unwind is frame j of the last one with the
 * same future: same ip, sp and callee-saved registers, and the same stack
 * bytes from sp to the end of the last unwind's copy (every word it read for
 * the frames further out lies there; one that did not came from elsewhere and
 * made it uncacheable, which forbids this too).
 */
static int same_future(struct unwind *u, const struct unwind_frame *f, size_t *j)
{
	const struct unwind_last *l = &u->last;
	while (*j < l->n && l->f[*j].sp < f->sp)
		(*j)++;
	if (*j >= l->n || l->f[*j].sp != f->sp || l->f[*j].ip != f->ip || !f->sp)
		return 0;
	const struct unwind_frame *g = &l->f[*j];
	if (g->saved_ok != f->saved_ok || memcmp(g->saved, f->saved, sizeof(g->saved)) != 0)
		return 0;
	uint64_t end = l->stack_lo + l->stack_len;
	if (f->sp < l->stack_lo || f->sp < u->stack_lo || end <= f->sp)
		return 0;
	/* The current copy must reach as far: stack_word extends it (or fails past the largest copy). */
	uint64_t w;
	if (end - u->stack_lo > u->stack_len && stack_word(u, end - sizeof(w), &w) != 0)
		return 0;
	return memcmp(u->stack + (f->sp - u->stack_lo), l->stack + (f->sp - l->stack_lo), end - f->sp) == 0;
}

/* Takes the last unwind's frames after its frame j, and its reads at sp and above for the memo. */
static size_t splice(struct unwind *u, size_t j, uint64_t sp, uint64_t *ips, size_t n, size_t max)
{
	const struct unwind_last *l = &u->last;
	size_t before = n;
	for (size_t k = j + 1; k < l->n && n < max; k++) {
		u->cur[n] = l->f[k];
		ips[n++] = l->f[k].ip;
	}
	if (l->uncacheable)
		u->uncacheable = 1;
	for (uint32_t i = 0; i < l->log.n; i++) {
		if (l->log.addr[i] < sp)
			continue;
		if (u->log.n == UNWIND_MEMO_READS) {
			u->uncacheable = 1;
			break;
		}
		u->log.addr[u->log.n] = l->log.addr[i];
		u->log.val[u->log.n++] = l->log.val[i];
	}
	u->splices++;
	u->spliced_frames += n - before;
	return n;
}

/* For PTFIL_UNWIND_VERIFY: unwinds again without splicing, quietly, and compares. */
static void verify_splice(struct unwind *u, const uint64_t *ips, size_t n, size_t max)
{
	unw_cursor_t c;
	size_t k = 1;
	int same = 1;
	u->quiet = 1;
	if (unw_init_remote(&c, u->as, u) == 0) {
		while (k < max && unw_step(&c) > 0) {
			unw_word_t ip;
			if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
				break;
			if (k >= n || ips[k] != ip) {
				same = 0;
				break;
			}
			k++;
		}
	}
	u->quiet = 0;
	if (!same || k != n)
		u->splice_mismatches++;
}

/* At most this many frames are compared with the last unwind, so a miss costs little. */
#define UNWIND_SPLICE_TRIES 4

static size_t unwind_steps(struct unwind *u, uint64_t *ips, size_t max);

size_t unwind_run(struct unwind *u, uint64_t *ips, size_t max)
{
	sigmask_unwinding(1);
	size_t n = unwind_steps(u, ips, max);
	sigmask_unwinding(0);
	return n;
}

static size_t unwind_steps(struct unwind *u, uint64_t *ips, size_t max)
{
	u->unwinds++;
	u->log.n = 0;
	u->log.regs_read = 0;
	u->uncacheable = 0;
	u->n_cur = 0;
	u->cur_done = 0;
	size_t n = 0;
	if (max == 0)
		return 0;
	if (max > UNWIND_MAX_FRAMES)
		max = UNWIND_MAX_FRAMES;
	ips[n++] = u->regs->rip;
	/* The first ip is part of the key even when libunwind never asks for it. */
	u->log.regs_read |= 1u << UNW_X86_64_RIP;
	u->log.reg_val[UNW_X86_64_RIP] = u->regs->rip;
	unw_cursor_t c;
	if (unw_init_remote(&c, u->as, u) < 0)
		return n;
	int try = u->last.valid && u->last.gen == u->gen;
	int tries = 0;
	size_t j = 0;
	u->cur[0].ip = u->regs->rip;
	frame_state(u, &c, &u->cur[0], 0);
	for (;;) {
		struct unwind_frame *f = &u->cur[n - 1];
		/*
		 * A last unwind cut at the most frames did not reach the end: its frames
		 * serve only if this one is cut at the same place or later.
		 */
		if (try && tries < UNWIND_SPLICE_TRIES && same_future(u, f, &j) &&
		    (u->last.n < UNWIND_MAX_FRAMES || n + (u->last.n - j - 1) >= max)) {
			/* What the frame's registers were recovered from becomes part of the memo's key. */
			frame_state(u, &c, f, 1);
			n = splice(u, j, f->sp, ips, n, max);
			if (u->verify)
				verify_splice(u, ips, n, max);
			break;
		}
		if (try && j < u->last.n && u->last.f[j].sp == f->sp)
			tries++;
		if (n >= max || unw_step(&c) <= 0)
			break;
		unw_word_t ip;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		u->cur[n].ip = ip;
		frame_state(u, &c, &u->cur[n], 0);
		ips[n++] = ip;
	}
	u->n_cur = n;
	u->cur_done = 1;
	u->frames += n;
	return n;
}
