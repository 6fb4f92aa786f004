/* Reads a snapshot file into a struct snap, treating every byte as hostile. */
#include "common/snap.h"
#include "common/snap_syntax.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/hex.h"
#include "common/u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK (128 * 1024)

/*
 * Work per byte of the file, not only per record: a gzip stream expands up
 * to a thousand times, so 1 MB of it can be 1 GiB of blank lines that cost
 * nothing to hold but seconds of CPU to read. Lines that carry no record (blank
 * lines, comments: ptfil writes one comment line) have a small budget of
 * their own, and a compressed file may expand to at most BASE plus RATIO times
 * its size. ptfil's snapshots expand 2 to 4 times (gcc, NumPy, a Python import
 * storm: 3.5 to 3.7), a synthetic timeline of a million constant samples 11.
 */
#define SNAP_MAX_BLANK ((uint64_t)1 << 20)        /* bytes of blank and comment lines */
#define SNAP_EXPAND_BASE ((uint64_t)16 << 20)     /* uncompressed bytes any file may reach */
#define SNAP_EXPAND_RATIO 64u                     /* and beyond, per byte of the file */

struct reader {
	const char *name;
	struct snap *s;
	gzFile gz;              /* NULL when reading from memory */
	const char *chunk;      /* bytes not yet consumed: the memory buffer, or gzbuf */
	size_t chunk_len;
	char *gzbuf;
	int at_eof;
	char *line;             /* the current line, NUL-terminated, newline removed */
	size_t line_len, line_cap;
	size_t lineno;
	uint64_t input;         /* uncompressed bytes consumed */
	uint64_t inflated;      /* uncompressed bytes read from gz */
	uint64_t max_inflated;  /* for a regular file: SNAP_EXPAND_BASE + RATIO * its size; 0 for none */
	uint64_t blank;         /* bytes of lines with no record */
	uint64_t memory;        /* bytes of records allocated */
	int failed;

	char **strs;            /* the `s` table, owned here; copies go into s */
	size_t n_strs, cap_strs;
	size_t cap_argv, cap_modules, cap_frames, cap_nodes, cap_stacks, cap_live,
		cap_samples, cap_counters;
	uint32_t *depth;        /* frames of each stack node (the root has none) */
	size_t cap_depth;
	uint64_t stack_frames;  /* sum of the depths of the `k` and `l` records so far */
	unsigned seen;          /* singleton records met so far, bit per enum single */
	int ended;
	struct u64map stack_seen, live_seen;  /* (node, kind) of each k and l record, for duplicates */
	struct u64map tree_seen;              /* (node, kind, process) of each j record */
	size_t cap_procs, cap_tree_stacks;
	struct u64map other_seen;             /* (node, kind) of each K record */
	struct u64map link_seen;              /* (touch node, alloc node) of each X record */
	size_t cap_other, cap_links;
	int view_seen;                        /* a `v` record was read */
	int stacks_begun;                     /* a k, l, j, K or X record was read: too late for `v` */
};

/* Singleton records: each must appear exactly once before `e`. */
enum single {
	SEEN_PTFIL, SEEN_MODE, SEEN_PID, SEEN_START, SEEN_DURATION, SEEN_EXIT,
	SEEN_VMHWM, SEEN_PAGESIZE, SEEN_PEAK, SEEN_COUNT
};

static const char single_tags[SEEN_COUNT] = {
	SNAP_TAG_PTFIL, SNAP_TAG_MODE, SNAP_TAG_PID, SNAP_TAG_START, SNAP_TAG_DURATION,
	SNAP_TAG_EXIT, SNAP_TAG_VMHWM, SNAP_TAG_PAGESIZE, SNAP_TAG_PEAK,
};

/*
 * Reports the first problem only: one error line per failed read. Messages
 * quote bytes of the file, so every byte that is not printable ASCII is shown
 * as \xHH: a hostile file cannot put a line break or a terminal escape on
 * the user's stderr.
 */
static int bad(struct reader *r, const char *fmt, ...) PTFIL_PRINTF(2, 3);
static int bad(struct reader *r, const char *fmt, ...)
{
	static const char hexdig[] = "0123456789abcdef";
	char raw[512], msg[4 * sizeof(raw)];
	va_list ap;
	size_t n = 0;

	if (r->failed)
		return -1;
	r->failed = 1;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
		if (*p >= 0x20 && *p < 0x7f) {
			msg[n++] = (char)*p;
			continue;
		}
		msg[n++] = '\\';
		msg[n++] = 'x';
		msg[n++] = hexdig[*p >> 4];
		msg[n++] = hexdig[*p & 15];
	}
	msg[n] = '\0';
	if (r->lineno)
		return error("%s: line %zu: %s", r->name, r->lineno, msg);
	return error("%s: %s", r->name, msg);
}

/* Counts allocations against SNAP_MAX_MEMORY before they are made. */
static int charge(struct reader *r, uint64_t bytes)
{
	if (bytes > SNAP_MAX_MEMORY || r->memory > SNAP_MAX_MEMORY - bytes)
		return bad(r, "snapshot too large (more than %llu MiB of records)",
			   (unsigned long long)(SNAP_MAX_MEMORY >> 20));
	r->memory += bytes;
	return 0;
}

/*
 * Makes room for one more element in *arr; *cap tracks capacity. Not
 * grow_array: the growth, by half, is charged to the snapshot's budget before
 * it is allocated.
 */
