/*
 * Python frames from outside (see pystack.h). The path from a stopped thread
 * to its Python stack, in CPython 3.11 and later:
 *
 *   _PyRuntime.interpreters.head -> PyInterpreterState.threads.head -> the
 *   PyThreadState whose native_thread_id is the tid -> its current frame
 *   (through the _PyCFrame before 3.13) -> _PyInterpreterFrame.previous ...
 *
 * Each frame names its code object (file, qualified name, location table)
 * and the instruction it is at. A native call of the eval loop runs several
 * Python frames: 3.11 marks the first of them is_entry, 3.12+ puts a shim
 * frame before it (owned by the C stack, or from 3.14 by the interpreter),
 * so the chain splits into one group per native _PyEval_EvalFrameDefault
 * frame.
 *
 * A thread state names its thread by native_thread_id, the id the thread has
 * in its own PID namespace; ptrace stops it under the id it has in ptfil's.
 * In a container the two differ: the thread's own id is the last field of
 * NSpid in its /proc status, read once per thread (struct pyproc.ns_tids).
 *
 * Costs per stack: the thread state (one read, cached per tid and checked),
 * the frames (4 KiB pages cached for the one walk: frames are contiguous in
 * the thread's data stack), and one read for the headers of every code
 * object on it, which are checked against what was decoded before (a freed
 * code object's address reused by another is caught by its fields).
 */
#include "tracer/stacks/pystack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common/error.h"
#include "common/grow.h"
#include "symbols/sym.h"
#include "tracer/stacks/modules.h"

#define NAME_MAX_BYTES 1024       /* a qualified name or file name longer than this is cut */
#define TABLE_MAX_BYTES (1 << 20) /* a location table longer than this is not read: no line */
#define MAX_CHAIN 4096            /* frames walked at most, shims included: a cycle ends here */

/* ---------------------------------------------------------------- names */

