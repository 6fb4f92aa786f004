/* Unit tests for tracer/emu: each supported form is run on this CPU and by the emulator from the same state, and the results must agree. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/unit/suites.h"
#include "tests/unit/testutil.h"
#include "symbols/sym.h"
#include "tracer/ptrace/emu.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO "/lib64/ld-linux-x86-64.so.2"

#define FL_ARITH 0x8d5ULL   /* CF PF AF ZF SF OF */
#define FL_AF 0x010ULL

static const char *const reg_names[16] = {
	"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
};

static unsigned long long *ureg(struct user_regs_struct *r, unsigned n)
{
	unsigned long long *t[16] = {
		&r->rax, &r->rcx, &r->rdx, &r->rbx, &r->rsp, &r->rbp, &r->rsi, &r->rdi,
		&r->r8, &r->r9, &r->r10, &r->r11, &r->r12, &r->r13, &r->r14, &r->r15,
	};
	return t[n];
}

/* ---- memory for the emulator: a private copy, so the CPU's run and the emulator's do not see each other ---- */

struct shadow {
	uint64_t base;
	uint8_t *buf;
	size_t size;
	int fail_read, fail_write;
	int reads, writes;
};

static int shadow_read(void *arg, uint64_t addr, void *buf, size_t n)
{
	struct shadow *s = arg;

	s->reads++;
	if (s->fail_read || addr < s->base || addr + n > s->base + s->size) {
		errno = EFAULT;
		return -1;
	}
	memcpy(buf, s->buf + (addr - s->base), n);
	return 0;
}

static int shadow_write(void *arg, uint64_t addr, const void *buf, size_t n)
{
	struct shadow *s = arg;

	s->writes++;
	if (s->fail_write || addr < s->base || addr + n > s->base + s->size) {
		errno = EFAULT;
		return -1;
	}
	memcpy(s->buf + (addr - s->base), buf, n);
	return 0;
}

/*
 * ---- the native harness ----
 * Three pages: data below the code (for negative rip-relative displacements),
 * the code, and data above it (the register block, a stack, more data). The
 * code loads every register and eflags from the block, jumps to the
 * instruction under test, and each "landing" it may end at records where it
 * landed and saves every register and eflags back, with rip-relative accesses
 * only, so no register is needed as a base.
 */
#define PG 4096
#define CODE_ENTRY 0x000
#define CODE_SAVE 0x100
#define AT_DEFAULT 0x800
#define STACK_OFF 0x600     /* in the upper data page */
#define DATA_OFF 0x800      /* in either data page */

struct hstate {
	uint64_t in[16];
	uint64_t in_flags;
	uint64_t out[16];
	uint64_t out_flags;
	uint64_t host_rsp;
	uint32_t mark;
};

static uint8_t *region;     /* three pages */
#define LOW (region)
#define CODE (region + PG)
#define HIGH (region + 2 * PG)
#define HS ((struct hstate *)HIGH)

static void harness_setup(void)
{
	void *p = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_msg(p != MAP_FAILED, "mmap: %s", strerror(errno));
	region = p;
}

static void harness_teardown(void)
{
	munmap(region, 3 * PG);
	region = NULL;
}

