/* ptfil's own signals and interval timer while it traces (signals.c); the loop reads the flags they set (loop.h). */
#ifndef PTFIL_SIGNALS_H
#define PTFIL_SIGNALS_H

#define SIGNALS_CAUGHT 5
/* ptfil's SIGINT, SIGQUIT, SIGTERM, SIGHUP: passed on to the program (launch) or leave (attach); SIGUSR1: dump. */
void signals_install(int attach);
/* What they were before signals_install (for a launched child before exec). */
void signals_restore(void);
void signals_start_timer(unsigned interval_ms);
void signals_stop_timer(void);

#endif