static uint64_t fnv(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

void pynames_init(struct pynames *n)
{
	memset(n, 0, sizeof(*n));
	u64map_init(&n->ids);
}

void pynames_fin(struct pynames *n)
{
	for (size_t i = 0; i < n->n; i++) {
		free(n->v[i].function);
		free(n->v[i].file);
	}
	free(n->v);
	u64map_fin(&n->ids);
	memset(n, 0, sizeof(*n));
}

/* The id of (function, file), made on first use; U64MAP_NONE out of memory. */
static uint32_t pynames_intern(struct pynames *n, const char *function, const char *file)
{
	uint64_t key = fnv(file, fnv(function, 0xcbf29ce484222325ULL) * 31 + 7);
	for (;;) {
		uint32_t id = u64map_get(&n->ids, key);
		if (id == U64MAP_NONE)
			break;
		if (!strcmp(n->v[id].function, function) && !strcmp(n->v[id].file, file))
			return id;
		key = key * 0x9e3779b97f4a7c15ULL + 1;
	}
	if (grow_array(&n->v, &n->cap, n->n + 1, sizeof(*n->v), 64))
		return U64MAP_NONE;
	char *fn = strdup(function), *fl = strdup(file);
	if (!fn || !fl || u64map_put(&n->ids, key, (uint32_t)n->n)) {
		free(fn);
		free(fl);
		return U64MAP_NONE;
	}
	n->v[n->n].function = fn;
	n->v[n->n].file = fl;
	return (uint32_t)n->n++;
}

/* ---------------------------------------------------------------- reading the target */

/* Reads len bytes at addr of process pid. Returns 0 when all were read. */
static int peek(pid_t pid, uint64_t addr, void *buf, size_t len, struct pystats *st)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	if (st)
		st->reads++;
	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* Pages read during one walk: the frames of a thread lie together in its data stack. */
#define PAGE 4096
#define CACHED_PAGES 8
static struct {
	pid_t pid;
	uint64_t page[CACHED_PAGES];
	int valid[CACHED_PAGES];
	unsigned next;
	uint8_t data[CACHED_PAGES][PAGE];
} pages;

static void pages_reset(pid_t pid)
{
	pages.pid = pid;
	memset(pages.valid, 0, sizeof(pages.valid));
	pages.next = 0;
}

/* Reads len bytes at addr (within one page or two) through the page cache. */
static int cached(uint64_t addr, void *buf, size_t len, struct pystats *st)
{
	uint8_t *out = buf;
	while (len) {
		uint64_t page = addr & ~(uint64_t)(PAGE - 1);
		size_t in = (size_t)(addr - page), n = PAGE - in < len ? PAGE - in : len;
		int k;
		for (k = 0; k < CACHED_PAGES; k++)
			if (pages.valid[k] && pages.page[k] == page)
				break;
		if (k == CACHED_PAGES) {
			k = (int)(pages.next++ % CACHED_PAGES);
			pages.valid[k] = 0;
			if (peek(pages.pid, page, pages.data[k], PAGE, st))
				return peek(pages.pid, addr, out, len, st); /* a page partly unreadable */
			pages.page[k] = page;
			pages.valid[k] = 1;
		}
		memcpy(out, pages.data[k] + in, n);
		out += n;
		addr += n;
		len -= n;
	}
	return 0;
}

static uint64_t u64_at(const uint8_t *p, size_t off)
{
	uint64_t v;
	memcpy(&v, p + off, sizeof(v));
	return v;
}

/* ---------------------------------------------------------------- finding the interpreter */

/*
 * Per thread (direct-mapped by tid): its thread state, and what its last walk
 * read, fetched again in one read at its next stop, before the walk needs it:
 * the outer frames of a stack rarely change from one stop to the next.
 */
#define PREV_CODES 128
#define PREV_PAGES 4
struct pythread {
	pid_t tid;                    /* 0: an empty slot */
	pid_t own_tid;                /* its id in its own PID namespace: what native_thread_id holds */
	uint64_t ts;
	size_t n_codes, n_pages;
	uint64_t codes[PREV_CODES];
	uint64_t pages[PREV_PAGES];
};

void pyproc_init(struct pyproc *py)
{
	memset(py, 0, sizeof(*py));
	u64map_init(&py->checked);
	u64map_init(&py->code_ids);
	u64map_init(&py->ns_tids);
}

void pyproc_fin(struct pyproc *py)
{
	if (py->no_thread)
		warning("process %d: Python frames are missing from %llu of its %llu stacks in Python code "
			"(they show native frames only): no thread state of the interpreter named their thread; "
			"this happens when the id a thread has in its own PID namespace (a container) cannot be "
			"read from /proc, or when a thread runs Python code while the interpreter does not list it "
			"(a thread being set up or torn down, or a thread state changed by the program)",
			(int)py->pid, (unsigned long long)py->no_thread, (unsigned long long)py->stacks);
	free(py->threads);
	for (size_t i = 0; i < py->n_codes; i++)
		free(py->codes[i].table);
	free(py->codes);
	u64map_fin(&py->checked);
	u64map_fin(&py->code_ids);
	u64map_fin(&py->ns_tids);
	memset(py, 0, sizeof(*py));
}

/*
 * The ids of thread tid of process pid from ptfil's PID namespace inwards, as
 * NSpid in its /proc status lists them: how many there are (0 when the file
 * cannot be read, 1 in ptfil's own namespace or on a kernel without NSpid),
 * and the innermost in *own.
 */
static int ns_ids(pid_t pid, pid_t tid, pid_t *own)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int n = 1;
	*own = tid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		n = 0;
		for (char *p = line + 6, *end; ; p = end) {
			long v = strtol(p, &end, 10);
			if (end == p)
				break;
			*own = (pid_t)v;
			n++;
		}
		break;
	}
	fclose(f);
	return n;
}

#define NS_TIDS_MAX 4096          /* threads whose own id is remembered; beyond, the memory starts over */

/* The id thread tid has in its process's own PID namespace, read once per thread; 0 when unknown. */
static pid_t own_tid(struct pyproc *py, pid_t pid, pid_t tid)
{
	if (!py->other_ns)
		return tid;
	uint32_t v = u64map_get(&py->ns_tids, (uint64_t)tid);
	if (v != U64MAP_NONE)
		return (pid_t)v;
	pid_t own;
	if (ns_ids(pid, tid, &own) < 2)
		return 0;                 /* gone, or /proc unreadable: never guessed */
	if (py->ns_tids.n >= NS_TIDS_MAX) {
		u64map_fin(&py->ns_tids);
		u64map_init(&py->ns_tids);
	}
	u64map_put(&py->ns_tids, (uint64_t)tid, (uint32_t)own); /* out of memory: read again next time */
	return own;
}

