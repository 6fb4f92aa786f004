/*
 * Where a function returns: its `ret` instructions, found by disassembling it
 * (capstone). The ptrace path puts its malloc breakpoints there instead of at
 * the entry (tracer/hooks.c), which is exact only if every way out of the
 * function is one of them: no jump leaves it, none goes through a register.
 * Works on bytes (testable without a file) or on a function of an ELF file.
 */
#ifndef PTFIL_EXITS_H
#define PTFIL_EXITS_H

#include <stddef.h>
#include <stdint.h>

struct sym_file;

/* The most returns a function may have and still be hooked at them. */
#define EXITS_MAX 16

/*
 * code[0..len) is a whole function, loaded at address base. Writes the
 * address of each of its returns (a plain `ret`, maybe with a rep or bnd
 * prefix) to at[] and returns how many, at least 1. Returns 0 when the
 * function can leave another way, or its exits cannot all be known: a jump
 * or branch outside [base, base + len), a jump through a register or memory,
 * `ret imm16`, bytes that do not decode, more than max returns.
 */
size_t exits_find(const uint8_t *code, size_t len, uint64_t base, uint64_t *at, size_t max);

/*
 * The same for the function exported as name by f: module offsets in
 * at_off. Returns 0 as above, or when f does not define name or its bytes
 * are not in the file.
 */
size_t exits_of(const struct sym_file *f, const char *name, uint64_t *at_off, size_t max);

#endif