static uint64_t addr_of(const uint8_t *p)
{
	return (uint64_t)(uintptr_t)p;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int k = 0; k < 4; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

/* Emits op, then a disp32 reaching target from the end of the instruction, then imm. */
static uint8_t *emit_rip(uint8_t *p, const uint8_t *op, size_t oplen, const void *target, const uint8_t *imm, size_t immlen)
{
	memcpy(p, op, oplen);
	p += oplen;
	uint64_t end = addr_of(p) + 4 + immlen;
	put32(p, (uint32_t)(addr_of(target) - end));
	p += 4;
	if (immlen)
		memcpy(p, imm, immlen);
	return p + immlen;
}

static uint8_t *emit_jmp(uint8_t *p, const uint8_t *to)
{
	*p++ = 0xe9;
	put32(p, (uint32_t)(addr_of(to) - (addr_of(p) + 4)));
	return p + 4;
}

/* mov between register n and rip-relative memory: opcode 89 stores, 8b loads. */
static uint8_t *emit_mov_mem(uint8_t *p, uint8_t opcode, unsigned n, const void *slot)
{
	uint8_t op[3] = { (uint8_t)(0x48 | (n >= 8 ? 4 : 0)), opcode, (uint8_t)(((n & 7) << 3) | 5) };
	return emit_rip(p, op, 3, slot, NULL, 0);
}

/* movl $off, mark(%rip); jmp save: touches no register and no flag. */
static void emit_landing(size_t off)
{
	uint8_t op[2] = { 0xc7, 0x05 }, imm[4];
	put32(imm, (uint32_t)off);
	uint8_t *p = emit_rip(CODE + off, op, 2, &HS->mark, imm, 4);
	emit_jmp(p, CODE + CODE_SAVE);
}

static void emit_harness(size_t at, const uint8_t *code, size_t len, size_t extra_landing)
{
	static const uint8_t save_callee[] = { 0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57 };
	static const uint8_t restore_callee[] = { 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b, 0xc3 };
	uint8_t *p;

	ck_assert_int_eq(mprotect(CODE, PG, PROT_READ | PROT_WRITE), 0);
	memset(CODE, 0xcc, PG);

	p = CODE + CODE_ENTRY;
	memcpy(p, save_callee, sizeof(save_callee));
	p += sizeof(save_callee);
	p = emit_mov_mem(p, 0x89, 4, &HS->host_rsp);
	p = emit_rip(p, (const uint8_t[]){ 0xff, 0x35 }, 2, &HS->in_flags, NULL, 0); /* push in_flags(%rip) */
	*p++ = 0x9d;                                                                    /* popfq */
	for (unsigned n = 0; n < 16; n++)
		p = emit_mov_mem(p, 0x8b, n, &HS->in[n]);
	p = emit_jmp(p, CODE + at);
	ck_assert(p <= CODE + CODE_SAVE);

	p = CODE + CODE_SAVE;
	for (unsigned n = 0; n < 16; n++)
		p = emit_mov_mem(p, 0x89, n, &HS->out[n]);
	p = emit_mov_mem(p, 0x8b, 4, &HS->host_rsp);
	*p++ = 0x9c;                                                                    /* pushfq */
	p = emit_rip(p, (const uint8_t[]){ 0x8f, 0x05 }, 2, &HS->out_flags, NULL, 0);  /* pop out_flags(%rip) */
	*p++ = 0xfc;                                                                    /* cld, as the ABI wants */
	memcpy(p, restore_callee, sizeof(restore_callee));
	p += sizeof(restore_callee);
	ck_assert(p <= CODE + 0x300);

	memcpy(CODE + at, code, len);
	emit_landing(at + len);
	if (extra_landing)
		emit_landing(extra_landing);
	ck_assert_int_eq(mprotect(CODE, PG, PROT_READ | PROT_EXEC), 0);
}

/* A test input: registers, eflags, where the instruction goes, where else it may land. */
struct tcase {
	const uint8_t *code;
	size_t len;
	size_t at;              /* offset in the code page; 0 means AT_DEFAULT */
	size_t extra_landing;   /* a jump or return target, or 0 */
	uint64_t in[16];
	uint64_t flags;         /* arithmetic bits to start with; IF and bit 1 are added */
	uint64_t undefined;     /* flag bits the instruction leaves undefined */
};

static uint64_t stack_top(void)
{
	return addr_of(HIGH + STACK_OFF);
}

static void default_regs(struct tcase *c)
{
	for (unsigned n = 0; n < 16; n++)
		c->in[n] = 0x0123456789abcdefULL * (n + 1) ^ ((uint64_t)n << 56);
	c->in[4] = stack_top();
}

static void fmt_code(char *out, const struct tcase *c)
{
	out[0] = '\0';
	for (size_t k = 0; k < c->len; k++)
		sprintf(out + strlen(out), "%02x ", c->code[k]);
}

/* Runs c on the CPU and in the emulator, and requires identical registers, rip, defined flags and memory. */
static void run_case(const struct tcase *c)
{
	size_t at = c->at ? c->at : AT_DEFAULT;
	uint64_t flags_in = 0x202 | (c->flags & FL_ARITH);
	char what[64];
	struct emu_insn insn;

	fmt_code(what, c);
	emit_harness(at, c->code, c->len, c->extra_landing);
	memcpy(HS->in, c->in, sizeof(HS->in));
	HS->in_flags = flags_in;
	HS->mark = 0xffffffff;

	/* The emulator works on memory as it was before the CPU ran. */
	struct shadow s = { .base = addr_of(region), .size = 3 * PG };
	s.buf = malloc(s.size);
	ck_assert(s.buf != NULL);
	memcpy(s.buf, region, s.size);

	((void (*)(void))(uintptr_t)(CODE + CODE_ENTRY))();
	ck_assert_msg(HS->mark != 0xffffffff, "%s: the harness did not land", what);
	uint64_t cpu_rip = addr_of(CODE) + HS->mark;

	/* Decoding from the page also sees the landing's bytes after the instruction: they must not count. */
	ck_assert_msg(emu_decode(CODE + at, 15, &insn) == 0, "%s: not decoded", what);
	ck_assert_msg(insn.len == c->len, "%s: length %u, expected %zu", what, insn.len, c->len);

	struct user_regs_struct r;
	memset(&r, 0x77, sizeof(r));
	for (unsigned n = 0; n < 16; n++)
		*ureg(&r, n) = c->in[n];
	r.eflags = flags_in;
	r.rip = addr_of(CODE + at);
	struct user_regs_struct before = r;
	struct emu_mem mem = { shadow_read, shadow_write, &s };
	ck_assert_msg(emu_apply(&insn, addr_of(CODE + at), &r, &mem) == 0, "%s: emu_apply failed", what);

	for (unsigned n = 0; n < 16; n++)
		ck_assert_msg(*ureg(&r, n) == HS->out[n], "%s (in %s=%#llx): %s: emu %#llx, cpu %#llx",
			      what, reg_names[n], (unsigned long long)c->in[n], reg_names[n],
			      *ureg(&r, n), (unsigned long long)HS->out[n]);
	ck_assert_msg(r.rip == cpu_rip, "%s: rip: emu %#llx, cpu %#llx", what, r.rip, (unsigned long long)cpu_rip);
	uint64_t defined = FL_ARITH & ~c->undefined;
	ck_assert_msg(((r.eflags ^ HS->out_flags) & defined) == 0, "%s: flags in %#llx: emu %#llx, cpu %#llx (compared %#llx)",
		      what, (unsigned long long)flags_in, r.eflags, (unsigned long long)HS->out_flags, (unsigned long long)defined);
	ck_assert_msg(((r.eflags ^ flags_in) & ~FL_ARITH) == 0, "%s: emu changed non-arithmetic flags", what);
	/* Fields ptrace has besides the general registers stay as they were. */
	ck_assert(r.fs_base == before.fs_base && r.orig_rax == before.orig_rax && r.cs == before.cs);

	/* Memory: below the code, and above the register block. */
	ck_assert_msg(memcmp(s.buf, LOW, PG) == 0, "%s: lower data differs", what);
	ck_assert_msg(memcmp(s.buf + 2 * PG + 0x200, HIGH + 0x200, PG - 0x200) == 0, "%s: stack or data differs", what);
	free(s.buf);
}

static const uint64_t edge[] = {
	0, 1, 2, 3, 0x0f, 0x10, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0x7fffffff, 0x80000000,
	0xffffffff, 0x100000000ULL, 0x7fffffffffffffffULL, 0x8000000000000000ULL,
	0xffffffffffffffffULL, 0x0123456789abcdefULL, 0xfedcba9876543210ULL,
};
#define NEDGE (sizeof(edge) / sizeof(edge[0]))

/* Start flags alternate between all clear and all set, so that each bit is seen both being set and being cleared. */
static uint64_t start_flags(unsigned i)
{
	return i & 1 ? FL_ARITH : 0;
}

/* REX byte (or 0 when none is needed) and ModRM for a register-register form. */
static size_t enc_rr(uint8_t *b, unsigned w, unsigned opcode, unsigned reg, unsigned rm)
{
	size_t k = 0;
	uint8_t rex = 0x40 | (w << 3) | (reg >= 8 ? 4 : 0) | (rm >= 8 ? 1 : 0);
	if (rex != 0x40)
		b[k++] = rex;
	b[k++] = (uint8_t)opcode;
	b[k++] = (uint8_t)(0xc0 | (reg & 7) << 3 | (rm & 7));
	return k;
}

/* ---- native comparisons ---- */

START_TEST(test_cpu_nop)
{
	static const uint8_t forms[][12] = {
		{ 4, 0xf3, 0x0f, 0x1e, 0xfa },
		{ 1, 0x90 },
		{ 2, 0x66, 0x90 },
		{ 2, 0x48, 0x90 },
		{ 3, 0x66, 0x66, 0x90 },
		{ 3, 0x0f, 0x1f, 0x00 },
		{ 4, 0x0f, 0x1f, 0x40, 0x00 },
		{ 5, 0x0f, 0x1f, 0x44, 0x00, 0x00 },
		{ 6, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 },
		{ 7, 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00 },
		{ 8, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 },
		{ 9, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 },
		{ 7, 0x0f, 0x1f, 0x05, 0x10, 0x20, 0x30, 0x40 },             /* nopl disp32(%rip): never accessed */
		{ 8, 0x0f, 0x1f, 0x04, 0x25, 0x00, 0x00, 0x00, 0x00 },       /* SIB with no base */
		{ 3, 0x0f, 0x1f, 0xc0 },                                     /* register operand */
		{ 4, 0x49, 0x0f, 0x1f, 0xc7 },
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct tcase c = { .code = forms[i] + 1, .len = forms[i][0], .flags = start_flags(i) };
		default_regs(&c);
		run_case(&c);
	}
}
END_TEST

START_TEST(test_cpu_push)
{
	for (unsigned n = 0; n < 16; n++) {
		uint8_t b[2];
		size_t k = 0;
		if (n >= 8)
			b[k++] = 0x41;
		b[k++] = (uint8_t)(0x50 + (n & 7));
		struct tcase c = { .code = b, .len = k, .flags = start_flags(n) };
		default_regs(&c);
		run_case(&c);
	}
}
END_TEST

START_TEST(test_cpu_mov_rr)
{
	uint8_t b[3];

	for (unsigned w = 0; w < 2; w++)
		for (unsigned dst = 0; dst < 16; dst++)
			for (unsigned src = 0; src < 16; src++) {
				struct tcase c = { .code = b, .flags = start_flags(dst + src) };
				default_regs(&c);
				c.len = enc_rr(b, w, 0x89, src, dst);
				run_case(&c);
				c.len = enc_rr(b, w, 0x8b, dst, src);
				run_case(&c);
			}
}
END_TEST

/* Register pairs for the two-operand forms: the same register twice, low and extended ones, rsp and rbp. */
static const uint8_t pairs[][2] = {
	{ 0, 0 }, { 0, 1 }, { 7, 7 }, { 7, 6 }, { 3, 8 }, { 9, 2 }, { 15, 15 }, { 12, 13 }, { 5, 4 }, { 4, 4 },
};
#define NPAIRS (sizeof(pairs) / sizeof(pairs[0]))

/* Runs opcode (dst in ModRM rm when rm_dst, else in reg) over pairs and edge values at both sizes. */
static void cpu_binary(unsigned opcode, int rm_dst, uint64_t undefined)
{
	uint8_t b[3];
	unsigned i = 0;

	for (unsigned w = 0; w < 2; w++)
		for (size_t p = 0; p < NPAIRS; p++) {
			unsigned dst = pairs[p][0], src = pairs[p][1];
			for (size_t x = 0; x < NEDGE; x++)
				for (size_t y = 0; y < NEDGE; y++) {
					if (dst == src && y > 0)
						break;
					struct tcase c = { .code = b, .flags = start_flags(i++), .undefined = undefined };
					default_regs(&c);
					c.in[dst] = edge[x];
					if (dst != src)
						c.in[src] = edge[y];
					c.len = rm_dst ? enc_rr(b, w, opcode, src, dst) : enc_rr(b, w, opcode, dst, src);
					run_case(&c);
				}
		}
}

START_TEST(test_cpu_test_rr)
{
	cpu_binary(0x85, 1, FL_AF);
}
END_TEST

START_TEST(test_cpu_xor_rr)
{
	cpu_binary(0x31, 1, FL_AF);
	cpu_binary(0x33, 0, FL_AF);
}
END_TEST

START_TEST(test_cpu_sub_rsp)
{
	static const int32_t imm8s[] = { 0, 1, 8, 0x10, 0x18, 0x7f, -1, -0x80 };
	static const int32_t imm32s[] = { 0, 0x80, 0x1000, 0x7fffffff, -0x80000000, -1, 0x18, 0x11 };
	uint8_t b[7];
	unsigned i = 0;

	for (size_t x = 0; x < NEDGE + 1; x++) {
		uint64_t rsp = x < NEDGE ? edge[x] : stack_top();
		for (size_t k = 0; k < sizeof(imm8s) / sizeof(imm8s[0]); k++) {
			b[0] = 0x48, b[1] = 0x83, b[2] = 0xec, b[3] = (uint8_t)imm8s[k];
			struct tcase c = { .code = b, .len = 4, .flags = start_flags(i++) };
			default_regs(&c);
			c.in[4] = rsp;
			run_case(&c);
		}
		for (size_t k = 0; k < sizeof(imm32s) / sizeof(imm32s[0]); k++) {
			b[0] = 0x48, b[1] = 0x81, b[2] = 0xec;
			put32(b + 3, (uint32_t)imm32s[k]);
			struct tcase c = { .code = b, .len = 7, .flags = start_flags(i++) };
			default_regs(&c);
			c.in[4] = rsp;
			run_case(&c);
		}
	}
}
END_TEST

START_TEST(test_cpu_cmp_ri)
{
	/* cmp $imm, r: 81 /7 id and 83 /7 ib, 32- and 64-bit, every register (jemalloc's malloc starts so). */
	static const int32_t imms[] = { 0, 1, 0x1000, 0x7f, -0x80, -1, 0x7fffffff, -0x80000000 };
	uint8_t b[7];
	unsigned i = 0;

	for (unsigned w = 0; w < 2; w++)
		for (unsigned r = 0; r < 16; r++)
			for (size_t x = 0; x < NEDGE; x++)
				for (size_t k = 0; k < sizeof(imms) / sizeof(imms[0]); k++) {
					size_t n = 0;
					unsigned rex = (w ? 0x48 : 0) | (r >= 8 ? 0x41 : 0);
					int short_form = imms[k] >= -0x80 && imms[k] <= 0x7f;
					if (rex)
						b[n++] = (uint8_t)rex;
					b[n++] = short_form ? 0x83 : 0x81;
					b[n++] = (uint8_t)(0xc0 | 7 << 3 | (r & 7));
					if (short_form)
						b[n++] = (uint8_t)imms[k];
					else
						put32(b + n, (uint32_t)imms[k]), n += 4;
					struct tcase c = { .code = b, .len = n, .flags = start_flags(i++) };
					default_regs(&c);
					if (r != 4)
						c.in[r] = edge[x];
					run_case(&c);
				}
}
END_TEST

/* Builds, in b, a rip-relative instruction meant to run at AT_DEFAULT, whose operand is at target. */
static size_t enc_rip(uint8_t *b, const uint8_t *op, size_t oplen, const uint8_t *target, const uint8_t *imm, size_t immlen)
{
	size_t len = oplen + 4 + immlen;

	memcpy(b, op, oplen);
	put32(b + oplen, (uint32_t)(addr_of(target) - (addr_of(CODE + AT_DEFAULT) + len)));
	if (immlen)
		memcpy(b + oplen + 4, imm, immlen);
	return len;
}

static void store_le(uint8_t *p, uint64_t v, size_t size)
{
	for (size_t k = 0; k < size; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

/* The operand below the code (negative displacement) and above it (positive). */
static uint8_t *operand_at(int side)
{
	return side ? HIGH + DATA_OFF : LOW + DATA_OFF + 3;
}

START_TEST(test_cpu_cmp_rip)
{
	static const int8_t imms[] = { 0, 1, 0x0f, 0x10, 0x7f, -0x80, -1, 0x55 };
	/* size 1: cmpb 80 /7; 4: cmpl 83 /7; 8: cmpq 48 83 /7. */
	static const struct { size_t size; uint8_t op[3]; size_t oplen; } forms[] = {
		{ 1, { 0x80, 0x3d }, 2 }, { 4, { 0x83, 0x3d }, 2 }, { 8, { 0x48, 0x83, 0x3d }, 3 },
	};
	uint8_t b[16];
	unsigned i = 0;

	for (size_t f = 0; f < 3; f++)
		for (int side = 0; side < 2; side++)
			for (size_t x = 0; x < NEDGE; x++)
				for (size_t k = 0; k < sizeof(imms); k++) {
					uint8_t *target = operand_at(side);
					memset(target - 8, 0xa5, 24);
					store_le(target, edge[x], forms[f].size);
					uint8_t imm = (uint8_t)imms[k];
					struct tcase c = { .code = b, .flags = start_flags(i++) };
					c.len = enc_rip(b, forms[f].op, forms[f].oplen, target, &imm, 1);
					default_regs(&c);
					run_case(&c);
				}
}
END_TEST

START_TEST(test_cpu_mov_load_rip)
{
	uint8_t b[16];

	for (unsigned w = 0; w < 2; w++)
		for (unsigned dst = 0; dst < 16; dst++)
			for (int side = 0; side < 2; side++) {
				uint8_t *target = operand_at(side);
				store_le(target, 0x8877665544332211ULL ^ ((uint64_t)dst << 40) ^ ((uint64_t)w << 7), 8);
				uint8_t op[3], k = 0;
				uint8_t rex = 0x40 | (w << 3) | (dst >= 8 ? 4 : 0);
				if (rex != 0x40)
					op[k++] = rex;
				op[k++] = 0x8b;
				op[k++] = (uint8_t)((dst & 7) << 3 | 5);
				struct tcase c = { .code = b, .flags = start_flags(dst) };
				c.len = enc_rip(b, op, k, target, NULL, 0);
				default_regs(&c);
				run_case(&c);
			}
}
END_TEST

START_TEST(test_cpu_lea_rip)
{
	uint8_t b[16];

	for (unsigned w = 0; w < 2; w++)
		for (unsigned dst = 0; dst < 16; dst++)
			for (int side = 0; side < 2; side++) {
				uint8_t op[3], k = 0;
				uint8_t rex = 0x40 | (w << 3) | (dst >= 8 ? 4 : 0);
				if (rex != 0x40)
					op[k++] = rex;
				op[k++] = 0x8d;
				op[k++] = (uint8_t)((dst & 7) << 3 | 5);
				struct tcase c = { .code = b, .flags = start_flags(dst) };
				c.len = enc_rip(b, op, k, operand_at(side) + dst, NULL, 0);
				default_regs(&c);
				run_case(&c);
			}
}
END_TEST

START_TEST(test_cpu_jmp)
{
	/* Targets relative to the end of the instruction at AT_DEFAULT: forward, backward, onto the next byte. */
	static const int32_t rel8s[] = { 0x20, -0x40, 0x7f - 0x10, -0x80 + 0x10 };
	static const int32_t rel32s[] = { 0x200, -0x300, 0x10, -0x7f0 + 0x400 };
	uint8_t b[5];

	for (size_t k = 0; k < 4; k++) {
		b[0] = 0xeb, b[1] = (uint8_t)rel8s[k];
		struct tcase c = { .code = b, .len = 2, .extra_landing = AT_DEFAULT + 2 + rel8s[k], .flags = start_flags(k) };
		default_regs(&c);
		run_case(&c);
	}
	for (size_t k = 0; k < 4; k++) {
		b[0] = 0xe9;
		put32(b + 1, (uint32_t)rel32s[k]);
		struct tcase c = { .code = b, .len = 5, .extra_landing = AT_DEFAULT + 5 + rel32s[k], .flags = start_flags(k) };
		default_regs(&c);
		run_case(&c);
	}
	/* A jump onto the next instruction lands where the harness would fall through. */
	b[0] = 0xeb, b[1] = 0;
	struct tcase c = { .code = b, .len = 2 };
	default_regs(&c);
	run_case(&c);
}
END_TEST

START_TEST(test_cpu_ret)
{
	static const uint8_t ret[] = { 0xc3 };
	static const size_t targets[] = { 0x400, 0xa00 };

	for (size_t k = 0; k < 2; k++) {
		struct tcase c = { .code = ret, .len = 1, .extra_landing = targets[k], .flags = start_flags(k) };
		default_regs(&c);
		store_le(HIGH + STACK_OFF, addr_of(CODE + targets[k]), 8);
		run_case(&c);
	}
}
END_TEST

START_TEST(test_cpu_mov_imm)
{
	static const uint32_t imms[] = { 0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0x12345678 };
	uint8_t b[8];

	for (unsigned n = 0; n < 16; n++)
		for (size_t k = 0; k < sizeof(imms) / sizeof(imms[0]); k++) {
			struct tcase c = { .code = b, .flags = start_flags(n + k) };
			default_regs(&c);
			/* b8+r imm32 */
			size_t j = 0;
			if (n >= 8)
				b[j++] = 0x41;
			b[j++] = (uint8_t)(0xb8 + (n & 7));
			put32(b + j, imms[k]);
			c.len = j + 4;
			run_case(&c);
			/* REX.W c7 /0 imm32, sign-extended; and the same without REX.W */
			for (unsigned w = 0; w < 2; w++) {
				j = 0;
				uint8_t rex = 0x40 | (w << 3) | (n >= 8 ? 1 : 0);
				if (rex != 0x40)
					b[j++] = rex;
				b[j++] = 0xc7;
				b[j++] = (uint8_t)(0xc0 | (n & 7));
				put32(b + j, imms[k]);
				c.len = j + 4;
				run_case(&c);
			}
		}
}
END_TEST

/* ---- decoding without the CPU ---- */

START_TEST(test_decode_fields)
{
	struct emu_insn i;

	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x41, 0x54, 0x55 }, 3, &i), 0);
	ck_assert(i.op == EMU_PUSH && i.len == 2 && i.src == 12);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x48, 0x85, 0xff }, 3, &i), 0);
	ck_assert(i.op == EMU_TEST_RR && i.len == 3 && i.dst == 7 && i.src == 7 && i.size == 8);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x48, 0x89, 0xf0 }, 3, &i), 0);
	ck_assert(i.op == EMU_MOV_RR && i.len == 3 && i.dst == 0 && i.src == 6 && i.size == 8);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x44, 0x8b, 0xc7 }, 3, &i), 0);
	ck_assert(i.op == EMU_MOV_RR && i.dst == 8 && i.src == 7 && i.size == 4);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00 }, 7, &i), 0);
	ck_assert(i.op == EMU_CMPB_RIP && i.len == 7 && i.size == 1 && i.disp == 0x140201 && i.imm == 0);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x48, 0x83, 0x3d, 0xfc, 0xff, 0xff, 0xff, 0xff }, 8, &i), 0);
	ck_assert(i.op == EMU_CMP_RIP && i.len == 8 && i.size == 8 && i.disp == -4 && i.imm == -1);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x48, 0x83, 0xec, 0x18 }, 4, &i), 0);
	ck_assert(i.op == EMU_SUB_RSP && i.len == 4 && i.imm == 0x18);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00 }, 7, &i), 0);
	ck_assert(i.op == EMU_SUB_RSP && i.len == 7 && i.imm == 0x1000);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x4c, 0x8d, 0x05, 0x10, 0x00, 0x00, 0x00 }, 7, &i), 0);
	ck_assert(i.op == EMU_LEA_RIP && i.dst == 8 && i.disp == 0x10 && i.size == 8);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0xe9, 0xfb, 0xff, 0xff, 0xff }, 5, &i), 0);
	ck_assert(i.op == EMU_JMP && i.len == 5 && i.imm == -5);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x49, 0xc7, 0xc3, 0xff, 0xff, 0xff, 0xff }, 7, &i), 0);
	ck_assert(i.op == EMU_MOV_IMM && i.dst == 11 && i.size == 8 && i.imm == -1);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0xb8, 0xff, 0xff, 0xff, 0xff }, 5, &i), 0);
	ck_assert(i.op == EMU_MOV_IMM && i.dst == 0 && i.size == 4 && i.imm == 0xffffffff);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0xc7, 0xc1, 0xff, 0xff, 0xff, 0xff }, 6, &i), 0);
	ck_assert(i.op == EMU_MOV_IMM && i.dst == 1 && i.size == 4 && i.imm == 0xffffffff);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0xc3, 0x66, 0x66 }, 3, &i), 0);
	ck_assert(i.op == EMU_RET && i.len == 1);
	/* More than 15 bytes given: only the first 15 can matter. */
	uint8_t many[32];
	memset(many, 0x90, sizeof(many));
	ck_assert_int_eq(emu_decode(many, sizeof(many), &i), 0);
	ck_assert(i.op == EMU_NOP && i.len == 1);
}
END_TEST

