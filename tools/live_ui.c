/*
 * --live: the full-screen terminal view (tracer/output/live.h), drawn with ncurses
 * on /dev/tty by a thread of its own from the models the tracer publishes,
 * so that the tracer's loop never waits for the terminal.
 */
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <curses.h>
#include <term.h>

#include "common/error.h"
#include "common/units.h"
#include "tools/live_ui.h"

#define UI_TICK_MS 250       /* the longest wait between looks at the terminal's size and the flags */
#define UI_REPAINT_S 1.0     /* the whole screen repainted at least this often */
#define UI_STOP_WAIT_S 2     /* how long live_ui_stop waits for the thread (a terminal stopped by ^S) */

/* Everything the two threads share is under lock, but quit (read by the tracer without the lock). */
static struct {
	pthread_mutex_t lock;
	struct live_model *pending;   /* published, not yet taken by the view */
	int stop;                     /* live_ui_stop asks the thread to end */
	atomic_int quit;              /* q pressed */
	int wake[2];                  /* a byte here wakes the thread (a new model, stop) */
	enum { UI_NONE, UI_ARMED, UI_RUNNING, UI_STOPPED } state;  /* ARMED: a terminal is there, no view yet */
	pthread_t thread;
	int tty;                      /* /dev/tty */
	FILE *in, *out;
	SCREEN *screen;
	struct termios saved;         /* the terminal as it was, put back by live_ui_stop */
	int have_saved;
	int utf8;                     /* the locale's characters are UTF-8: the sparkline in blocks */
} ui = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = { -1, -1 }, .tty = -1 };

/* ---- what the view thread keeps between draws ---------------------------- */

enum ui_mode { UI_LIST, UI_FRAMES };

struct view {
	struct live_model *m;
	int peak;                 /* p: the stacks at the peak instead of now */
	size_t sel, top;          /* the selected row and the first row shown */
	int chosen;               /* the user moved the selection: it follows its stack; else it stays on the top row */
	enum ui_mode mode;
	struct live_stack shown;  /* UI_FRAMES: a copy of the stack opened, kept if it leaves the list */
	int shown_gone;           /* it is no longer among the stacks listed */
	size_t scroll;            /* UI_FRAMES: the first frame shown */
	int rows, cols;           /* the terminal's size as ncurses knows it */
};

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fmt_share(char *buf, size_t size, uint64_t part, uint64_t whole)
{
	if (!whole)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.1f%%", 100.0 * (double)part / (double)whole);
}

static const char *kind_name(char kind)
{
	switch (kind) {
	case 'm': return "mmap";
	case 'b': return "brk";
	case 'h': return "heap";
	case 'p': return "pseudo";
	case 't': return "resident";
	default: return "?";
	}
}

/*
 * Writes s at (y, x), at most width columns, clearing the rest of them.
 * Control bytes become '?', and so do other bytes than ASCII unless the
 * locale is UTF-8 (then a character is counted as one column).
 */
static void put(int y, int x, int width, const char *s)
{
	char buf[1024];
	size_t n = 0;
	int cols = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && cols < width && n + 5 < sizeof(buf); p++) {
		if (*p < 0x20 || *p == 0x7f) {
			buf[n++] = '?';
			cols++;
		} else if (*p < 0x80) {
			buf[n++] = (char)*p;
			cols++;
		} else if (!ui.utf8) {
			buf[n++] = '?';
			cols++;
		} else {
			/* One whole UTF-8 character, or '?' for a broken one. */
			size_t len = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc0 ? 2 : 0;
			size_t k = 1;
			while (len && k < len && (p[k] & 0xc0) == 0x80)
				k++;
			if (!len || k != len) {
				buf[n++] = '?';
			} else {
				memcpy(buf + n, p, len);
				n += len;
				p += len - 1;
			}
			cols++;
		}
	}
	buf[n] = '\0';
	mvaddstr(y, x, buf);
	for (; cols < width; cols++)
		addch(' ');
}

static void putf(int y, int x, int width, const char *fmt, ...) PTFIL_PRINTF(4, 5);
static void putf(int y, int x, int width, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	put(y, x, width, buf);
}

/* ---- the stacks ------------------------------------------------------------ */

