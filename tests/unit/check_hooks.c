/*
 * Unit tests for tracer/hooks: the breakpoints of the C library's malloc family
 * written into a fake memory that holds libc's loaded image (its file's
 * segments through symbols/, at a made-up base), so every byte hooks.c reads,
 * writes and puts back can be checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/suites.h"
#include "tests/unit/testutil.h"
#include "common/error.h"
#include "symbols/exits.h"
#include "symbols/maps.h"
#include "symbols/sym.h"
#include "tracer/ptrace/hooks.h"
#include "tracer/stacks/modules.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define BASE 0x7f0000000000ULL
#define SPAN 0x1000000ULL      /* more than libc's image: the range the modmaps below give it */
#define MAX_WRITES 4096

/* libc's image at BASE, with the bytes written since on top; writes fail on demand. */
struct fake {
	struct sym_file *f;
	uint64_t addr[MAX_WRITES];
	uint8_t byte[MAX_WRITES];
	size_t n;
	int fail_writes;
	unsigned reads, writes;
};

static int fake_byte(const struct fake *k, uint64_t addr, uint8_t *b)
{
	for (size_t i = k->n; i-- > 0;) {
		if (k->addr[i] == addr) {
			*b = k->byte[i];
			return 0;
		}
	}
	if (addr < BASE || addr >= BASE + SPAN)
		return -1;
	return sym_read(k->f, addr - BASE, b, 1);
}

static int fake_read(const struct hooks_mem *m, uint64_t addr, void *buf, size_t n)
{
	struct fake *k = m->ctx;
	k->reads++;
	for (size_t i = 0; i < n; i++) {
		if (fake_byte(k, addr + i, (uint8_t *)buf + i)) {
			errno = EFAULT;
			return -1;
		}
	}
	return 0;
}

static void poke(struct fake *k, uint64_t addr, uint8_t b)
{
	ck_assert_uint_lt(k->n, MAX_WRITES);
	k->addr[k->n] = addr;
	k->byte[k->n++] = b;
}

static int fake_write(const struct hooks_mem *m, uint64_t addr, const void *buf, size_t n)
{
	struct fake *k = m->ctx;
	uint8_t b;
	if (k->fail_writes || fake_byte(k, addr, &b)) {
		errno = EIO;
		return -1;
	}
	k->writes++;
	for (size_t i = 0; i < n; i++)
		poke(k, addr + i, ((const uint8_t *)buf)[i]);
	return 0;
}

static uint8_t peek(const struct fake *k, uint64_t addr)
{
	uint8_t b = 0;
	ck_assert_int_eq(fake_byte(k, addr, &b), 0);
	return b;
}

static uint8_t file_byte(const struct fake *k, uint64_t addr)
{
	uint8_t b = 0;
	ck_assert_int_eq(sym_read(k->f, addr - BASE, &b, 1), 0);
	return b;
}

/* A world: the registry, one process's modules, its fake memory and hooks. */
struct world {
	struct modreg reg;
	struct modmap mm;
	struct fake *k;
	struct hooks_mem mem;
	struct hooks h;
};

/* Registers an object at base with the given file identity; libc's symbols when sym. Returns its id. */
static uint32_t add_module(struct world *w, const char *path, uint64_t base, uint64_t inode, struct sym_file *sym)
{
	struct modreg *r = &w->reg;
	r->v = realloc(r->v, (r->n + 1) * sizeof(*r->v));
	ck_assert_ptr_nonnull(r->v);
	struct modreg_entry *e = &r->v[r->n];
	memset(e, 0, sizeof(*e));
	e->path = strdup(path);
	e->base = base;
	e->dev_major = 8;
	e->dev_minor = 1;
	e->inode = inode;
	e->sym = sym;
	r->cap = r->n + 1;
	return (uint32_t)r->n++;
}

/* Sets the process's modmap to these (gid, start) ranges of SPAN bytes, executable, in ascending order. */
static void set_map(struct world *w, size_t n, const uint32_t *gids, const uint64_t *starts)
{
	free(w->mm.v);
	w->mm.v = calloc(n ? n : 1, sizeof(*w->mm.v));
	ck_assert_ptr_nonnull(w->mm.v);
	for (size_t i = 0; i < n; i++) {
		w->mm.v[i].start = starts[i];
		w->mm.v[i].end = starts[i] + SPAN;
		w->mm.v[i].gid = gids[i];
		w->mm.v[i].perms = MAPS_R | MAPS_X;
	}
	w->mm.n = n;
}

