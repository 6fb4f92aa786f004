/* CPython layouts by version, the 3.11+ location table and str objects (see pylayout.h). */
#include "tracer/stacks/pylayout.h"

#include <stdarg.h>
#include <stdio.h>
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

/* ---------------------------------------------------------------- _Py_DebugOffsets */

/*
 * _Py_DebugOffsets is a cookie, the version, free_threaded, then one section
 * a struct, each a run of u64s: mostly the struct's size, then the offsets of
 * its fields. Sections grow from one version to the next, so where each
 * starts depends on the version; inside its section a field ptfil needs sits
 * at the same index in every table below, but for native_thread_id. These
 * are the byte positions of the sections ptfil needs in each table it knows,
 * counted off CPython's Include/internal/pycore_runtime.h (3.13) and
 * pycore_debug_offsets.h (3.14 and later). Tables are tried newest first and
 * the first whose every check passes is taken: the checks tell them apart.
 */
struct dotable {
	unsigned minor;               /* the version that has it */
	uint16_t interp, ts, ts_native; /* ts_native: native_thread_id's index in thread_state */
	uint16_t frame, code, bytes, unicode;
};

static const struct dotable dotables[] = {
	/* CPython's main branch (3.15, not released): thread_state has 15 fields (base_frame and
	 * last_profiled_frame come before thread_id), err_stackitem follows it, then as 3.14; type_object
	 * has 6 fields and heap_type_object follows it in later snapshots of it, 4 and none in earlier ones. */
	{ 15, 48, 176, 8, 304, 368, 680, 704 },
	{ 15, 48, 176, 8, 304, 368, 648, 672 },
	/* 3.14.0: interpreter_state has 16 fields, interpreter_frame 8, code_object 11; set_object comes before dict_object. */
	{ 14, 48, 176, 6, 248, 312, 592, 616 },
	/* 3.14's early alphas: interpreter_state 14 fields, interpreter_frame 7, code_object 10. */
	{ 14, 48, 160, 6, 232, 288, 560, 584 },
	/* 3.13: interpreter_state 13 fields, thread_state 9, interpreter_frame 6, code_object 10, no set_object. */
	{ 13, 48, 152, 6, 224, 272, 512, 536 },
};

/* What pystack.c's buffers hold at most: a table whose offsets need more is refused. */
#define TS_NEED_MAX 512           /* thread state bytes up to native_thread_id and the current frame */
#define FRAME_NEED_MAX 128        /* frame bytes up to its owner and instruction pointer */
#define CODE_HDR_MAX 256          /* code object bytes from co_firstlineno to _co_firsttraceable */
#define STR_HDR_MAX 128           /* sizeof(PyCompactUnicodeObject) */
#define BYTES_HDR_MAX 40          /* bytes object header up to ob_sval */

static uint64_t at64(const uint8_t *d, size_t at)
{
	uint64_t v;
	memcpy(&v, d + at, sizeof(v));
	return v;
}