START_TEST(test_decode_rejects)
{
	static const uint8_t bad[][16] = {
		{ 2, 0xf0, 0x90 },                                     /* lock */
		{ 5, 0xf0, 0x48, 0x83, 0x2c, 0x24 },                   /* lock sub ...(%rsp) */
		{ 2, 0xf3, 0x90 },                                     /* pause */
		{ 2, 0xf3, 0xc3 },                                     /* rep ret */
		{ 2, 0xf2, 0xc3 },                                     /* bnd ret */
		{ 4, 0xf3, 0x0f, 0x1e, 0xfb },                         /* endbr32 */
		{ 5, 0x64, 0x48, 0x8b, 0x04, 0x25 },                   /* mov %fs:..., %rax */
		{ 9, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 },          /* cs nopw */
		{ 3, 0x67, 0x8b, 0x07 },                               /* address size */
		{ 3, 0x48, 0x89, 0x07 },                               /* mov %rax, (%rdi) */
		{ 3, 0x48, 0x8b, 0x07 },                               /* mov (%rdi), %rax */
		{ 4, 0x48, 0x8b, 0x47, 0x08 },                         /* mov 8(%rdi), %rax */
		{ 3, 0x48, 0x85, 0x07 },                               /* test %rax, (%rdi) */
		{ 3, 0x31, 0x07, 0x00 },                               /* xor %eax, (%rdi) */
		{ 4, 0x48, 0x8d, 0x47, 0x08 },                         /* lea 8(%rdi), %rax */
		{ 3, 0x48, 0x8d, 0xc0 },                               /* lea with a register operand (invalid) */
		{ 3, 0x83, 0xec, 0x08 },                               /* sub $8, %esp */
		{ 4, 0x49, 0x83, 0xec, 0x08 },                         /* sub $8, %r12 */
		{ 4, 0x48, 0x83, 0xc4, 0x08 },                         /* add $8, %rsp */
		{ 3, 0x80, 0xec, 0x08 },                               /* sub $8, %ah */
		{ 7, 0x80, 0x7f, 0x08, 0x00 },                         /* cmpb $0, 8(%rdi) */
		{ 7, 0x80, 0x35, 0, 0, 0, 0, 0 },                      /* xorb $0, disp(%rip): writes memory */
		{ 10, 0x81, 0x3d, 0, 0, 0, 0, 0, 0, 0, 0 },            /* cmpl $imm32, disp(%rip) */
		{ 8, 0x48, 0x80, 0x3d, 0, 0, 0, 0, 0 },                /* REX on cmpb */
		{ 2, 0x41, 0x90 },                                     /* xchg %eax, %r8d */
		{ 2, 0x66, 0x50 },                                     /* push %ax */
		{ 3, 0x66, 0x89, 0xc0 },                               /* mov %ax, %ax */
		{ 3, 0x0f, 0x1f, 0x08 },                               /* 0f 1f /1 */
		{ 2, 0x0f, 0x0b },                                     /* ud2 */
		{ 1, 0xcc },                                           /* int3 */
		{ 5, 0xe8, 0, 0, 0, 0 },                               /* call */
		{ 2, 0xff, 0xe0 },                                     /* jmp *%rax */
		{ 2, 0x48, 0xc3 },                                     /* REX ret */
		{ 3, 0xc2, 0x08, 0x00 },                               /* ret $8 */
		{ 10, 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8 },            /* movabs */
		{ 6, 0xc7, 0x07, 1, 2, 3, 4 },                         /* movl $imm, (%rdi) */
		{ 6, 0xc7, 0xc8, 1, 2, 3, 4 },                         /* c7 /1 */
		{ 3, 0x48, 0x66, 0x90 },                               /* REX not last */
		{ 2, 0x48, 0x48 },                                     /* REX REX */
		{ 2, 0x74, 0x07 },                                     /* je */
		{ 3, 0x48, 0xf7, 0xe2 },                               /* mul */
	};
	struct emu_insn i;

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
		ck_assert_msg(emu_decode(bad[k] + 1, bad[k][0], &i) == -1, "case %zu (%02x %02x) was accepted", k, bad[k][1], bad[k][2]);
	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x90 }, 0, &i), -1);
}
END_TEST