static const struct live_stack *list_of(const struct view *v, size_t *n)
{
	if (!v->m) {
		*n = 0;
		return NULL;
	}
	*n = v->peak ? v->m->n_peak : v->m->n_now;
	return v->peak ? v->m->peak_stacks : v->m->now_stacks;
}

/* Whether a and b are the same stack (of two models): the same frames, kind and process. */
static int same_stack(const struct live_stack *a, const struct live_stack *b)
{
	if (a->kind != b->kind || a->pid != b->pid || a->n_frames != b->n_frames)
		return 0;
	for (size_t i = 0; i < a->n_frames; i++)
		if (strcmp(a->frames[i] ? a->frames[i] : "", b->frames[i] ? b->frames[i] : ""))
			return 0;
	return 1;
}

/* Where stack s is in the list shown, or n when it is not there. */
static size_t find_stack(const struct view *v, const struct live_stack *s)
{
	size_t n;
	const struct live_stack *l = list_of(v, &n);
	for (size_t i = 0; i < n; i++)
		if (same_stack(&l[i], s))
			return i;
	return n;
}

static void shown_free(struct live_stack *s)
{
	for (size_t i = 0; i < s->n_frames; i++)
		free(s->frames[i]);
	free(s->frames);
	free(s->summary);
	memset(s, 0, sizeof(*s));
}

/* A deep copy of src into dst (freed by shown_free); -1 when memory runs out. */
static int shown_copy(struct live_stack *dst, const struct live_stack *src)
{
	*dst = *src;
	dst->summary = NULL;
	dst->frames = calloc(src->n_frames ? src->n_frames : 1, sizeof(*dst->frames));
	dst->n_frames = 0;
	if (!dst->frames)
		return -1;
	for (size_t i = 0; i < src->n_frames; i++) {
		if (!(dst->frames[i] = strdup(src->frames[i] ? src->frames[i] : "")))
			return -1;
		dst->n_frames++;
	}
	dst->summary = strdup(src->summary ? src->summary : "");
	return dst->summary ? 0 : -1;
}

/* Takes a new model: the selection and the stack opened follow their stacks when they are still listed. */
static void take_model(struct view *v, struct live_model *m)
{
	size_t n;
	const struct live_stack *l = list_of(v, &n);
	struct live_stack *keep = NULL, tmp;
	memset(&tmp, 0, sizeof(tmp));
	/* Until the user picks a row, the top row stays selected: the largest stack, whichever it is now. */
	if (v->chosen && v->sel < n && !shown_copy(&tmp, &l[v->sel]))
		keep = &tmp;
	struct live_model *old = v->m;
	v->m = m;
	live_model_free(old);
	l = list_of(v, &n);
	if (keep) {
		size_t at = find_stack(v, keep);
		if (at < n)
			v->sel = at;
	}
	shown_free(&tmp);
	if (v->sel >= n)
		v->sel = n ? n - 1 : 0;
	if (v->mode == UI_FRAMES) {
		size_t at = find_stack(v, &v->shown);
		v->shown_gone = at >= n;
		if (!v->shown_gone) {
			v->shown.charged = l[at].charged;
			v->shown.reserved = l[at].reserved;
			v->shown.count = l[at].count;
		}
	}
}

/* ---- drawing ------------------------------------------------------------------ */

/* The sparkline's glyphs, from empty to full: eight levels a row in UTF-8, four in ASCII. */
static const char *const blocks_utf8[] = { " ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586",
					   "\u2587", "\u2588" };
static const char *const blocks_ascii[] = { " ", ".", ":", "|", "#" };

/*
 * The timeline of charged bytes, from 0 to now, over the width and h rows:
 * each column the largest sample in its time slice (a slice without one
 * holds the one before), scaled to the largest of all.
 */
