/* Decodes and executes, outside the tracee, the one instruction a hook's int3 displaces. */
#include <errno.h>
#include <string.h>

#include "tracer/ptrace/emu.h"

/* Longest x86 instruction; bytes past it can never belong to the one at code[0]. */
#define EMU_MAX_LEN 15

#define FL_CF 0x001ULL
#define FL_PF 0x004ULL
#define FL_AF 0x010ULL
#define FL_ZF 0x040ULL
#define FL_SF 0x080ULL
#define FL_OF 0x800ULL

/* The register numbered n in the encoding order, in the layout ptrace gives. */
static unsigned long long *reg(struct user_regs_struct *r, unsigned n)
{
	switch (n) {
	case 0: return &r->rax;
	case 1: return &r->rcx;
	case 2: return &r->rdx;
	case 3: return &r->rbx;
	case 4: return &r->rsp;
	case 5: return &r->rbp;
	case 6: return &r->rsi;
	case 7: return &r->rdi;
	case 8: return &r->r8;
	case 9: return &r->r9;
	case 10: return &r->r10;
	case 11: return &r->r11;
	case 12: return &r->r12;
	case 13: return &r->r13;
	case 14: return &r->r14;
	case 15: return &r->r15;
	}
	return NULL;
}

static int32_t get_i32(const uint8_t *p)
{
	uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	return (int32_t)v;
}

/*
 * Length of a ModRM operand (the ModRM byte and what follows it: SIB,
 * displacement) starting at p, or 0 when it does not fit in the n bytes left.
 * Only the NOP forms need this: no other accepted form has a general operand.
 */
static size_t modrm_len(const uint8_t *p, size_t n)
{
	size_t len = 1;

	if (n < 1)
		return 0;
	unsigned mod = p[0] >> 6, rm = p[0] & 7;
	if (mod != 3 && rm == 4) {
		if (n < 2)
			return 0;
		len++;
		if (mod == 0 && (p[1] & 7) == 5)
			len += 4;   /* no base: disp32 */
	}
	if (mod == 0 && rm == 5)
		len += 4;           /* rip-relative disp32 */
	else if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len <= n ? len : 0;
}

