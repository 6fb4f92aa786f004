/*
 * A library that defines the malloc family itself, each function forwarding to
 * the C library's __libc_* entry point, and that holds in its code a block of
 * constant bytes which modrep_sum folds into a checksum. For the tests of a
 * library replaced on disk while a program runs (tests/e2e/test_modules.py).
 *
 * It is built twice under one soname: build 1 has the block first and the
 * malloc family after it, build 2 the malloc family first. So build 2's
 * functions lie at module offsets where build 1 has its block: a tracer that
 * takes build 2's symbols (the file now on disk) for a process that mapped
 * build 1 writes its int3s into the block, and the checksum changes while it
 * is attached. Every byte of the block is 0x55 (push %rbp), an instruction
 * ptfil emulates, so nothing would stop such a hook from being placed.
 */
#include <stddef.h>
#include <stdint.h>

#ifndef MODREP_BUILD
#error "build with -DMODREP_BUILD=1 or 2"
#endif

void *__libc_malloc(size_t size);
void __libc_free(void *p);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);

#define MODREP_BLOCK_SIZE 65536

/* In .text: code bytes, never executed (built with -fno-toplevel-reorder, so it stays where it is written). */
#define MODREP_BLOCK                                                                                   \
	__asm__(".pushsection .text\n.balign 64\n.hidden modrep_block\n.type modrep_block, @object\n" \
		"modrep_block:\n.fill 65536, 1, 0x55\n.size modrep_block, 65536\n.popsection\n")

extern const unsigned char modrep_block[MODREP_BLOCK_SIZE];

#if MODREP_BUILD == 1
MODREP_BLOCK;
#endif

void *malloc(size_t size) { return __libc_malloc(size); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { return __libc_realloc(p, size); }

#if MODREP_BUILD == 2
MODREP_BLOCK;
#endif

int modrep_build(void) { return MODREP_BUILD; }

uint64_t modrep_sum(void)
{
	uint64_t sum = 1469598103934665603ULL;
	for (size_t i = 0; i < MODREP_BLOCK_SIZE; i++)
		sum = (sum ^ modrep_block[i]) * 1099511628211ULL;
	return sum;
}