static int refuse(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * The field offset at byte `at` of the table: width bytes wide, aligned to
 * align, inside the struct of `limit` bytes, and small enough for a uint16_t.
 */
static int field(const uint8_t *d, size_t at, const char *name, uint64_t limit, unsigned width, unsigned align,
		 uint16_t *out, char *why, size_t size)
{
	uint64_t v = at64(d, at);
	if (v % align || v > limit || limit - v < width || v >= PYL_NONE)
		return refuse(why, size, "%s is %llu, which cannot be in its struct of %llu bytes", name,
			      (unsigned long long)v, (unsigned long long)limit);
	*out = (uint16_t)v;
	return 0;
}

/* A struct's size as the table gives it: not 0, not past max. */
static int struct_size(const uint8_t *d, size_t at, const char *name, uint64_t max, uint64_t *out, char *why, size_t size)
{
	*out = at64(d, at);
	if (*out == 0 || *out > max)
		return refuse(why, size, "%s.size is %llu", name, (unsigned long long)*out);
	return 0;
}

/* *l from the table laid out as t, every check passed; or -1 with why. */
static int from_table(const struct dotable *t, const uint8_t *d, size_t len, struct pylayout *l, char *why, size_t size)
{
	uint64_t rt, in, ts, fr, co, by, un;
	uint16_t prev = 0, thread_id = 0, interp = 0;
	if ((size_t)t->unicode + 32 > len)
		return refuse(why, size, "its table is shorter than %u bytes", t->unicode + 32u);
	memset(l, 0, sizeof(*l));
	l->ts_cframe = l->cframe_current = l->frame_is_entry = PYL_NONE;
	if (struct_size(d, 24, "runtime_state", 1u << 26, &rt, why, size) ||
	    field(d, 40, "runtime_state.interpreters_head", rt, 8, 8, &l->runtime_interp_head, why, size) ||
	    struct_size(d, t->interp, "interpreter_state", 1u << 26, &in, why, size) ||
	    field(d, t->interp + 16u, "interpreter_state.next", in, 8, 8, &l->interp_next, why, size) ||
	    field(d, t->interp + 24u, "interpreter_state.threads_head", in, 8, 8, &l->interp_threads_head, why, size) ||
	    struct_size(d, t->ts, "thread_state", 1u << 16, &ts, why, size) ||
	    field(d, t->ts + 8u, "thread_state.prev", ts, 8, 8, &prev, why, size) ||
	    field(d, t->ts + 16u, "thread_state.next", ts, 8, 8, &l->ts_next, why, size) ||
	    field(d, t->ts + 24u, "thread_state.interp", ts, 8, 8, &interp, why, size) ||
	    field(d, t->ts + 32u, "thread_state.current_frame", ts, 8, 8, &l->ts_current_frame, why, size) ||
	    field(d, t->ts + 8u * (t->ts_native - 1u), "thread_state.thread_id", ts, 8, 8, &thread_id, why, size) ||
	    field(d, t->ts + 8u * t->ts_native, "thread_state.native_thread_id", ts, 8, 8, &l->ts_native_thread_id, why, size) ||
	    struct_size(d, t->frame, "interpreter_frame", 1024, &fr, why, size) ||
	    field(d, t->frame + 8u, "interpreter_frame.previous", fr, 8, 8, &l->frame_previous, why, size) ||
	    field(d, t->frame + 16u, "interpreter_frame.executable", fr, 8, 8, &l->frame_code, why, size) ||
	    field(d, t->frame + 24u, "interpreter_frame.instr_ptr", fr, 8, 8, &l->frame_instr, why, size) ||
	    field(d, t->frame + 40u, "interpreter_frame.owner", fr, 1, 1, &l->frame_owner, why, size) ||
	    struct_size(d, t->code, "code_object", 4096, &co, why, size) ||
	    field(d, t->code + 8u, "code_object.filename", co, 8, 8, &l->code_filename, why, size) ||
	    field(d, t->code + 24u, "code_object.qualname", co, 8, 8, &l->code_qualname, why, size) ||
	    field(d, t->code + 32u, "code_object.linetable", co, 8, 8, &l->code_linetable, why, size) ||
	    field(d, t->code + 40u, "code_object.firstlineno", co, 4, 4, &l->code_firstlineno, why, size) ||
	    field(d, t->code + 72u, "code_object.co_code_adaptive", co, 2, 8, &l->code_adaptive, why, size) ||
	    struct_size(d, t->bytes, "bytes_object", 256, &by, why, size) ||
	    field(d, t->bytes + 8u, "bytes_object.ob_size", by, 8, 8, &l->bytes_size, why, size) ||
	    field(d, t->bytes + 16u, "bytes_object.ob_sval", by, 1, 8, &l->bytes_data, why, size) ||
	    struct_size(d, t->unicode, "unicode_object", 256, &un, why, size) ||
	    field(d, t->unicode + 8u, "unicode_object.state", un, 4, 4, &l->str_state, why, size) ||
	    field(d, t->unicode + 16u, "unicode_object.length", un, 8, 8, &l->str_length, why, size) ||
	    field(d, t->unicode + 24u, "unicode_object.asciiobject_size", un, 0, 8, &l->ascii_size, why, size))
		return -1;
	/* Facts of CPython's structs that every version has: a table that breaks one is not laid out as t. */
	if (prev != 0 || l->ts_next != 8 || interp != 16)
		return refuse(why, size, "thread_state does not start prev, next, interp (%u, %u, %u)", prev, l->ts_next, interp);
	if (l->ts_native_thread_id != thread_id + 8u)
		return refuse(why, size, "thread_state.native_thread_id (%u) does not follow thread_id (%u)",
			      l->ts_native_thread_id, thread_id);
	if (l->ts_current_frame + 8u > TS_NEED_MAX || l->ts_native_thread_id + 8u > TS_NEED_MAX)
		return refuse(why, size, "thread_state's fields lie past %u bytes", TS_NEED_MAX);
	if (l->frame_owner + 1u > FRAME_NEED_MAX || l->frame_instr + 8u > FRAME_NEED_MAX ||
	    l->frame_previous + 8u > FRAME_NEED_MAX || l->frame_code + 8u > FRAME_NEED_MAX)
		return refuse(why, size, "interpreter_frame's fields lie past %u bytes", FRAME_NEED_MAX);
	if (l->frame_previous == l->frame_code || l->frame_previous == l->frame_instr || l->frame_code == l->frame_instr)
		return refuse(why, size, "interpreter_frame's fields overlap");
	/*
	 * _co_firsttraceable is not in the table. In 3.11 to 3.14 (every table
	 * above) it is the int 16 bytes before co_code_adaptive, co_extra
	 * between them; it is taken there, and checked to come after the other
	 * fields read: pystack reads one span of the code object from
	 * co_firstlineno to it. A version that moved it yields a number that is
	 * no code unit index of the frame's set-up, which pystack does without.
	 */
	l->code_firsttraceable = l->code_adaptive - 16u;
	uint16_t lo = l->code_firstlineno;
	if (l->code_adaptive < 16u + 8u || l->code_filename < lo || l->code_qualname < lo || l->code_linetable < lo ||
	    l->code_filename + 8u > l->code_firsttraceable || l->code_qualname + 8u > l->code_firsttraceable ||
	    l->code_linetable + 8u > l->code_firsttraceable || l->code_firstlineno + 4u > l->code_firsttraceable ||
	    l->code_firsttraceable + 4u - lo > CODE_HDR_MAX)
		return refuse(why, size, "code_object's fields are not where ptfil reads them (firstlineno %u, filename %u, "
			      "qualname %u, linetable %u, co_code_adaptive %u)", lo, l->code_filename, l->code_qualname,
			      l->code_linetable, l->code_adaptive);
	if (l->bytes_size + 8u > l->bytes_data || l->bytes_data > BYTES_HDR_MAX)
		return refuse(why, size, "bytes_object's fields are not where ptfil reads them (ob_size %u, ob_sval %u)",
			      l->bytes_size, l->bytes_data);
	/*
	 * sizeof(PyCompactUnicodeObject), where a non-ASCII str's characters
	 * start, is not in the table either: it is PyASCIIObject and two words
	 * (utf8_length, utf8), and PyUnicodeObject, whose size the table gives,
	 * is one word (its data pointer) more. That must hold, or no str is read.
	 */
	l->compact_size = l->ascii_size + 16u;
	if (un != l->compact_size + 8u || l->compact_size > STR_HDR_MAX || l->str_state + 4u > l->ascii_size ||
	    l->str_length + 8u > l->ascii_size)
		return refuse(why, size, "unicode_object's fields are not where ptfil reads them (size %llu, state %u, "
			      "length %u, asciiobject_size %u)", (unsigned long long)un, l->str_state, l->str_length,
			      l->ascii_size);
	return 0;
}

int pylayout_from_debug_offsets(struct pylayout *l, const uint8_t *d, size_t len, uint32_t version,
				char *why, size_t size)
{
	unsigned major = version >> 24, minor = version >> 16 & 255;
	if (len < 24 || memcmp(d, "xdebugpy", 8))
		return refuse(why, size, "CPython %u.%u, whose _PyRuntime does not start with _Py_DebugOffsets "
			      "(the \"xdebugpy\" cookie)", major, minor);
	uint64_t said = at64(d, 8), ft = at64(d, 16);
	if (said >> 16 != version >> 16)
		return refuse(why, size, "CPython %u.%u, whose _Py_DebugOffsets say they are of %llu.%llu",
			      major, minor, (unsigned long long)(said >> 24 & 255), (unsigned long long)(said >> 16 & 255));
	if (ft == 1)
		return refuse(why, size, "a free-threaded CPython %u.%ut build, whose objects ptfil does not read yet",
			      major, minor);
	if (ft != 0)
		return refuse(why, size, "CPython %u.%u, whose _Py_DebugOffsets say free_threaded is %llu",
			      major, minor, (unsigned long long)ft);
	char first[160] = "";
	for (size_t i = 0; i < sizeof(dotables) / sizeof(dotables[0]); i++) {
		const struct dotable *t = &dotables[i];
		/* 3.13 and 3.14 have their own tables; a later version may have any table since 3.14's. */
		if (major != 3 || !(t->minor == minor || (minor > 14 && t->minor >= 14 && t->minor <= minor)))
			continue;
		char reason[160];
		if (from_table(t, d, len, l, reason, sizeof(reason)) == 0) {
			l->minor = minor;
			l->debug_offsets = 1;
			return 0;
		}
		if (!first[0])
			memcpy(first, reason, sizeof(first));
	}
	if (!first[0])
		return refuse(why, size, "CPython %u.%u, whose _Py_DebugOffsets ptfil does not know", major, minor);
	return refuse(why, size, "CPython %u.%u, whose _Py_DebugOffsets are not laid out as ptfil knows them: %s",
		      major, minor, first);
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