int emu_decode(const uint8_t *code, size_t n, struct emu_insn *insn)
{
	size_t i = 0;
	unsigned opsize16 = 0, rex = 0;

	memset(insn, 0, sizeof(*insn));
	if (n > EMU_MAX_LEN)
		n = EMU_MAX_LEN;

	/* f3 is accepted only as part of endbr64: anywhere else it is rep (f3 c3, pause). */
	if (n >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa) {
		insn->op = EMU_NOP;
		insn->len = 4;
		return 0;
	}
	/*
	 * 66 only ever reaches a NOP form below: a 16-bit move or push would
	 * need its own semantics. Any other prefix (lock, rep, segment, address
	 * size) changes what the instruction touches, so it is refused.
	 */
	while (i < n && code[i] == 0x66) {
		opsize16 = 1;
		i++;
	}
	/* REX counts only right before the opcode, which is the only place we look for it. */
	if (i < n && (code[i] & 0xf0) == 0x40)
		rex = code[i++];
	if (i >= n)
		return -1;

	unsigned w = (rex >> 3) & 1, r = (rex >> 2) & 1, b = rex & 1;
	unsigned opc = code[i++];
	unsigned modrm = i < n ? code[i] : 0, mod = modrm >> 6;
	unsigned mreg = ((modrm >> 3) & 7) | r << 3, mrm = (modrm & 7) | b << 3;
	int has_modrm = i < n;
	int riprel = has_modrm && mod == 0 && (modrm & 7) == 5;

	insn->size = w ? 8 : 4;

	if (opc == 0x0f) {
		/* 0f 1f /0 is the multi-byte NOP; its operand is never accessed. */
		if (i + 1 >= n || code[i] != 0x1f || ((code[i + 1] >> 3) & 7) != 0)
			return -1;
		size_t ml = modrm_len(code + i + 1, n - i - 1);
		if (!ml)
			return -1;
		insn->op = EMU_NOP;
		insn->len = i + 1 + ml;
		return 0;
	}
	if (opc == 0x90) {
		/* With REX.B, 90 is xchg %r8d,%eax: a real exchange, not a NOP. */
		if (b)
			return -1;
		insn->op = EMU_NOP;
		insn->len = i;
		return 0;
	}
	if (opsize16)
		return -1;

	switch (opc) {
	case 0x50: case 0x51: case 0x52: case 0x53:
	case 0x54: case 0x55: case 0x56: case 0x57:
		/* Operand size is 64 bits in long mode whatever REX.W says. */
		insn->op = EMU_PUSH;
		insn->src = (opc & 7) | b << 3;
		insn->size = 8;
		insn->len = i;
		return 0;

	case 0x89: case 0x8b: case 0x85: case 0x31: case 0x33:
		if (!has_modrm)
			return -1;
		if (opc == 0x8b && riprel) {
			if (i + 5 > n)
				return -1;
			insn->op = EMU_MOV_LOAD_RIP;
			insn->dst = mreg;
			insn->disp = get_i32(code + i + 1);
			insn->len = i + 5;
			return 0;
		}
		if (mod != 3)
			return -1;
		insn->op = opc == 0x85 ? EMU_TEST_RR : (opc == 0x31 || opc == 0x33) ? EMU_XOR_RR : EMU_MOV_RR;
		/* The low opcode bit set with bit 1 set means the ModRM reg field is the destination. */
		if (opc == 0x8b || opc == 0x33) {
			insn->dst = mreg;
			insn->src = mrm;
		} else {
			insn->dst = mrm;
			insn->src = mreg;
		}
		insn->len = i + 1;
		return 0;

	case 0x8d:
		if (!riprel || i + 5 > n)
			return -1;
		insn->op = EMU_LEA_RIP;
		insn->dst = mreg;
		insn->disp = get_i32(code + i + 1);
		insn->len = i + 5;
		return 0;

	case 0x80: case 0x81: case 0x83: {
		if (!has_modrm)
			return -1;
		size_t immlen = opc == 0x81 ? 4 : 1;
		unsigned sub = (modrm >> 3) & 7;
		if (mod == 3 && sub == 5 && mrm == 4 && w && opc != 0x80) {
			if (i + 1 + immlen > n)
				return -1;
			insn->op = EMU_SUB_RSP;
			insn->dst = 4;
			insn->imm = immlen == 4 ? get_i32(code + i + 1) : (int8_t)code[i + 1];
			insn->len = i + 1 + immlen;
			return 0;
		}
		if (mod == 3 && sub == 7 && opc != 0x80) {
			if (i + 1 + immlen > n)
				return -1;
			insn->op = EMU_CMP_RI;
			insn->dst = mrm;
			insn->size = w ? 8 : 4;
			insn->imm = immlen == 4 ? get_i32(code + i + 1) : (int8_t)code[i + 1];
			insn->len = i + 1 + immlen;
			return 0;
		}
		/* cmp with an imm8 against rip-relative memory; the 81 form (imm32) is not needed. */
		if (riprel && sub == 7 && opc != 0x81) {
			if (i + 6 > n || (opc == 0x80 && rex))
				return -1;
			insn->op = opc == 0x80 ? EMU_CMPB_RIP : EMU_CMP_RIP;
			if (opc == 0x80)
				insn->size = 1;
			insn->disp = get_i32(code + i + 1);
			insn->imm = (int8_t)code[i + 5];
			insn->len = i + 6;
			return 0;
		}
		return -1;
	}

	case 0xeb: case 0xe9:
		/* REX on a near jump has no use; refusing it keeps the accepted set exact. */
		if (rex)
			return -1;
		if (opc == 0xeb) {
			if (i + 1 > n)
				return -1;
			insn->imm = (int8_t)code[i];
			insn->len = i + 1;
		} else {
			if (i + 4 > n)
				return -1;
			insn->imm = get_i32(code + i);
			insn->len = i + 4;
		}
		insn->op = EMU_JMP;
		insn->size = 8;
		return 0;

	case 0xc3:
		if (rex)
			return -1;
		insn->op = EMU_RET;
		insn->size = 8;
		insn->len = i;
		return 0;

	case 0xb8: case 0xb9: case 0xba: case 0xbb:
	case 0xbc: case 0xbd: case 0xbe: case 0xbf:
		/* With REX.W this is movabs with an imm64: not among the forms we expect. */
		if (w || i + 4 > n)
			return -1;
		insn->op = EMU_MOV_IMM;
		insn->dst = (opc & 7) | b << 3;
		insn->imm = (uint32_t)get_i32(code + i);
		insn->len = i + 4;
		return 0;

	case 0xc7:
		if (!has_modrm || mod != 3 || ((modrm >> 3) & 7) != 0 || i + 5 > n)
			return -1;
		insn->op = EMU_MOV_IMM;
		insn->dst = mrm;
		insn->imm = w ? (int64_t)get_i32(code + i + 1) : (int64_t)(uint32_t)get_i32(code + i + 1);
		insn->len = i + 5;
		return 0;
	}
	return -1;
}

/* The value truncated to size bytes (zero-extended back to 64 bits). */
static uint64_t zext(uint64_t v, unsigned size)
{
	return size >= 8 ? v : v & ((1ULL << (8 * size)) - 1);
}

