/*
 * A shared library that exports the whole malloc family, each forwarding to glibc's own
 * (__libc_malloc and the like): built three times (SAFETY_MALLOCS_LIB 1 to 3) for
 * safety_dlmany, which loads all three in one dlopen. Dlopened RTLD_LOCAL, they never
 * take the place of libc's functions in the program: they are only there to be hooked.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t size);
void *__libc_valloc(size_t size);
void *__libc_pvalloc(size_t size);

/* Which of the three builds this is, so that their files differ. */
int safety_mallocs_lib(void)
{
	return SAFETY_MALLOCS_LIB;
}

void *malloc(size_t size)
{
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	return __libc_realloc(p, size);
}

void *reallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, n * size);
}

void free(void *p)
{
	__libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p = __libc_memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
	return __libc_memalign(align, size);
}

void *memalign(size_t align, size_t size)
{
	return __libc_memalign(align, size);
}

void *valloc(size_t size)
{
	return __libc_valloc(size);
}

void *pvalloc(size_t size)
{
	return __libc_pvalloc(size);
}