static void draw_sparkline(const struct live_model *m, int y, int h, int width)
{
	const char *const *glyph = ui.utf8 ? blocks_utf8 : blocks_ascii;
	int levels = ui.utf8 ? 8 : 4;
	if (!m->n_samples || width < 1) {
		put(y, 0, width, "  (no samples yet)");
		for (int r = 1; r < h; r++)
			put(y + r, 0, width, "");
		return;
	}
	double t0 = 0, t1 = m->now > m->samples[m->n_samples - 1].time ? m->now : m->samples[m->n_samples - 1].time;
	if (t1 <= t0)
		t1 = t0 + 1;
	uint64_t top = 0;
	for (size_t i = 0; i < m->n_samples; i++)
		if (m->samples[i].charged > top)
			top = m->samples[i].charged;
	size_t i = 0;
	uint64_t hold = 0;
	int have = 0;
	for (int c = 0; c < width; c++) {
		double end = t0 + (t1 - t0) * (c + 1) / width;
		uint64_t v = hold;
		int any = 0;
		while (i < m->n_samples && (m->samples[i].time < end || c == width - 1)) {
			if (!any || m->samples[i].charged > v)
				v = m->samples[i].charged;
			any = 1;
			hold = m->samples[i].charged;
			i++;
		}
		have |= any;
		if (!have)
			v = 0;
		int level = top ? (int)((double)v / (double)top * levels * h + 0.5) : 0;
		if (v && !level)
			level = 1;  /* something, however small, shows */
		for (int r = 0; r < h; r++) {
			int lv = level - levels * (h - 1 - r);
			lv = lv < 0 ? 0 : lv > levels ? levels : lv;
			mvaddstr(y + r, c, glyph[lv]);
		}
	}
}

static void draw_header(const struct view *v)
{
	const struct live_model *m = v->m;
	int w = v->cols;
	char now[32], rss[32], peak[32];
	attron(A_REVERSE);
	if (!m) {
		put(0, 0, w, " ptfil --live");
		attroff(A_REVERSE);
		put(1, 0, w, "waiting for the first sample...");
		return;
	}
	char right[64];
	snprintf(right, sizeof(right), "%s%d  %.1f s ", m->attach ? "attached to " : "pid ", (int)m->pid, m->now);
	int rl = (int)strlen(right);
	putf(0, 0, w, " ptfil --live  %s", m->command ? m->command : "");
	if (w > rl + 20)
		mvaddstr(0, w - rl, right);
	attroff(A_REVERSE);
	units_size(now, sizeof(now), m->charged);
	units_size(rss, sizeof(rss), m->rss);
	units_size(peak, sizeof(peak), m->peak_charged);
	char procs[32] = "";
	if (m->processes != 1)
		snprintf(procs, sizeof(procs), "; %d processes", m->processes);
	putf(1, 0, w, "now %s charged, RSS %s; peak %s at %.1f s%s; %s", now, rss, peak, m->peak_time, procs,
	     m->touch ? "view touch: charged to the code that made it resident"
		      : "view alloc: charged to the code that allocated it");
}

/* The line under the sparkline: its scale, and where the peak is. */
static void draw_axis(const struct live_model *m, int y, int width)
{
	char top[32], buf[128];
	uint64_t t = 0;
	for (size_t i = 0; i < m->n_samples; i++)
		if (m->samples[i].charged > t)
			t = m->samples[i].charged;
	units_size(top, sizeof(top), t);
	put(y, 0, width, "");
	snprintf(buf, sizeof(buf), "0 s, top %s", top);
	mvaddnstr(y, 0, buf, width);
	double t1 = m->now > 0 ? m->now : 1;
	if (m->n_samples && m->samples[m->n_samples - 1].time > t1)
		t1 = m->samples[m->n_samples - 1].time;
	int left = (int)strlen(buf) + 1;
	/* The peak's column, marked; the time now at the right end, or just left of the mark. */
	int c = -1;
	if (m->peak_charged && m->peak_time >= 0 && m->peak_time <= t1) {
		c = (int)(m->peak_time / t1 * width);
		if (c >= width)
			c = width - 1;
		if (c < left)
			c = -1;
	}
	snprintf(buf, sizeof(buf), "%.1f s", m->now);
	int len = (int)strlen(buf);
	int x = c >= 0 && c >= width - len - 1 ? c - len - 1 : width - len;
	if (x >= left)
		mvaddstr(y, x, buf);
	if (c >= 0) {
		attron(A_BOLD);
		mvaddstr(y, c, "^");
		attroff(A_BOLD);
	}
}