static uint32_t LIBC_GID;

static void world_init(struct world *w)
{
	memset(w, 0, sizeof(*w));
	ck_assert_int_eq(modreg_init(&w->reg), 0);
	modmap_init(&w->mm);
	w->k = calloc(1, sizeof(*w->k));
	ck_assert_ptr_nonnull(w->k);
	w->k->f = sym_cache_add(w->reg.cache, sym_open(LIBC));
	ck_assert_ptr_nonnull(w->k->f);
	w->mem.read = fake_read;
	w->mem.write = fake_write;
	w->mem.ctx = w->k;
	hooks_init(&w->h);
	/* Every function at its entry: the table these tests check. test_hooks_malloc_at_returns checks the rest. */
	w->h.exact_sizes = 1;
	LIBC_GID = add_module(w, LIBC, BASE, 1000, w->k->f);
	set_map(w, 1, &LIBC_GID, (uint64_t[]){ BASE });
}

static void world_fin(struct world *w)
{
	hooks_fin(&w->h);
	modmap_fin(&w->mm);
	modreg_fin(&w->reg);
	free(w->k);
}

/* The malloc family libc defines: every address, and how many distinct ones. */
static size_t heap_functions(const struct world *w, uint64_t *addr, size_t *distinct)
{
	size_t n = 0;
	*distinct = 0;
	for (int fn = HOOK_MALLOC; fn <= HOOK_PVALLOC; fn++) {
		uint64_t off;
		if (sym_dynamic(w->k->f, hook_names[fn], &off))
			continue;
		int seen = 0;
		for (size_t i = 0; i < n; i++)
			seen |= addr[i] == BASE + off;
		*distinct += !seen;
		addr[n++] = BASE + off;
	}
	return n;
}

/* Every function of the family hooked once, its int3 in memory, the byte it replaced kept. */
START_TEST(test_hooks_whole_family)
{
	struct world w;
	uint64_t addr[HOOK__COUNT];
	size_t distinct;

	world_init(&w);
	size_t n = heap_functions(&w, addr, &distinct);
	ck_assert_uint_ge(n, 5);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, distinct);
	ck_assert_uint_eq(w.h.unhookable, 0);
	for (size_t i = 0; i < n; i++) {
		const struct hook_bp *b = hooks_find(&w.h, addr[i]);
		ck_assert_ptr_nonnull(b);
		ck_assert_uint_eq(peek(w.k, addr[i]), 0xcc);
		ck_assert_uint_eq(b->orig, file_byte(w.k, addr[i]));
		ck_assert_uint_eq(b->gid, LIBC_GID);
	}
	/* Looked at once: a second scan writes nothing. */
	unsigned writes = w.k->writes;
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.k->writes, writes);
	ck_assert_uint_eq(w.h.n, distinct);
	world_fin(&w);
}
END_TEST

/* memalign and aligned_alloc are one function in glibc: one breakpoint, found from either address. */
START_TEST(test_hooks_alias_is_one_breakpoint)
{
	struct world w;
	uint64_t addr[HOOK__COUNT];
	size_t distinct;

	world_init(&w);
	size_t n = heap_functions(&w, addr, &distinct);
	ck_assert_msg(distinct < n, "no two malloc-family functions share an address in " LIBC);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, distinct);
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (addr[i] == addr[j])
				ck_assert_ptr_eq(hooks_find(&w.h, addr[i]), hooks_find(&w.h, addr[j]));
	/* Each breakpoint written once: one write per distinct address. */
	ck_assert_uint_eq(w.k->writes, distinct);
	for (size_t i = 0; i < w.h.n; i++)
		for (size_t j = i + 1; j < w.h.n; j++)
			ck_assert_uint_ne(w.h.v[i].addr, w.h.v[j].addr);
	world_fin(&w);
}
END_TEST

static void scan_quietly(void *arg)
{
	struct world *w = arg;
	ck_assert_int_eq(hooks_scan_mem(&w->h, &w->mem, &w->mm, &w->reg), 0);
}

/*
 * One function that cannot be hooked (here free, made to start with ud2, an
 * instruction ptfil does not emulate): none of the family is, and one warning
 * names the module and the function.
 */