static int grow(struct reader *r, void *arrp, size_t *cap, size_t n, size_t elsize)
{
	void **arr = arrp;
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap + *cap / 2 : 16;
	if (charge(r, (uint64_t)(ncap - *cap) * elsize) < 0)
		return -1;
	void *p = realloc(*arr, ncap * elsize);
	if (!p)
		return bad(r, "out of memory");
	*arr = p;
	*cap = ncap;
	return 0;
}

static char *dup_str(struct reader *r, const char *src)
{
	size_t len = strlen(src) + 1;
	if (charge(r, len) < 0)
		return NULL;
	char *d = malloc(len);
	if (!d) {
		bad(r, "out of memory");
		return NULL;
	}
	memcpy(d, src, len);
	return d;
}

/* ---- lines ------------------------------------------------------------- */

static int refill(struct reader *r)
{
	if (!r->gz || r->at_eof)
		return 0;
	int n = gzread(r->gz, r->gzbuf, CHUNK);
	if (n > 0) {
		r->inflated += (uint64_t)n;
		if (r->max_inflated && r->inflated > r->max_inflated)
			return bad(r, "decompresses to more than %llu MiB, over %u times its size as no "
				   "snapshot does: not a ptfil snapshot, or corrupted",
				   (unsigned long long)(r->max_inflated >> 20), SNAP_EXPAND_RATIO);
		r->chunk = r->gzbuf;
		r->chunk_len = (size_t)n;
		return 1;
	}
	r->at_eof = 1;
	int zerr = Z_OK;
	const char *msg = gzerror(r->gz, &zerr);
	if (zerr == Z_ERRNO)
		return bad(r, "read error: %s", strerror(errno));
	if (zerr == Z_BUF_ERROR)
		return bad(r, "truncated (the gzip stream ends early)");
	if (zerr != Z_OK) {
		/* zlib puts the name it was given, "<fd:N>", first: the file is named already. */
		const char *sep = msg && strncmp(msg, "<fd:", 4) == 0 ? strstr(msg, ": ") : NULL;
		return bad(r, "corrupt gzip data (%s)", sep ? sep + 2 : msg ? msg : "unknown error");
	}
	return 0;
}

static int append(struct reader *r, const char *p, size_t n, size_t max)
{
	if (r->line_len + n > max)
		return -1;
	if (grow_array(&r->line, &r->line_cap, r->line_len + n + 1, 1, 256))
		return bad(r, "out of memory");
	memcpy(r->line + r->line_len, p, n);
	r->line_len += n;
	r->line[r->line_len] = '\0';
	return 0;
}

/*
 * Reads the next line into r->line. Returns 1, 0 at a clean end of input,
 * -1 after reporting. A last line without its newline is a truncation.
 */
static int next_line(struct reader *r, size_t max)
{
	r->line_len = 0;
	if (r->line)
		r->line[0] = '\0';
	r->lineno++;
	for (;;) {
		if (r->chunk_len == 0) {
			int rc = refill(r);
			if (rc < 0)
				return -1;
			if (rc == 0) {
				if (r->line_len)
					return bad(r, "truncated (the last line has no newline)");
				r->lineno--;
				return 0;
			}
		}
		const char *nl = memchr(r->chunk, '\n', r->chunk_len);
		size_t take = nl ? (size_t)(nl - r->chunk) : r->chunk_len;
		if (r->input + take + 1 > SNAP_MAX_INPUT)
			return bad(r, "snapshot too large (more than %llu GiB uncompressed)",
				   (unsigned long long)(SNAP_MAX_INPUT >> 30));
		if (append(r, r->chunk, take, max) < 0) {
			if (r->failed)
				return -1;
			if (r->lineno == 1)
				return bad(r, "not a ptfil snapshot (no '%s' first line)", SNAP_MAGIC);
			return bad(r, "line longer than %u bytes", SNAP_MAX_LINE);
		}
		r->input += take;
		r->chunk += take;
		r->chunk_len -= take;
		if (nl) {
			r->chunk++;
			r->chunk_len--;
			r->input++;
			if (memchr(r->line, '\0', r->line_len))
				return r->lineno == 1
					? bad(r, "not a ptfil snapshot (no '%s' first line)", SNAP_MAGIC)
					: bad(r, "NUL byte in line");
			return 1;
		}
	}
}

/* ---- fields ------------------------------------------------------------- */

#define MAX_FIELDS 12

/*
 * Splits the line after its tag into fields separated by single spaces, in
 * place, and checks there are exactly `want` of them.
 */
static int split(struct reader *r, char **f, size_t want)
{
	char *p = r->line + 1;
	size_t n = 0;

	if (*p == '\0')
		return want ? bad(r, "expected %zu fields, found none", want) : 0;
	if (*p != ' ')
		return bad(r, "unknown tag '%.*s'", (int)(strcspn(r->line, " ") > 8 ? 8 : strcspn(r->line, " ")), r->line);
	while (*p == ' ') {
		*p++ = '\0';
		if (*p == ' ' || *p == '\0')
			return bad(r, "empty field");
		if (n == MAX_FIELDS || n == want)
			return bad(r, "too many fields (expected %zu)", want);
		f[n++] = p;
		p += strcspn(p, " ");
	}
	if (n != want)
		return bad(r, "expected %zu fields, found %zu", want, n);
	return 0;
}

