/*
 * ptfil's own signals while it traces: SIGINT, SIGQUIT, SIGTERM and SIGHUP
 * passed on to the program (launch) or a request to leave (attach), SIGUSR1
 * for a snapshot of the present, SIGPIPE ignored, and the interval timer.
 */
#include <signal.h>
#include <string.h>
#include <sys/time.h>

#include "tracer/loop.h"
#include "tracer/signals.h"

/* The signals ptfil catches while it traces, and what they were before (a launched child gets those back). */
static const int caught[SIGNALS_CAUGHT] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1 };
static struct sigaction saved[SIGNALS_CAUGHT];

/* launch: the program decides what a signal means, ptfil follows it out. */
static void on_forward(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	/* From the terminal (SI_KERNEL) the program got the signal too. Sent to ptfil alone, by kill, it is passed on. */
	if (si->si_code != SI_KERNEL && sig < 65) {
		loop_forward_from[sig] = si->si_pid;
		loop_forward[sig] = 1;
		loop_forward_any = 1;
	}
}

/* attach: ptfil leaves, the program never hears of it. */
static void on_leave(int sig)
{
	(void)sig;
	loop_leave = 1;
}

static void on_dump(int sig)
{
	(void)sig;
	loop_dump = 1;
}

static void on_alarm(int sig)
{
	(void)sig;
	loop_tick = 1;
}

/* SIGPIPE as ptfil was given it: a launched program gets it back (an ignored signal stays ignored across exec). */
static struct sigaction saved_pipe;

void signals_install(int attach)
{
	struct sigaction sa;
	/*
	 * A closed stderr (ptfil ... 2>&1 | head) must not kill ptfil while it
	 * holds breakpoints in the program: a write fails with EPIPE instead.
	 */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, &saved_pipe);
	for (size_t i = 0; i < SIGNALS_CAUGHT; i++) {
		memset(&sa, 0, sizeof(sa));
		sigemptyset(&sa.sa_mask);
		/* No SA_RESTART: waitpid returns to the loop, which looks at the flags. */
		if (caught[i] == SIGUSR1) {
			sa.sa_handler = on_dump;
		} else if (attach) {
			sa.sa_handler = on_leave;
		} else {
			sa.sa_sigaction = on_forward;
			sa.sa_flags = SA_SIGINFO;
		}
		sigaction(caught[i], &sa, &saved[i]);
	}
}

void signals_restore(void)
{
	sigaction(SIGPIPE, &saved_pipe, NULL);
	for (size_t i = 0; i < SIGNALS_CAUGHT; i++)
		sigaction(caught[i], &saved[i], NULL);
}

void signals_start_timer(unsigned interval_ms)
{
	struct sigaction al;
	memset(&al, 0, sizeof(al));
	al.sa_handler = on_alarm;
	sigemptyset(&al.sa_mask);
	sigaction(SIGALRM, &al, NULL);
	struct itimerval it;
	it.it_interval.tv_sec = interval_ms / 1000;
	it.it_interval.tv_usec = (interval_ms % 1000) * 1000;
	it.it_value = it.it_interval;
	setitimer(ITIMER_REAL, &it, NULL);
}

void signals_stop_timer(void)
{
	struct itimerval it;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
}