START_TEST(test_hooks_all_or_nothing)
{
	static const char *const victims[] = { "free", "malloc", "pvalloc" };
	const char *victim = victims[_i];
	struct world w;
	uint64_t off;

	world_init(&w);
	ck_assert_int_eq(sym_dynamic(w.k->f, victim, &off), 0);
	poke(w.k, BASE + off, 0x0f);
	poke(w.k, BASE + off + 1, 0x0b);
	size_t pokes = w.k->n;
	char *msg = test_capture_stderr(scan_quietly, &w);
	ck_assert_uint_eq(w.h.n, 0);
	ck_assert_uint_eq(w.k->writes, 0);
	ck_assert_uint_eq(w.k->n, pokes);
	ck_assert_uint_eq(w.h.unhookable, 1);
	char *first = strstr(msg, "warning");
	ck_assert_msg(first && strstr(msg, victim) && strstr(msg, LIBC), "no warning naming %s and %s: \"%s\"",
		      victim, LIBC, msg);
	ck_assert_msg(!strstr(first + 1, "warning"), "more than one warning: \"%s\"", msg);
	free(msg);
	world_fin(&w);
}
END_TEST

/* An int3 already there (a debugger's, or one ptfil lost track of) is not taken for the function's code. */
START_TEST(test_hooks_existing_int3_refused)
{
	struct world w;
	uint64_t off;

	world_init(&w);
	ck_assert_int_eq(sym_dynamic(w.k->f, "realloc", &off), 0);
	poke(w.k, BASE + off, 0xcc);
	error_set_quiet(1);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	error_set_quiet(0);
	ck_assert_uint_eq(w.h.n, 0);
	ck_assert_uint_eq(w.k->writes, 0);
	world_fin(&w);
}
END_TEST

/* A module without verified symbols (modules.c refused its file) is never written into. */
START_TEST(test_hooks_unverified_module_untouched)
{
	struct world w;

	world_init(&w);
	uint32_t gid = add_module(&w, "/usr/lib/libreplaced.so", BASE, 2000, NULL);
	set_map(&w, 1, &gid, (uint64_t[]){ BASE });
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, 0);
	ck_assert_uint_eq(w.k->writes, 0);
	ck_assert_uint_eq(w.k->reads, 0);
	world_fin(&w);
}
END_TEST

/*
 * A breakpoint is forgotten only when its module is known to be unmapped: a
 * map that holds the same object (even under another id) keeps it, an empty
 * map (a maps reading that found nothing) proves nothing, and only a map
 * where another object or nothing lies at its address drops it.
 */
START_TEST(test_hooks_forget_only_unmapped)
{
	struct world w;
	uint64_t addr[HOOK__COUNT];
	size_t distinct;

	world_init(&w);
	heap_functions(&w, addr, &distinct);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, distinct);
	unsigned writes = w.k->writes;

	/* The leader exited: its maps read empty. */
	set_map(&w, 0, NULL, NULL);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, distinct);

	/* The same object met again under a new registry id (same path, base, device and inode). */
	uint32_t again = add_module(&w, LIBC, BASE, 1000, w.k->f);
	set_map(&w, 1, &again, (uint64_t[]){ BASE });
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, distinct);
	for (size_t i = 0; i < distinct; i++)
		ck_assert_ptr_nonnull(hooks_find(&w.h, addr[i]));

	/* Another library loaded elsewhere; libc still where it was. */
	uint32_t other = add_module(&w, "/usr/lib/libother.so", BASE + 2 * SPAN, 3000, NULL);
	set_map(&w, 2, (uint32_t[]){ again, other }, (uint64_t[]){ BASE, BASE + 2 * SPAN });
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, distinct);
	ck_assert_uint_eq(w.k->writes, writes);

	/* libc unmapped and another file mapped at its address: its bytes went with it. */
	uint32_t replaced = add_module(&w, LIBC, BASE, 1001, NULL);
	set_map(&w, 2, (uint32_t[]){ replaced, other }, (uint64_t[]){ BASE, BASE + 2 * SPAN });
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, 0);
	for (size_t i = 0; i < distinct; i++)
		ck_assert_ptr_null(hooks_find(&w.h, addr[i]));
	/* Forgetting writes nothing: that memory is not libc's any more. */
	ck_assert_uint_eq(w.k->writes, writes);
	world_fin(&w);

	/* And with nothing at all mapped there. */
	world_init(&w);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, distinct);
	other = add_module(&w, "/usr/lib/libother.so", BASE + 2 * SPAN, 3000, NULL);
	set_map(&w, 1, &other, (uint64_t[]){ BASE + 2 * SPAN });
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n, 0);
	world_fin(&w);
}
END_TEST