static int parse_u64(struct reader *r, const char *t, uint64_t *out, const char *what)
{
	uint64_t v = 0;
	if (!*t)
		return bad(r, "malformed %s ''", what);
	for (const char *p = t; *p; p++) {
		if (*p < '0' || *p > '9' || p - t >= 20)
			return bad(r, "malformed %s '%.32s'", what, t);
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return bad(r, "%s '%.32s' out of range", what, t);
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int parse_hex(struct reader *r, const char *t, uint64_t *out, const char *what)
{
	uint64_t v = 0;
	if (!*t)
		return bad(r, "malformed %s ''", what);
	for (const char *p = t; *p; p++) {
		unsigned d;
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			return bad(r, "malformed %s '%.32s' (lower-case hexadecimal expected)", what, t);
		if (v >> 60)
			return bad(r, "%s '%.32s' out of range", what, t);
		v = v << 4 | d;
	}
	*out = v;
	return 0;
}

/* A signed decimal in [lo, hi]. */
static int parse_int(struct reader *r, const char *t, long long lo, long long hi,
		     long long *out, const char *what)
{
	uint64_t mag;
	int neg = *t == '-';
	if (parse_u64(r, t + neg, &mag, what) < 0)
		return -1;
	if (mag > (uint64_t)LLONG_MAX)
		return bad(r, "%s '%.32s' out of range", what, t);
	long long v = neg ? -(long long)mag : (long long)mag;
	if (v < lo || v > hi)
		return bad(r, "%s %lld out of range", what, v);
	*out = v;
	return 0;
}

/* A finite decimal number; the caller has switched to the "C" locale. */
static int parse_double(struct reader *r, const char *t, double *out, const char *what)
{
	size_t n = strlen(t);
	if (n == 0 || n > 64 || strspn(t, "0123456789.eE+-") != n)
		return bad(r, "malformed %s '%.32s'", what, t);
	char *end;
	errno = 0;
	double v = strtod(t, &end);
	if (*end || !isfinite(v) || errno == ERANGE)
		return bad(r, "malformed %s '%.32s'", what, t);
	*out = v;
	return 0;
}

static int parse_index(struct reader *r, const char *t, size_t limit, uint32_t *out, const char *what)
{
	uint64_t v;
	if (parse_u64(r, t, &v, what) < 0)
		return -1;
	if (v >= limit)
		return bad(r, "%s %llu refers to nothing (only %zu defined so far)",
			   what, (unsigned long long)v, limit);
	*out = (uint32_t)v;
	return 0;
}

/* A copy of the string that field t refers to; *out stays NULL for "-" when optional. */
static int parse_str(struct reader *r, const char *t, int optional, char **out, const char *what)
{
	uint32_t i = 0;
	*out = NULL;
	if (optional && strcmp(t, SNAP_NONE) == 0)
		return 0;
	if (parse_index(r, t, r->n_strs, &i, what) < 0)
		return -1;
	*out = dup_str(r, r->strs[i]);
	return *out ? 0 : -1;
}

/* ---- records ------------------------------------------------------------ */

static int rec_string(struct reader *r)
{
	const char *p = r->line + 1;
	if (*p == ' ')
		p++;
	else if (*p)
		return bad(r, "unknown tag '%c%c'", r->line[0], *p);
	if (grow(r, &r->strs, &r->cap_strs, r->n_strs, sizeof(*r->strs)) < 0)
		return -1;
	/* Unescaping only shrinks, so the text fits in its own length. */
	size_t len = strlen(p);
	if (charge(r, len + 1) < 0)
		return -1;
	char *d = malloc(len + 1), *q = d;
	if (!d)
		return bad(r, "out of memory");
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c == 0x7f) {
			free(d);
			return bad(r, "unescaped control byte 0x%02x in string", c);
		}
		if (c != '\\') {
			*q++ = (char)c;
			continue;
		}
		p++;
		if (*p == '\\') {
			*q++ = '\\';
		} else if (*p == 'n') {
			*q++ = '\n';
		} else if (*p == 'x' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0 &&
			   (hexval(p[1]) | hexval(p[2]))) {
			*q++ = (char)(hexval(p[1]) << 4 | hexval(p[2]));
			p += 2;
		} else {
			free(d);
			return bad(r, "bad escape in string");
		}
	}
	*q = '\0';
	r->strs[r->n_strs++] = d;
	return 0;
}

static int set_single(struct reader *r, enum single which)
{
	if (r->seen & (1u << which))
		return bad(r, "duplicate '%c' record", single_tags[which]);
	r->seen |= 1u << which;
	return 0;
}

