/* ptfil --live's terminal view (live_ui.c): ncurses in a thread of its own, fed tracer/output/live.h's models. */
#ifndef PTFIL_LIVE_UI_H
#define PTFIL_LIVE_UI_H

#include "tracer/output/live.h"

/*
 * The view, in tools/live_ui.c (ncurses, a thread of its own). live_ui_start
 * takes the terminal (/dev/tty) and returns 0, or -1 after error() when
 * there is none. live_ui_publish hands the view a new model (the view owns
 * it from then on and frees the one it replaces). live_ui_quit says whether
 * the user asked to end (q). live_ui_stop gives the terminal back as it was;
 * it is safe to call twice, and from an atexit or fatal-error path.
 */
int live_ui_start(void);
void live_ui_publish(struct live_model *m);
int live_ui_quit(void);
void live_ui_stop(void);

#endif