static void draw_list(struct view *v, int y, int h)
{
	const struct live_model *m = v->m;
	int w = v->cols;
	size_t n;
	const struct live_stack *l = list_of(v, &n);
	uint64_t whole = v->peak ? m->peak_charged : m->charged;
	attron(A_BOLD);
	if (v->peak)
		putf(y, 0, w, "stacks at the peak (%.1f s), by charged bytes: %zu   [p: now]", m->peak_time, n);
	else
		putf(y, 0, w, "stacks now, by charged bytes: %zu   [p: at the peak]", n);
	attroff(A_BOLD);
	putf(y + 1, 0, w, "  %10s %6s %8s  %-6s  %s", "charged", "%", "count", "kind", "where");
	y += 2;
	h -= 2;
	if (h < 1)
		return;
	if (v->sel < v->top)
		v->top = v->sel;
	if (v->sel >= v->top + (size_t)h)
		v->top = v->sel - (size_t)h + 1;
	if (!n)
		put(y, 0, w, v->peak && !m->peak_charged ? "  (no peak yet)" : "  (no stack holds memory)");
	for (int r = n ? 0 : 1; r < h; r++) {
		size_t i = v->top + (size_t)r;
		if (i >= n) {
			put(y + r, 0, w, "");
			continue;
		}
		const struct live_stack *s = &l[i];
		char charged[32], share[16], where[600];
		units_size(charged, sizeof(charged), s->charged);
		fmt_share(share, sizeof(share), s->charged, whole);
		if (s->pid != m->pid)
			snprintf(where, sizeof(where), "%s [pid %d]", s->summary ? s->summary : "?", (int)s->pid);
		else
			snprintf(where, sizeof(where), "%s", s->summary ? s->summary : "?");
		if (i == v->sel)
			attron(A_REVERSE);
		putf(y + r, 0, w, "%c %10s %6s %8llu  %-6s  %s", i == v->sel ? '>' : ' ', charged, share,
		     (unsigned long long)s->count, kind_name(s->kind), where);
		if (i == v->sel)
			attroff(A_REVERSE);
	}
}

static void draw_frames(struct view *v, int y, int h)
{
	const struct live_stack *s = &v->shown;
	int w = v->cols;
	char charged[32], reserved[32];
	units_size(charged, sizeof(charged), s->charged);
	units_size(reserved, sizeof(reserved), s->reserved);
	attron(A_BOLD);
	putf(y, 0, w, "stack %s: %s charged, %s reserved, %llu live, %s, pid %d%s", v->peak ? "at the peak" : "now",
	     charged, reserved, (unsigned long long)s->count, kind_name(s->kind), (int)s->pid,
	     v->shown_gone ? " (no longer listed: as it was)" : "");
	attroff(A_BOLD);
	putf(y + 1, 0, w, "%zu frames, innermost first:", s->n_frames);
	y += 2;
	h -= 2;
	if (h < 1)
		return;
	if (v->scroll + (size_t)h > s->n_frames)
		v->scroll = s->n_frames > (size_t)h ? s->n_frames - (size_t)h : 0;
	for (int r = 0; r < h; r++) {
		size_t i = v->scroll + (size_t)r;
		if (i < s->n_frames)
			putf(y + r, 0, w, "  #%-3zu %s", i, s->frames[i] ? s->frames[i] : "?");
		else
			put(y + r, 0, w, "");
	}
}

static void draw(struct view *v, int full)
{
	int w = v->cols, h = v->rows;
	erase();
	if (h < 8 || w < 40) {
		put(0, 0, w, "ptfil --live: the terminal is too small");
	} else {
		draw_header(v);
		int y = 2;
		if (v->m) {
			int spark = h >= 24 ? 3 : 1;
			draw_sparkline(v->m, y, spark, w);
			y += spark;
			draw_axis(v->m, y++, w);
			y++;
			if (v->mode == UI_FRAMES)
				draw_frames(v, y, h - 1 - y);
			else
				draw_list(v, y, h - 1 - y);
		}
		attron(A_REVERSE);
		if (atomic_load(&ui.quit))
			put(h - 1, 0, w, v->m && v->m->attach ? " leaving... (detaching, then writing the snapshot)"
							      : " leaving...");
		else if (v->mode == UI_FRAMES)
			put(h - 1, 0, w, " Esc/Enter/q back   up/down PgUp/PgDn scroll");
		else
			put(h - 1, 0, w, v->m && v->m->attach ? " q detach   p now/peak   up/down PgUp/PgDn select   Enter frames"
							      : " q close the view   p now/peak   up/down PgUp/PgDn select   Enter frames");
		attroff(A_REVERSE);
	}
	/* The launched program writes to this terminal too: the whole screen is painted again. */
	if (full)
		clearok(curscr, TRUE);
	refresh();
}

