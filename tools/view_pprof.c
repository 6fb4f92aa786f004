/*
 * The pprof export of ptfil-view: one set of stacks of a snapshot as a
 * gzip-compressed profile in pprof's protocol buffer format (profile.proto),
 * which go tool pprof, speedscope, Grafana Pyroscope and Parca read.
 *
 * The encoding is written here, by hand: a protocol buffer message is a
 * sequence of fields, each a key (field number << 3 | wire type) and a value,
 * a varint (wire type 0) or a length-prefixed run of bytes (wire type 2:
 * strings, nested messages, packed repeated numbers). Each table (samples,
 * mappings, locations, functions) is built into its own buffer while the
 * string table grows, then the whole profile is put together and compressed.
 *
 * Every id is given in the order things are first met, walking the stacks
 * largest first (view_sort_stacks), so one snapshot always gives the same
 * bytes.
 */
#include "tools/view.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/u64map.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Field numbers of profile.proto used here. */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10, PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
	LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
	MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3, MAPPING_FILENAME = 5,
	MAPPING_BUILD_ID = 6, MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
	LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1, LINE_LINE = 2,
	FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
};

/* What the frames of a module in the stacks hold, for the mapping's has_* fields. */
#define HAS_FUNCTIONS 1
#define HAS_FILENAMES 2
#define HAS_LINES 4
#define HAS_INLINED 8

#define WIRE_VARINT 0
#define WIRE_LEN 2

/* ---- the encoder ------------------------------------------------------------ */

/* A growing byte buffer; oom is set once an allocation failed, and every later write is dropped. */
struct pb {
	unsigned char *p;
	size_t len, cap;
	int oom;
};