static int rec_stack_key(struct reader *r, char **f, struct snap_stack **arr, size_t *n, size_t *cap,
			 struct u64map *seen, uint64_t salt, int presplit)
{
	struct snap_stack st = { 0 };
	if ((!presplit && split(r, f, 5) < 0) ||
	    parse_index(r, f[0], r->s->n_nodes, &st.node, "stack node") < 0)
		return -1;
	r->stacks_begun = 1;
	r->stack_frames += r->depth[st.node];
	if (r->stack_frames > SNAP_STACK_FRAMES_BASE + SNAP_STACK_FRAMES_PER_BYTE * r->input)
		return bad(r, "the stacks named so far hold %llu frames in all, more than %llu for a "
			   "file of this size (%llu bytes): a deep stack repeated without end",
			   (unsigned long long)r->stack_frames,
			   (unsigned long long)(SNAP_STACK_FRAMES_BASE + SNAP_STACK_FRAMES_PER_BYTE * r->input),
			   (unsigned long long)r->input);
	/* A format-4 reader does not know kind t: neither does this one, in such a file. */
	if (f[1][1] || (f[1][0] != SNAP_KIND_MMAP && f[1][0] != SNAP_KIND_BRK &&
			f[1][0] != SNAP_KIND_HEAP && f[1][0] != SNAP_KIND_PSEUDO &&
			(f[1][0] != SNAP_KIND_TOUCH || r->s->version < SNAP_VERSION_VIEW)))
		return f[1][0] == SNAP_KIND_TOUCH && !f[1][1]
			? bad(r, "unknown stack kind 't' in a format %u snapshot (touch stacks are format %d)",
			      r->s->version, SNAP_VERSION_VIEW)
			: bad(r, "unknown stack kind '%.8s'", f[1]);
	st.kind = f[1][0];
	if (st.kind == SNAP_KIND_TOUCH && r->line[0] == SNAP_TAG_OTHERSTACK)
		return bad(r, "stack kind 't' in a 'K' record: the other view of a touch snapshot is the alloc view");
	if (st.kind == SNAP_KIND_TOUCH && r->s->view != SNAP_VIEW_TOUCH)
		return bad(r, "stack kind 't' in an alloc-view snapshot (a touch snapshot says 'v touch' first)");
	/* One record per stack and kind (see the format): a repeated one would be counted twice. */
	uint64_t key = ((uint64_t)st.node << 8 | (unsigned char)st.kind) ^ salt;
	if (u64map_get(seen, key) != U64MAP_NONE)
		return bad(r, "duplicate '%c' record for node %u, kind '%c'", r->line[0], st.node, st.kind);
	if (charge(r, 4 * (sizeof(uint64_t) + sizeof(uint32_t))) < 0)
		return -1;
	if (u64map_put(seen, key, 0) < 0)
		return bad(r, "out of memory");
	if (parse_u64(r, f[2], &st.charged, "charged bytes") < 0 ||
	    parse_u64(r, f[3], &st.reserved, "reserved bytes") < 0 ||
	    parse_u64(r, f[4], &st.count, "count") < 0 ||
	    grow(r, arr, cap, *n, sizeof(**arr)) < 0)
		return -1;
	(*arr)[(*n)++] = st;
	return 0;
}

static int rec_stack(struct reader *r, char **f, struct snap_stack **arr, size_t *n, size_t *cap,
		     struct u64map *seen)
{
	return rec_stack_key(r, f, arr, n, cap, seen, 0, 0);
}

/* Links largest first, then by their nodes: the order snap.h promises, whatever the file's. */
static int cmp_link(const void *pa, const void *pb)
{
	const struct snap_link *a = pa, *b = pb;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	if (a->touch_node != b->touch_node)
		return a->touch_node < b->touch_node ? -1 : 1;
	return (a->alloc_node > b->alloc_node) - (a->alloc_node < b->alloc_node);
}

static int rec_end(struct reader *r)
{
	char *f[MAX_FIELDS];
	if (split(r, f, 0) < 0)
		return -1;
	for (int i = 0; i < SEEN_COUNT; i++)
		if (!(r->seen & (1u << i)))
			return bad(r, "end marker before the required '%c' record", single_tags[i]);
	if (r->s->n_links)
		qsort(r->s->links, r->s->n_links, sizeof(*r->s->links), cmp_link);
	r->ended = 1;
	return 0;
}