START_TEST(test_decode_truncated)
{
	static const uint8_t good[][16] = {
		{ 4, 0xf3, 0x0f, 0x1e, 0xfa },
		{ 9, 0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 },
		{ 8, 0x0f, 0x1f, 0x04, 0x25, 0, 0, 0, 0 },
		{ 2, 0x66, 0x90 },
		{ 2, 0x41, 0x57 },
		{ 3, 0x4c, 0x89, 0xe7 },
		{ 3, 0x48, 0x85, 0xff },
		{ 2, 0x31, 0xc0 },
		{ 4, 0x48, 0x83, 0xec, 0x18 },
		{ 7, 0x48, 0x81, 0xec, 0, 0x10, 0, 0 },
		{ 7, 0x80, 0x3d, 1, 2, 3, 4, 0 },
		{ 7, 0x83, 0x3d, 1, 2, 3, 4, 0 },
		{ 8, 0x48, 0x83, 0x3d, 1, 2, 3, 4, 0 },
		{ 7, 0x48, 0x8b, 0x05, 1, 2, 3, 4 },
		{ 6, 0x8b, 0x05, 1, 2, 3, 4 },
		{ 7, 0x48, 0x8d, 0x3d, 1, 2, 3, 4 },
		{ 5, 0xe9, 1, 2, 3, 4 },
		{ 2, 0xeb, 0xfe },
		{ 1, 0xc3 },
		{ 6, 0x41, 0xbc, 1, 2, 3, 4 },
		{ 7, 0x48, 0xc7, 0xc0, 1, 2, 3, 4 },
	};
	struct emu_insn i;

	for (size_t k = 0; k < sizeof(good) / sizeof(good[0]); k++) {
		size_t len = good[k][0];
		ck_assert_msg(emu_decode(good[k] + 1, len, &i) == 0 && i.len == len, "case %zu not decoded whole", k);
		for (size_t n = 0; n < len; n++)
			ck_assert_msg(emu_decode(good[k] + 1, n, &i) == -1, "case %zu decoded from %zu of %zu bytes", k, n, len);
	}
}
END_TEST