/* Removing puts back every byte written, the trampoline's too: memory reads as the file again. */
START_TEST(test_hooks_remove_restores_every_byte)
{
	struct world w;

	world_init(&w);
	uint64_t entry;
	ck_assert_int_eq(sym_entry(w.k->f, &entry), 0);
	w.h.trampoline = BASE + entry;
	w.h.wrappers = 1;
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert(w.h.trampoline_armed);
	ck_assert_uint_eq(peek(w.k, w.h.trampoline), 0xcc);
	ck_assert_uint_gt(w.h.n, 5); /* the malloc family and the mapping calls' wrappers */
	size_t written = w.k->n;
	ck_assert_uint_eq(written, w.h.n + 1);
	ck_assert_int_eq(hooks_remove_mem(&w.h, &w.mem), 0);
	ck_assert_uint_eq(w.h.n, 0);
	ck_assert(!w.h.trampoline_armed);
	for (size_t i = 0; i < written; i++)
		ck_assert_msg(peek(w.k, w.k->addr[i]) == file_byte(w.k, w.k->addr[i]), "%#llx not restored",
			      (unsigned long long)w.k->addr[i]);
	world_fin(&w);
}
END_TEST

/* A byte that cannot be put back keeps its breakpoint in the table: it may still be in memory. */
START_TEST(test_hooks_remove_failure_keeps_table)
{
	struct world w;

	world_init(&w);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	size_t n = w.h.n;
	ck_assert_uint_gt(n, 0);
	w.k->fail_writes = 1;
	error_set_quiet(1);
	ck_assert_int_eq(hooks_remove_mem(&w.h, &w.mem), -1);
	error_set_quiet(0);
	ck_assert_uint_eq(w.h.n, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_ptr_eq(hooks_find(&w.h, w.h.v[i].addr), &w.h.v[i]);
	w.k->fail_writes = 0;
	ck_assert_int_eq(hooks_remove_mem(&w.h, &w.mem), 0);
	ck_assert_uint_eq(w.h.n, 0);
	for (size_t i = 0; i < w.k->n; i++)
		ck_assert_uint_eq(peek(w.k, w.k->addr[i]), file_byte(w.k, w.k->addr[i]));
	world_fin(&w);
}
END_TEST

/* A write that fails halfway through a family takes back what went in: never half a family. */
static int fail_third_write(const struct hooks_mem *m, uint64_t addr, const void *buf, size_t n)
{
	struct fake *k = m->ctx;
	if (k->writes == 2 && ((const uint8_t *)buf)[0] == 0xcc) {
		errno = EIO;
		return -1;
	}
	return fake_write(m, addr, buf, n);
}

START_TEST(test_hooks_failed_write_takes_back_family)
{
	struct world w;

	world_init(&w);
	w.mem.write = fail_third_write;
	error_set_quiet(1);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), -1);
	error_set_quiet(0);
	ck_assert_uint_eq(w.h.n, 0);
	for (size_t i = 0; i < w.k->n; i++)
		ck_assert_uint_eq(peek(w.k, w.k->addr[i]), file_byte(w.k, w.k->addr[i]));
	world_fin(&w);
}
END_TEST

/*
 * The default: glibc's malloc (and calloc, when it leaves only by ret) hooked
 * at each of its returns and not at its entry, its code known as hooked so;
 * the rest at their entries. Removing puts every byte back, a copy (fork)
 * keeps the functions, an unmapped module loses them.
 */
