/* One way to grow a plain array by doubling, with the size arithmetic checked, for every module. */
#ifndef PTFIL_GROW_H
#define PTFIL_GROW_H

#include <stddef.h>

/*
 * Makes room for at least need elements of elem_size bytes in the array *pv,
 * of capacity *cap elements. pv is the address of the caller's T * (NULL or
 * from malloc), which is reallocated in place. The new capacity is
 * max(*cap, min, 1) doubled until it holds need (need itself when doubling
 * would overflow), so min == need allocates exactly need. Elements past the
 * old capacity are left uninitialised. The array stays the caller's to free.
 *
 * Returns 0 (nothing changes when need <= *cap), or -1 with errno ENOMEM when
 * out of memory or when the size overflows, leaving *pv and *cap as they were.
 */
int grow_array(void *pv, size_t *cap, size_t need, size_t elem_size, size_t min);

#endif
