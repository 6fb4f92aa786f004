/* A function's returns, by a linear sweep of its bytes with capstone. */
#include "symbols/exits.h"

#include <capstone/capstone.h>
#include <stdlib.h>

#include "symbols/sym.h"

/* The most bytes of one function looked at: glibc's malloc is 791. */
#define EXITS_MAX_CODE 16384

/* A plain return: c3, or f3 c3 / f2 c3 (rep and bnd ret). */
static int plain_ret(const cs_insn *in)
{
	if (in->size == 1)
		return in->bytes[0] == 0xc3;
	return in->size == 2 && (in->bytes[0] == 0xf3 || in->bytes[0] == 0xf2) && in->bytes[1] == 0xc3;
}

static int in_group(const cs_insn *in, uint8_t g)
{
	for (uint8_t i = 0; i < in->detail->groups_count; i++)
		if (in->detail->groups[i] == g)
			return 1;
	return 0;
}

size_t exits_find(const uint8_t *code, size_t len, uint64_t base, uint64_t *at, size_t max)
{
	csh cs;
	if (len == 0 || len > EXITS_MAX_CODE || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	cs_insn *in = cs_malloc(cs);
	size_t n = 0;
	int ok = in != NULL;
	const uint8_t *p = code;
	size_t left = len;
	uint64_t addr = base;
	while (ok && left > 0) {
		if (!cs_disasm_iter(cs, &p, &left, &addr, in)) {
			ok = 0; /* bytes that do not decode: data, or an instruction capstone does not know */
			break;
		}
		if (in_group(in, CS_GRP_RET) || in_group(in, CS_GRP_IRET)) {
			if (!plain_ret(in) || n == max)
				ok = 0;
			else
				at[n++] = in->address;
		} else if (in_group(in, CS_GRP_JUMP)) {
			const cs_x86 *x = &in->detail->x86;
			/* A direct jump (or branch, loop, jrcxz) names its target as an immediate. */
			if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
				ok = 0;
			else if ((uint64_t)x->operands[0].imm < base || (uint64_t)x->operands[0].imm >= base + len)
				ok = 0; /* a tail call, or a jump into a cold part elsewhere */
		}
	}
	if (in)
		cs_free(in, 1);
	cs_close(&cs);
	return ok ? n : 0;
}

size_t exits_of(const struct sym_file *f, const char *name, uint64_t *at_off, size_t max)
{
	uint64_t off, size;
	if (sym_dynamic_extent(f, name, &off, &size) || size == 0 || size > EXITS_MAX_CODE)
		return 0;
	uint8_t *code = malloc(size);
	if (!code)
		return 0;
	size_t n = sym_read(f, off, code, size) ? 0 : exits_find(code, size, off, at_off, max);
	free(code);
	return n;
}