static void unsupported(struct pyproc *py, const char *path, const char *why)
{
	warning("Python frames are not read in %s: %s; its stacks show native frames only", path, why);
	py->state = PY_UNSUPPORTED;
}

/* Two layouts alike, wherever they came from. */
static int same_layout(const struct pylayout *a, const struct pylayout *b)
{
	struct pylayout x, y;
	memcpy(&x, a, sizeof(x));     /* padding too: both were made zeroed */
	memcpy(&y, b, sizeof(y));
	x.debug_offsets = y.debug_offsets = 0;
	return !memcmp(&x, &y, sizeof(x));
}

static void found(struct pyproc *py, const struct modreg_entry *e, uint32_t gid, uint64_t runtime_off, pid_t pid)
{
	uint64_t voff, lo, size;
	uint32_t version;
	if (sym_dynamic_data(e->sym, "Py_Version", &voff) || sym_read(e->sym, voff, &version, sizeof(version))) {
		unsupported(py, e->path, "a CPython older than 3.11 (it has no Py_Version); ptfil reads 3.11 and later");
		return;
	}
	unsigned major = version >> 24, minor = version >> 16 & 255;
	const char *mode = getenv("PTFIL_PY_LAYOUT");
	int want_do = mode && !strcmp(mode, "debug-offsets"), want_compiled = mode && !strcmp(mode, "compiled");
	const struct pylayout *l = pylayout_for(major, minor);
	char why[256];
	if (major != 3 || minor < 11 || (!l && (minor < 13 || want_compiled))) {
		snprintf(why, sizeof(why), "CPython %u.%u, whose frame layout ptfil does not know (it reads 3.11 and later%s)",
			 major, minor, want_compiled ? "; PTFIL_PY_LAYOUT=compiled: 3.11 to 3.13" : "");
		unsupported(py, e->path, why);
		return;
	}
	if (sym_dynamic_extent(e->sym, "_PyEval_EvalFrameDefault", &lo, &size) || size == 0) {
		unsupported(py, e->path, "_PyEval_EvalFrameDefault is not exported");
		return;
	}
	py->runtime = e->base + runtime_off;
	if (minor >= 13) {
		/*
		 * The process's own _Py_DebugOffsets, whatever layout is used:
		 * they say whether it is a free-threaded build, and whether a
		 * compiled-in layout is the one it has.
		 */
		uint8_t d[PYL_DEBUG_OFFSETS_MAX];
		if (peek(pid, py->runtime, d, sizeof(d), NULL)) {
			snprintf(why, sizeof(why), "CPython %u.%u, whose _Py_DebugOffsets cannot be read", major, minor);
			unsupported(py, e->path, why);
			return;
		}
		if (pylayout_from_debug_offsets(&py->own, d, sizeof(d), version, why, sizeof(why))) {
			unsupported(py, e->path, why);
			return;
		}
		if (!l || want_do || !same_layout(l, &py->own)) {
			if (want_compiled) {
				snprintf(why, sizeof(why), "its _Py_DebugOffsets disagree with CPython %u.%u's compiled-in "
					 "layout, and PTFIL_PY_LAYOUT=compiled", major, minor);
				unsupported(py, e->path, why);
				return;
			}
			l = &py->own;
		}
	}
	if (!(py->threads = calloc(PY_THREAD_SLOTS, sizeof(*py->threads)))) {
		unsupported(py, e->path, "out of memory");
		return;
	}
	/* A process whose ids differ in its own PID namespace: its threads' ids are mapped (own_tid). */
	pid_t own;
	py->other_ns = ns_ids(pid, pid, &own) > 1;
	py->pid = pid;
	py->l = l;
	py->eval_gid = gid;
	py->eval_lo = lo;
	py->eval_hi = lo + size;
	py->state = PY_READY;
}

