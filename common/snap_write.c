/*
 * Writes a struct snap as a gzip-compressed snapshot file: atomically over a
 * regular file, in place into a device or a FIFO.
 */
#include "common/snap.h"
#include "common/snap_syntax.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/*
 * Strings are interned by content: the same function name or path is written
 * once as an `s` line, just before its first use, and referred to by number.
 */
struct intern {
	const char **keys;   /* borrowed from the snap being written */
	uint32_t *ids;
	size_t cap;          /* power of two, 0 before the first insertion */
	size_t n;
};

struct writer {
	const char *path;
	gzFile gz;
	char *buf;           /* pending output, flushed to gz in large pieces */
	size_t len, cap;
	int failed;          /* errno-style cause of the first failure, 0 if none */
	const char *failed_what;
	struct intern strings;
	uint32_t n_strings;
};

#define FLUSH_AT (64 * 1024)

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;  /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void fail(struct writer *w, int err, const char *what)
{
	if (!w->failed) {
		w->failed = err ? err : EIO;
		w->failed_what = what;
	}
}

static void flush(struct writer *w)
{
	if (w->failed || w->len == 0)
		return;
	size_t off = 0;
	while (off < w->len) {
		unsigned chunk = w->len - off > (1u << 30) ? (1u << 30) : (unsigned)(w->len - off);
		errno = 0;
		int n = gzwrite(w->gz, w->buf + off, chunk);
		if (n <= 0) {
			int zerr;
			gzerror(w->gz, &zerr);
			fail(w, zerr == Z_ERRNO ? errno : EIO, "write");
			return;
		}
		off += (size_t)n;
	}
	w->len = 0;
}

static void reserve(struct writer *w, size_t more)
{
	if (w->failed || w->len + more <= w->cap)
		return;
	if (grow_array(&w->buf, &w->cap, w->len + more, 1, 2 * FLUSH_AT))
		fail(w, ENOMEM, "allocate");
}

static void put(struct writer *w, const char *s, size_t n)
{
	reserve(w, n);
	if (w->failed)
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static void putf(struct writer *w, const char *fmt, ...) PTFIL_PRINTF(2, 3);
static void putf(struct writer *w, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	/* Only numbers go through here; strings use put_escaped. */
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		fail(w, EINVAL, "format");
		return;
	}
	put(w, tmp, (size_t)n);
}

/* Ends a record: lines are flushed in large pieces, not one by one. */
static void endl(struct writer *w)
{
	put(w, "\n", 1);
	if (w->len >= FLUSH_AT)
		flush(w);
}

/* The shortest %g text that reads back as the same double; 0 for non-finite. */
static void put_double(struct writer *w, double v)
{
	char tmp[64];
	if (!isfinite(v))
		v = 0;
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	put(w, tmp, strlen(tmp));
}

/* The shortest text that reads back as v (0 for a non-finite v), into tmp of 64 bytes. */
static const char *double_text(char *tmp, double v)
{
	if (!isfinite(v))
		v = 0;
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, 64, "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	return tmp;
}

static void put_escaped(struct writer *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\\') {
			put(w, "\\\\", 2);
		} else if (*p == '\n') {
			put(w, "\\n", 2);
		} else if (*p < 0x20 || *p == 0x7f) {
			char e[4] = { '\\', 'x', hex[*p >> 4], hex[*p & 15] };
			put(w, e, 4);
		} else {
			put(w, (const char *)p, 1);
		}
	}
}

static int intern_grow(struct intern *in)
{
	size_t cap = in->cap ? in->cap * 2 : 1024;
	const char **keys = calloc(cap, sizeof(*keys));
	uint32_t *ids = calloc(cap, sizeof(*ids));
	if (!keys || !ids) {
		free(keys);
		free(ids);
		return -1;
	}
	for (size_t i = 0; i < in->cap; i++) {
		if (!in->keys[i])
			continue;
		size_t j = hash_str(in->keys[i]) & (cap - 1);
		while (keys[j])
			j = (j + 1) & (cap - 1);
		keys[j] = in->keys[i];
		ids[j] = in->ids[i];
	}
	free(in->keys);
	free(in->ids);
	in->keys = keys;
	in->ids = ids;
	in->cap = cap;
	return 0;
}

/*
 * Writes the number of string s, first defining it with an `s` line if this
 * is its first use. The definition goes out before the record that uses it,
 * so the pending record text is held aside while it is written.
 */
