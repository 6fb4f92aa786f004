/* Sizes as people read them, shared by ptfil-view's reports and ptfil's live view. */
#ifndef PTFIL_UNITS_H
#define PTFIL_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "1.5 MiB", "12 B": binary units, one decimal, into buf of at least 32 bytes. */
void units_size(char *buf, size_t size, uint64_t bytes);

#endif
