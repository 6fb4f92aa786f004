/*
 * The snapshot file syntax shared by snap_write.c and snap_read.c: the first
 * line, the record tags and the limits. docs/snapshot-format.md is the
 * reference; change both together and bump SNAP_FORMAT_VERSION in snap.h.
 */
#ifndef PTFIL_SNAP_SYNTAX_H
#define PTFIL_SNAP_SYNTAX_H

#include <stdint.h>

/* First line: SNAP_MAGIC, one space, the format version in decimal. */
#define SNAP_MAGIC "ptfil-snapshot"

/* Record tags: the first byte of every line after the first. */
enum snap_tag {
	SNAP_TAG_COMMENT = '#',
	SNAP_TAG_STRING = 's',     /* s TEXT: next string number, TEXT escaped */
	SNAP_TAG_PTFIL = 'V',      /* V STR: ptfil version that wrote the file */
	SNAP_TAG_MODE = 'o',       /* o STR: "launch" or "attach" */
	SNAP_TAG_ARG = 'a',        /* a STR: next argument of the command line */
	SNAP_TAG_PID = 'i',        /* i PID */
	SNAP_TAG_START = 'T',      /* T SECONDS: unix start time */
	SNAP_TAG_DURATION = 'd',   /* d SECONDS */
	SNAP_TAG_EXIT = 'x',       /* x STATUS: -1 when not exited */
	SNAP_TAG_VMHWM = 'w',      /* w BYTES */
	SNAP_TAG_PAGESIZE = 'z',   /* z BYTES */
	SNAP_TAG_PEAK = 'p',       /* p TIME CHARGED RESERVED RSS */
	SNAP_TAG_MODULE = 'm',     /* m PATH BUILDID|- BASEHEX */
	SNAP_TAG_DEBUGINFO = 'u',  /* u MODULE SYMBOLS LINES PACKAGE|-: what debug information a module had (format 3 on) */
	SNAP_TAG_FRAME = 'f',      /* f MODULE|-1 OFFSETHEX FUNCTION|- */
	SNAP_TAG_PYFRAME = 'y',    /* y LINE FUNCTION|- FILE: a Python frame (format 2 on) */
	SNAP_TAG_SRCFRAME = 'g',   /* g MODULE|-1 OFFSETHEX FUNCTION|- FILE|- LINE INLINED: a native
	                              frame with its source line, or an inlined call (format 3 on) */
	SNAP_TAG_NODE = 'n',       /* n PARENT FRAME (node 0 is the implicit root) */
	SNAP_TAG_STACK = 'k',      /* k NODE KIND CHARGED RESERVED COUNT, at the peak */
	SNAP_TAG_LIVE = 'l',       /* l NODE KIND CHARGED RESERVED COUNT, live at the end */
	SNAP_TAG_SAMPLE = 't',     /* t TIME CHARGED RSS */
	SNAP_TAG_COUNTER = 'c',    /* c NAME COUNT */
	SNAP_TAG_PROC = 'P',       /* P PID PPID PROFILED PEAK PEAKTIME ATCOMBINED VMHWM START END COMMAND|- FILE|- (format 4 on) */
	SNAP_TAG_TREE = 'r',       /* r TIME CHARGED: the tree's combined peak (format 4 on) */
	SNAP_TAG_TREESTACK = 'j',  /* j NODE KIND CHARGED RESERVED COUNT PROC: a stack at the combined peak (format 4 on) */
	SNAP_TAG_VIEW = 'v',       /* v STR: "alloc" or "touch", once, before any k l j K X (format 5 on; absent: alloc) */
	SNAP_TAG_OTHERSTACK = 'K', /* K NODE KIND CHARGED RESERVED COUNT: a stack of the other (alloc) view at the peak (format 5 on) */
	SNAP_TAG_LINK = 'X',       /* X TOUCHNODE ALLOCNODE BYTES: what a touch stack made resident inside what an alloc stack reserved (format 5 on) */
	SNAP_TAG_END = 'e',        /* e: last line; anything after it is an error */
};

/* The first format version with the `y` record (Python frames). */
#define SNAP_VERSION_PYFRAME 2
/* The first format version with the `g` record (native frames with source lines, inlined calls). */
#define SNAP_VERSION_SRCFRAME 3
/* The first format version with the process tree (`P`, `r`, `j`). */
#define SNAP_VERSION_TREE 4
/* The first format version with the views (`v`, `K`, `X`, kind `t`). */
#define SNAP_VERSION_VIEW 5
/* The `v` record's values. */
#define SNAP_VIEW_NAME_ALLOC "alloc"
#define SNAP_VIEW_NAME_TOUCH "touch"
/* At most this many `P` records. */
#define SNAP_MAX_PROCS (1u << 20)

/* Written where an optional string reference is absent. */
#define SNAP_NONE "-"

/* Reader limits: a hostile file cannot make us allocate or read without bound. */
#define SNAP_MAX_LINE (1u << 20)                 /* bytes per line, newline excluded */
#define SNAP_MAX_MEMORY ((uint64_t)1 << 30)      /* bytes of records held in memory */
#define SNAP_MAX_INPUT ((uint64_t)4 << 30)       /* uncompressed bytes read in all */
/*
 * Frames per stack, and frames over all `k`, `l`, `j` and `K` records (the sum of the
 * depths of the stacks they name): at most BASE plus PER_BYTE for each byte
 * read so far. A renderer that lists every frame of every stack (JSON) then
 * does work proportional to the file, never stacks x depth of a small hostile
 * file. Real snapshots stay far below: a stack record is a line of about 30
 * bytes, and stacks of hundreds of frames that differ only at the end are rare.
 */
#define SNAP_MAX_DEPTH 4096u
#define SNAP_STACK_FRAMES_BASE ((uint64_t)1 << 20)
#define SNAP_STACK_FRAMES_PER_BYTE 64u

#endif
