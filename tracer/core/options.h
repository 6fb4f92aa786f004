/*
 * What the user asked of a tracing session (ptfil's command line), read by
 * every part of the tracer; tracer/tracer.h gives it to the mains.
 */
#ifndef PTFIL_OPTIONS_H
#define PTFIL_OPTIONS_H

struct live_ui;
struct fold_own;

/* --charge: which stack memory is charged to (README.md, "What is charged"). */
enum charge_view {
	CHARGE_AUTO,    /* touch wherever the fault path can run and the process runs no Python, else alloc */
	CHARGE_TOUCH,   /* the stack that made each page resident (its page fault) */
	CHARGE_ALLOC,   /* the stack that allocated it (malloc family, mappings) */
	CHARGE_BOTH,    /* touch, with the alloc view beside it and the links between them */
};

struct tracer_opts {
	char **argv;              /* program and arguments, NULL-terminated */
	const char *output;       /* snapshot path; NULL for the default name */
	unsigned interval_ms;     /* residency poll for the timeline; 0 disables it */
	int quiet;                /* no summary on stderr */
	unsigned long long large_block; /* heap blocks this big or more are charged by residency; 0: default */
	int no_heap;              /* no malloc-family hooks: mappings only */
	int native_frames;        /* Python programs: keep every native frame, not only those inside the innermost Python frame */
	int follow_forks;         /* profile every process of the tree, one snapshot each */
	int attach_pid;           /* attach: the process to profile */
	double duration;          /* attach: leave after this many seconds; 0 for never */
	int heap_events;          /* enum heap_events (tracer/kernel/kheap.h): auto, uprobe or ptrace */
	int exact_sizes;          /* ptrace path: hook glibc's malloc at its entry too, for requested sizes */
	int charge;               /* enum charge_view */
	unsigned long long max_peak; /* launch --max-peak: the budget in bytes (the combined peak with
	                              follow_forks), 0 for none */
	const struct fold_own *own;  /* --own: the paths of the user's own code (common/fold.h), or NULL */
	const struct live_ui *live;  /* --live: the view, started by the caller (tracer/output/live.h); NULL for none */
};

/* launch's exit status when the program succeeded but its peak passed --max-peak. */
#define PTFIL_EXIT_OVER_BUDGET 97

#endif
