/*
 * tracer/stacks/pylayout.c on its own, for tests/e2e/test_pylayout.py, which
 * compares it with what real CPython interpreters say about themselves:
 *
 *   pylayout_probe offsets MINOR      the layout of 3.MINOR, "field offset" per line
 *   pylayout_probe lines              per input line "FIRSTLINENO HEXTABLE UNITS":
 *                                     the line of each code unit 0..UNITS-1
 *   pylayout_probe str MINOR HEXOBJ   a str object's bytes decoded: hex UTF-8, or "refused"
 *   pylayout_probe debug HEXVERSION HEXBYTES
 *                                     the layout built from the first bytes of a _PyRuntime
 *                                     (Py_Version HEXVERSION), as for offsets; or "refused: why"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/stacks/pylayout.h"

static size_t unhex(const char *h, unsigned char *out, size_t max)
{
	size_t n = 0;
	for (; h[0] && h[1] && n < max; h += 2) {
		unsigned v;
		if (sscanf(h, "%2x", &v) != 1)
			break;
		out[n++] = (unsigned char)v;
	}
	return n;
}

static void print_layout(const struct pylayout *l)
{
#define F(name) printf("%s %u\n", #name, (unsigned)l->name)
	F(runtime_interp_head); F(interp_next); F(interp_threads_head);
	F(ts_next); F(ts_native_thread_id); F(ts_cframe); F(cframe_current); F(ts_current_frame);
	F(frame_code); F(frame_previous); F(frame_instr); F(frame_owner); F(frame_is_entry);
	F(code_firstlineno); F(code_filename); F(code_qualname); F(code_linetable); F(code_adaptive); F(code_firsttraceable);
	F(ascii_size); F(compact_size); F(str_length); F(str_state); F(bytes_size); F(bytes_data);
#undef F
}

static int offsets(unsigned minor)
{
	const struct pylayout *l = pylayout_for(3, minor);
	if (!l) {
		printf("unknown\n");
		return 1;
	}
	print_layout(l);
	return 0;
}

static int debug(const char *hexversion, const char *hexbytes)
{
	static unsigned char d[PYL_DEBUG_OFFSETS_MAX];
	struct pylayout l;
	char why[256];
	size_t len = unhex(hexbytes, d, sizeof(d));
	if (pylayout_from_debug_offsets(&l, d, len, (uint32_t)strtoul(hexversion, NULL, 16), why, sizeof(why))) {
		printf("refused: %s\n", why);
		return 0;
	}
	print_layout(&l);
	return 0;
}

static int lines(void)
{
	static char buf[1 << 22];
	static unsigned char table[1 << 21];
	while (fgets(buf, sizeof(buf), stdin)) {
		int first;
		long units;
		char *hex = strchr(buf, ' ');
		if (!hex || sscanf(buf, "%d", &first) != 1)
			return 2;
		char *sp = strchr(hex + 1, ' ');
		if (!sp || sscanf(sp + 1, "%ld", &units) != 1)
			return 2;
		*sp = '\0';
		size_t len = unhex(hex + 1, table, sizeof(table));
		for (long u = 0; u < units; u++)
			printf("%s%u", u ? " " : "", pylayout_line(table, len, first, u));
		printf("\n");
	}
	return 0;
}

static int str(unsigned minor, const char *hexobj)
{
	const struct pylayout *l = pylayout_for(3, minor);
	static unsigned char obj[1 << 16];
	static char out[1 << 16];
	if (!l)
		return 1;
	size_t have = unhex(hexobj, obj, sizeof(obj)), need = 0;
	int n = pylayout_str(l, obj, have, out, sizeof(out), &need);
	if (n < 0) {
		printf("refused\n");
		return 0;
	}
	for (int i = 0; i < n; i++)
		printf("%02x", (unsigned char)out[i]);
	printf(" %zu\n", need);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "offsets"))
		return offsets((unsigned)atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "lines"))
		return lines();
	if (argc == 4 && !strcmp(argv[1], "str"))
		return str((unsigned)atoi(argv[2]), argv[3]);
	if (argc == 4 && !strcmp(argv[1], "debug"))
		return debug(argv[2], argv[3]);
	fprintf(stderr, "usage: pylayout_probe offsets MINOR | lines | str MINOR HEXOBJ | debug HEXVERSION HEXBYTES\n");
	return 2;
}