/* ---- the real first instructions of this machine's allocator ---- */


/* The output of nm -D for path; the caller frees it. */
static char *nm_dynamic(const char *path)
{
	char *cmd, *out;

	ck_assert(asprintf(&cmd, "nm -D --defined-only '%s'", path) > 0);
	out = test_run_command(cmd);
	free(cmd);
	return out;
}

/* A function's address in the object, from nm -D output. */
static uint64_t nm_lookup(const char *nm_out, const char *name)
{
	char *copy = strdup(nm_out), *line, *save = NULL;
	uint64_t value = 0;

	ck_assert(copy != NULL);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long v;
		char type, sym[256];
		if (sscanf(line, "%lx %c %255s", &v, &type, sym) != 3)
			continue;
		char *at = strchr(sym, '@');
		if (at)
			*at = '\0';
		if (strcmp(sym, name) == 0 && strchr("TtWi", type)) {
			value = v;
			break;
		}
	}
	free(copy);
	ck_assert_msg(value != 0, "%s not found by nm -D", name);
	return value;
}

/* The bytes objdump shows for the first instruction at addr: a second decoder's opinion of its length. */
static size_t objdump_first(const char *path, uint64_t addr, uint8_t *bytes)
{
	char *cmd, *out, *line, *save = NULL;
	size_t n = 0;
	int started = 0;

	ck_assert(asprintf(&cmd, "objdump -d --start-address=%#lx --stop-address=%#lx '%s'",
			   (unsigned long)addr, (unsigned long)addr + 16, path) > 0);
	out = test_run_command(cmd);
	free(cmd);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long a;
		char *tab1 = strchr(line, '\t');
		if (!tab1 || sscanf(line, " %lx:", &a) != 1)
			continue;
		char *tab2 = strchr(tab1 + 1, '\t');
		/* A long instruction goes on over lines with bytes and no mnemonic. */
		if (started && tab2)
			break;
		if (!started && a != addr)
			continue;
		started = 1;
		if (tab2)
			*tab2 = '\0';
		for (char *p = tab1 + 1; n < 15;) {
			unsigned x;
			int used;
			if (sscanf(p, " %2x%n", &x, &used) != 1)
				break;
			bytes[n++] = (uint8_t)x;
			p += used;
		}
		if (tab2)
			break;  /* the mnemonic was on this line: the instruction ended here */
	}
	free(out);
	ck_assert_msg(n > 0, "objdump shows nothing at %#lx in %s", (unsigned long)addr, path);
	return n;
}