static int record(struct reader *r)
{
	struct snap *s = r->s;
	char *f[MAX_FIELDS];
	long long ll = 0;
	uint64_t u = 0;

	switch (r->line[0]) {
	case '\0':
	case SNAP_TAG_COMMENT:
		r->blank += r->line_len + 1;
		if (r->blank > SNAP_MAX_BLANK)
			return bad(r, "more than %llu MiB of blank lines and comments: not a ptfil snapshot, "
				   "or corrupted", (unsigned long long)(SNAP_MAX_BLANK >> 20));
		return 0;
	case SNAP_TAG_STRING:
		return rec_string(r);
	case SNAP_TAG_PTFIL:
		if (set_single(r, SEEN_PTFIL) < 0 || split(r, f, 1) < 0)
			return -1;
		return parse_str(r, f[0], 0, &s->ptfil_version, "string");
	case SNAP_TAG_MODE:
		if (set_single(r, SEEN_MODE) < 0 || split(r, f, 1) < 0)
			return -1;
		return parse_str(r, f[0], 0, &s->mode, "string");
	case SNAP_TAG_ARG:
		if (split(r, f, 1) < 0 || grow(r, &s->argv, &r->cap_argv, s->argc, sizeof(*s->argv)) < 0)
			return -1;
		if (parse_str(r, f[0], 0, &s->argv[s->argc], "string") < 0)
			return -1;
		s->argc++;
		return 0;
	case SNAP_TAG_PID:
		if (set_single(r, SEEN_PID) < 0 || split(r, f, 1) < 0 ||
		    parse_int(r, f[0], INT_MIN, INT_MAX, &ll, "pid") < 0)
			return -1;
		s->pid = (int)ll;
		return 0;
	case SNAP_TAG_START:
		if (set_single(r, SEEN_START) < 0 || split(r, f, 1) < 0)
			return -1;
		return parse_double(r, f[0], &s->start_time, "start time");
	case SNAP_TAG_DURATION:
		if (set_single(r, SEEN_DURATION) < 0 || split(r, f, 1) < 0)
			return -1;
		return parse_double(r, f[0], &s->duration, "duration");
	case SNAP_TAG_EXIT:
		if (set_single(r, SEEN_EXIT) < 0 || split(r, f, 1) < 0 ||
		    parse_int(r, f[0], -1, INT_MAX, &ll, "exit status") < 0)
			return -1;
		s->exit_status = (int)ll;
		return 0;
	case SNAP_TAG_VMHWM:
		if (set_single(r, SEEN_VMHWM) < 0 || split(r, f, 1) < 0)
			return -1;
		return parse_u64(r, f[0], &s->vmhwm, "VmHWM");
	case SNAP_TAG_PAGESIZE:
		if (set_single(r, SEEN_PAGESIZE) < 0 || split(r, f, 1) < 0)
			return -1;
		return parse_u64(r, f[0], &s->page_size, "page size");
	case SNAP_TAG_PEAK:
		if (set_single(r, SEEN_PEAK) < 0 || split(r, f, 4) < 0)
			return -1;
		return parse_double(r, f[0], &s->peak.time, "peak time") < 0 ||
		       parse_u64(r, f[1], &s->peak.charged, "charged bytes") < 0 ||
		       parse_u64(r, f[2], &s->peak.reserved, "reserved bytes") < 0 ||
		       parse_u64(r, f[3], &s->peak.rss, "RSS") < 0 ? -1 : 0;
	case SNAP_TAG_MODULE: {
		if (split(r, f, 3) < 0)
			return -1;
		if (s->n_modules >= INT32_MAX)
			return bad(r, "too many modules");
		if (grow(r, &s->modules, &r->cap_modules, s->n_modules, sizeof(*s->modules)) < 0)
			return -1;
		struct snap_module *m = &s->modules[s->n_modules];
		memset(m, 0, sizeof(*m));
		/* Counted before parsing so that snap_fin frees what was parsed. */
		s->n_modules++;
		return parse_str(r, f[0], 0, &m->path, "string") < 0 ||
		       parse_str(r, f[1], 1, &m->build_id, "string") < 0 ||
		       parse_hex(r, f[2], &m->base, "module base") < 0 ? -1 : 0;
	}
	case SNAP_TAG_FRAME: {
		if (split(r, f, 3) < 0)
			return -1;
		if (s->n_frames >= UINT32_MAX)
			return bad(r, "too many frames");
		if (parse_int(r, f[0], -1, (long long)s->n_modules - 1, &ll, "module") < 0)
			return -1;
		if (parse_hex(r, f[1], &u, "offset") < 0 ||
		    grow(r, &s->frames, &r->cap_frames, s->n_frames, sizeof(*s->frames)) < 0)
			return -1;
		struct snap_frame *fr = &s->frames[s->n_frames];
		memset(fr, 0, sizeof(*fr));
		fr->module = (int32_t)ll;
		fr->offset = u;
		fr->kind = SNAP_FRAME_NATIVE;
		s->n_frames++;
		return parse_str(r, f[2], 1, &fr->function, "string");
	}
	case SNAP_TAG_DEBUGINFO: {
		if (s->version < SNAP_VERSION_SRCFRAME)
			return bad(r, "unknown tag 'u' in a format %u snapshot (debug information records are format %d)",
				   s->version, SNAP_VERSION_SRCFRAME);
		if (split(r, f, 4) < 0)
			return -1;
		uint64_t lines = 0;
		if (parse_int(r, f[0], 0, (long long)s->n_modules - 1, &ll, "module") < 0 ||
		    parse_u64(r, f[2], &lines, "lines flag") < 0)
			return -1;
		struct snap_module *m = &s->modules[ll];
		if (m->symbols)
			return bad(r, "second 'u' record for module %lld", ll);
		if (strlen(f[1]) != 1 || !strchr("nemf", f[1][0]))
			return bad(r, "unknown symbol source '%.8s'", f[1]);
		if (lines > 1)
			return bad(r, "lines flag %llu is neither 0 nor 1", (unsigned long long)lines);
		m->symbols = f[1][0];
		m->lines = (int)lines;
		return parse_str(r, f[3], 1, &m->package, "string");
	}
	case SNAP_TAG_SRCFRAME: {
		/* A reader of format 2 refuses `g` as an unknown tag: so does this one, in such a file. */
		if (s->version < SNAP_VERSION_SRCFRAME)
			return bad(r, "unknown tag 'g' in a format %u snapshot (native source lines are format %d)",
				   s->version, SNAP_VERSION_SRCFRAME);
		if (split(r, f, 6) < 0)
			return -1;
		if (s->n_frames >= UINT32_MAX)
			return bad(r, "too many frames");
		uint64_t line = 0, inl = 0;
		if (parse_int(r, f[0], -1, (long long)s->n_modules - 1, &ll, "module") < 0 ||
		    parse_hex(r, f[1], &u, "offset") < 0 || parse_u64(r, f[4], &line, "line number") < 0 ||
		    parse_u64(r, f[5], &inl, "inlined flag") < 0)
			return -1;
		if (line > UINT32_MAX)
			return bad(r, "line number %llu out of range", (unsigned long long)line);
		if (inl > 1)
			return bad(r, "inlined flag %llu is neither 0 nor 1", (unsigned long long)inl);
		if (grow(r, &s->frames, &r->cap_frames, s->n_frames, sizeof(*s->frames)) < 0)
			return -1;
		struct snap_frame *fr = &s->frames[s->n_frames];
		memset(fr, 0, sizeof(*fr));
		fr->module = (int32_t)ll;
		fr->offset = u;
		fr->kind = SNAP_FRAME_NATIVE;
		fr->line = (uint32_t)line;
		fr->inlined = (int)inl;
		/* Counted before parsing so that snap_fin frees what was parsed. */
		s->n_frames++;
		return parse_str(r, f[2], 1, &fr->function, "string") < 0 ||
		       parse_str(r, f[3], 1, &fr->file, "string") < 0 ? -1 : 0;
	}
	case SNAP_TAG_PYFRAME: {
		/* A reader of version 1 refuses `y` as an unknown tag: so does this one, in such a file. */
		if (s->version < SNAP_VERSION_PYFRAME)
			return bad(r, "unknown tag 'y' in a format %u snapshot (Python frames are format %d)",
				   s->version, SNAP_VERSION_PYFRAME);
		if (split(r, f, 3) < 0)
			return -1;
		if (s->n_frames >= UINT32_MAX)
			return bad(r, "too many frames");
		if (parse_u64(r, f[0], &u, "line number") < 0)
			return -1;
		if (u > UINT32_MAX)
			return bad(r, "line number %llu out of range", (unsigned long long)u);
		if (grow(r, &s->frames, &r->cap_frames, s->n_frames, sizeof(*s->frames)) < 0)
			return -1;
		struct snap_frame *fr = &s->frames[s->n_frames];
		memset(fr, 0, sizeof(*fr));
		fr->module = -1;
		fr->kind = SNAP_FRAME_PYTHON;
		fr->line = (uint32_t)u;
		/* Counted before parsing so that snap_fin frees what was parsed. */
		s->n_frames++;
		if (strcmp(f[2], SNAP_NONE) == 0)
			return bad(r, "Python frame without a source file ('-')");
		return parse_str(r, f[1], 1, &fr->function, "string") < 0 ||
		       parse_str(r, f[2], 0, &fr->file, "string") < 0 ? -1 : 0;
	}
	case SNAP_TAG_NODE: {
		uint32_t parent = 0, frame = 0;
		if (split(r, f, 2) < 0)
			return -1;
		if (s->n_nodes >= UINT32_MAX)
			return bad(r, "too many stack nodes");
		/* The parent must come first: this is what makes the trie acyclic. */
		if (parse_index(r, f[0], s->n_nodes, &parent, "parent node") < 0 ||
		    parse_index(r, f[1], s->n_frames, &frame, "frame") < 0 ||
		    grow(r, &s->nodes, &r->cap_nodes, s->n_nodes, sizeof(*s->nodes)) < 0 ||
		    grow(r, &r->depth, &r->cap_depth, s->n_nodes, sizeof(*r->depth)) < 0)
			return -1;
		if (r->depth[parent] >= SNAP_MAX_DEPTH)
			return bad(r, "stack node %zu is more than %u frames deep", s->n_nodes, SNAP_MAX_DEPTH);
		r->depth[s->n_nodes] = r->depth[parent] + 1;
		s->nodes[s->n_nodes].parent = parent;
		s->nodes[s->n_nodes].frame = frame;
		s->n_nodes++;
		return 0;
	}
	case SNAP_TAG_STACK:
		return rec_stack(r, f, &s->stacks, &s->n_stacks, &r->cap_stacks, &r->stack_seen);
	case SNAP_TAG_LIVE:
		return rec_stack(r, f, &s->live, &s->n_live, &r->cap_live, &r->live_seen);
	case SNAP_TAG_PROC: {
		if (s->version < SNAP_VERSION_TREE)
			return bad(r, "unknown tag 'P' in a format %u snapshot (process trees are format %d)", s->version,
				   SNAP_VERSION_TREE);
		if (split(r, f, 11) < 0)
			return -1;
		if (s->n_procs >= SNAP_MAX_PROCS)
			return bad(r, "more than %u processes", SNAP_MAX_PROCS);
		if (grow(r, &s->procs, &r->cap_procs, s->n_procs, sizeof(*s->procs)) < 0)
			return -1;
		struct snap_proc *q = &s->procs[s->n_procs];
		memset(q, 0, sizeof(*q));
		/* Counted before parsing so that snap_fin frees what was parsed. */
		s->n_procs++;
		uint64_t prof = 0;
		if (parse_int(r, f[0], 1, INT32_MAX, &ll, "pid") < 0)
			return -1;
		q->pid = (int)ll;
		if (parse_int(r, f[1], 0, INT32_MAX, &ll, "parent pid") < 0 || parse_u64(r, f[2], &prof, "profiled flag") < 0)
			return -1;
		q->ppid = (int)ll;
		if (prof > 1)
			return bad(r, "profiled flag %llu is neither 0 nor 1", (unsigned long long)prof);
		q->profiled = (int)prof;
		if (parse_u64(r, f[3], &q->peak, "peak bytes") < 0 || parse_double(r, f[4], &q->peak_time, "peak time") < 0 ||
		    parse_u64(r, f[5], &q->at_combined, "bytes at the combined peak") < 0 ||
		    parse_u64(r, f[6], &q->vmhwm, "VmHWM") < 0 || parse_double(r, f[7], &q->start, "start time") < 0)
			return -1;
		if (strcmp(f[8], "-1") == 0)
			q->end = -1;
		else if (parse_double(r, f[8], &q->end, "end time") < 0)
			return -1;
		return parse_str(r, f[9], 1, &q->command, "string") < 0 || parse_str(r, f[10], 1, &q->file, "string") < 0
			       ? -1 : 0;
	}
	case SNAP_TAG_TREE:
		if (s->version < SNAP_VERSION_TREE)
			return bad(r, "unknown tag 'r' in a format %u snapshot (process trees are format %d)", s->version,
				   SNAP_VERSION_TREE);
		if (s->has_tree)
			return bad(r, "duplicate 'r' record");
		if (split(r, f, 2) < 0 || parse_double(r, f[0], &s->tree_time, "combined peak time") < 0 ||
		    parse_u64(r, f[1], &s->tree_charged, "combined peak bytes") < 0)
			return -1;
		s->has_tree = 1;
		return 0;
	case SNAP_TAG_TREESTACK: {
		if (s->version < SNAP_VERSION_TREE)
			return bad(r, "unknown tag 'j' in a format %u snapshot (process trees are format %d)", s->version,
				   SNAP_VERSION_TREE);
		if (split(r, f, 6) < 0)
			return -1;
		uint32_t proc = 0;
		if (parse_index(r, f[5], s->n_procs, &proc, "process") < 0)
			return -1;
		/* The same checks and limits as a `k` record, with (node, kind, process) unique. */
		size_t before = s->n_tree_stacks;
		if (rec_stack_key(r, f, &s->tree_stacks, &s->n_tree_stacks, &r->cap_tree_stacks, &r->tree_seen,
				  (uint64_t)proc << 40, 1) < 0)
			return -1;
		if (s->n_tree_stacks > before)
			s->tree_stacks[before].proc = proc;
		return 0;
	}
	case SNAP_TAG_VIEW: {
		if (s->version < SNAP_VERSION_VIEW)
			return bad(r, "unknown tag 'v' in a format %u snapshot (views are format %d)", s->version,
				   SNAP_VERSION_VIEW);
		if (r->view_seen)
			return bad(r, "duplicate 'v' record");
		/* The stacks' kinds are checked against the view as they are read: it must come first. */
		if (r->stacks_begun)
			return bad(r, "the 'v' record comes after stack records (it belongs before every k, l, j, K and X)");
		r->view_seen = 1;
		uint32_t i = 0;
		if (split(r, f, 1) < 0 || parse_index(r, f[0], r->n_strs, &i, "string") < 0)
			return -1;
		if (strcmp(r->strs[i], SNAP_VIEW_NAME_ALLOC) == 0)
			s->view = SNAP_VIEW_ALLOC;
		else if (strcmp(r->strs[i], SNAP_VIEW_NAME_TOUCH) == 0)
			s->view = SNAP_VIEW_TOUCH;
		else
			return bad(r, "unknown view '%.32s' (alloc or touch)", r->strs[i]);
		return 0;
	}
	case SNAP_TAG_OTHERSTACK:
		if (s->version < SNAP_VERSION_VIEW)
			return bad(r, "unknown tag 'K' in a format %u snapshot (views are format %d)", s->version,
				   SNAP_VERSION_VIEW);
		if (s->view != SNAP_VIEW_TOUCH)
			return bad(r, "'K' record in an alloc-view snapshot (only a touch snapshot carries the other view)");
		return rec_stack(r, f, &s->other, &s->n_other, &r->cap_other, &r->other_seen);
	case SNAP_TAG_LINK: {
		if (s->version < SNAP_VERSION_VIEW)
			return bad(r, "unknown tag 'X' in a format %u snapshot (views are format %d)", s->version,
				   SNAP_VERSION_VIEW);
		if (s->view != SNAP_VIEW_TOUCH)
			return bad(r, "'X' record in an alloc-view snapshot (only a touch snapshot links two views)");
		r->stacks_begun = 1;
		struct snap_link ln = { 0 };
		if (split(r, f, 3) < 0 || parse_index(r, f[0], s->n_nodes, &ln.touch_node, "touch node") < 0 ||
		    parse_index(r, f[1], s->n_nodes, &ln.alloc_node, "alloc node") < 0 ||
		    parse_u64(r, f[2], &ln.bytes, "link bytes") < 0)
			return -1;
		/* One record per pair: a repeated one would be shown, and counted, twice. */
		uint64_t key = (uint64_t)ln.touch_node << 32 | ln.alloc_node;
		if (u64map_get(&r->link_seen, key) != U64MAP_NONE)
			return bad(r, "duplicate 'X' record for touch node %u, alloc node %u", ln.touch_node, ln.alloc_node);
		if (charge(r, 4 * (sizeof(uint64_t) + sizeof(uint32_t))) < 0)
			return -1;
		if (u64map_put(&r->link_seen, key, 0) < 0)
			return bad(r, "out of memory");
		if (grow(r, &s->links, &r->cap_links, s->n_links, sizeof(*s->links)) < 0)
			return -1;
		s->links[s->n_links++] = ln;
		return 0;
	}
	case SNAP_TAG_SAMPLE: {
		struct snap_sample smp;
		if (split(r, f, 3) < 0 ||
		    parse_double(r, f[0], &smp.time, "sample time") < 0 ||
		    parse_u64(r, f[1], &smp.charged, "charged bytes") < 0 ||
		    parse_u64(r, f[2], &smp.rss, "RSS") < 0)
			return -1;
		if (s->n_samples && smp.time < s->samples[s->n_samples - 1].time)
			return bad(r, "sample time %s is before the previous sample's", f[0]);
		if (grow(r, &s->samples, &r->cap_samples, s->n_samples, sizeof(*s->samples)) < 0)
			return -1;
		s->samples[s->n_samples++] = smp;
		return 0;
	}
	case SNAP_TAG_COUNTER: {
		if (split(r, f, 2) < 0 || parse_u64(r, f[1], &u, "count") < 0 ||
		    grow(r, &s->counters, &r->cap_counters, s->n_counters, sizeof(*s->counters)) < 0)
			return -1;
		struct snap_counter *c = &s->counters[s->n_counters];
		c->count = u;
		if (parse_str(r, f[0], 0, &c->name, "string") < 0)
			return -1;
		s->n_counters++;
		return 0;
	}
	case SNAP_TAG_END:
		return rec_end(r);
	default: {
		unsigned char c = (unsigned char)r->line[0];
		if (c < 0x20 || c >= 0x7f)
			return bad(r, "unknown tag (byte 0x%02x)", c);
		return bad(r, "unknown tag '%c'", c);
	}
	}
}