void pystack_detect(struct pyproc *py, const struct modmap *mm, const struct modreg *reg, pid_t pid)
{
	if (py->state == PY_READY || py->state == PY_UNSUPPORTED || mm->loads == py->checked_loads)
		return;
	py->checked_loads = mm->loads;
	for (size_t i = 0; i < mm->n; i++) {
		uint32_t gid = mm->v[i].gid;
		if (u64map_get(&py->checked, gid) != U64MAP_NONE)
			continue;
		if (u64map_put(&py->checked, gid, 1))
			return;
		const struct modreg_entry *e = &reg->v[gid];
		uint64_t off;
		if (e->sym && !e->copy && sym_dynamic_data(e->sym, "_PyRuntime", &off) == 0) {
			found(py, e, gid, off, pid);
			return;
		}
	}
	py->state = PY_ABSENT;
}

/* ---------------------------------------------------------------- thread states */

/*
 * Walks every interpreter's thread list for the thread state whose native id
 * is own (thread tid's id in its own namespace); returns it, or 0. In ptfil's
 * own namespace, every thread's state is remembered on the way.
 */
static uint64_t scan_threads(struct pyproc *py, struct pystats *st, pid_t pid, pid_t tid, pid_t own)
{
	const struct pylayout *l = py->l;
	uint64_t interp, found_ts = 0;
	st->thread_scans++;
	if (peek(pid, py->runtime + l->runtime_interp_head, &interp, 8, st))
		return 0;
	for (int ni = 0; interp && ni < 64; ni++) {
		uint64_t ts, next;
		if (peek(pid, interp + l->interp_threads_head, &ts, 8, st))
			return found_ts;
		for (int nt = 0; ts && nt < 100000; nt++) {
			uint8_t b[512];
			size_t need = (l->ts_native_thread_id > l->ts_next ? l->ts_native_thread_id : l->ts_next) + 8u;
			if (peek(pid, ts, b, need, st))
				return found_ts;
			pid_t t = (pid_t)u64_at(b, l->ts_native_thread_id);
			if (!py->other_ns) {
				struct pythread *slot = &py->threads[(unsigned)t % PY_THREAD_SLOTS];
				if (slot->tid != t || slot->ts != ts)
					*slot = (struct pythread){ .tid = t, .own_tid = t, .ts = ts };
			}
			if (t == own)
				found_ts = ts;
			ts = u64_at(b, l->ts_next);
		}
		if (peek(pid, interp + l->interp_next, &next, 8, st))
			break;
		interp = next;
	}
	struct pythread *slot = &py->threads[(unsigned)tid % PY_THREAD_SLOTS];
	if (found_ts && (slot->tid != tid || slot->ts != found_ts))
		*slot = (struct pythread){ .tid = tid, .own_tid = own, .ts = found_ts };
	return found_ts;
}

/* ---------------------------------------------------------------- code objects */

/* Reads the str object at addr as UTF-8 into out (size bytes with the NUL): its header, then all it needs. */
static int read_str(const struct pylayout *l, pid_t pid, uint64_t addr, char *out, size_t size, struct pystats *st)
{
	uint8_t h[128];
	size_t need = 0, have = l->compact_size;
	if (!addr || have > sizeof(h) || peek(pid, addr, h, have, st) || pylayout_str(l, h, have, out, size, &need) < 0)
		return -1;
	if (need <= have)
		return 0;
	size_t cap = (size_t)l->compact_size + 4 * NAME_MAX_BYTES; /* enough characters for out, whatever their kind */
	have = need < cap ? need : cap;
	uint8_t *big = malloc(have);
	int r = -1;
	if (big && peek(pid, addr, big, have, st) == 0 && pylayout_str(l, big, have, out, size, NULL) >= 0)
		r = 0;
	free(big);
	return r;
}

/* The fields of a code object a walk reads, from firstlineno to _co_firsttraceable (the last in 3.11 to 3.13). */
#define CODE_HDR_LO(l) ((l)->code_firstlineno)
#define CODE_HDR_LEN(l) ((size_t)(l)->code_firsttraceable + 4u - (l)->code_firstlineno)

