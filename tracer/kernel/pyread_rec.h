/*
 * Python frames read by the kernel (tracer/kernel/pyread.bpf.h): the record
 * the BPF reader writes into its program's ring just before the record of
 * the event it belongs to (a fault, a malloc entry), and the description of
 * a process's CPython that ptfil gives it (tracer/kernel/pyread.c, from the
 * layout tracer/stacks/pylayout.c chose: one source of truth for both
 * readers). Plain C types of fixed width, so that the BPF target and the
 * host agree.
 */
#ifndef PTFIL_PYREAD_REC_H
#define PTFIL_PYREAD_REC_H

/* The record's kind: apart from every kind of kheap_rec.h and faults_rec.h. */
#define KPY_REC 0x50

/* Python frames read at most per event, as the ptrace path's reader (PY_MAX_FRAMES). */
#define KPY_MAX_FRAMES 256
/* Frames walked at most, shims included; a longer chain is cut (KPY_CUT). */
#define KPY_CHAIN 1024
/* Thread states looked at per interpreter, and interpreters, in one scan. */
#define KPY_MAX_THREADS 1024
#define KPY_INTERPS 8
/* Bytes of a frame read in one go: its fields' offsets (+ 8) must lie below. */
#define KPY_FRAME_BYTES 128

/* Bytes of a code object read per frame, from its first field the reader needs. */
#define KPY_CODE_BYTES 64

/*
 * One frame: its code object, with these flags in the low bits (objects are
 * 8-aligned), its instruction pointer, and the code object's fields as they
 * were at the event: ptfil names a code object it decoded before without
 * reading it again, and tells one freed since from another at its address.
 */
#define KPY_LAST_OF_CALL 1ull   /* the outermost frame of one native eval loop call */
#define KPY_GENERATOR 2ull      /* owned by a generator (its set-up is not skipped) */
#define KPY_UNKNOWN 4ull        /* a code object ptfil was not known to have named: the thread was stopped for it */
#define KPY_FLAGS 7ull
struct kpy_frame {
	unsigned long long code;
	unsigned long long instr;
	unsigned long long filename, qualname, linetable;
};

/* flags */
#define KPY_CUT 0x1         /* more frames than KPY_MAX_FRAMES (or a chain past KPY_CHAIN): the outer ones not read */
#define KPY_FAILED 0x2      /* a read failed: the frames before it are good, the outer ones missing */
#define KPY_NO_THREAD 0x4   /* no thread state of the interpreter names the thread */

struct kpy_rec {
	unsigned int kind;      /* KPY_REC */
	unsigned int tid;
	unsigned int tgid;
	unsigned int n;         /* frames in f[], innermost first */
	unsigned int flags;
	unsigned int pad;
	struct kpy_frame f[KPY_MAX_FRAMES];
};

/* What ptfil names a code object by, and learns it by (pycodes: code object -> this of its fields). */
#define KPY_CODE_KEY(f) ((f)->filename ^ ((f)->qualname << 1) ^ ((f)->linetable << 2))

/* The offsets the reader uses, indexes of struct kpy_proc's off[]. */
enum {
	KPY_RUNTIME_INTERP_HEAD, KPY_INTERP_NEXT, KPY_INTERP_THREADS_HEAD,
	KPY_TS_NEXT, KPY_TS_NATIVE_THREAD_ID, KPY_TS_CFRAME, KPY_CFRAME_CURRENT, KPY_TS_CURRENT_FRAME,
	KPY_FRAME_CODE, KPY_FRAME_PREVIOUS, KPY_FRAME_INSTR, KPY_FRAME_OWNER, KPY_FRAME_IS_ENTRY,
	/* in the bytes of a code object read from code_lo on */
	KPY_CODE_FILENAME, KPY_CODE_QUALNAME, KPY_CODE_LINETABLE,
	KPY_NOFF
};
#define KPY_NONE 0xffff      /* a field the version does not have */

/* A process's CPython (a hash map by tgid). */
struct kpy_proc {
	unsigned long long runtime;           /* the address of _PyRuntime */
	unsigned long long ns_dev, ns_ino;    /* its PID namespace, for the thread's own id there */
	unsigned short off[KPY_NOFF];
	unsigned short frame_bytes;           /* bytes of a frame read: its last field's end */
	unsigned short code_lo, code_bytes;   /* a code object's bytes read: from code_lo, code_bytes of them */
	unsigned short pad[3];
};

#endif
