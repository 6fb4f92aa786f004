/* Sizes as people read them (see units.h). */
#include <stdio.h>

#include "common/units.h"

void units_size(char *buf, size_t size, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	if (bytes < 1024) {
		snprintf(buf, size, "%llu B", (unsigned long long)bytes);
		return;
	}
	double v = (double)bytes / 1024;
	size_t u = 0;
	/* What "%.1f" would round up to 1024.0 goes to the next unit: 1.0 MiB, not 1024.0 KiB. */
	while (u + 1 < sizeof(units) / sizeof(units[0]) && v >= 1023.95) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, "%.1f %s", v, units[u]);
}
