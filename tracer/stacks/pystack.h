/*
 * Python frames read from outside: finding CPython in a traced process, the
 * thread state of a stopped thread, and the chain of frames it is running,
 * each decoded to (qualified name, file, line). Reads the target's memory
 * with process_vm_readv only; nothing is put into the interpreter.
 *
 * Ownership: struct pynames is the tracer's (names outlive processes, as
 * frames do); struct pyproc is its process's. Both are freed by their _fin.
 */
#ifndef PTFIL_PYSTACK_H
#define PTFIL_PYSTACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/u64map.h"
#include "tracer/stacks/pylayout.h"

struct modmap;
struct modreg;
struct pythread;

/* Distinct (function, file) pairs of Python code, by id. */
struct pyname { char *function, *file; };
struct pynames {
	struct pyname *v; size_t n, cap;
	struct u64map ids;            /* hash of (function, file) -> id */
};
void pynames_init(struct pynames *n);
void pynames_fin(struct pynames *n);

/* A code object decoded once: what checks it is still the same, and what it says. */
struct pycode {
	uint64_t filename, qualname, linetable; /* those fields' values, which check it is the same object */
	int32_t firstlineno;
	int32_t firsttraceable;       /* code units of set-up before its first line */
	uint32_t name;                /* in pynames */
	uint8_t *table; uint32_t table_len;  /* the location table, owned */
	int64_t last_lasti;           /* the last instruction looked up, and its line: */
	uint32_t last_line;           /* outer frames stay where they are from one stack to the next */
};

enum py_state { PY_UNKNOWN, PY_ABSENT, PY_READY, PY_UNSUPPORTED };

#define PY_THREAD_SLOTS 64        /* threads whose state and last walk are remembered, by tid modulo this */
#define PY_MAX_FRAMES 256         /* Python frames read per stack at most; deeper ones are cut off */

struct pyproc {
	enum py_state state;
	pid_t pid;                    /* the process, once its interpreter is found (for the report) */
	unsigned checked_loads;       /* modmap loads when the modules were last looked at */
	struct u64map checked;        /* modules (global ids) looked at already */
	const struct pylayout *l;     /* compiled in (static), or &own */
	struct pylayout own;          /* built from the process's own _Py_DebugOffsets (3.13 and later) */
	uint64_t runtime;             /* address of _PyRuntime */
	uint32_t eval_gid;            /* the module holding _PyEval_EvalFrameDefault, */
	uint64_t eval_lo, eval_hi;    /* and its extent there (module offsets) */
	struct pythread *threads;     /* PY_THREAD_SLOTS of them by tid, owned; made once found (pystack.c) */
	/*
	 * A thread state names its thread by the id the thread has in its own PID
	 * namespace; ptrace gives the id in ptfil's. When they differ (a process in
	 * a container), each thread's own id is read once from NSpid in its /proc
	 * status and remembered here: tid -> own tid.
	 */
	int other_ns;
	struct u64map ns_tids;
	uint64_t stacks, no_thread;   /* stacks in the eval loop, and those whose thread state was not found */
	struct pycode *codes; size_t n_codes, cap_codes;
	struct u64map code_ids;       /* code object address -> index in codes */
};

/* Counters, the tracer's. */
struct pystats {
	uint64_t stacks, frames, reads, code_decodes, code_hits, thread_scans, cut, group_mismatch;
	/* time in microseconds: native stacks taken in processes running Python, and the Python frames read for them */
	uint64_t native_stacks, native_us, python_us;
	/* stacks whose Python frames the kernel read at the event (tracer/kernel/pyread.bpf.h), and those it marked failed */
	uint64_t kernel_stacks, kernel_failed;
	uint64_t kernel_freed;        /* frames of theirs whose code object was freed before it was named */
};

/*
 * pyproc_fin also says, once, on stderr how many of the process's stacks ran
 * Python code whose frames could not be read because no thread state named
 * their thread (py->no_thread, the snapshot's python.no_thread_state): those
 * stacks show native frames only, and a user must not take that for a program
 * without Python code.
 */
void pyproc_init(struct pyproc *py);
void pyproc_fin(struct pyproc *py);

/*
 * Looks at the modules of mm not looked at yet for a CPython runtime; on
 * finding one, sets py->state to PY_READY (a version ptfil reads) or
 * PY_UNSUPPORTED (after one warning naming the version and the module).
 * Cheap when nothing new was loaded.
 *
 * 3.11 and 3.12 are read with their compiled-in layouts; 3.14 and later
 * through the layout their _Py_DebugOffsets give; 3.13 with its compiled-in
 * layout when its _Py_DebugOffsets agree with it, else through them.
 * PTFIL_PY_LAYOUT=debug-offsets reads any version that has them through
 * them, PTFIL_PY_LAYOUT=compiled only with a compiled-in layout.
 */
void pystack_detect(struct pyproc *py, const struct modmap *mm, const struct modreg *reg, pid_t pid);
/*
 * Whether one of the objects in mm is a CPython interpreter (it exports
 * _PyRuntime): the process runs Python, whose frames are read live at each
 * stop, or by the kernel at each event the kernel records (kernel/pyread.h).
 */
int pystack_runs_python(const struct modmap *mm, const struct modreg *reg);

/* True when module gid at offset `offset` is inside _PyEval_EvalFrameDefault. */
static inline int pystack_is_eval(const struct pyproc *py, uint32_t gid, uint64_t offset)
{
	return py->state == PY_READY && gid == py->eval_gid && offset >= py->eval_lo && offset < py->eval_hi;
}

/* One Python frame of a stack. */
#define PYFRAME_NONE UINT32_MAX       /* no frame: only ends the frames of an eval loop call that ran none yet */
struct pyframe {
	uint32_t name;                /* in pynames, or PYFRAME_NONE */
	uint32_t line;                /* 0 when unknown */
	int last_of_call;             /* the outermost frame one native eval-loop call ran */
};

/*
 * The Python frames thread tid of process pid is running, innermost first;
 * writes at most max to out and returns how many (0 when the thread runs no
 * Python code, or on any read failure: a wrong frame is never given).
 * stack_word, when not NULL, gives words of the thread's stack already copied
 * (0, or -1 when it has not that one): CPython 3.11 and 3.12 keep the pointer
 * to the current frame there.
 */
typedef int pystack_word_fn(void *ctx, uint64_t addr, uint64_t *val);
size_t pystack_read(struct pyproc *py, struct pynames *names, struct pystats *st, pid_t pid, pid_t tid,
		    pystack_word_fn *stack_word, void *ctx, struct pyframe *out, size_t max);

/*
 * A frame as read from the target, not named yet: its address (0 when not
 * known), its code object, its instruction pointer, whether it is the
 * outermost of its eval loop call, and its owner (enum _frameowner).
 */
struct pyraw {
	uint64_t addr, code, instr;
	int last_of_call;
	uint8_t owner;
	/* have_hdr: read by the kernel, with the code object's fields as they were at the event */
	int have_hdr;
	uint64_t filename, qualname, linetable;
};

/*
 * Names frames read earlier, by the kernel at the event (tracer/kernel/pyread.c):
 * raw[0..n), innermost first, to at most n frames in out; returns how many
 * (0 on a read that failed). The code objects are read now: one freed since
 * and its address reused is told by its fields, and fails.
 */
size_t pystack_name(struct pyproc *py, struct pynames *names, struct pystats *st, pid_t pid,
		    const struct pyraw *raw, size_t n, struct pyframe *out);

#endif