static void put_str_ref(struct writer *w, char *line, size_t *line_len, const char *s)
{
	char num[16];
	if (!s)
		s = "";
	if (w->strings.n * 2 >= w->strings.cap && intern_grow(&w->strings) < 0) {
		fail(w, ENOMEM, "allocate");
		return;
	}
	size_t j = hash_str(s) & (w->strings.cap - 1);
	while (w->strings.keys[j] && strcmp(w->strings.keys[j], s) != 0)
		j = (j + 1) & (w->strings.cap - 1);
	if (!w->strings.keys[j]) {
		w->strings.keys[j] = s;
		w->strings.ids[j] = w->n_strings++;
		w->strings.n++;
		put(w, "s ", 2);
		put_escaped(w, s);
		endl(w);
	}
	int n = snprintf(num, sizeof(num), "%u", (unsigned)w->strings.ids[j]);
	memcpy(line + *line_len, num, (size_t)n);
	*line_len += (size_t)n;
}

/*
 * A record built in a small line buffer: string references may emit `s`
 * lines of their own, which must precede it in the file.
 */
struct rec {
	char text[512];
	size_t len;
};

static void rec_start(struct rec *r, char tag)
{
	r->text[0] = tag;
	r->len = 1;
}

static void rec_str(struct writer *w, struct rec *r, const char *s)
{
	r->text[r->len++] = ' ';
	put_str_ref(w, r->text, &r->len, s);
}

static void rec_opt_str(struct writer *w, struct rec *r, const char *s)
{
	if (s) {
		rec_str(w, r, s);
	} else {
		r->text[r->len++] = ' ';
		r->text[r->len++] = '-';
	}
}

