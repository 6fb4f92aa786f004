/*
 * The library torture_dlopen and torture_mainexit load and unload in a loop (built twice, as
 * torture_lib.so and torture_lib2.so, with a stream of its own each). It exports the malloc
 * family and the mapping calls, as an allocator library does, forwarding each to the C
 * library: nothing binds to them (it is loaded RTLD_LOCAL), but a tracer hooks them, and its
 * tables of hooks grow and shrink at every load and unload.
 */
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "torture.h"

#ifndef TORTURE_LIB_STREAM
#define TORTURE_LIB_STREAM 60
#endif

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

uint64_t torture_lib_work(uint64_t i)
{
	return torture_unit(TORTURE_LIB_STREAM, i);
}

void *malloc(size_t n) { return __libc_malloc(n); }
void *calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t align, size_t n) { return __libc_memalign(align, n); }
void *aligned_alloc(size_t align, size_t n) { return __libc_memalign(align, n); }
void *valloc(size_t n) { return __libc_valloc(n); }
void *pvalloc(size_t n) { return __libc_pvalloc(n); }

/*
 * The checks live in functions of their own so that every exported function starts by setting up
 * its frame (push %rbp), an instruction a tracer can emulate under its breakpoint.
 */
static __attribute__((noinline)) void *checked_reallocarray(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, total);
}

static __attribute__((noinline)) int checked_memalign(void **out, size_t align, size_t n)
{
	if (align % sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	void *p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *reallocarray(void *p, size_t n, size_t size) { return checked_reallocarray(p, n, size); }
int posix_memalign(void **out, size_t align, size_t n) { return checked_memalign(out, align, n); }

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len) { return (int)syscall(SYS_munmap, addr, len); }
int madvise(void *addr, size_t len, int advice) { return (int)syscall(SYS_madvise, addr, len, advice); }

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	void *new_addr = flags & MREMAP_FIXED ? va_arg(ap, void *) : NULL;
	va_end(ap);
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}