/* nm's value is the module offset sym_read wants for these objects (first PT_LOAD at offset 0, address 0); objdump checks the bytes. */
static void check_object_start(const char *path, struct sym_file *f, const char *nm_out, const char *name)
{
	uint64_t off = nm_lookup(nm_out, name);
	uint8_t code[15], ref[15];
	struct emu_insn i;

	ck_assert_msg(sym_read(f, off, code, sizeof(code)) == 0, "cannot read %s in %s", name, path);
	size_t reflen = objdump_first(path, off, ref);
	ck_assert_msg(memcmp(code, ref, reflen) == 0, "%s: sym_read and objdump disagree", name);
	ck_assert_msg(emu_decode(code, sizeof(code), &i) == 0,
		      "%s in %s starts with %02x %02x %02x %02x, not decoded", name, path, code[0], code[1], code[2], code[3]);
	ck_assert_msg(i.len == reflen, "%s: length %u, objdump says %zu", name, i.len, reflen);
}

START_TEST(test_libc_starts)
{
	static const char *const fns[] = {
		"malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
		"aligned_alloc", "memalign", "valloc", "pvalloc",
	};
	struct sym_file *f = sym_open(LIBC);
	ck_assert_msg(f != NULL, "cannot open %s", LIBC);
	char *nm_out = nm_dynamic(LIBC);
	for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++)
		check_object_start(LIBC, f, nm_out, fns[k]);
	free(nm_out);
	sym_close(f);
}
END_TEST

