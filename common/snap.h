/*
 * The snapshot: the profile ptfil writes at the peak and ptfil-view reads.
 * This header is the in-memory model; only common/snap_*.c know the file syntax
 * (documented in docs/snapshot-format.md).
 */
#ifndef PTFIL_SNAP_H
#define PTFIL_SNAP_H

#include <stddef.h>
#include <stdint.h>

#define SNAP_FORMAT_VERSION 5

/* What a stack's memory is. One stack node may appear once per kind. */
enum snap_kind {
	SNAP_KIND_MMAP = 'm',   /* anonymous mmap/mremap made by the program (thread stacks too) */
	SNAP_KIND_BRK = 'b',    /* heap growth through brk */
	SNAP_KIND_HEAP = 'h',   /* malloc-family blocks (later) */
	SNAP_KIND_PSEUDO = 'p', /* memory with no call stack: main thread stack, before attach */
	SNAP_KIND_TOUCH = 't',  /* pages a stack made resident (a page fault, MAP_POPULATE...): the touch view */
};

/*
 * Which view of memory a snapshot's stacks are (format 5 on; alloc before):
 * memory charged to the stack that allocated it (malloc-family blocks,
 * mappings and large blocks at their resident bytes), or each resident page
 * of an anonymous or private mapping charged to the stack that made it
 * resident (kind t).
 */
enum snap_view { SNAP_VIEW_ALLOC = 0, SNAP_VIEW_TOUCH = 1 };

/* Where a module's function names came from (format 3 on; 0 when the snapshot does not say). */
enum snap_symbols {
	SNAP_SYMBOLS_UNKNOWN = 0,
	SNAP_SYMBOLS_NONE = 'n',     /* no symbol table: frames show module + offset */
	SNAP_SYMBOLS_EXPORTS = 'e',  /* exported functions only (.dynsym): static functions misnamed or unnamed */
	SNAP_SYMBOLS_MINI = 'm',     /* MiniDebugInfo: every function, no lines */
	SNAP_SYMBOLS_FULL = 'f',     /* a full symbol table (the object's or its debug file's) */
};

/* A loaded object: executable, shared library. */
struct snap_module {
	char *path;      /* as the target saw it */
	char *build_id;  /* lower-case hex, or NULL when the object has none */
	uint64_t base;   /* address where file offset 0 was mapped, in the target */
	char symbols;    /* enum snap_symbols */
	int lines;       /* 1 when its debug information gave source lines */
	char *package;   /* the distribution package that installed it ("libc6"), or NULL */
};

/* What a frame is: machine code, or a line of Python code read from the interpreter. */
enum snap_frame_kind {
	SNAP_FRAME_NATIVE = 0,
	SNAP_FRAME_PYTHON = 1,
};

/*
 * One frame. A native frame is a code address resolved to a module and an
 * offset in it, with the source line that holds it when the module's debug
 * information says. A call the compiler inlined is a native frame of its own
 * (inlined set) with the same module and offset as the frame it was inlined
 * into, which follows it (outward) in the stack. A Python frame is a line in
 * a Python source file: its module is -1 and its offset 0 (neither is written
 * to the file).
 */
struct snap_frame {
	int32_t module;  /* index in modules[], or -1 (no module: JIT, vdso, pseudo frame, Python frame) */
	uint64_t offset; /* address - module base; the absolute address when module is -1 */
	char *function;  /* symbol name, "[...]" for a pseudo frame, or NULL when unknown;
	                    Python frames: the code object's qualified name ("Model.fit", "<module>") or NULL */
	int kind;        /* enum snap_frame_kind; 0 (native) in zeroed storage */
	char *file;      /* Python frames: the source file as the code object names it (never NULL
	                    once read; written as "" if NULL). Native frames: the source file from
	                    the debug information ("malloc/malloc.c", "/home/u/src/a.c"), or NULL */
	uint32_t line;   /* line number in file, 0 when unknown */
	int inlined;     /* native frames: 1 for a call inlined into the next frame outward */
};

/*
 * The stack trie. nodes[0] is the root and has no frame; every other node's
 * parent has a smaller index. A stack is named by its innermost node: follow
 * parent links to read it innermost first.
 */
struct snap_node {
	uint32_t parent;
	uint32_t frame;  /* index in frames[]; unused for the root */
};

/*
 * The charge of one stack (at the peak, or at the end of the run). A touch
 * stack (kind t) reserves nothing of its own: its reserved bytes are its
 * charged bytes, and its count is the pages (of page_size) it made resident.
 */
struct snap_stack {
	uint32_t node;     /* innermost node in nodes[] */
	char kind;         /* enum snap_kind */
	uint64_t charged;  /* resident (mappings, touch) or requested (small heap blocks) bytes */
	uint64_t reserved; /* virtual bytes */
	uint64_t count;    /* live mappings or blocks; touch: resident pages */
	uint32_t proc;     /* tree_stacks only: the process holding it, an index in procs[]; 0 elsewhere */
};

/*
 * A process of the profiled program's tree (format 4 on): every process the
 * run saw, in the main process's snapshot. Times are seconds since the main
 * process started (the snapshot's own clock when it is the main one's).
 */
struct snap_proc {
	int pid;
	int ppid;           /* the process that started it, 0 for the main one */
	int profiled;       /* 1: followed (--follow-forks) and charged; 0: only seen, its VmHWM known */
	uint64_t peak;      /* its own peak, charged bytes; 0 when not profiled */
	double peak_time;
	uint64_t at_combined; /* its charged bytes at the tree's combined peak */
	uint64_t vmhwm;     /* its VmHWM (peak RSS), at exit or when written */
	double start;       /* when it was first seen */
	double end;         /* when it exited; -1 while it ran */
	char *command;      /* its command line, arguments joined by spaces, or NULL */
	char *file;         /* its own snapshot's file name (no directory), or NULL */
};