/* The first line: the magic and a version we know. */
static int header(struct reader *r)
{
	int rc = next_line(r, 64);
	if (rc < 0)
		return -1;
	if (rc == 0)
		return bad(r, "empty file, not a ptfil snapshot");
	size_t ml = strlen(SNAP_MAGIC);
	if (strncmp(r->line, SNAP_MAGIC, ml) != 0 || r->line[ml] != ' ')
		return bad(r, "not a ptfil snapshot (no '%s' first line)", SNAP_MAGIC);
	const char *v = r->line + ml + 1;
	uint64_t version;
	size_t n = strlen(v);
	if (n == 0 || n > 9 || strspn(v, "0123456789") != n)
		return bad(r, "malformed format version '%.16s'", v);
	version = strtoull(v, NULL, 10);
	if (version > SNAP_FORMAT_VERSION)
		return bad(r, "snapshot format %llu is newer than this %s reads (%d); upgrade ptfil",
			   (unsigned long long)version, error_progname(), SNAP_FORMAT_VERSION);
	if (version < 1)
		return bad(r, "unsupported snapshot format %llu", (unsigned long long)version);
	r->s->version = (unsigned)version;
	return 0;
}

static int read_all(struct reader *r)
{
	int rc = header(r);

	/* Node 0, the root, is implicit in the file. */
	if (rc == 0 && grow(r, &r->s->nodes, &r->cap_nodes, 0, sizeof(*r->s->nodes)) == 0 &&
	    grow(r, &r->depth, &r->cap_depth, 0, sizeof(*r->depth)) == 0) {
		r->depth[0] = 0;
		r->s->nodes[0].parent = 0;
		r->s->nodes[0].frame = 0;
		r->s->n_nodes = 1;
	}
	while (!r->failed) {
		rc = next_line(r, SNAP_MAX_LINE);
		if (rc < 0)
			break;
		if (rc == 0) {
			if (!r->ended)
				bad(r, "truncated (no end marker)");
			break;
		}
		if (r->ended) {
			bad(r, "data after the end marker");
			break;
		}
		record(r);
	}
	return r->failed ? -1 : 0;
}