/* ---- keys ------------------------------------------------------------------------ */

static void move_sel(struct view *v, long by)
{
	size_t n;
	list_of(v, &n);
	if (!n)
		return;
	long to = (long)v->sel + by;
	v->sel = to < 0 ? 0 : (size_t)to >= n ? n - 1 : (size_t)to;
	v->chosen = v->sel != 0;
}

/* Returns 1 when the screen must be painted again from scratch. */
static int key(struct view *v, int c)
{
	int page = v->rows > 16 ? v->rows - 12 : 4;
	if (c == 12) /* ^L */
		return 1;
	if (atomic_load(&ui.quit))
		return 0;
	if (v->mode == UI_FRAMES) {
		switch (c) {
		case 27: case '\n': case '\r': case KEY_ENTER: case 'q': case 'Q': case KEY_LEFT: case KEY_BACKSPACE:
			v->mode = UI_LIST;
			shown_free(&v->shown);
			break;
		case KEY_UP: case 'k': if (v->scroll) v->scroll--; break;
		case KEY_DOWN: case 'j': v->scroll++; break;
		case KEY_PPAGE: v->scroll = v->scroll > (size_t)page ? v->scroll - (size_t)page : 0; break;
		case KEY_NPAGE: case ' ': v->scroll += (size_t)page; break;
		case KEY_HOME: v->scroll = 0; break;
		}
		return 0;
	}
	size_t n;
	const struct live_stack *l = list_of(v, &n);
	switch (c) {
	case 'q': case 'Q':
		atomic_store(&ui.quit, 1);
		break;
	case 'p': case 'P':
		v->peak = !v->peak;
		v->sel = v->top = 0;
		v->chosen = 0;
		break;
	case KEY_UP: case 'k': move_sel(v, -1); break;
	case KEY_DOWN: case 'j': move_sel(v, 1); break;
	case KEY_PPAGE: move_sel(v, -page); break;
	case KEY_NPAGE: move_sel(v, page); break;
	case KEY_HOME: case 'g': v->sel = 0; v->chosen = 0; break;
	case KEY_END: case 'G': move_sel(v, (long)n); break;
	case '\n': case '\r': case KEY_ENTER: case KEY_RIGHT:
		if (v->sel < n) {
			shown_free(&v->shown);
			if (shown_copy(&v->shown, &l[v->sel])) {
				shown_free(&v->shown);
				break;
			}
			v->mode = UI_FRAMES;
			v->shown_gone = 0;
			v->scroll = 0;
		}
		break;
	}
	return 0;
}

/* ---- the thread --------------------------------------------------------------------- */