START_TEST(test_ldso_debug_state)
{
	struct sym_file *f = sym_open(LDSO);
	ck_assert_msg(f != NULL, "cannot open %s", LDSO);
	char *nm_out = nm_dynamic(LDSO);
	check_object_start(LDSO, f, nm_out, "_dl_debug_state");
	free(nm_out);
	sym_close(f);
}
END_TEST

/* ---- failures ---- */

static void expect_fail(const uint8_t *code, size_t len, int fail_read, int fail_write)
{
	uint8_t mem[64];
	struct shadow s = { .buf = mem, .size = sizeof(mem), .fail_read = fail_read, .fail_write = fail_write };
	struct emu_mem m = { shadow_read, shadow_write, &s };
	struct user_regs_struct r, before;
	struct emu_insn i;

	memset(mem, 0x11, sizeof(mem));
	memset(&r, 0x5a, sizeof(r));
	s.base = 0x10000;
	r.rsp = s.base + 32;
	r.rip = s.base + 8;     /* rip-relative operands land inside mem */
	before = r;
	ck_assert_int_eq(emu_decode(code, len, &i), 0);
	/* With working memory the instruction succeeds, so the failure below is the callback's doing. */
	struct shadow ok = s;
	uint8_t okmem[64];
	memcpy(okmem, mem, sizeof(okmem));
	ok.buf = okmem;
	ok.fail_read = ok.fail_write = 0;
	struct emu_mem okm = { shadow_read, shadow_write, &ok };
	ck_assert_int_eq(emu_apply(&i, r.rip, &r, &okm), 0);
	r = before;

	errno = 0;
	ck_assert_int_eq(emu_apply(&i, r.rip, &r, &m), -1);
	ck_assert_int_eq(errno, EFAULT);
	ck_assert(memcmp(&r, &before, sizeof(r)) == 0);
	ck_assert_int_eq(s.reads + s.writes, 1);
	for (size_t k = 0; k < sizeof(mem); k++)
		ck_assert_uint_eq(mem[k], 0x11);
}