static int run(struct reader *r, struct snap *s)
{
	snap_init(s);
	r->s = s;
	/* Doubles are written in the "C" locale; read them so whatever the caller set. */
	locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
	locale_t old = c ? uselocale(c) : (locale_t)0;
	int rc = read_all(r);
	if (c) {
		uselocale(old);
		freelocale(c);
	}
	for (size_t i = 0; i < r->n_strs; i++)
		free(r->strs[i]);
	free(r->strs);
	free(r->depth);
	free(r->line);
	u64map_fin(&r->stack_seen);
	u64map_fin(&r->live_seen);
	u64map_fin(&r->tree_seen);
	u64map_fin(&r->other_seen);
	u64map_fin(&r->link_seen);
	return rc;
}

int snap_read_mem(const char *buf, size_t len, const char *name, struct snap *s)
{
	struct reader r = { .name = name, .chunk = buf, .chunk_len = len };
	return run(&r, s);
}

int snap_read(const char *path, struct snap *s)
{
	struct reader r = { .name = path };
	struct stat st;

	snap_init(s);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error_errno("%s: cannot open", path);
	if (fstat(fd, &st) < 0)
		st.st_mode = 0;
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return error("%s: is a directory", path);
	}
	/* A pipe has no size to measure against: the other limits hold there. */
	if (S_ISREG(st.st_mode) && st.st_size > 0)
		r.max_inflated = SNAP_EXPAND_BASE + SNAP_EXPAND_RATIO * (uint64_t)st.st_size;
	r.gz = gzdopen(fd, "rb");
	r.gzbuf = malloc(CHUNK);
	if (!r.gz || !r.gzbuf) {
		if (r.gz)
			gzclose(r.gz);
		else
			close(fd);
		free(r.gzbuf);
		return error("%s: out of memory", path);
	}
	gzbuffer(r.gz, CHUNK);
	int rc = run(&r, s);
	gzclose(r.gz);
	free(r.gzbuf);
	return rc;
}