/* Follows the terminal's size (no SIGWINCH handler: the tracer's thread must not be interrupted for it). */
static int follow_size(struct view *v)
{
	struct winsize ws;
	if (ioctl(ui.tty, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col &&
	    (ws.ws_row != LINES || ws.ws_col != COLS))
		resizeterm(ws.ws_row, ws.ws_col);
	int changed = v->rows != LINES || v->cols != COLS;
	v->rows = LINES;
	v->cols = COLS;
	return changed;
}

static void *ui_main(void *arg)
{
	(void)arg;
	struct view v;
	memset(&v, 0, sizeof(v));
	double painted = 0;
	int tty_ok = 1;
	follow_size(&v);
	for (;;) {
		pthread_mutex_lock(&ui.lock);
		int stop = ui.stop;
		struct live_model *m = ui.pending;
		ui.pending = NULL;
		pthread_mutex_unlock(&ui.lock);
		if (stop) {
			live_model_free(m);
			break;
		}
		int dirty = 0, full = 0;
		if (m) {
			take_model(&v, m);
			dirty = full = 1;
		}
		if (follow_size(&v))
			dirty = full = 1;
		int c;
		while (tty_ok && (c = getch()) != ERR) {
			if (c == KEY_RESIZE) {
				follow_size(&v);
				full = 1;
			} else {
				full |= key(&v, c);
			}
			dirty = 1;
		}
		double now = mono_s();
		if (now - painted >= UI_REPAINT_S)
			dirty = full = 1;
		if (dirty) {
			/* Back in the view's mode, should a stop and continue (^Z, fg) have left the shell's. */
			if (full)
				reset_prog_mode();
			draw(&v, full);
			if (full)
				painted = now;
		}
		struct pollfd pf[2] = { { tty_ok ? ui.tty : -1, POLLIN, 0 }, { ui.wake[0], POLLIN, 0 } };
		if (poll(pf, 2, UI_TICK_MS) > 0) {
			if (pf[0].revents & (POLLHUP | POLLERR | POLLNVAL))
				tty_ok = 0;  /* the terminal is gone: SIGHUP tells the tracer */
			if (pf[1].revents & POLLIN) {
				char buf[64];
				while (read(ui.wake[0], buf, sizeof(buf)) > 0)
					;
			}
		}
	}
	shown_free(&v.shown);
	live_model_free(v.m);
	return NULL;
}

static void wake_thread(void)
{
	if (ui.wake[1] >= 0)
		(void)!write(ui.wake[1], "", 1);
}

/* ---- the interface --------------------------------------------------------------------- */

/*
 * ncurses catches SIGINT, SIGTERM, SIGTSTP and SIGWINCH in newterm when they
 * are at their default, and its handlers draw and exit from whichever thread
 * the signal lands in. ptfil handles its own signals (tracer/signals.c), so for
 * the time newterm takes they are not at their default.
 */
static const int curses_sigs[] = { SIGINT, SIGTERM, SIGTSTP, SIGWINCH };
static volatile sig_atomic_t held[sizeof(curses_sigs) / sizeof(curses_sigs[0])];

static void hold(int sig)
{
	for (size_t i = 0; i < sizeof(curses_sigs) / sizeof(curses_sigs[0]); i++)
		if (curses_sigs[i] == sig)
			held[i] = 1;
}

static SCREEN *newterm_quietly(void)
{
	struct sigaction sa, old[sizeof(curses_sigs) / sizeof(curses_sigs[0])];
	int swapped[sizeof(curses_sigs) / sizeof(curses_sigs[0])] = { 0 };
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = hold;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(curses_sigs) / sizeof(curses_sigs[0]); i++) {
		held[i] = 0;
		if (sigaction(curses_sigs[i], NULL, &old[i]) == 0 && old[i].sa_handler == SIG_DFL &&
		    !(old[i].sa_flags & SA_SIGINFO))
			swapped[i] = sigaction(curses_sigs[i], &sa, NULL) == 0;
	}
	SCREEN *sp = newterm(NULL, ui.out, ui.in);
	for (size_t i = 0; i < sizeof(curses_sigs) / sizeof(curses_sigs[0]); i++) {
		if (!swapped[i])
			continue;
		sigaction(curses_sigs[i], &old[i], NULL);
		if (held[i] && curses_sigs[i] != SIGWINCH)
			raise(curses_sigs[i]);
	}
	return sp;
}

static void close_files(void)
{
	if (ui.in)
		fclose(ui.in);
	if (ui.out)
		fclose(ui.out);
	else if (ui.tty >= 0)
		close(ui.tty);
	ui.in = ui.out = NULL;
	ui.tty = -1;
	for (int i = 0; i < 2; i++)
		if (ui.wake[i] >= 0)
			close(ui.wake[i]);
	ui.wake[0] = ui.wake[1] = -1;
}

static void stop_at_exit(void)
{
	live_ui_stop();
}

/* Gives the terminal back as it was when the view could not be set up; returns -1. */
static int begin_failed(void)
{
	if (ui.screen) {
		endwin();
		delscreen(ui.screen);
		ui.screen = NULL;
	}
	if (ui.have_saved)
		tcsetattr(ui.tty, TCSADRAIN, &ui.saved);
	close_files();
	ui.state = UI_STOPPED;
	return -1;
}

