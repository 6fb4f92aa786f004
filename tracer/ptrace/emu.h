/*
 * Emulation of the one instruction a hook's int3 displaces, so that a
 * breakpoint never has to be lifted (no single-stepping, no window in which
 * another thread could run past it). Only the instructions that start
 * allocator functions are known; the hook is not placed on any other.
 * Works on registers and a memory callback: testable without a process.
 */
#ifndef PTFIL_EMU_H
#define PTFIL_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

/* Memory of the target, as the caller reaches it. Each returns 0, or -1 when it failed. */
struct emu_mem {
	int (*read)(void *arg, uint64_t addr, void *buf, size_t n);
	int (*write)(void *arg, uint64_t addr, const void *buf, size_t n);
	void *arg;
};

enum emu_op {
	EMU_NOP,        /* endbr64, nop, nopl/nopw forms */
	EMU_PUSH,       /* push r64 */
	EMU_MOV_RR,     /* mov r64, r64 (also 32-bit forms, zero-extending) */
	EMU_TEST_RR,    /* test r64/r32, r64/r32 */
	EMU_XOR_RR,     /* xor r32/r64, r32/r64 */
	EMU_SUB_RSP,    /* sub $imm, %rsp */
	EMU_CMPB_RIP,   /* cmpb $imm8, disp32(%rip) */
	EMU_CMP_RIP,    /* cmpl/cmpq $imm8, disp32(%rip) */
	EMU_CMP_RI,     /* cmp $imm8/imm32, r32/r64 (jemalloc's malloc starts so) */
	EMU_MOV_LOAD_RIP, /* mov disp32(%rip), r64/r32 */
	EMU_LEA_RIP,    /* lea disp32(%rip), r64 */
	EMU_JMP,        /* jmp rel8 / rel32 */
	EMU_RET,        /* ret */
	EMU_MOV_IMM,    /* mov $imm32, r32 (zero-extends) / mov $imm32, r64 (sign-extends) */
};

struct emu_insn {
	enum emu_op op;
	uint8_t len;      /* bytes the instruction takes */
	uint8_t dst, src; /* register numbers 0..15 in the x86 encoding order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15) */
	uint8_t size;     /* operand size in bytes: 1, 4 or 8 */
	int64_t imm;      /* immediate, or the relative displacement of a jump */
	int32_t disp;     /* rip-relative displacement */
};

/*
 * Decodes the instruction at code[0..n) (the original bytes where the hook
 * goes). Returns 0, or -1 when it is not one ptfil can emulate.
 */
int emu_decode(const uint8_t *code, size_t n, struct emu_insn *insn);

/*
 * Executes insn, which lies at address at, on regs (rip must equal at on entry;
 * it ends after the instruction, or at the jump or return target), updating
 * eflags as the CPU would for the bits it defines. Returns 0, or -1 when a
 * memory access failed (regs then unchanged).
 */
int emu_apply(const struct emu_insn *insn, uint64_t at, struct user_regs_struct *regs, const struct emu_mem *mem);

#endif