static void rec_fmt(struct rec *r, const char *fmt, ...) PTFIL_PRINTF(2, 3);
static void rec_fmt(struct rec *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(r->text + r->len, sizeof(r->text) - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n;
	if (r->len >= sizeof(r->text))  /* cannot happen: a record holds at most 6 numbers */
		r->len = sizeof(r->text) - 1;
}

static void rec_end(struct writer *w, struct rec *r)
{
	put(w, r->text, r->len);
	endl(w);
}

static void put_stack(struct writer *w, char tag, const struct snap_stack *st)
{
	putf(w, "%c %u %c %llu %llu %llu", tag, (unsigned)st->node, st->kind,
	     (unsigned long long)st->charged, (unsigned long long)st->reserved,
	     (unsigned long long)st->count);
	endl(w);
}

/* A kind the reader takes in a stack of the snapshot's own view (kind t in a touch snapshot only). */
static int valid_kind(const struct snap *s, char k)
{
	return k == SNAP_KIND_MMAP || k == SNAP_KIND_BRK || k == SNAP_KIND_HEAP || k == SNAP_KIND_PSEUDO ||
	       (k == SNAP_KIND_TOUCH && s->view == SNAP_VIEW_TOUCH);
}

/* Whether a K record or an X record would repeat another (the reader refuses both), or NULL. */
static const char *repeated(const struct snap *s)
{
	struct u64map seen;
	const char *why = NULL;
	u64map_init(&seen);
	for (size_t i = 0; i < s->n_other && !why; i++) {
		uint64_t key = (uint64_t)s->other[i].node << 8 | (unsigned char)s->other[i].kind;
		if (u64map_get(&seen, key) != U64MAP_NONE)
			why = "the other view has a stack twice (same node and kind)";
		else if (u64map_put(&seen, key, 0) < 0)
			why = "out of memory";
	}
	u64map_fin(&seen);
	u64map_init(&seen);
	for (size_t i = 0; i < s->n_links && !why; i++) {
		uint64_t key = (uint64_t)s->links[i].touch_node << 32 | s->links[i].alloc_node;
		if (u64map_get(&seen, key) != U64MAP_NONE)
			why = "two links between the same two stacks";
		else if (u64map_put(&seen, key, 0) < 0)
			why = "out of memory";
	}
	u64map_fin(&seen);
	return why;
}

/*
 * The writer refuses what the reader would refuse, so that ptfil never
 * leaves a snapshot that ptfil-view cannot open. Returns a reason or NULL.
 */
static const char *invalid(const struct snap *s)
{
	size_t n_nodes = s->n_nodes ? s->n_nodes : 1;
	if (n_nodes > UINT32_MAX || s->n_frames > UINT32_MAX || s->n_modules > INT32_MAX)
		return "too many nodes, frames or modules";
	if ((s->argc && !s->argv) || (s->n_modules && !s->modules) || (s->n_frames && !s->frames) ||
	    (s->n_nodes && !s->nodes) || (s->n_stacks && !s->stacks) || (s->n_live && !s->live) ||
	    (s->n_samples && !s->samples) || (s->n_counters && !s->counters) || (s->n_other && !s->other) ||
	    (s->n_links && !s->links))
		return "array missing";
	for (size_t i = 0; i < s->n_frames; i++) {
		if (s->frames[i].kind != SNAP_FRAME_NATIVE && s->frames[i].kind != SNAP_FRAME_PYTHON)
			return "frame of unknown kind";
		/* A Python frame's module and offset are not written: they cannot be wrong. */
		if (s->frames[i].kind == SNAP_FRAME_NATIVE &&
		    (s->frames[i].module < -1 || (s->frames[i].module >= 0 &&
						  (size_t)s->frames[i].module >= s->n_modules)))
			return "frame refers to a missing module";
	}
	for (size_t i = 1; i < s->n_nodes; i++)
		if (s->nodes[i].parent >= i || s->nodes[i].frame >= s->n_frames)
			return "stack trie node out of order or refers to a missing frame";
	if (s->view != SNAP_VIEW_ALLOC && s->view != SNAP_VIEW_TOUCH)
		return "unknown view";
	for (size_t i = 0; i < s->n_stacks; i++)
		if (s->stacks[i].node >= n_nodes || !valid_kind(s, s->stacks[i].kind))
			return "peak stack refers to a missing node or has an unknown kind (t only in the touch view)";
	for (size_t i = 0; i < s->n_live; i++)
		if (s->live[i].node >= n_nodes || !valid_kind(s, s->live[i].kind))
			return "live stack refers to a missing node or has an unknown kind (t only in the touch view)";
	if ((s->n_procs && !s->procs) || (s->n_tree_stacks && !s->tree_stacks) || s->n_procs > SNAP_MAX_PROCS)
		return "process tree missing or too large";
	for (size_t i = 0; i < s->n_tree_stacks; i++)
		if (s->tree_stacks[i].node >= n_nodes || !valid_kind(s, s->tree_stacks[i].kind) ||
		    s->tree_stacks[i].proc >= s->n_procs)
			return "combined-peak stack refers to a missing node or process, or has an unknown kind";
	if ((s->n_other || s->n_links) && s->view != SNAP_VIEW_TOUCH)
		return "the other view's stacks or links in an alloc-view snapshot (only the touch view carries them)";
	for (size_t i = 0; i < s->n_other; i++)
		if (s->other[i].node >= n_nodes || !valid_kind(s, s->other[i].kind) || s->other[i].kind == SNAP_KIND_TOUCH)
			return "other view's stack refers to a missing node or has an unknown kind (never t)";
	for (size_t i = 0; i < s->n_links; i++)
		if (s->links[i].touch_node >= n_nodes || s->links[i].alloc_node >= n_nodes)
			return "link refers to a missing node";
	return repeated(s);
}

static void put_snap(struct writer *w, const struct snap *s)
{
	struct rec r;
	size_t i;

	putf(w, "%s %d", SNAP_MAGIC, SNAP_FORMAT_VERSION);
	endl(w);
	static const char comment[] = "# ptfil snapshot, see docs/snapshot-format.md";
	put(w, comment, sizeof(comment) - 1);
	endl(w);

	rec_start(&r, SNAP_TAG_PTFIL);
	rec_str(w, &r, s->ptfil_version);
	rec_end(w, &r);
	rec_start(&r, SNAP_TAG_MODE);
	rec_str(w, &r, s->mode);
	rec_end(w, &r);
	for (i = 0; i < s->argc; i++) {
		rec_start(&r, SNAP_TAG_ARG);
		rec_str(w, &r, s->argv[i]);
		rec_end(w, &r);
	}
	putf(w, "%c %d", SNAP_TAG_PID, s->pid);
	endl(w);
	putf(w, "%c ", SNAP_TAG_START);
	put_double(w, s->start_time);
	endl(w);
	putf(w, "%c ", SNAP_TAG_DURATION);
	put_double(w, s->duration);
	endl(w);
	putf(w, "%c %d", SNAP_TAG_EXIT, s->exit_status);
	endl(w);
	putf(w, "%c %llu", SNAP_TAG_VMHWM, (unsigned long long)s->vmhwm);
	endl(w);
	putf(w, "%c %llu", SNAP_TAG_PAGESIZE, (unsigned long long)s->page_size);
	endl(w);
	putf(w, "%c ", SNAP_TAG_PEAK);
	put_double(w, s->peak.time);
	putf(w, " %llu %llu %llu", (unsigned long long)s->peak.charged,
	     (unsigned long long)s->peak.reserved, (unsigned long long)s->peak.rss);
	endl(w);
	/* Before every stack record: the reader checks their kinds against it. */
	rec_start(&r, SNAP_TAG_VIEW);
	rec_str(w, &r, s->view == SNAP_VIEW_TOUCH ? SNAP_VIEW_NAME_TOUCH : SNAP_VIEW_NAME_ALLOC);
	rec_end(w, &r);

	for (i = 0; i < s->n_modules && !w->failed; i++) {
		rec_start(&r, SNAP_TAG_MODULE);
		rec_str(w, &r, s->modules[i].path);
		rec_opt_str(w, &r, s->modules[i].build_id);
		rec_fmt(&r, " %llx", (unsigned long long)s->modules[i].base);
		rec_end(w, &r);
		if (s->modules[i].symbols) {
			rec_start(&r, SNAP_TAG_DEBUGINFO);
			rec_fmt(&r, " %zu %c %d", i, s->modules[i].symbols, s->modules[i].lines ? 1 : 0);
			rec_opt_str(w, &r, s->modules[i].package);
			rec_end(w, &r);
		}
	}
	/* Native and Python frames share one numbering, in the order of frames[]. */
	for (i = 0; i < s->n_frames && !w->failed; i++) {
		const struct snap_frame *fr = &s->frames[i];
		if (fr->kind == SNAP_FRAME_PYTHON) {
			rec_start(&r, SNAP_TAG_PYFRAME);
			rec_fmt(&r, " %u", (unsigned)fr->line);
			rec_opt_str(w, &r, fr->function);
			rec_str(w, &r, fr->file);
		} else if (fr->file || fr->inlined) {
			rec_start(&r, SNAP_TAG_SRCFRAME);
			rec_fmt(&r, " %d %llx", (int)fr->module, (unsigned long long)fr->offset);
			rec_opt_str(w, &r, fr->function);
			rec_opt_str(w, &r, fr->file);
			rec_fmt(&r, " %u %d", (unsigned)fr->line, fr->inlined ? 1 : 0);
		} else {
			rec_start(&r, SNAP_TAG_FRAME);
			rec_fmt(&r, " %d %llx", (int)fr->module, (unsigned long long)fr->offset);
			rec_opt_str(w, &r, fr->function);
		}
		rec_end(w, &r);
	}
	for (i = 1; i < s->n_nodes && !w->failed; i++) {
		putf(w, "%c %u %u", SNAP_TAG_NODE, (unsigned)s->nodes[i].parent, (unsigned)s->nodes[i].frame);
		endl(w);
	}
	for (i = 0; i < s->n_stacks && !w->failed; i++)
		put_stack(w, SNAP_TAG_STACK, &s->stacks[i]);
	for (i = 0; i < s->n_live && !w->failed; i++)
		put_stack(w, SNAP_TAG_LIVE, &s->live[i]);
	for (i = 0; i < s->n_other && !w->failed; i++)
		put_stack(w, SNAP_TAG_OTHERSTACK, &s->other[i]);
	for (i = 0; i < s->n_links && !w->failed; i++) {
		putf(w, "%c %u %u %llu", SNAP_TAG_LINK, (unsigned)s->links[i].touch_node, (unsigned)s->links[i].alloc_node,
		     (unsigned long long)s->links[i].bytes);
		endl(w);
	}
	for (i = 0; i < s->n_procs && !w->failed; i++) {
		const struct snap_proc *q = &s->procs[i];
		char t1[64], t2[64], t3[64];
		rec_start(&r, SNAP_TAG_PROC);
		rec_fmt(&r, " %d %d %d %llu %s %llu %llu %s %s", q->pid, q->ppid, q->profiled ? 1 : 0,
			(unsigned long long)q->peak, double_text(t1, q->peak_time), (unsigned long long)q->at_combined,
			(unsigned long long)q->vmhwm, double_text(t2, q->start), q->end < 0 ? "-1" : double_text(t3, q->end));
		rec_opt_str(w, &r, q->command);
		rec_opt_str(w, &r, q->file);
		rec_end(w, &r);
	}
	if (s->has_tree && !w->failed) {
		char t1[64];
		putf(w, "%c %s %llu", SNAP_TAG_TREE, double_text(t1, s->tree_time), (unsigned long long)s->tree_charged);
		endl(w);
	}
	for (i = 0; i < s->n_tree_stacks && !w->failed; i++) {
		const struct snap_stack *st = &s->tree_stacks[i];
		putf(w, "%c %u %c %llu %llu %llu %u", SNAP_TAG_TREESTACK, (unsigned)st->node, st->kind,
		     (unsigned long long)st->charged, (unsigned long long)st->reserved, (unsigned long long)st->count,
		     (unsigned)st->proc);
		endl(w);
	}
	for (i = 0; i < s->n_samples && !w->failed; i++) {
		putf(w, "%c ", SNAP_TAG_SAMPLE);
		put_double(w, s->samples[i].time);
		putf(w, " %llu %llu", (unsigned long long)s->samples[i].charged,
		     (unsigned long long)s->samples[i].rss);
		endl(w);
	}
	for (i = 0; i < s->n_counters && !w->failed; i++) {
		rec_start(&r, SNAP_TAG_COUNTER);
		rec_str(w, &r, s->counters[i].name);
		rec_fmt(&r, " %llu", (unsigned long long)s->counters[i].count);
		rec_end(w, &r);
	}
	putf(w, "%c", SNAP_TAG_END);
	endl(w);
	flush(w);
}

/* ---- where the snapshot goes --------------------------------------------- */

/*
 * A regular file, or a name not taken yet, is replaced atomically (a
 * temporary file beside it, then rename), so a reader never sees half a
 * snapshot and a failed write keeps the previous one. Anything else is
 * written in place: a rename would put a regular file where a device, a FIFO
 * or a terminal was (as root, over /dev/null). A symlink stays a link: the
 * file it names is the one replaced.
 */
enum out_kind { OUT_REPLACE, OUT_IN_PLACE };

/* The output opened in place by snap_output_check, kept for snap_write. */
static struct {
	char *path;
	int fd;
} kept = { NULL, -1 };

/*
 * The name a chain of symlinks at path ends at, whether that file exists or
 * not. Caller frees; NULL with errno on a loop or out of memory.
 */
static char *follow_links(const char *path)
{
	char *cur = strdup(path);
	for (int hops = 0; cur; hops++) {
		struct stat st;
		if (lstat(cur, &st) < 0 || !S_ISLNK(st.st_mode))
			return cur;
		char target[PATH_MAX];
		ssize_t n = hops < 40 ? readlink(cur, target, sizeof(target) - 1) : -1;
		if (n < 0) {
			int err = hops < 40 ? errno : ELOOP;
			free(cur);
			errno = err;
			return NULL;
		}
		target[n] = '\0';
		const char *slash = strrchr(cur, '/');
		size_t dirlen = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
		char *next = malloc(dirlen + (size_t)n + 1);
		if (next) {
			memcpy(next, cur, dirlen);
			memcpy(next + dirlen, target, (size_t)n + 1);
		}
		free(cur);
		cur = next;
	}
	errno = ENOMEM;
	return NULL;
}

/*
 * How path is written. For OUT_REPLACE, *file is the name to replace (path
 * with its symlinks followed; caller frees). -1 with errno when path cannot
 * be a snapshot (EISDIR for a directory, ENXIO for a socket).
 */
static int out_kind(const char *path, char **file)
{
	struct stat st, fst;
	*file = NULL;
	/* Missing: a new file, or a symlink to one. */
	int exists = stat(path, &st) == 0;
	if (!exists && errno != ENOENT)
		return -1;
	if (exists && S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		return -1;
	}
	if (exists && S_ISSOCK(st.st_mode)) {
		errno = ENXIO;
		return -1;
	}
	if (exists && !S_ISREG(st.st_mode))
		return OUT_IN_PLACE;
	if (!(*file = follow_links(path)))
		return -1;
	/*
	 * /dev/stdout on a deleted file, or a /proc link into another mount
	 * namespace: the link's text names no file, or another one. Only the
	 * link reaches the file the user means.
	 */
	if (exists && (stat(*file, &fst) < 0 || st.st_dev != fst.st_dev || st.st_ino != fst.st_ino)) {
		free(*file);
		*file = NULL;
		return OUT_IN_PLACE;
	}
	return OUT_REPLACE;
}

int snap_output_in_place(const char *path)
{
	char *file;
	int kind = out_kind(path, &file);
	free(file);
	return kind == OUT_IN_PLACE;
}

/*
 * Opens a device or a FIFO for writing, without creating anything. A FIFO
 * waits for its reader, as a shell's redirection does; saying so first
 * tells the user why nothing happens. -1 with errno.
 */
static int open_in_place(const char *path)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENXIO) {
		struct stat st;
		if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode))
			fprintf(stderr, "%s: waiting for a reader of FIFO %s\n", error_progname(), path);
		fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
		return fd;
	}
	/* Opened without waiting: writes may wait, as they would on a terminal or a pipe. */
	if (fd >= 0) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
			int err = errno;
			close(fd);
			errno = err;
			return -1;
		}
	}
	return fd;
}

