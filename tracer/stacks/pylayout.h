/*
 * Where CPython keeps what ptfil reads from outside: the offsets of the
 * fields on the path from _PyRuntime to a thread's current frame, and from a
 * frame to its code object's file, qualified name and line table. 3.11 to
 * 3.13 are compiled in: every number was read off that version's own
 * internal headers (Include/internal/pycore_*.h, x86-64) and is checked
 * against them by tests/e2e/test_pylayout.py wherever those headers are
 * installed. 3.13 and later also say where their fields are themselves
 * (_Py_DebugOffsets), which pylayout_from_debug_offsets turns into a layout.
 * Pure data and pure functions: no process is touched here.
 */
#ifndef PTFIL_PYLAYOUT_H
#define PTFIL_PYLAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define PYL_NONE UINT16_MAX  /* a field the version does not have */

struct pylayout {
	unsigned minor;              /* 3.minor */
	/* _PyRuntimeState and PyInterpreterState */
	uint16_t runtime_interp_head;
	uint16_t interp_next, interp_threads_head;
	/* PyThreadState */
	uint16_t ts_next, ts_native_thread_id;
	uint16_t ts_cframe;          /* _PyCFrame * (3.11, 3.12), or PYL_NONE */
	uint16_t cframe_current;     /* _PyCFrame.current_frame */
	uint16_t ts_current_frame;   /* _PyInterpreterFrame * held directly (3.13), or PYL_NONE */
	/* _PyInterpreterFrame */
	uint16_t frame_code, frame_previous, frame_instr, frame_owner; /* frame_code: 3.14's is tagged in its low bits */
	uint16_t frame_is_entry;     /* bool: the first frame an eval loop call ran (3.11), or PYL_NONE */
	/* PyCodeObject */
	uint16_t code_firstlineno, code_filename, code_qualname, code_linetable, code_adaptive;
	uint16_t code_firsttraceable; /* int: code units before it are the frame's set-up, which tracebacks skip */
	/* str and bytes */
	uint16_t ascii_size, compact_size; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
	uint16_t str_length, str_state, bytes_size, bytes_data;
	int debug_offsets;           /* 1: built from the target's own _Py_DebugOffsets, 0: compiled in */
};

/*
 * Frame owners (enum _frameowner). 0 to 2 are the same in 3.11 and later;
 * every value from 3 on is a frame with no code of its own: 3.12 and 3.13's
 * C-stack entry shim of an eval loop call (3), 3.14's interpreter-owned entry
 * and base frames (3) and C-stack frames (4), 3.15's interpreter-owned ones.
 */
#define PY_OWNED_BY_THREAD 0
#define PY_OWNED_BY_GENERATOR 1
#define PY_OWNED_BY_FRAME_OBJECT 2
#define PY_OWNED_BY_CSTACK 3          /* this and above: a shim; an eval loop call starts at one */

/* The compiled-in layout of CPython 3.minor, or NULL when ptfil has none. */
const struct pylayout *pylayout_for(unsigned major, unsigned minor);

/*
 * CPython 3.13 and later describe their own layout in _Py_DebugOffsets, the
 * first bytes of _PyRuntime (cookie "xdebugpy"). PYL_DEBUG_OFFSETS_MAX is how
 * many bytes of it a caller reads (more than any known version's table, which
 * _PyRuntime always holds after it).
 */
#define PYL_DEBUG_OFFSETS_MAX 1024

/*
 * Builds *l from d[0..len), the bytes at the start of the target's
 * _PyRuntime, for the CPython whose Py_Version is version (3.13 or later).
 * The bytes come from another process and are checked before any is
 * believed: every offset must lie inside the size its table gives for its
 * struct, and the fields ptfil knows stand in a fixed order (a thread
 * state starts prev, next, interp; native_thread_id follows thread_id).
 * Returns 0, or -1 with why (size bytes, NUL-ended) saying what was refused:
 * a free-threaded build, a table laid out in a way ptfil does not know, or
 * an offset that cannot be. Pure: no process is touched.
 */
int pylayout_from_debug_offsets(struct pylayout *l, const uint8_t *d, size_t len, uint32_t version,
				char *why, size_t size);

/*
 * The line of the instruction at code unit index `lasti` (unit = 2 bytes) of a
 * code object whose first line is firstlineno and whose location table
 * (co_linetable, the 3.11+ format) is table[0..len). Returns the line, or 0
 * when the table has none for that instruction or is malformed.
 */
uint32_t pylayout_line(const uint8_t *table, size_t len, int firstlineno, int64_t lasti);

/*
 * Decodes a str object's characters to UTF-8: obj is the object's first
 * `have` bytes as read from the target (header and characters), l the layout.
 * Writes at most size-1 bytes and a NUL to out. Returns the bytes written, or
 * -1 when the object is not a compact str this reads (legacy strings).
 * *need (when not NULL) gets how many bytes of the object hold its header and
 * characters, for a caller that read too few and must read again.
 */
int pylayout_str(const struct pylayout *l, const uint8_t *obj, size_t have, char *out, size_t size, size_t *need);

#endif