/* Decodes the code object at addr whose header (CODE_HDR_*) is hdr into py->codes; its index, or -1. */
static int32_t decode_code(struct pyproc *py, struct pynames *names, struct pystats *st, pid_t pid, uint64_t addr,
			   const uint8_t *hdr)
{
	const struct pylayout *l = py->l;
	struct pycode c = { .last_lasti = INT64_MIN };
	c.filename = u64_at(hdr, l->code_filename - CODE_HDR_LO(l));
	c.qualname = u64_at(hdr, l->code_qualname - CODE_HDR_LO(l));
	c.linetable = u64_at(hdr, l->code_linetable - CODE_HDR_LO(l));
	memcpy(&c.firstlineno, hdr, sizeof(c.firstlineno));
	char file[NAME_MAX_BYTES], function[NAME_MAX_BYTES];
	if (read_str(l, pid, c.filename, file, sizeof(file), st) || read_str(l, pid, c.qualname, function, sizeof(function), st))
		return -1;
	st->code_decodes++;
	/* The location table: a bytes object. Without it the frame still names its function, with no line. */
	uint8_t bh[40];
	int64_t len;
	if (c.linetable && peek(pid, c.linetable, bh, l->bytes_data, st) == 0) {
		memcpy(&len, bh + l->bytes_size, sizeof(len));
		if (len > 0 && len <= TABLE_MAX_BYTES && (c.table = malloc((size_t)len))) {
			if (peek(pid, c.linetable + l->bytes_data, c.table, (size_t)len, st) == 0) {
				c.table_len = (uint32_t)len;
			} else {
				free(c.table);
				c.table = NULL;
			}
		}
	}
	c.name = pynames_intern(names, function, file);
	if (c.name == U64MAP_NONE) {
		free(c.table);
		return -1;
	}
	uint32_t i = u64map_get(&py->code_ids, addr);
	if (i != U64MAP_NONE) {
		/* The address now holds another code object: the old one was freed. */
		free(py->codes[i].table);
		py->codes[i] = c;
		return (int32_t)i;
	}
	if (grow_array(&py->codes, &py->cap_codes, py->n_codes + 1, sizeof(*py->codes), 256)) {
		free(c.table);
		return -1;
	}
	if (u64map_put(&py->code_ids, addr, (uint32_t)py->n_codes)) {
		free(c.table);
		return -1;
	}
	py->codes[py->n_codes] = c;
	return (int32_t)py->n_codes++;
}

/* ---------------------------------------------------------------- the walk */

/* Code object headers fetched ahead of the walk, in the order of the last walk. */
static struct {
	size_t n;
	uint64_t addr[PREV_CODES];
	int ok[PREV_CODES];
	uint8_t hdr[PREV_CODES][256];
} pre;

static const uint8_t *prefetched(uint64_t code, size_t i)
{
	if (i < pre.n && pre.addr[i] == code)
		return pre.ok[i] ? pre.hdr[i] : NULL;
	for (size_t k = 0; k < pre.n; k++)
		if (pre.addr[k] == code)
			return pre.ok[k] ? pre.hdr[k] : NULL;
	return NULL;
}

/*
 * One read for the thread state (tneed bytes into tb), the headers of the
 * code objects of the thread's last walk and the pages its frames were in.
 * Returns 0 when the thread state was read.
 */
