/* CPython layouts by version, the 3.11+ location table and str objects (see pylayout.h). */
#include "tracer/pylayout.h"

#include <string.h>

/* Read off Debian's python3.11-dev (3.11.2) and CPython 3.11.7's headers; the same. */
static const struct pylayout py311 = {
	.minor = 11,
	.runtime_interp_head = 40, .interp_next = 0, .interp_threads_head = 16,
	.ts_next = 8, .ts_native_thread_id = 160, .ts_cframe = 56, .cframe_current = 8, .ts_current_frame = PYL_NONE,
	.frame_code = 32, .frame_previous = 48, .frame_instr = 56, .frame_owner = 69, .frame_is_entry = 68,
	.code_firstlineno = 72, .code_filename = 112, .code_qualname = 128, .code_linetable = 136, .code_adaptive = 184,
	.code_firsttraceable = 168,
	.ascii_size = 48, .compact_size = 72, .str_length = 16, .str_state = 32, .bytes_size = 16, .bytes_data = 32,
};

/* CPython 3.12.1: the eval loop marks its entry with a shim frame owned by the C stack. */
static const struct pylayout py312 = {
	.minor = 12,
	.runtime_interp_head = 40, .interp_next = 0, .interp_threads_head = 72,
	.ts_next = 8, .ts_native_thread_id = 144, .ts_cframe = 56, .cframe_current = 0, .ts_current_frame = PYL_NONE,
	.frame_code = 0, .frame_previous = 8, .frame_instr = 56, .frame_owner = 70, .frame_is_entry = PYL_NONE,
	.code_firstlineno = 68, .code_filename = 112, .code_qualname = 128, .code_linetable = 136, .code_adaptive = 192,
	.code_firsttraceable = 176,
	.ascii_size = 40, .compact_size = 56, .str_length = 16, .str_state = 32, .bytes_size = 16, .bytes_data = 32,
};

/* CPython 3.13.0: no _PyCFrame; the thread state holds the current frame, which points at its current instruction. */
static const struct pylayout py313 = {
	.minor = 13,
	.runtime_interp_head = 632, .interp_next = 7264, .interp_threads_head = 7344,
	.ts_next = 8, .ts_native_thread_id = 160, .ts_cframe = PYL_NONE, .cframe_current = PYL_NONE, .ts_current_frame = 72,
	.frame_code = 0, .frame_previous = 8, .frame_instr = 56, .frame_owner = 70, .frame_is_entry = PYL_NONE,
	.code_firstlineno = 68, .code_filename = 112, .code_qualname = 128, .code_linetable = 136, .code_adaptive = 200,
	.code_firsttraceable = 184,
	.ascii_size = 40, .compact_size = 56, .str_length = 16, .str_state = 32, .bytes_size = 16, .bytes_data = 32,
};

const struct pylayout *pylayout_for(unsigned major, unsigned minor)
{
	if (major != 3)
		return NULL;
	switch (minor) {
	case 11: return &py311;
	case 12: return &py312;
	case 13: return &py313;
	default: return NULL;
	}
}

/* A location table varint: 6 bits a byte, bit 6 set when more follow. Returns -1 past the end. */
static int64_t varint(const uint8_t *t, size_t len, size_t *i)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64; shift += 6) {
		if (*i >= len)
			return -1;
		uint8_t b = t[(*i)++];
		v |= (uint64_t)(b & 63) << shift;
		if (!(b & 64))
			return v > INT32_MAX ? -1 : (int64_t)v;
	}
	return -1;
}

uint32_t pylayout_line(const uint8_t *t, size_t len, int firstlineno, int64_t lasti)
{
	if (lasti < 0)
		return firstlineno > 0 ? (uint32_t)firstlineno : 0; /* a frame not started yet: its def line */
	int64_t line = firstlineno;
	int64_t unit = 0;            /* code unit where the entry at i starts */
	size_t i = 0;
	while (i < len) {
		uint8_t first = t[i++];
		if (!(first & 0x80))
			return 0;            /* not the start of an entry: malformed */
		unsigned code = (first >> 3) & 15;
		int64_t units = (first & 7) + 1;
		int64_t delta = 0;
		int none = 0;
		if (code == 15) {
			none = 1;
		} else if (code == 14 || code == 13) {
			int64_t u = varint(t, len, &i);
			if (u < 0)
				return 0;
			delta = u & 1 ? -(u >> 1) : u >> 1;
			if (code == 14) /* end line, start and end columns */
				for (int k = 0; k < 3; k++)
					if (varint(t, len, &i) < 0)
						return 0;
		} else if (code >= 10) {
			delta = code - 10;
			i += 2;              /* start and end columns */
		} else {
			i += 1;              /* the column byte of the short form */
		}
		line += delta;
		if (lasti < unit + units)
			return none || line <= 0 || line > UINT32_MAX ? 0 : (uint32_t)line;
		unit += units;
	}
	return 0;
}

/* Appends code point c to out as UTF-8 if it fits (size counts the NUL). */
static size_t put_utf8(char *out, size_t n, size_t size, uint32_t c)
{
	char b[4];
	size_t k;
	if (c < 0x80) {
		b[0] = (char)c; k = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xC0 | c >> 6); b[1] = (char)(0x80 | (c & 63)); k = 2;
	} else if (c < 0x10000) {
		if (c >= 0xD800 && c < 0xE000)
			c = 0xFFFD;      /* a lone surrogate is not UTF-8 */
		b[0] = (char)(0xE0 | c >> 12); b[1] = (char)(0x80 | (c >> 6 & 63)); b[2] = (char)(0x80 | (c & 63)); k = 3;
	} else if (c < 0x110000) {
		b[0] = (char)(0xF0 | c >> 18); b[1] = (char)(0x80 | (c >> 12 & 63));
		b[2] = (char)(0x80 | (c >> 6 & 63)); b[3] = (char)(0x80 | (c & 63)); k = 4;
	} else {
		return put_utf8(out, n, size, 0xFFFD);
	}
	if (n + k >= size)
		return n;
	memcpy(out + n, b, k);
	return n + k;
}

int pylayout_str(const struct pylayout *l, const uint8_t *obj, size_t have, char *out, size_t size, size_t *need)
{
	if (size == 0 || have < (size_t)l->str_state + 4u)
		return -1;
	int64_t length;
	uint32_t state;
	memcpy(&length, obj + l->str_length, sizeof(length));
	memcpy(&state, obj + l->str_state, sizeof(state));
	unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
	if (!compact || length < 0 || length > (1 << 20) || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return -1;
	size_t data = ascii ? l->ascii_size : l->compact_size;
	size_t total = data + (size_t)length * kind;
	if (need)
		*need = total;
	size_t n = 0;
	for (int64_t i = 0; i < length && data + (size_t)(i + 1) * kind <= have; i++) {
		const uint8_t *p = obj + data + (size_t)i * kind;
		uint32_t c = kind == 1 ? p[0] : kind == 2 ? (uint32_t)(p[0] | p[1] << 8) :
			     (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		size_t m = put_utf8(out, n, size, c);
		if (m == n)
			break;           /* out is full */
		n = m;
	}
	out[n] = '\0';
	return (int)n;
}
