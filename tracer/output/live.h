/*
 * --live: what the terminal view shows, as a copy the tracer makes between
 * events about once a second (tracer/output/live.c builds it; tools/live_ui.c draws
 * it in its own thread and never touches the tracer's tables). Pure data:
 * every string and array is owned by the model.
 */
#ifndef PTFIL_LIVE_H
#define PTFIL_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One stack as the view lists it. */
struct live_stack {
	uint64_t charged, reserved, count;
	char kind;            /* enum snap_kind: 'm' mmap, 'b' brk, 'h' heap, 'p' pseudo */
	pid_t pid;            /* the process holding it */
	char *summary;        /* where: its frame of the user's own code (common/fold.h) and what it called,
	                         "load (demo.py:12) -> ones (numeric.py:206)", "<module> (seed.py:3) [import
	                         numpy]"; without one, its innermost meaningful frame */
	char **frames;        /* its frames, innermost first, as text; a run of Python's import system
	                         reads as one, "[import numpy.core]" */
	size_t n_frames;
};

struct live_sample {
	double time;          /* seconds since the start */
	uint64_t charged, rss;
};

struct live_model {
	unsigned seq;                  /* bumped by each new model */
	char *command;                 /* the profiled command line */
	pid_t pid;                     /* the main process */
	int attach;                    /* 1 under attach: q detaches */
	int touch;                     /* the main process's view: 1 touch (who made memory resident), 0 alloc */
	int processes;                 /* profiled processes running now */
	double now;                    /* seconds since the start */
	uint64_t charged, reserved, rss;     /* now, over the processes profiled */
	uint64_t peak_charged, peak_rss;     /* the peak so far (the combined peak with -f) */
	double peak_time;
	struct live_sample *samples; size_t n_samples;       /* the main process's timeline, time ascending */
	struct live_stack *now_stacks; size_t n_now;         /* the largest by charged bytes now, largest first */
	struct live_stack *peak_stacks; size_t n_peak;       /* the same at the peak so far */
};

void live_model_free(struct live_model *m);

/*
 * The view as the tracer sees it: ptfil's main wires these to
 * tools/live_ui.c, so that tracer/ does not depend on a terminal library.
 */
struct live_ui {
	void (*publish)(struct live_model *m);
	int (*quit)(void);
	void (*stop)(void);
};

/* The run's part (struct tracer's live). */
struct live {
	int on;                    /* --live: the view is up */
	int leave;                 /* q pressed under attach */
	double at;                 /* when the last model was made */
	unsigned seq;
	char **names; size_t n_names;  /* frame texts for the view, by frame id */
	unsigned char *kinds;          /* what each frame is (live.c's FK_ bits), by frame id; 0: not known yet */
};

struct tracer;
/* From the loop's timer: a new model about once a second; q seen, the view closed (and under attach, leave). */
void live_tick(struct tracer *T);
/* After the loop: the view closed before anything is printed. */
void live_end(struct tracer *T);
/* Frees what live_tick keeps (the frames' names). */
void live_fin(struct tracer *T);

#endif