static int prefetch(const struct pythread *ts, pid_t pid, uint8_t *tb, size_t tneed, size_t hlen, uint16_t hlo,
		    struct pystats *st)
{
	static struct iovec lv[1 + PREV_CODES + PREV_PAGES], rv[1 + PREV_CODES + PREV_PAGES];
	size_t n = 0;
	lv[n] = (struct iovec){ tb, tneed };
	rv[n++] = (struct iovec){ (void *)(uintptr_t)ts->ts, tneed };
	pre.n = ts->n_codes;
	for (size_t i = 0; i < pre.n; i++) {
		pre.addr[i] = ts->codes[i];
		pre.ok[i] = 0;
		lv[n] = (struct iovec){ pre.hdr[i], hlen };
		rv[n++] = (struct iovec){ (void *)(uintptr_t)(ts->codes[i] + hlo), hlen };
	}
	for (size_t i = 0; i < ts->n_pages; i++) {
		lv[n] = (struct iovec){ pages.data[i], PAGE };
		rv[n++] = (struct iovec){ (void *)(uintptr_t)ts->pages[i], PAGE };
	}
	st->reads++;
	ssize_t got = process_vm_readv(pid, lv, n, rv, n, 0);
	/* A read stops at the first range it cannot read: what came before it is good. */
	size_t left = got < 0 ? 0 : (size_t)got;
	for (size_t i = 0; i < n; i++) {
		if (left < lv[i].iov_len) {
			if (i == 0)
				return -1;
			break;
		}
		left -= lv[i].iov_len;
		if (i >= 1 && i <= pre.n) {
			pre.ok[i - 1] = 1;
		} else if (i > pre.n) {
			size_t k = i - 1 - pre.n;
			pages.page[k] = ts->pages[k];
			pages.valid[k] = 1;
		}
	}
	pages.next = (unsigned)ts->n_pages;
	return 0;
}

/*
 * Names raw[0..n), innermost first, into out (as many as there are at most):
 * the headers of their code objects read in one go (those fetched ahead
 * excepted), each checked against what was decoded from that address before
 * or decoded now, and its line looked up. Returns how many frames out got;
 * 0 on a read that failed (a wrong frame is never given).
 */
static size_t name_frames(struct pyproc *py, struct pynames *names, struct pystats *st, pid_t pid,
			  const struct pyraw *raw, size_t n, struct pyframe *out)
{
	const struct pylayout *l = py->l;
	size_t hlen = CODE_HDR_LEN(l);
	static const uint8_t *hdr[PY_MAX_FRAMES];
	static uint32_t hit[PY_MAX_FRAMES];  /* indexes in py->codes (decode_code may move them), or U64MAP_NONE */
	static struct iovec lv[PY_MAX_FRAMES], rv[PY_MAX_FRAMES];
	static uint8_t more[PY_MAX_FRAMES][256];
	size_t nm = 0;
	for (size_t i = 0; i < n; i++) {
		hit[i] = U64MAP_NONE;
		hdr[i] = NULL;
		if (raw[i].have_hdr) {
			/*
			 * Read by the kernel at the event: the code object's fields as
			 * they were then say whether it is the one decoded before, with
			 * no read of a code object that may have been freed since.
			 */
			uint32_t ci = u64map_get(&py->code_ids, raw[i].code);
			struct pycode *c = ci == U64MAP_NONE ? NULL : &py->codes[ci];
			if (c && c->filename == raw[i].filename && c->qualname == raw[i].qualname &&
			    c->linetable == raw[i].linetable) {
				hit[i] = ci;
				continue;
			}
		} else if ((hdr[i] = prefetched(raw[i].code, i))) {
			continue;
		}
		hdr[i] = more[nm];
		lv[nm] = (struct iovec){ more[nm], hlen };
		rv[nm] = (struct iovec){ (void *)(uintptr_t)(raw[i].code + CODE_HDR_LO(l)), hlen };
		nm++;
	}
	/* The headers of the code objects not fetched ahead, in one read; the kernel's misses one by one. */
	int kernel = n && raw[0].have_hdr;
	for (size_t done = 0; done < nm;) {
		size_t batch = kernel ? 1 : nm - done < 1024 ? nm - done : 1024;
		st->reads++;
		ssize_t got = process_vm_readv(pid, lv + done, batch, rv + done, batch, 0);
		if (got != (ssize_t)(batch * hlen)) {
			if (!kernel)
				return 0;
			memset(lv[done].iov_base, 0, hlen); /* a freed code object: its frame is marked below */
		}
		done += batch;
	}

	/* Each header checked against what was decoded from that address before. */
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *h = hdr[i];
		struct pycode *c = hit[i] == U64MAP_NONE ? NULL : &py->codes[hit[i]];
		if (c) {
			st->code_hits++;
		} else {
			uint32_t ci = u64map_get(&py->code_ids, raw[i].code);
			c = ci == U64MAP_NONE ? NULL : &py->codes[ci];
			int32_t first;
			memcpy(&first, h, sizeof(first));
			uint64_t fn = u64_at(h, l->code_filename - CODE_HDR_LO(l)), qn = u64_at(h, l->code_qualname - CODE_HDR_LO(l)),
				 lt = u64_at(h, l->code_linetable - CODE_HDR_LO(l));
			if (raw[i].have_hdr && (fn != raw[i].filename || qn != raw[i].qualname || lt != raw[i].linetable)) {
				/*
				 * The code object the kernel saw is gone (freed, its memory
				 * reused) before ptfil could name it: a frame says so, in its
				 * place, and the frames around it are kept.
				 */
				uint32_t freed = pynames_intern(names, "[Python code freed before ptfil named it]", "");
				st->kernel_freed++;
				if (freed == U64MAP_NONE)
					return 0;
				out[m].name = freed;
				out[m].line = 0;
				out[m++].last_of_call = raw[i].last_of_call;
				continue;
			}
			if (c && c->filename == fn && c->qualname == qn && c->linetable == lt && c->firstlineno == first) {
				st->code_hits++;
			} else {
				int32_t k = decode_code(py, names, st, pid, raw[i].code, h);
				if (k < 0)
					return 0;
				c = &py->codes[k];
			}
			int32_t traceable;
			memcpy(&traceable, h + l->code_firsttraceable - CODE_HDR_LO(l), sizeof(traceable));
			if (traceable < 0 || traceable > 4096)
				traceable = 0;    /* no set-up is that long: not the field (pylayout.c derives where it is) */
			c->firsttraceable = traceable;
		}
		int64_t lasti = ((int64_t)raw[i].instr - (int64_t)(raw[i].code + l->code_adaptive)) / 2;
		if (raw[i].owner != PY_OWNED_BY_GENERATOR && lasti < c->firsttraceable) {
			/*
			 * A frame still setting itself up (3.13 also runs a stand-in
			 * "__init__" this way when a class is called): no line of its
			 * code has run, and tracebacks leave it out; so does ptfil. If
			 * it was the first frame of an eval loop call, the frame before
			 * it ends that call, or nothing does.
			 */
			if (raw[i].last_of_call) {
				if (m && !out[m - 1].last_of_call)
					out[m - 1].last_of_call = 1;
				else
					out[m++] = (struct pyframe){ .name = PYFRAME_NONE, .last_of_call = 1 };
			}
			continue;
		}
		if (lasti != c->last_lasti) {
			c->last_lasti = lasti;
			c->last_line = pylayout_line(c->table, c->table_len, c->firstlineno, lasti);
		}
		out[m].name = c->name;
		out[m].line = c->last_line;
		out[m++].last_of_call = raw[i].last_of_call;
	}
	st->frames += m;
	return m;
}

