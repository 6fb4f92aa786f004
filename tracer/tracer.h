/* The tracer's face to ptfil's main: run a program under ptrace and write its snapshot. */
#ifndef PTFIL_TRACER_H
#define PTFIL_TRACER_H

struct live_ui;

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
	int heap_events;          /* enum heap_events (tracer/kheap.h): auto, uprobe or ptrace */
	int exact_sizes;          /* ptrace path: hook glibc's malloc at its entry too, for requested sizes */
	unsigned long long max_peak; /* launch --max-peak: the budget in bytes (the combined peak with
	                              follow_forks), 0 for none */
	const struct live_ui *live;  /* --live: the view, started by the caller (tracer/live.h); NULL for none */
};

/* launch's exit status when the program succeeded but its peak passed --max-peak. */
#define PTFIL_EXIT_OVER_BUDGET 97

/* The default snapshot name for a program and pid: "ptfil-NAME-PID.gz". Caller frees. */
char *tracer_default_output(const char *prog, int pid);

/*
 * Runs opts->argv under ptrace from its first instruction until it and every
 * process it started have exited, then writes the snapshot. Returns the
 * program's status as a shell reports it (128+N for signal N), 127/126 when it
 * cannot be run, or -1 after error() when ptfil itself failed (the child is
 * killed then).
 */
int tracer_launch(const struct tracer_opts *opts);

/*
 * Attaches to the running process opts->attach_pid, profiles it until
 * SIGINT/SIGTERM/SIGHUP, --duration or its exit, writes the snapshot and
 * leaves it as it was. Returns ptfil's exit status: 0, a REFUSE_* status
 * (tracer/refuse.h) when the target cannot be traced, 1 when ptfil failed.
 */
int tracer_attach(const struct tracer_opts *opts);

#endif