/* Takes the terminal and starts the view's thread, in the process that traces. */
static int begin(void)
{
	int in_fd = fcntl(ui.tty, F_DUPFD_CLOEXEC, 3);
	if (in_fd < 0 || pipe2(ui.wake, O_CLOEXEC | O_NONBLOCK) ||
	    !(ui.out = fdopen(ui.tty, "w")) || !(ui.in = fdopen(in_fd, "r"))) {
		if (in_fd >= 0 && !ui.in)
			close(in_fd);
		warning_errno("--live: cannot set up the terminal");
		return begin_failed();
	}
	/*
	 * ncurses draws UTF-8 only under a process-wide LC_CTYPE that says so (a
	 * thread's uselocale is not enough). ptfil has no other use for LC_CTYPE,
	 * and LC_NUMERIC, which the snapshot's numbers depend on, stays "C".
	 */
	setlocale(LC_CTYPE, "");
	ui.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
	ui.screen = newterm_quietly();
	if (!ui.screen) {
		warning("--live: ncurses cannot use the terminal");
		return begin_failed();
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	intrflush(stdscr, FALSE);
	set_escdelay(50);
	curs_set(0);

	/* The tracer's signals (tracer/signals.c) go to its thread, never to the view's. */
	sigset_t all, was;
	sigfillset(&all);
	static const int sync_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS };
	for (size_t i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		sigdelset(&all, sync_sigs[i]);
	pthread_sigmask(SIG_SETMASK, &all, &was);
	ui.stop = 0;
	int rc = pthread_create(&ui.thread, NULL, ui_main, NULL);
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (rc) {
		warning("--live: cannot start the view's thread: %s", strerror(rc));
		return begin_failed();
	}
	ui.state = UI_RUNNING;
	return 0;
}

/*
 * Only checks that there is a terminal to draw on: the view starts with the
 * first model, in the process that publishes it (under attach, the tracer is
 * a child of the process that called this; under launch, the program is
 * forked before, and gets no copy of the view's thread).
 */
int live_ui_start(void)
{
	if (ui.state != UI_NONE)
		return ui.state == UI_STOPPED ? -1 : 0;
	ui.tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (ui.tty < 0)
		return error_errno("--live needs a terminal to draw on (/dev/tty)");
	const char *term = getenv("TERM");
	int err = 0;
	if (!term || !*term || !strcmp(term, "dumb")) {
		close_files();
		return error("--live needs a terminal that can move its cursor (TERM is %s)",
			     term && *term ? term : "not set");
	}
	if (setupterm(term, ui.tty, &err) != OK) {
		close_files();
		return error("--live: the terminal type %s is not known here (terminfo)", term);
	}
	char *cup = tigetstr("cup");
	del_curterm(cur_term);
	if (!cup || cup == (char *)-1) {
		close_files();
		return error("--live needs a terminal that can move its cursor (TERM is %s)", term);
	}
	ui.have_saved = tcgetattr(ui.tty, &ui.saved) == 0;
	atomic_store(&ui.quit, 0);
	static int registered;
	if (!registered && atexit(stop_at_exit) == 0)
		registered = 1;
	ui.state = UI_ARMED;
	return 0;
}

void live_ui_publish(struct live_model *m)
{
	if (ui.state == UI_ARMED && begin()) {
		live_model_free(m);
		return;
	}
	pthread_mutex_lock(&ui.lock);
	struct live_model *old = NULL;
	if (ui.state == UI_RUNNING && !ui.stop) {
		old = ui.pending;
		ui.pending = m;
	} else {
		old = m;
	}
	pthread_mutex_unlock(&ui.lock);
	/* A model the view never took (it was busy drawing): rare, and freed here. */
	live_model_free(old);
	wake_thread();
}

int live_ui_quit(void)
{
	return atomic_load(&ui.quit);
}

void live_ui_stop(void)
{
	if (ui.state == UI_ARMED) {
		close_files();
		ui.state = UI_STOPPED;
	}
	if (ui.state != UI_RUNNING)
		return;
	ui.state = UI_STOPPED;
	pthread_mutex_lock(&ui.lock);
	ui.stop = 1;
	pthread_mutex_unlock(&ui.lock);
	wake_thread();
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += UI_STOP_WAIT_S;
	/* A thread stuck writing to a stopped terminal cannot be waited for; ncurses is then left alone. */
	if (pthread_timedjoin_np(ui.thread, NULL, &until)) {
		if (ui.have_saved)
			tcsetattr(ui.tty, TCSANOW, &ui.saved);
		return;
	}
	endwin();
	delscreen(ui.screen);
	ui.screen = NULL;
	if (ui.have_saved)
		tcsetattr(ui.tty, TCSADRAIN, &ui.saved);
	pthread_mutex_lock(&ui.lock);
	live_model_free(ui.pending);
	ui.pending = NULL;
	pthread_mutex_unlock(&ui.lock);
	close_files();
}