static void pb_put(struct pb *b, const void *data, size_t n)
{
	if (b->oom || !n)
		return;
	if (b->len + n < b->len || grow_array(&b->p, &b->cap, b->len + n, 1, 256)) {
		b->oom = 1;
		return;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	unsigned char buf[10];
	size_t n = 0;
	do {
		buf[n] = v & 0x7f;
		v >>= 7;
		if (v)
			buf[n] |= 0x80;
		n++;
	} while (v);
	pb_put(b, buf, n);
}

/* A varint field; zero is proto3's default and is left out. */
static void pb_uint(struct pb *b, unsigned field, uint64_t v)
{
	if (!v)
		return;
	pb_varint(b, (uint64_t)field << 3 | WIRE_VARINT);
	pb_varint(b, v);
}

/* An int64 field from an unsigned count: pprof's values are signed, so clamp. */
static void pb_int(struct pb *b, unsigned field, uint64_t v)
{
	pb_uint(b, field, v > INT64_MAX ? INT64_MAX : v);
}

static void pb_bytes(struct pb *b, unsigned field, const void *data, size_t n)
{
	pb_varint(b, (uint64_t)field << 3 | WIRE_LEN);
	pb_varint(b, n);
	pb_put(b, data, n);
}

/* A nested message from sub, which is then emptied for reuse. */
static void pb_msg(struct pb *b, unsigned field, struct pb *sub)
{
	if (sub->oom)
		b->oom = 1;
	pb_bytes(b, field, sub->p, sub->len);
	sub->len = 0;
	sub->oom = 0;
}

static void pb_fin(struct pb *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ---- interning ---------------------------------------------------------------- */

static uint64_t hash_bytes(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;  /* FNV-1a */
	return h;
}

#define HASH_SEED 0xcbf29ce484222325ull

struct export {
	const struct snap *s;
	int oom;

	/* The string table: strs[0] is "", as profile.proto requires. The strings are the snapshot's or static. */
	const char **strs; size_t n_strs, cap_strs;
	char **owned; size_t n_owned, cap_owned;  /* strings made here (valid UTF-8 copies, the command line) */
	struct u64map str_ids;      /* hash (probed on a collision) -> index in strs */

	/* Functions, by name and file: the key packs both string indexes. */
	struct u64map fn_ids;       /* -> function id */
	uint32_t n_fns;
	struct pb fns;

	/* Locations, by their frames: a native frame and the calls inlined into it, or one Python frame. */
	uint32_t *loc_frames; size_t n_loc_frames, cap_loc_frames; /* every location's frames, one after another */
	size_t *loc_start; size_t cap_loc_start;                   /* location id i+1's frames start at loc_start[i] */
	uint32_t n_locs;
	struct u64map loc_ids;      /* hash of the frames (probed) -> location id */
	uint32_t no_stack;          /* the location of stacks without frames, 0 until needed */
	struct pb locs;

	/* Mappings: one per module some frame is in, ids in module order. */
	uint32_t *map_id;           /* per module: its mapping id, 0 when none */
	uint64_t *map_limit;        /* per module: the largest offset seen, plus one */
	unsigned char *map_has;     /* per module: HAS_* of its frames in the stacks */

	struct pb samples;
	struct pb sub, sub2;        /* scratch for nested messages */
};

/* Keeps a string made here until the export ends; NULL (after setting oom) when out of memory. */
static char *keep(struct export *e, char *s)
{
	if (!s || grow_array(&e->owned, &e->cap_owned, e->n_owned + 1, sizeof(*e->owned), 16)) {
		free(s);
		e->oom = 1;
		return NULL;
	}
	return e->owned[e->n_owned++] = s;
}

/*
 * s as valid UTF-8, which protocol buffer strings must be (strict readers
 * refuse a profile otherwise): s itself, or a copy kept in e with each
 * invalid byte replaced by U+FFFD.
 */
static const char *valid_utf8(struct export *e, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), bad = 0;
	for (size_t i = 0; i < len;) {
		size_t k = view_utf8_len(p + i, len - i);
		bad += !k;
		i += k ? k : 1;
	}
	if (!bad)
		return s;
	char *c = malloc(len + 2 * bad + 1), *q = c;
	if (!c)
		return keep(e, NULL);
	for (size_t i = 0; i < len;) {
		size_t k = view_utf8_len(p + i, len - i);
		if (k) {
			memcpy(q, p + i, k);
			q += k;
			i += k;
		} else {
			memcpy(q, "\xef\xbf\xbd", 3);
			q += 3;
			i++;
		}
	}
	*q = 0;
	return keep(e, c);
}

/* The index of s in the string table, added if new. NULL is "". */
static uint64_t str_id(struct export *e, const char *s)
{
	if (!s || !*s)
		return 0;
	s = valid_utf8(e, s);
	if (!s)
		return 0;
	uint64_t h = hash_bytes(HASH_SEED, s, strlen(s));
	for (;; h++) {
		uint32_t v = u64map_get(&e->str_ids, h);
		if (v == U64MAP_NONE)
			break;
		if (!strcmp(e->strs[v], s))
			return v;
	}
	if (e->n_strs >= UINT32_MAX - 1 ||
	    grow_array(&e->strs, &e->cap_strs, e->n_strs + 1, sizeof(*e->strs), 256) ||
	    u64map_put(&e->str_ids, h, (uint32_t)e->n_strs)) {
		e->oom = 1;
		return 0;
	}
	e->strs[e->n_strs] = s;
	return e->n_strs++;
}

/* The id of the function named name in file (NULL when unknown), added if new. */
static uint64_t fn_id(struct export *e, const char *name, const char *file)
{
	uint64_t n = str_id(e, name), f = str_id(e, file);
	uint64_t key = n << 32 | f;
	uint32_t v = u64map_get(&e->fn_ids, key);
	if (v != U64MAP_NONE)
		return v;
	if (u64map_put(&e->fn_ids, key, ++e->n_fns)) {
		e->oom = 1;
		return 0;
	}
	struct pb *m = &e->sub2;
	pb_uint(m, FUNCTION_ID, e->n_fns);
	pb_uint(m, FUNCTION_NAME, n);
	pb_uint(m, FUNCTION_SYSTEM_NAME, n);
	pb_uint(m, FUNCTION_FILENAME, f);
	pb_msg(&e->fns, PROFILE_FUNCTION, m);
	return e->n_fns;
}

static const struct snap_module *frame_module(const struct snap *s, const struct snap_frame *f)
{
	if (f->kind != SNAP_FRAME_NATIVE || f->module < 0 || (size_t)f->module >= s->n_modules)
		return NULL;
	return &s->modules[f->module];
}

/*
 * How many frames from frames[i] on make one location: a native frame and
 * the calls inlined into it (each inlined frame followed by one at the same
 * module and offset), or one frame.
 */
static size_t group_len(const struct snap *s, const uint32_t *frames, size_t i, size_t depth)
{
	size_t j = i;
	while (j + 1 < depth) {
		const struct snap_frame *f = &s->frames[frames[j]], *g = &s->frames[frames[j + 1]];
		if (f->kind != SNAP_FRAME_NATIVE || g->kind != SNAP_FRAME_NATIVE || !f->inlined ||
		    f->module != g->module || f->offset != g->offset)
			break;
		j++;
	}
	return j - i + 1;
}

/* A Line of a location for frame f, when there is something to say: a function name or a source file. */
static void put_line(struct export *e, struct pb *loc, const struct snap_frame *f)
{
	const char *name = f->function;
	const char *file = f->file && *f->file ? f->file : NULL;
	if (f->kind == SNAP_FRAME_PYTHON && !name)
		name = "<unknown>";
	if (!name && !file)
		return;
	uint64_t id = fn_id(e, name, file);
	struct pb *line = &e->sub2;
	/* fn_id may have used sub2 for the function: it is emptied by then. */
	pb_uint(line, LINE_FUNCTION_ID, id);
	pb_uint(line, LINE_LINE, f->line);
	pb_msg(loc, LOCATION_LINE, line);
}

/* The id of the location made of frames[0..n), innermost first, added if new. */
static uint64_t loc_id(struct export *e, const uint32_t *frames, size_t n)
{
	const struct snap *s = e->s;
	uint64_t h = hash_bytes(HASH_SEED, frames, n * sizeof(*frames));
	for (;; h++) {
		uint32_t v = u64map_get(&e->loc_ids, h);
		if (v == U64MAP_NONE)
			break;
		size_t start = e->loc_start[v - 1];
		size_t end = v < e->n_locs ? e->loc_start[v] : e->n_loc_frames;
		if (end - start == n && !memcmp(e->loc_frames + start, frames, n * sizeof(*frames)))
			return v;
	}
	if (e->n_locs >= UINT32_MAX - 1 ||
	    grow_array(&e->loc_frames, &e->cap_loc_frames, e->n_loc_frames + n, sizeof(*frames), 256) ||
	    grow_array(&e->loc_start, &e->cap_loc_start, e->n_locs + 1, sizeof(*e->loc_start), 64) ||
	    u64map_put(&e->loc_ids, h, e->n_locs + 1)) {
		e->oom = 1;
		return 0;
	}
	memcpy(e->loc_frames + e->n_loc_frames, frames, n * sizeof(*frames));
	e->loc_start[e->n_locs] = e->n_loc_frames;
	e->n_loc_frames += n;
	uint32_t id = ++e->n_locs;

	/* The outermost frame of the group holds the address and the module. */
	const struct snap_frame *f = &s->frames[frames[n - 1]];
	const struct snap_module *m = frame_module(s, f);
	struct pb *loc = &e->sub;
	pb_uint(loc, LOCATION_ID, id);
	if (m) {
		size_t mi = (size_t)f->module;
		if (f->offset >= e->map_limit[mi])
			e->map_limit[mi] = f->offset == UINT64_MAX ? UINT64_MAX : f->offset + 1;
		pb_uint(loc, LOCATION_MAPPING_ID, e->map_id[mi]);
		pb_uint(loc, LOCATION_ADDRESS, m->base + f->offset);
	} else if (f->kind == SNAP_FRAME_NATIVE) {
		pb_uint(loc, LOCATION_ADDRESS, f->offset);
	}
	/* Innermost first: the last Line is the function the others were inlined into. */
	for (size_t i = 0; i < n; i++)
		put_line(e, loc, &s->frames[frames[i]]);
	pb_msg(&e->locs, PROFILE_LOCATION, loc);
	return id;
}

/* The location of stacks without frames: one, under the name the flame graph gives them. */
static uint64_t no_stack_loc(struct export *e)
{
	if (e->no_stack)
		return e->no_stack;
	uint64_t fid = fn_id(e, FLAME_NO_STACK, NULL);
	if (e->n_locs >= UINT32_MAX - 1 ||
	    grow_array(&e->loc_start, &e->cap_loc_start, e->n_locs + 1, sizeof(*e->loc_start), 64)) {
		e->oom = 1;
		return 0;
	}
	/* No frames of its own: a lookup in loc_ids never finds it. */
	e->loc_start[e->n_locs] = e->n_loc_frames;
	e->no_stack = ++e->n_locs;
	struct pb *loc = &e->sub, *line = &e->sub2;
	pb_uint(loc, LOCATION_ID, e->no_stack);
	pb_uint(line, LINE_FUNCTION_ID, fid);
	pb_msg(loc, LOCATION_LINE, line);
	pb_msg(&e->locs, PROFILE_LOCATION, loc);
	return e->no_stack;
}

/* A label with a string value (or a number, when str is NULL) into the message in sub2. */
static void put_label(struct export *e, struct pb *sample, const char *key, const char *str, uint64_t num)
{
	struct pb *l = &e->sub2;
	pb_uint(l, LABEL_KEY, str_id(e, key));
	if (str)
		pb_uint(l, LABEL_STR, str_id(e, str));
	else
		pb_int(l, LABEL_NUM, num);
	pb_msg(sample, SAMPLE_LABEL, l);
}

/* Gives every module a frame of stacks is in its mapping id, in module order. */
static void number_mappings(struct export *e, const struct snap_stack *st, size_t n, uint32_t **frames,
			    size_t *cap)
{
	const struct snap *s = e->s;
	for (size_t i = 0; i < n && !e->oom; i++) {
		size_t depth = snap_stack_frames(s, st[i].node, NULL, 0);
		if (grow_array(frames, cap, depth, sizeof(**frames), depth)) {
			e->oom = 1;
			return;
		}
		snap_stack_frames(s, st[i].node, *frames, depth);
		for (size_t k = 0; k < depth; k++) {
			const struct snap_frame *f = &s->frames[(*frames)[k]];
			if (!frame_module(s, f))
				continue;
			/* What pprof is told the profile already knows of the module's code. */
			e->map_id[f->module] = 1;
			e->map_has[f->module] |= (f->function ? HAS_FUNCTIONS : 0) | (f->file && *f->file ? HAS_FILENAMES : 0) |
						 (f->line ? HAS_LINES : 0) | (f->inlined ? HAS_INLINED : 0);
		}
	}
	uint32_t id = 0;
	for (size_t i = 0; i < s->n_modules; i++)
		if (e->map_id[i])
			e->map_id[i] = ++id;
}

static void put_mappings(struct export *e, struct pb *out)
{
	const struct snap *s = e->s;
	for (size_t i = 0; i < s->n_modules; i++) {
		if (!e->map_id[i])
			continue;
		const struct snap_module *m = &s->modules[i];
		int names = e->map_has[i] & HAS_FUNCTIONS, files = e->map_has[i] & HAS_FILENAMES;
		int lines = e->map_has[i] & HAS_LINES, inlined = e->map_has[i] & HAS_INLINED;
		/* Round the end up to a page: the module's extent, as far as its frames show it. */
		uint64_t limit = m->base + e->map_limit[i];
		limit = limit < m->base || limit > UINT64_MAX - 4095 ? UINT64_MAX : (limit + 4095) & ~(uint64_t)4095;
		struct pb *mp = &e->sub;
		pb_uint(mp, MAPPING_ID, e->map_id[i]);
		pb_uint(mp, MAPPING_MEMORY_START, m->base);
		pb_uint(mp, MAPPING_MEMORY_LIMIT, limit);
		pb_uint(mp, MAPPING_FILENAME, str_id(e, m->path));
		pb_uint(mp, MAPPING_BUILD_ID, str_id(e, m->build_id));
		pb_uint(mp, MAPPING_HAS_FUNCTIONS, !!names);
		pb_uint(mp, MAPPING_HAS_FILENAMES, !!files);
		pb_uint(mp, MAPPING_HAS_LINE_NUMBERS, !!lines);
		pb_uint(mp, MAPPING_HAS_INLINE_FRAMES, inlined || (names && m->lines));
		pb_msg(out, PROFILE_MAPPING, mp);
	}
}

static void put_value_type(struct export *e, struct pb *out, unsigned field, const char *type, const char *unit)
{
	struct pb *vt = &e->sub;
	pb_uint(vt, VALUE_TYPE_TYPE, str_id(e, type));
	pb_uint(vt, VALUE_TYPE_UNIT, str_id(e, unit));
	pb_msg(out, field, vt);
}

/* The samples, one per stack, largest first, with the locations and functions they need. */
static void put_samples(struct export *e, const struct snap_stack *st, size_t n, int tree,
			uint32_t **frames, size_t *cap)
{
	const struct snap *s = e->s;
	const struct snap_stack **v = view_sort_stacks(st, n);
	struct pb ids = { 0 }, values = { 0 }, sample = { 0 };
	if (!v) {
		e->oom = 1;
		return;
	}
	for (size_t i = 0; i < n && !e->oom; i++) {
		const struct snap_stack *x = v[i];
		size_t depth = snap_stack_frames(s, x->node, NULL, 0);
		if (grow_array(frames, cap, depth, sizeof(**frames), depth)) {
			e->oom = 1;
			break;
		}
		snap_stack_frames(s, x->node, *frames, depth);
		for (size_t k = 0; k < depth;) {
			size_t g = group_len(s, *frames, k, depth);
			pb_varint(&ids, loc_id(e, *frames + k, g));
			k += g;
		}
		if (!depth)
			pb_varint(&ids, no_stack_loc(e));
		pb_bytes(&sample, SAMPLE_LOCATION_ID, ids.p, ids.len);
		/* In the order of the sample types: inuse_objects, inuse_space, reserved_space. */
		pb_varint(&values, x->count > INT64_MAX ? INT64_MAX : x->count);
		pb_varint(&values, x->charged > INT64_MAX ? INT64_MAX : x->charged);
		pb_varint(&values, x->reserved > INT64_MAX ? INT64_MAX : x->reserved);
		pb_bytes(&sample, SAMPLE_VALUE, values.p, values.len);
		put_label(e, &sample, "kind", view_kind_key(x->kind), 0);
		if (tree) {
			const struct snap_proc *p = x->proc < s->n_procs ? &s->procs[x->proc] : NULL;
			if (p) {
				put_label(e, &sample, "pid", NULL, (uint64_t)(unsigned)p->pid);
				if (p->command)
					put_label(e, &sample, "command", p->command, 0);
			}
		}
		if (ids.oom || values.oom)
			sample.oom = 1;
		ids.len = values.len = 0;
		pb_msg(&e->samples, PROFILE_SAMPLE, &sample);
	}
	pb_fin(&ids);
	pb_fin(&values);
	pb_fin(&sample);
	free(v);
}

/* The profiled command, its arguments joined by spaces (at most about 1000 bytes), kept in e. */
static const char *command_line(struct export *e, const struct snap *s)
{
	if (!s->argc)
		return NULL;
	size_t max = 1000, len = 0;
	char *c = malloc(max + 4);
	if (!c)
		return keep(e, NULL);
	size_t i;
	for (i = 0; i < s->argc && len <= max; i++) {
		const char *a = s->argv[i] ? s->argv[i] : "";
		size_t n = strlen(a);
		if (i)
			c[len++] = ' ';
		if (n > max + 1 - len)
			n = max + 1 - len;
		memcpy(c + len, a, n);
		len += n;
	}
	if (len > max || i < s->argc) {
		/* Cut at a character boundary, then say so. */
		if (len > max)
			len = max;
		while (len && ((unsigned char)c[len] & 0xc0) == 0x80)
			len--;
		memcpy(c + len, "...", 3);
		len += 3;
	}
	c[len] = 0;
	return keep(e, c);
}

/* Nanoseconds for a time in seconds, 0 when it is not a sensible one. */
static uint64_t nanos(double seconds)
{
	if (!(seconds > 0) || seconds > 9e9)
		return 0;
	return (uint64_t)(seconds * 1e9 + 0.5);
}

/* Compresses the profile as gzip (fixed header: no name, no time) and writes it to out. */
static int put_gzip(FILE *out, const struct pb *b)
{
	z_stream z;
	unsigned char buf[65536];
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return error("out of memory");
	const unsigned char *p = b->p;
	size_t left = b->len;
	int rc;
	do {
		uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
		z.next_in = (unsigned char *)p;
		z.avail_in = chunk;
		p += chunk;
		left -= chunk;
		int flush = left ? Z_NO_FLUSH : Z_FINISH;
		do {
			z.next_out = buf;
			z.avail_out = sizeof(buf);
			rc = deflate(&z, flush);
			fwrite(buf, 1, sizeof(buf) - z.avail_out, out);
		} while (z.avail_out == 0);
	} while (left);
	deflateEnd(&z);
	return rc == Z_STREAM_END ? 0 : error("cannot compress the profile");
}

int view_pprof(FILE *out, const struct snap *a, const struct snap *b, const struct view_options *o)
{
	/* In a diff, the after side: go tool pprof -diff_base compares two exports. */
	const struct snap *s = b ? b : a;
	const struct snap_stack *st = s->stacks;
	size_t n = s->n_stacks;
	int tree = 0;
	if (o->set == FLAME_LIVE) {
		st = s->live;
		n = s->n_live;
	} else if (o->set == FLAME_TREE && s->has_tree) {
		st = s->tree_stacks;
		n = s->n_tree_stacks;
		tree = 1;
	}

	struct export e = { .s = s };
	struct pb prof = { 0 };
	uint32_t *frames = NULL;
	size_t cap = 0;
	int rc = -1, oom = 1;
	u64map_init(&e.str_ids);
	u64map_init(&e.fn_ids);
	u64map_init(&e.loc_ids);
	e.map_id = calloc(s->n_modules ? s->n_modules : 1, sizeof(*e.map_id));
	e.map_limit = calloc(s->n_modules ? s->n_modules : 1, sizeof(*e.map_limit));
	e.map_has = calloc(s->n_modules ? s->n_modules : 1, 1);
	if (!e.map_id || !e.map_limit || !e.map_has ||
	    grow_array(&e.strs, &e.cap_strs, 1, sizeof(*e.strs), 256))
		goto out;
	e.strs[e.n_strs++] = "";

	/* The sample types first, so their names lead the string table. */
	put_value_type(&e, &prof, PROFILE_SAMPLE_TYPE, "inuse_objects", "count");
	put_value_type(&e, &prof, PROFILE_SAMPLE_TYPE, "inuse_space", "bytes");
	put_value_type(&e, &prof, PROFILE_SAMPLE_TYPE, "reserved_space", "bytes");

	number_mappings(&e, st, n, &frames, &cap);
	put_samples(&e, st, n, tree, &frames, &cap);
	pb_put(&prof, e.samples.p, e.samples.len);
	put_mappings(&e, &prof);
	pb_put(&prof, e.locs.p, e.locs.len);
	pb_put(&prof, e.fns.p, e.fns.len);

	/* The comments and names the remaining fields need, before the string table is written. */
	const char *what = o->set == FLAME_LIVE ? "still live at the end of the run"
			 : tree ? "at the combined peak of the process tree" : "at the peak";
	const char *version = s->ptfil_version ? s->ptfil_version : "?";
	size_t clen = strlen(version) + strlen(what) + 64;
	char *comment = malloc(clen);
	if (comment)
		snprintf(comment, clen, "ptfil %s: memory %s, pid %d", version, what, s->pid);
	uint64_t c_what = str_id(&e, keep(&e, comment));
	uint64_t c_cmd = str_id(&e, command_line(&e, s));
	/* The view, in the words of the text report: the sample types keep their names, which servers know. */
	size_t vlen = strlen(view_view_meaning(s)) + 32;
	char *vline = malloc(vlen);
	if (vline)
		snprintf(vline, vlen, "view %s: %s", view_view_name(s), view_view_meaning(s));
	uint64_t c_view = str_id(&e, keep(&e, vline));
	uint64_t space = str_id(&e, "space"), bytes = str_id(&e, "bytes");
	uint64_t def = str_id(&e, "inuse_space");
	if (e.oom)
		goto out;

	for (size_t i = 0; i < e.n_strs; i++)
		pb_bytes(&prof, PROFILE_STRING_TABLE, e.strs[i], strlen(e.strs[i]));
	double at = o->set == FLAME_LIVE ? s->duration : tree ? s->tree_time : s->peak.time;
	pb_uint(&prof, PROFILE_TIME_NANOS, nanos(s->start_time + (at > 0 ? at : 0)));
	pb_uint(&prof, PROFILE_DURATION_NANOS, nanos(s->duration));
	struct pb *vt = &e.sub;
	pb_uint(vt, VALUE_TYPE_TYPE, space);
	pb_uint(vt, VALUE_TYPE_UNIT, bytes);
	pb_msg(&prof, PROFILE_PERIOD_TYPE, vt);
	pb_uint(&prof, PROFILE_PERIOD, 1);
	pb_uint(&prof, PROFILE_COMMENT, c_what);
	pb_uint(&prof, PROFILE_COMMENT, c_cmd);
	pb_uint(&prof, PROFILE_COMMENT, c_view);
	pb_uint(&prof, PROFILE_DEFAULT_SAMPLE_TYPE, def);

	if (e.oom || prof.oom || e.samples.oom || e.locs.oom || e.fns.oom || e.sub.oom || e.sub2.oom)
		goto out;
	rc = put_gzip(out, &prof);
	oom = 0;
out:
	if (oom)
		error("out of memory");
	free(frames);
	free(e.strs);
	for (size_t i = 0; i < e.n_owned; i++)
		free(e.owned[i]);
	free(e.owned);
	free(e.loc_frames);
	free(e.loc_start);
	free(e.map_id);
	free(e.map_limit);
	free(e.map_has);
	u64map_fin(&e.str_ids);
	u64map_fin(&e.fn_ids);
	u64map_fin(&e.loc_ids);
	pb_fin(&e.fns);
	pb_fin(&e.locs);
	pb_fin(&e.samples);
	pb_fin(&e.sub);
	pb_fin(&e.sub2);
	pb_fin(&prof);
	return rc;
}