/* Both nodes are in nodes[]. */
struct snap_link {      /* with both views: of what touch node made resident at the peak, bytes inside blocks or mappings alloc node reserved */
	uint32_t touch_node, alloc_node;
	uint64_t bytes;
};

struct snap_sample {
	double time;       /* seconds since start */
	uint64_t charged;
	uint64_t rss;
};

struct snap_peak {
	double time;       /* seconds since start */
	uint64_t charged;
	uint64_t reserved;
	uint64_t rss;      /* process VmRSS at that moment */
};

struct snap_counter {
	char *name;        /* e.g. "seccomp", "syscall-exit", "signal" */
	uint64_t count;
};

struct snap {
	unsigned version;          /* SNAP_FORMAT_VERSION when written by us */
	char *ptfil_version;
	char *mode;                /* "launch" or "attach" */
	char **argv;               /* the profiled command line */
	size_t argc;
	int pid;
	double start_time;         /* unix time, seconds */
	double duration;           /* seconds from start to the snapshot */
	int exit_status;           /* as a shell reports it (128+N for signal N); -1 if not exited */
	uint64_t vmhwm;            /* VmHWM at exit or when written, bytes */
	uint64_t page_size;
	struct snap_peak peak;

	struct snap_module *modules; size_t n_modules;
	struct snap_frame *frames;   size_t n_frames;
	struct snap_node *nodes;     size_t n_nodes;    /* n_nodes >= 1 once read */
	struct snap_stack *stacks;   size_t n_stacks;   /* at the peak, any order */
	struct snap_stack *live;     size_t n_live;     /* still live when written */
	struct snap_sample *samples; size_t n_samples;  /* timeline, time ascending */
	struct snap_counter *counters; size_t n_counters; /* stop counts by kind, other facts */

	/*
	 * The process tree (format 4 on; n_procs 0 otherwise): its processes,
	 * procs[0] the main one, and, when more than one was profiled
	 * (has_tree), the combined peak: the moment the sum of every live
	 * profiled process's charge was highest, and each one's stacks then.
	 */
	struct snap_proc *procs; size_t n_procs;
	int has_tree;
	double tree_time;          /* seconds since the main process started */
	uint64_t tree_charged;     /* the combined peak, bytes */
	struct snap_stack *tree_stacks; size_t n_tree_stacks; /* their .proc says whose */

	/*
	 * The view (format 5 on; SNAP_VIEW_ALLOC before, and in zeroed storage).
	 * Only a touch snapshot carries other[] and links[]: the alloc view's
	 * stacks at the same peak (never kind t), and the links between the two,
	 * largest bytes first (then touch_node, then alloc_node), as snap_read
	 * leaves them. Kind t appears only in a touch snapshot's stacks[],
	 * live[] and tree_stacks[].
	 */
	int view;                                        /* enum snap_view of stacks[], live[], tree_stacks[] and peak.charged */
	struct snap_stack *other; size_t n_other;        /* the other view's charge by stack at the same peak (kinds m b h p), or none */
	struct snap_link *links; size_t n_links;         /* with both views: links between them, largest first */
};

/* Zeroes s; the storage is the caller's. */
void snap_init(struct snap *s);
/* Frees everything s owns (every string and array) and zeroes it. */
void snap_fin(struct snap *s);

/*
 * Writes s to path as gzip. A regular file, or a name not taken yet, is
 * replaced atomically: a temporary file beside it, then rename (a symlink is
 * followed, and the file it names is replaced). Anything else, a device, a
 * FIFO, a terminal, is written in place, with the whole snapshot at once.
 * Returns 0, or -1 after reporting with error() (a regular file is then
 * untouched).
 */
int snap_write(const struct snap *s, const char *path);

/*
 * Before a run: whether a snapshot can be written to path, so that a bad
 * output is found before the program starts or a process is attached, not
 * after. Without path, whether the current directory takes a new file (the
 * default name). A device or a FIFO is opened now and kept open for
 * snap_write(path): a FIFO waits here for its reader, as a shell's
 * redirection does. Returns 0, or -1 after one error() line naming path and why.
 */
int snap_output_check(const char *path);

/*
 * Whether snap_write(path) writes in place (path is, or links to, a device
 * or a FIFO): such an output takes one snapshot, the last, since a rewrite
 * would follow the first in the stream instead of replacing it.
 */
int snap_output_in_place(const char *path);

/*
 * Reads a snapshot into s (which snap_read initializes; the caller calls
 * snap_fin in both outcomes). The file is untrusted: any truncation,
 * corruption, excessive size or newer version gives -1 after one error()
 * line naming the file, the line number and the problem.
 */
int snap_read(const char *path, struct snap *s);
/* As snap_read, on an uncompressed buffer (for tests and fuzzing); name is used in messages. */
int snap_read_mem(const char *buf, size_t len, const char *name, struct snap *s);

/*
 * The frames of stack node `node`, innermost first: writes up to max frame
 * indexes to out and returns the whole depth, which may exceed max (as
 * snprintf does), so a caller can print "... N more". A malformed trie (node
 * or frame out of range, parent not smaller) ends the walk; it never loops.
 */
size_t snap_stack_frames(const struct snap *s, uint32_t node, uint32_t *out, size_t max);

#endif
