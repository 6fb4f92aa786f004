/*
 * Where CPython keeps what ptfil reads from outside: the offsets of the
 * fields on the path from _PyRuntime to a thread's current frame, and from a
 * frame to its code object's file, qualified name and line table, for each
 * CPython minor version ptfil knows. Every number was read off that version's
 * own internal headers (Include/internal/pycore_*.h, x86-64) and is checked
 * against them by tests/unit/check_pylayout.c wherever those headers are
 * installed. Pure data and pure functions: no process is touched here.
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
	uint16_t frame_code, frame_previous, frame_instr, frame_owner;
	uint16_t frame_is_entry;     /* bool: the first frame an eval loop call ran (3.11), or PYL_NONE */
	/* PyCodeObject */
	uint16_t code_firstlineno, code_filename, code_qualname, code_linetable, code_adaptive;
	uint16_t code_firsttraceable; /* int: code units before it are the frame's set-up, which tracebacks skip */
	/* str and bytes */
	uint16_t ascii_size, compact_size; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
	uint16_t str_length, str_state, bytes_size, bytes_data;
};

/* Frame owners (enum _frameowner, the same in 3.11 to 3.13). */
#define PY_OWNED_BY_THREAD 0
#define PY_OWNED_BY_GENERATOR 1
#define PY_OWNED_BY_FRAME_OBJECT 2
#define PY_OWNED_BY_CSTACK 3          /* 3.12+: the entry shim of an eval loop call, no code of its own */

/* The layout of CPython 3.minor, or NULL when ptfil does not know it. */
const struct pylayout *pylayout_for(unsigned major, unsigned minor);

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