/* Whether a file can be created beside `file`: the temporary file of the atomic write. */
static int probe_create(const char *file)
{
	size_t tlen = strlen(file) + 32;
	char *tmp = malloc(tlen);
	if (!tmp) {
		errno = ENOMEM;
		return -1;
	}
	snprintf(tmp, tlen, "%s.tmp.%ld", file, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
	int err = errno;
	if (fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	free(tmp);
	errno = err;
	return fd >= 0 ? 0 : -1;
}

int snap_output_check(const char *path)
{
	if (!path) {
		/* The default name is made later, from the program's pid: any name in "." tells. */
		if (probe_create("ptfil-check") == 0)
			return 0;
		char cwd[PATH_MAX];
		int err = errno;
		if (!getcwd(cwd, sizeof(cwd)))
			strcpy(cwd, ".");
		errno = err;
		return error_errno("cannot write the snapshot in the current directory %s (give another with -o)", cwd);
	}
	if (!*path)
		return error("cannot write the snapshot to '': empty file name");
	char *file;
	int kind = out_kind(path, &file);
	if (kind < 0) {
		if (errno == EISDIR)
			return error("cannot write the snapshot to %s: it is a directory", path);
		if (errno == ENXIO)
			return error("cannot write the snapshot to %s: it is a socket", path);
		return error_errno("cannot write the snapshot to %s", path);
	}
	if (kind == OUT_REPLACE) {
		int rc = probe_create(file);
		if (rc < 0 && strcmp(file, path) != 0)
			error_errno("cannot write the snapshot to %s (a link to %s)", path, file);
		else if (rc < 0)
			error_errno("cannot write the snapshot to %s", path);
		free(file);
		return rc;
	}
	/* Opened now, before the run: a missing reader is found before, not after, and nothing is left waiting at the end. */
	int fd = open_in_place(path);
	if (fd < 0)
		return error_errno("cannot write the snapshot to %s", path);
	char *copy = strdup(path);
	if (!copy) {
		close(fd);
		return error("cannot write the snapshot to %s: out of memory", path);
	}
	if (kept.fd >= 0)
		close(kept.fd);
	free(kept.path);
	kept.path = copy;
	kept.fd = fd;
	return 0;
}

/*
 * Copies all of memfd to fd. A write cut by the tracer's timer (SIGALRM) or
 * dump request (SIGUSR1) is not a reason to stop, so those wait until the
 * copy is done; any other signal (Ctrl-C) ends a copy that a reader does not
 * take. SIGPIPE is held too: a reader that went away is an error, EPIPE, not
 * the death of ptfil. 0, or -1 with errno.
 */
static int copy_out(int memfd, int fd)
{
	sigset_t hold, old, pending;
	sigemptyset(&hold);
	sigaddset(&hold, SIGALRM);
	sigaddset(&hold, SIGUSR1);
	sigaddset(&hold, SIGPIPE);
	sigpending(&pending);
	int pipe_pending = sigismember(&pending, SIGPIPE);
	sigprocmask(SIG_BLOCK, &hold, &old);

	char buf[64 * 1024];
	int err = 0;
	off_t off = 0;
	ssize_t n;
	while (!err && (n = pread(memfd, buf, sizeof(buf), off)) != 0) {
		if (n < 0) {
			err = errno;
			break;
		}
		off += n;
		for (ssize_t done = 0; done < n && !err;) {
			ssize_t put = write(fd, buf + done, (size_t)(n - done));
			if (put > 0)
				done += put;
			else
				err = put < 0 ? errno : EIO;
		}
	}
	/* Ours, not the program's: a SIGPIPE raised by this copy is taken back. */
	sigpending(&pending);
	if (!pipe_pending && sigismember(&pending, SIGPIPE)) {
		sigset_t only;
		sigemptyset(&only);
		sigaddset(&only, SIGPIPE);
		struct timespec zero = { 0, 0 };
		sigtimedwait(&only, NULL, &zero);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return err ? -1 : 0;
}

/* Makes the rename itself durable; a failure here loses nothing already written. */
static void sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dir);
}

/* Compresses s through fd, which the caller keeps: the whole write, or the cause of its failure in w. */
static void write_gz(struct writer *w, const struct snap *s, int fd)
{
	int gzfd = dup(fd);
	if (gzfd >= 0)
		w->gz = gzdopen(gzfd, "wb6");
	if (!w->gz) {
		int err = errno ? errno : ENOMEM;
		if (gzfd >= 0)
			close(gzfd);
		fail(w, err, "open");
		return;
	}
	gzbuffer(w->gz, 128 * 1024);
	/* Doubles must read back in any locale: write them in "C". */
	locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	locale_t old = c ? uselocale(c) : (locale_t)0;
	put_snap(w, s);
	if (c) {
		uselocale(old);
		freelocale(c);
	}
	errno = 0;
	int rc = gzclose(w->gz);
	if (rc != Z_OK)
		fail(w, rc == Z_ERRNO && errno ? errno : EIO, "write");
}

/*
 * In place: the whole snapshot is made in memory first, so that a device or
 * a reader gets all of it or nothing of ptfil's making.
 */
static void write_in_place(struct writer *w, const struct snap *s, const char *path)
{
	int memfd = memfd_create("ptfil-snapshot", MFD_CLOEXEC);
	if (memfd < 0) {
		fail(w, errno, "make room for");
		return;
	}
	write_gz(w, s, memfd);
	int fd = -1;
	if (!w->failed && kept.path && !strcmp(kept.path, path)) {
		fd = kept.fd;
		free(kept.path);
		kept.path = NULL;
		kept.fd = -1;
	} else if (!w->failed && (fd = open_in_place(path)) < 0) {
		fail(w, errno, "write");
	}
	if (fd >= 0) {
		if (copy_out(memfd, fd) < 0)
			fail(w, errno, "write");
		if (close(fd) < 0)
			fail(w, errno, "close");
	}
	close(memfd);
}

static void write_replace(struct writer *w, const struct snap *s, const char *file)
{
	size_t tlen = strlen(file) + 32;
	char *tmp = malloc(tlen);
	if (!tmp) {
		fail(w, ENOMEM, "allocate");
		return;
	}
	snprintf(tmp, tlen, "%s.tmp.%ld", file, (long)getpid());

	/* A stale file of an earlier ptfil with our pid is ours to replace; a symlink is not. */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0) {
		fail(w, errno, "create a temporary file for");
		free(tmp);
		return;
	}
	write_gz(w, s, fd);
	if (!w->failed && fsync(fd) < 0)
		fail(w, errno, "sync");
	if (close(fd) < 0)
		fail(w, errno, "close");
	if (!w->failed && rename(tmp, file) < 0)
		fail(w, errno, "rename temporary file onto");
	if (w->failed)
		unlink(tmp);
	else
		sync_dir(file);
	free(tmp);
}

int snap_write(const struct snap *s, const char *path)
{
	struct writer w = { .path = path };
	const char *why = invalid(s);
	if (why)
		return error("cannot write %s: invalid snapshot: %s", path, why);

	char *file = NULL;
	int kind = out_kind(path, &file);
	if (kind < 0)
		fail(&w, errno, "write");
	else if (kind == OUT_IN_PLACE)
		write_in_place(&w, s, path);
	else
		write_replace(&w, s, file);
	free(file);
	free(w.buf);
	free(w.strings.keys);
	free(w.strings.ids);
	if (w.failed) {
		errno = w.failed;
		return error_errno("cannot %s %s", w.failed_what, path);
	}
	return 0;
}