static uint64_t sign_bit(unsigned size)
{
	return 1ULL << (8 * size - 1);
}

/* ZF, SF and PF of a result; PF looks at the low byte only, whatever the size. */
static uint64_t zsp(uint64_t res, unsigned size)
{
	uint64_t f = 0;

	if (res == 0)
		f |= FL_ZF;
	if (res & sign_bit(size))
		f |= FL_SF;
	if (!(__builtin_popcount((unsigned)(res & 0xff)) & 1))
		f |= FL_PF;
	return f;
}

/* eflags after a - b (sub and cmp), as a and b are at the given size. */
static unsigned long long flags_sub(unsigned long long old, uint64_t a, uint64_t b, unsigned size)
{
	uint64_t res = zext(a - b, size);
	uint64_t f = zsp(res, size);

	if (a < b)
		f |= FL_CF;
	if ((a ^ b) & (a ^ res) & sign_bit(size))
		f |= FL_OF;
	if ((a ^ b ^ res) & 0x10)
		f |= FL_AF;
	return (old & ~(FL_CF | FL_PF | FL_AF | FL_ZF | FL_SF | FL_OF)) | f;
}

/* eflags after a logical operation; AF is undefined, so it is left as it was. */
static unsigned long long flags_logic(unsigned long long old, uint64_t res, unsigned size)
{
	return (old & ~(FL_CF | FL_PF | FL_ZF | FL_SF | FL_OF)) | zsp(res, size);
}

static uint64_t load_le(const uint8_t *p, unsigned size)
{
	uint64_t v = 0;

	for (unsigned k = 0; k < size; k++)
		v |= (uint64_t)p[k] << (8 * k);
	return v;
}

int emu_apply(const struct emu_insn *insn, uint64_t at, struct user_regs_struct *regs, const struct emu_mem *mem)
{
	/* Work on a copy so that a failed access leaves the caller's registers as they were. */
	struct user_regs_struct r = *regs;
	uint64_t next = at + insn->len;
	unsigned size = insn->size;
	uint8_t buf[8];

	if (regs->rip != at || insn->dst > 15 || insn->src > 15) {
		errno = EINVAL;
		return -1;
	}
	unsigned long long *dst = reg(&r, insn->dst), *src = reg(&r, insn->src);

	r.rip = next;
	switch (insn->op) {
	case EMU_NOP:
		break;

	case EMU_PUSH: {
		/* push %rsp stores the value rsp had before the decrement. */
		uint64_t v = *src;
		for (unsigned k = 0; k < 8; k++)
			buf[k] = (uint8_t)(v >> (8 * k));
		if (mem->write(mem->arg, r.rsp - 8, buf, 8) < 0)
			return -1;
		r.rsp -= 8;
		break;
	}

	case EMU_MOV_RR:
		*dst = zext(*src, size);
		break;

	case EMU_TEST_RR:
		r.eflags = flags_logic(r.eflags, zext(*dst & *src, size), size);
		break;

	case EMU_XOR_RR: {
		uint64_t res = zext(*dst ^ *src, size);
		*dst = res;
		r.eflags = flags_logic(r.eflags, res, size);
		break;
	}

	case EMU_SUB_RSP: {
		uint64_t a = r.rsp, b = (uint64_t)insn->imm;
		r.rsp = a - b;
		r.eflags = flags_sub(r.eflags, a, b, 8);
		break;
	}

	case EMU_CMP_RI:
		r.eflags = flags_sub(r.eflags, zext(*dst, size), zext((uint64_t)insn->imm, size), size);
		break;

	case EMU_CMPB_RIP:
	case EMU_CMP_RIP:
		if (mem->read(mem->arg, next + (int64_t)insn->disp, buf, size) < 0)
			return -1;
		r.eflags = flags_sub(r.eflags, load_le(buf, size), zext((uint64_t)insn->imm, size), size);
		break;

	case EMU_MOV_LOAD_RIP:
		if (mem->read(mem->arg, next + (int64_t)insn->disp, buf, size) < 0)
			return -1;
		*dst = load_le(buf, size);
		break;

	case EMU_LEA_RIP:
		*dst = zext(next + (int64_t)insn->disp, size);
		break;

	case EMU_JMP:
		r.rip = next + (uint64_t)insn->imm;
		break;

	case EMU_RET:
		if (mem->read(mem->arg, r.rsp, buf, 8) < 0)
			return -1;
		r.rip = load_le(buf, 8);
		r.rsp += 8;
		break;

	case EMU_MOV_IMM:
		*dst = zext((uint64_t)insn->imm, size);
		break;

	default:
		errno = EINVAL;
		return -1;
	}
	*regs = r;
	return 0;
}