START_TEST(test_mem_failures)
{
	expect_fail((const uint8_t[]){ 0x55 }, 1, 0, 1);
	expect_fail((const uint8_t[]){ 0x41, 0x57 }, 2, 0, 1);
	expect_fail((const uint8_t[]){ 0xc3 }, 1, 1, 0);
	expect_fail((const uint8_t[]){ 0x80, 0x3d, 0x04, 0, 0, 0, 0 }, 7, 1, 0);
	expect_fail((const uint8_t[]){ 0x83, 0x3d, 0x04, 0, 0, 0, 0 }, 7, 1, 0);
	expect_fail((const uint8_t[]){ 0x48, 0x83, 0x3d, 0x04, 0, 0, 0, 0 }, 8, 1, 0);
	expect_fail((const uint8_t[]){ 0x48, 0x8b, 0x05, 0x04, 0, 0, 0 }, 7, 1, 0);
	expect_fail((const uint8_t[]){ 0x8b, 0x05, 0x04, 0, 0, 0 }, 6, 1, 0);
}
END_TEST

START_TEST(test_wrong_rip)
{
	struct emu_insn i;
	struct user_regs_struct r, before;
	struct emu_mem m = { shadow_read, shadow_write, NULL };

	ck_assert_int_eq(emu_decode((const uint8_t[]){ 0x90 }, 1, &i), 0);
	memset(&r, 0x33, sizeof(r));
	r.rip = 0x1000;
	before = r;
	ck_assert_int_eq(emu_apply(&i, 0x1001, &r, &m), -1);
	ck_assert(memcmp(&r, &before, sizeof(r)) == 0);
	ck_assert_int_eq(emu_apply(&i, 0x1000, &r, &m), 0);
	ck_assert_uint_eq(r.rip, 0x1001);
}
END_TEST

Suite *emu_suite(void)
{
	Suite *s = suite_create("emu");
	TCase *cpu = tcase_create("cpu");
	TCase *dec = tcase_create("decode");
	TCase *obj = tcase_create("objects");

	tcase_add_checked_fixture(cpu, harness_setup, harness_teardown);
	tcase_set_timeout(cpu, 60);
	tcase_add_test(cpu, test_cpu_nop);
	tcase_add_test(cpu, test_cpu_push);
	tcase_add_test(cpu, test_cpu_mov_rr);
	tcase_add_test(cpu, test_cpu_test_rr);
	tcase_add_test(cpu, test_cpu_xor_rr);
	tcase_add_test(cpu, test_cpu_sub_rsp);
	tcase_add_test(cpu, test_cpu_cmp_ri);
	tcase_add_test(cpu, test_cpu_cmp_rip);
	tcase_add_test(cpu, test_cpu_mov_load_rip);
	tcase_add_test(cpu, test_cpu_lea_rip);
	tcase_add_test(cpu, test_cpu_jmp);
	tcase_add_test(cpu, test_cpu_ret);
	tcase_add_test(cpu, test_cpu_mov_imm);
	suite_add_tcase(s, cpu);

	tcase_add_test(dec, test_decode_fields);
	tcase_add_test(dec, test_decode_rejects);
	tcase_add_test(dec, test_decode_truncated);
	tcase_add_test(dec, test_mem_failures);
	tcase_add_test(dec, test_wrong_rip);
	suite_add_tcase(s, dec);

	/* Runs nm and objdump, which take seconds on a busy machine. */
	tcase_set_timeout(obj, 120);
	tcase_add_test(obj, test_libc_starts);
	tcase_add_test(obj, test_ldso_debug_state);
	suite_add_tcase(s, obj);
	return s;
}