size_t pystack_read(struct pyproc *py, struct pynames *names, struct pystats *st, pid_t pid, pid_t tid,
		    pystack_word_fn *stack_word, void *ctx, struct pyframe *out, size_t max)
{
	if (py->state != PY_READY || max == 0)
		return 0;
	const struct pylayout *l = py->l;
	size_t hlen = CODE_HDR_LEN(l);
	if (hlen > sizeof(pre.hdr[0]))
		return 0;
	st->stacks++;
	py->stacks++;
	pages_reset(pid);
	pre.n = 0;

	/* The thread state: cached per tid, checked by its native thread id (the thread's id in its own namespace). */
	struct pythread *ts = &py->threads[(unsigned)tid % PY_THREAD_SLOTS];
	uint8_t tb[512];
	size_t tneed = l->ts_native_thread_id + 8u;
	uint16_t frame_field = l->ts_cframe != PYL_NONE ? l->ts_cframe : l->ts_current_frame;
	if (frame_field + 8u > tneed)
		tneed = frame_field + 8u;
	int ok = ts->tid == tid && ts->ts &&
		 prefetch(ts, pid, tb, tneed, hlen, CODE_HDR_LO(l), st) == 0 &&
		 (pid_t)u64_at(tb, l->ts_native_thread_id) == ts->own_tid;
	if (!ok) {
		pid_t own = ts->tid == tid ? ts->own_tid : own_tid(py, pid, tid);
		uint64_t addr = own ? scan_threads(py, st, pid, tid, own) : 0;
		if (!addr || peek(pid, addr, tb, tneed, st) || (pid_t)u64_at(tb, l->ts_native_thread_id) != own) {
			py->no_thread++;
			return 0;
		}
		pre.n = 0;                /* scan_threads filled ts: nothing was fetched ahead for it */
		pages_reset(pid);
	}
	uint64_t cur = u64_at(tb, frame_field);
	if (l->ts_cframe != PYL_NONE && cur && (!stack_word || stack_word(ctx, cur + l->cframe_current, &cur)) &&
	    cached(cur + l->cframe_current, &cur, 8, st))
		return 0;

	/* The frames, innermost first. */
	static struct pyraw raw[PY_MAX_FRAMES];
	size_t n = 0;
	uint8_t fb[128];              /* what pylayout allows a frame's fields to need */
	size_t fneed = l->frame_owner + 1u;
	if (l->frame_is_entry != PYL_NONE && l->frame_is_entry + 1u > fneed)
		fneed = l->frame_is_entry + 1u;
	if (l->frame_instr + 8u > fneed)
		fneed = l->frame_instr + 8u;
	for (int steps = 0; cur && steps < MAX_CHAIN; steps++) {
		if (n == max || n == PY_MAX_FRAMES) {
			st->cut++;
			break;
		}
		if (cached(cur, fb, fneed, st))
			return 0;
		uint8_t owner = fb[l->frame_owner];
		if (owner >= PY_OWNED_BY_CSTACK) {
			/* 3.12+: a shim, such as the one that starts an eval loop call; the frame before it was that call's outermost. */
			if (n)
				raw[n - 1].last_of_call = 1;
		} else {
			raw[n].addr = cur;
			/* 3.14's f_executable is a _PyStackRef, tagged in its low bits; objects are 8-aligned in every version. */
			raw[n].code = u64_at(fb, l->frame_code) & ~(uint64_t)7;
			raw[n].instr = u64_at(fb, l->frame_instr);
			raw[n].last_of_call = l->frame_is_entry != PYL_NONE && fb[l->frame_is_entry];
			raw[n].owner = owner;
			raw[n].have_hdr = 0;
			if (!raw[n].code)
				return 0;
			n++;
		}
		cur = u64_at(fb, l->frame_previous);
	}
	if (n == 0)
		return 0;
	size_t m = name_frames(py, names, st, pid, raw, n, out);
	if (!m && n)
		return 0;

	/* What the next stop of this thread fetches ahead: these code objects and frame pages. */
	ts->n_codes = 0;
	for (size_t i = 0; i < n && ts->n_codes < PREV_CODES; i++)
		ts->codes[ts->n_codes++] = raw[i].code;
	ts->n_pages = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t pg = raw[i].addr & ~(uint64_t)(PAGE - 1);
		size_t k;
		for (k = 0; k < ts->n_pages && ts->pages[k] != pg; k++)
			;
		if (k == ts->n_pages) {
			if (ts->n_pages == PREV_PAGES)
				break;
			ts->pages[ts->n_pages++] = pg;
		}
	}
	return m;
}

size_t pystack_name(struct pyproc *py, struct pynames *names, struct pystats *st, pid_t pid,
		    const struct pyraw *raw, size_t n, struct pyframe *out)
{
	if (py->state != PY_READY || n == 0 || CODE_HDR_LEN(py->l) > sizeof(pre.hdr[0]))
		return 0;
	if (n > PY_MAX_FRAMES)
		n = PY_MAX_FRAMES;
	st->stacks++;
	st->kernel_stacks++;
	py->stacks++;
	pre.n = 0;                    /* nothing fetched ahead: the frames are another moment's */
	return name_frames(py, names, st, pid, raw, n, out);
}

int pystack_runs_python(const struct modmap *mm, const struct modreg *reg)
{
	for (size_t i = 0; i < mm->n; i++) {
		const struct modreg_entry *e = &reg->v[mm->v[i].gid];
		uint64_t off;
		if (e->sym && !e->copy && sym_dynamic_data(e->sym, "_PyRuntime", &off) == 0)
			return 1;
	}
	return 0;
}
