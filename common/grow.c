/* Growth of plain arrays by doubling (common/grow.h). */
#include "common/grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int grow_array(void *pv, size_t *cap, size_t need, size_t elem_size, size_t min)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap > min ? *cap : min;
	if (ncap == 0)
		ncap = 1;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (elem_size && ncap > SIZE_MAX / elem_size) {
		errno = ENOMEM;
		return -1;
	}
	/* The pointer is copied in and out, not read through a void **: pv points at a T *. */
	void *v;
	memcpy(&v, pv, sizeof(v));
	/* realloc of 0 bytes would free the array. */
	void *nv = realloc(v, elem_size ? ncap * elem_size : 1);
	if (!nv)
		return -1;
	memcpy(pv, &nv, sizeof(nv));
	*cap = ncap;
	return 0;
}