START_TEST(test_hooks_malloc_at_returns)
{
	struct world w;
	uint64_t addr[HOOK__COUNT];
	size_t distinct;

	world_init(&w);
	w.h.exact_sizes = 0;
	heap_functions(&w, addr, &distinct);
	uint64_t rets[2][EXITS_MAX], off[2], size[2];
	size_t nret[2], extra = 0;
	const char *names[2] = { "malloc", "calloc" };
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(sym_dynamic_extent(w.k->f, names[i], &off[i], &size[i]), 0);
		nret[i] = exits_of(w.k->f, names[i], rets[i], EXITS_MAX);
		extra += nret[i] ? nret[i] - 1 : 0;
	}
	ck_assert_uint_gt(nret[0], 0);
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.unhookable, 0);
	ck_assert_uint_eq(w.h.n, distinct + extra);
	ck_assert_uint_eq(w.h.n_exit_fn, 1 + (nret[1] > 0));
	for (int i = 0; i < 2; i++) {
		const struct hook_bp *entry = hooks_find(&w.h, BASE + off[i]);
		if (!nret[i]) {
			ck_assert_ptr_nonnull(entry);
			ck_assert(!entry->at_exit);
			ck_assert_ptr_null(hooks_exit_fn_at(&w.h, BASE + off[i]));
			continue;
		}
		ck_assert_ptr_null(entry);
		ck_assert_uint_eq(peek(w.k, BASE + off[i]), file_byte(w.k, BASE + off[i]));
		const struct hooks_exit_fn *xf = hooks_exit_fn_at(&w.h, BASE + off[i] + size[i] - 1);
		ck_assert_ptr_nonnull(xf);
		ck_assert_uint_eq(xf->lo, BASE + off[i]);
		ck_assert_uint_eq(xf->hi, BASE + off[i] + size[i]);
		ck_assert_ptr_null(hooks_exit_fn_at(&w.h, BASE + off[i] + size[i]));
		for (size_t j = 0; j < nret[i]; j++) {
			const struct hook_bp *b = hooks_find(&w.h, BASE + rets[i][j]);
			ck_assert_ptr_nonnull(b);
			ck_assert(b->at_exit);
			ck_assert_int_eq(b->insn.op, EMU_RET);
			ck_assert_uint_eq(peek(w.k, b->addr), 0xcc);
			ck_assert_uint_eq(b->orig, file_byte(w.k, b->addr));
		}
	}
	/* A forked child's copy knows them too. */
	struct hooks copy;
	hooks_init(&copy);
	ck_assert_int_eq(hooks_copy(&copy, &w.h), 0);
	ck_assert_uint_eq(copy.n_exit_fn, w.h.n_exit_fn);
	ck_assert_ptr_nonnull(hooks_exit_fn_at(&copy, BASE + off[0]));
	hooks_fin(&copy);
	/* Another object where libc was: its functions are forgotten with its breakpoints. */
	uint32_t other = add_module(&w, "/other.so", BASE, 2000, NULL);
	set_map(&w, 1, &other, (uint64_t[]){ BASE });
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_uint_eq(w.h.n_exit_fn, 0);
	ck_assert_uint_eq(w.h.n, 0);
	world_fin(&w);

	/* Removed: every byte is the file's again. */
	world_init(&w);
	w.h.exact_sizes = 0;
	ck_assert_int_eq(hooks_scan_mem(&w.h, &w.mem, &w.mm, &w.reg), 0);
	ck_assert_int_eq(hooks_remove_mem(&w.h, &w.mem), 0);
	ck_assert_uint_eq(w.h.n, 0);
	ck_assert_uint_eq(w.h.n_exit_fn, 0);
	for (size_t i = 0; i < w.k->n; i++)
		ck_assert_uint_eq(peek(w.k, w.k->addr[i]), file_byte(w.k, w.k->addr[i]));
	world_fin(&w);
}
END_TEST

Suite *hooks_suite(void)
{
	Suite *s = suite_create("hooks");
	TCase *tc = tcase_create("fake memory");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hooks_whole_family);
	tcase_add_test(tc, test_hooks_alias_is_one_breakpoint);
	tcase_add_loop_test(tc, test_hooks_all_or_nothing, 0, 3);
	tcase_add_test(tc, test_hooks_existing_int3_refused);
	tcase_add_test(tc, test_hooks_unverified_module_untouched);
	tcase_add_test(tc, test_hooks_forget_only_unmapped);
	tcase_add_test(tc, test_hooks_remove_restores_every_byte);
	tcase_add_test(tc, test_hooks_remove_failure_keeps_table);
	tcase_add_test(tc, test_hooks_failed_write_takes_back_family);
	tcase_add_test(tc, test_hooks_malloc_at_returns);
	suite_add_tcase(s, tc);
	return s;
}
