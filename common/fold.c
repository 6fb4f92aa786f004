/* Own code, anchors and the folds of import-system and unnamed native frames (fold.h). */
#include "common/fold.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/u64map.h"

/* ---- paths -------------------------------------------------------------------- */

void fold_normalize(const char *path, char *out, size_t size)
{
	size_t n = 0;
	int abs = path[0] == '/';
	const char *p = path;
	if (size == 0)
		return;
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = p;
		while (*e && *e != '/')
			e++;
		size_t len = (size_t)(e - p);
		if (len == 0)
			break;
		if (len == 1 && p[0] == '.') {
			/* "." says nothing */
		} else if (len == 2 && p[0] == '.' && p[1] == '.' && n > 0 &&
			   !(n >= 2 && out[n - 1] == '.' && out[n - 2] == '.' && (n == 2 || out[n - 3] == '/'))) {
			/* back over the last component */
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--;
		} else if (len == 2 && p[0] == '.' && p[1] == '.' && n == 0 && abs) {
			/* "/.." is "/" */
		} else {
			if ((n > 0 || abs) && n + 1 < size)
				out[n++] = '/';
			size_t room = size - 1 - n;
			if (len > room)
				len = room;
			memcpy(out + n, p, len);
			n += len;
		}
		p = e;
	}
	if (n == 0 && abs && size > 1)
		out[n++] = '/';
	out[n] = '\0';
}

int fold_own_add(struct fold_own *o, const char *path)
{
	char cwd[PATH_MAX];
	char *joined = NULL;
	if (path[0] != '/' && getcwd(cwd, sizeof(cwd))) {
		size_t n = strlen(cwd) + strlen(path) + 2;
		if (!(joined = malloc(n)))
			return error("out of memory");
		snprintf(joined, n, "%s/%s", cwd, path);
		path = joined;
	}
	size_t size = strlen(path) + 1;
	char *norm = malloc(size);
	char **v = norm ? realloc(o->paths, (o->n + 1) * sizeof(*v)) : NULL;
	if (v)
		o->paths = v;
	if (norm)
		fold_normalize(path, norm, size);
	free(joined);
	if (!v) {
		free(norm);
		return error("out of memory");
	}
	o->paths[o->n++] = norm;
	return 0;
}

void fold_own_fin(struct fold_own *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->paths[i]);
	free(o->paths);
	o->paths = NULL;
	o->n = 0;
}

/* Whether file (normalised here) is one of o's paths or under one. */
static int listed(const struct fold_own *o, const char *file)
{
	char buf[PATH_MAX];
	if (!file || !*file)
		return 0;
	fold_normalize(file, buf, sizeof(buf));
	for (size_t i = 0; i < o->n; i++) {
		const char *p = o->paths[i];
		size_t n = strlen(p);
		if (strncmp(buf, p, n) == 0 && (buf[n] == '\0' || buf[n] == '/' || (n && p[n - 1] == '/')))
			return 1;
	}
	return 0;
}

/* Whether p starts "python3.N/" (or "python3.Nt/", a free-threaded build): then its length, else 0. */
static size_t python_dir(const char *p)
{
	size_t n = 0;
	if (strncmp(p, "python3.", 8) != 0)
		return 0;
	n = 8;
	if (p[n] < '0' || p[n] > '9')
		return 0;
	while (p[n] >= '0' && p[n] <= '9')
		n++;
	if (p[n] == 't')
		n++;
	return p[n] == '/' ? n + 1 : 0;
}

const char *fold_python_library(const char *file)
{
	static const char *const sites[] = { "/site-packages/", "/dist-packages/" };
	const char *best = NULL, *q;

	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++)
		for (const char *p = file; (q = strstr(p, sites[i])); p = q + 1)
			if (q[strlen(sites[i])] && (!best || q + strlen(sites[i]) > best))
				best = q + strlen(sites[i]);
	if (best)
		return best;
	/* The standard library: /usr/lib/python3.11/json/decoder.py, a venv's or pyenv's lib/python3.12/... */
	for (const char *p = file; (q = strstr(p, "/lib")); p = q + 1) {
		const char *d = q + 4;
		if (d[0] == '6' && d[1] == '4')
			d += 2;
		if (*d != '/')
			continue;
		size_t n = python_dir(d + 1);
		if (n && d[1 + n])
			best = d + 1 + n;
	}
	return best;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcmp(s + n - t, tail) == 0;
}

int fold_import_file(const char *file)
{
	if (!file)
		return 0;
	return strncmp(file, "<frozen importlib._bootstrap", 28) == 0 || strcmp(file, "<frozen zipimport>") == 0 ||
	       ends_with(file, "/importlib/_bootstrap.py") || ends_with(file, "/importlib/_bootstrap_external.py") ||
	       ends_with(file, "/importlib/__init__.py") || ends_with(file, "/zipimport.py");
}

void fold_module_name(const char *file, char *buf, size_t size)
{
	if (!strncmp(file, "<frozen ", 8)) {
		/* A module frozen into the interpreter names itself: "<frozen os>". */
		size_t n = strcspn(file + 8, ">");
		snprintf(buf, size, "%.*s", (int)n, file + 8);
		return;
	}
	const char *m = fold_python_library(file);
	if (!m) {
		m = strrchr(file, '/');
		m = m ? m + 1 : file;
	}
	size_t n = strlen(m);
	if (ends_with(m, "/__init__.py"))
		n -= strlen("/__init__.py");
	else if (ends_with(m, ".py"))
		n -= 3;
	if (n >= size)
		n = size - 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = m[i] == '/' ? '.' : m[i];
	buf[n] = '\0';
}

int fold_own_python(const struct fold_own *o, const char *file)
{
	if (!file || !*file)
		return 0;
	if (o && o->n)
		return listed(o, file);
	if (file[0] == '<')
		return !strcmp(file, "<stdin>") || !strcmp(file, "<string>") || !strncmp(file, "<ipython-input-", 15);
	return fold_python_library(file) == NULL;
}

/* Whether a module is installed by the system (or by Python's packaging): never the user's own. */
static int system_module(const char *path)
{
	static const char *const dirs[] = { "/usr/", "/lib/", "/lib32/", "/lib64/", "/bin/", "/sbin/",
					    "/snap/", "/nix/store/", "/gnu/store/" };
	if (path[0] != '/')
		return 1; /* [vdso] and the like */
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (strncmp(path, dirs[i], strlen(dirs[i])) == 0)
			return 1;
	return strstr(path, "/site-packages/") || strstr(path, "/dist-packages/");
}

/* Whether a module is a Python interpreter or its library (pyenv's live in a home directory). */
static int interpreter_module(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	return strncmp(base, "python", 6) == 0 || strncmp(base, "libpython", 9) == 0;
}

int fold_own_native(const struct fold_own *o, const char *module, const char *src, const char *function, int python)
{
	if (function && (function[0] == '[' || !strcmp(function, "_start") || !strcmp(function, "_init") ||
			 strncmp(function, "std::", 5) == 0 ||
			 strncmp(function, "__gnu_cxx::", 11) == 0 || strncmp(function, "__cxxabiv1::", 12) == 0))
		return 0;
	if (src && strncmp(src, "/usr/include/", 13) == 0)
		return 0;
	if (!module || !*module || (python && interpreter_module(module)))
		return 0;
	if (o && o->n)
		return listed(o, module) || (src && src[0] == '/' && listed(o, src));
	return !system_module(module);
}

int fold_frame_own(const struct snap *s, const struct fold_own *o, uint32_t fi, int python)
{
	const struct snap_frame *f = &s->frames[fi];
	if (f->kind == SNAP_FRAME_PYTHON)
		return fold_own_python(o, f->file);
	const char *module = f->module >= 0 && (size_t)f->module < s->n_modules ? s->modules[f->module].path : NULL;
	return fold_own_native(o, module, f->file, f->function, python);
}

/* The program's executable among s's modules: the one named as the command is, else -1. */
static int32_t main_module(const struct snap *s)
{
	if (s->argc == 0 || !s->argv[0])
		return -1;
	const char *want = strrchr(s->argv[0], '/');
	want = want ? want + 1 : s->argv[0];
	for (size_t i = 0; i < s->n_modules; i++) {
		const char *path = s->modules[i].path ? s->modules[i].path : "";
		const char *base = strrchr(path, '/');
		if (strcmp(base ? base + 1 : path, want) == 0)
			return (int32_t)i;
	}
	return -1;
}

/* Whether a Python file names code given as text ("<string>": python -c, exec; "<stdin>"). */
static int text_code(const char *file)
{
	return file && (!strcmp(file, "<string>") || !strcmp(file, "<stdin>"));
}

int fold_stack_own(const struct snap *s, const struct fold_own *o, const uint32_t *frames, size_t n, size_t k,
		   int python)
{
	/*
	 * Code given as text is the user's when the user ran it (python -c, the
	 * outermost Python code) or their code exec'd it; not when a library
	 * made it (namedtuple, dataclasses).
	 */
	while (k < n && !(o && o->n) && s->frames[frames[k]].kind == SNAP_FRAME_PYTHON &&
	       text_code(s->frames[frames[k]].file)) {
		size_t q = k + 1;
		while (q < n && s->frames[frames[q]].kind != SNAP_FRAME_PYTHON)
			q++;
		if (q == n)
			return 1;
		k = q;
	}
	return k < n && fold_frame_own(s, o, frames[k], python);
}

int fold_has_python(const struct snap *s, const uint32_t *frames, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (s->frames[frames[k]].kind == SNAP_FRAME_PYTHON)
			return 1;
	return 0;
}

size_t fold_anchor(const struct snap *s, const struct fold_own *o, const uint32_t *frames, size_t n)
{
	int python = fold_has_python(s, frames, n);
	for (size_t k = 0; k < n; k++)
		if (fold_stack_own(s, o, frames, n, k, python))
			return k;
	if (python || (o && o->n))
		return n;
	/* A program installed by the system: its own functions are its executable's. */
	int32_t exe = main_module(s);
	for (size_t k = 0; exe >= 0 && k < n; k++) {
		const struct snap_frame *f = &s->frames[frames[k]];
		if (f->module == exe && fold_own_native(NULL, "/own", f->file, f->function, 0))
			return k;
	}
	return n;
}

/* ---- folding -------------------------------------------------------------------- */

struct folder {
	struct snap *s;
	const struct fold_options *o;
	int fold_natives;        /* the snapshot did not keep every native frame */
	struct u64map labels;    /* hash of a new frame's (module, name) -> its index in s->frames */
	size_t frames_cap;
	struct snap_node *nodes; /* the new trie */
	size_t n_nodes, nodes_cap;
	struct u64map children;  /* (parent << 32 | frame) -> node */
	struct u64map memo;      /* old innermost node -> new one */
	uint32_t *in, *out;      /* one stack's frames, innermost first */
	size_t cap;
	long folded;
};

static uint64_t hash_label(int32_t module, const char *name, uint64_t salt)
{
	uint64_t h = 1469598103934665603ULL ^ salt;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (h ^ (uint64_t)(uint32_t)module) * 1099511628211ULL;
}

/* The index of the native frame named name in module (-1: none), added to s->frames once; UINT32_MAX when out of memory. */
static uint32_t new_frame(struct folder *F, int32_t module, const char *name)
{
	struct snap *s = F->s;
	for (uint64_t salt = 0;; salt++) {
		uint64_t h = hash_label(module, name, salt);
		uint32_t v = u64map_get(&F->labels, h);
		if (v == U64MAP_NONE)
			break;
		if (s->frames[v].module == module && s->frames[v].function && !strcmp(s->frames[v].function, name))
			return v;
	}
	if (s->n_frames >= UINT32_MAX - 1 ||
	    grow_array(&s->frames, &F->frames_cap, s->n_frames + 1, sizeof(*s->frames), s->n_frames + 64))
		return UINT32_MAX;
	struct snap_frame *f = &s->frames[s->n_frames];
	memset(f, 0, sizeof(*f));
	f->module = module;
	f->kind = SNAP_FRAME_NATIVE;
	if (!(f->function = strdup(name)))
		return UINT32_MAX;
	uint32_t idx = (uint32_t)s->n_frames++;
	uint64_t salt = 0;
	while (u64map_get(&F->labels, hash_label(module, name, salt)) != U64MAP_NONE)
		salt++;
	if (u64map_put(&F->labels, hash_label(module, name, salt), idx))
		return UINT32_MAX;
	return idx;
}

static int is_python(const struct snap *s, uint32_t fi)
{
	return s->frames[fi].kind == SNAP_FRAME_PYTHON;
}

static int is_import(const struct snap *s, uint32_t fi)
{
	return is_python(s, fi) && fold_import_file(s->frames[fi].file);
}

static int unnamed_native(const struct snap *s, uint32_t fi)
{
	const struct snap_frame *f = &s->frames[fi];
	return f->kind == SNAP_FRAME_NATIVE && !(f->function && f->function[0]) && !f->inlined && f->module >= 0 &&
	       (size_t)f->module < s->n_modules;
}

/* A long module name shortened as a frame label shows it: "_multiarray_umath…so". */
static void short_module(const char *path, char *buf, size_t size)
{
	const char *base = strrchr(path ? path : "", '/');
	base = base ? base + 1 : path ? path : "?";
	const char *dot = strchr(base, '.'), *ext = strrchr(base, '.');
	if (strlen(base) <= 24 || !dot || dot == ext || dot == base)
		snprintf(buf, size, "%s", base);
	else
		snprintf(buf, size, "%.*s\xe2\x80\xa6%s", (int)(dot - base), base, ext + 1);
}

/* Frames in[*k..j] as one frame named name (in module, or -1) at out[*m]; *k moves past them. -1 when out of memory. */
static int put_fold(struct folder *F, size_t *m, size_t *k, size_t j, int32_t module, const char *name)
{
	uint32_t fi = new_frame(F, module, name);
	if (fi == UINT32_MAX)
		return -1;
	F->out[(*m)++] = fi;
	F->folded += (long)(j - *k);
	*k = j + 1;
	return 0;
}

/* Folds F->in[0..n) into F->out; returns the folded length, or (size_t)-1 when out of memory. */
static size_t fold_frames(struct folder *F, size_t n)
{
	struct snap *s = F->s;
	const uint32_t *in = F->in;
	int python = fold_has_python(s, in, n);
	size_t m = 0;
	for (size_t k = 0; k < n;) {
		if (F->o->imports && python && is_import(s, in[k])) {
			size_t j = k;
			for (;;) {
				size_t q = j + 1;
				while (q < n && !is_python(s, in[q]))
					q++;
				if (q < n && is_import(s, in[q]))
					j = q;
				else
					break;
			}
			/* Named by the module whose body it runs: the first Python frame inside it, when a module's. */
			char name[300], mod[256] = "";
			for (size_t q = k; q-- > 0;)
				if (is_python(s, in[q])) {
					const struct snap_frame *f = &s->frames[in[q]];
					if (f->function && !strcmp(f->function, "<module>") && f->file && *f->file)
						fold_module_name(f->file, mod, sizeof(mod));
					break;
				}
			snprintf(name, sizeof(name), mod[0] ? "[import %s]" : "[import]", mod);
			if (put_fold(F, &m, &k, j, -1, name) < 0)
				return (size_t)-1;
			continue;
		}
		if (F->o->natives && F->fold_natives && python && unnamed_native(s, in[k])) {
			size_t j = k;
			while (j + 1 < n && unnamed_native(s, in[j + 1]) && s->frames[in[j + 1]].module == s->frames[in[k]].module)
				j++;
			if (j > k) {
				char name[300], mod[200];
				int32_t module = s->frames[in[k]].module;
				short_module(s->modules[module].path, mod, sizeof(mod));
				snprintf(name, sizeof(name), "[%s, %zu frames]", mod, j - k + 1);
				if (put_fold(F, &m, &k, j, module, name) < 0)
					return (size_t)-1;
				continue;
			}
		}
		F->out[m++] = in[k++];
	}
	return m;
}

/* The new node for the stack whose innermost node is old; UINT32_MAX when out of memory. */
static uint32_t refold(struct folder *F, uint32_t old)
{
	struct snap *s = F->s;
	if (old == 0 || old >= s->n_nodes)
		return old >= s->n_nodes ? 0 : old;
	uint32_t done = u64map_get(&F->memo, old);
	if (done != U64MAP_NONE)
		return done;
	size_t n = snap_stack_frames(s, old, NULL, 0);
	if (n > F->cap) {
		uint32_t *a = realloc(F->in, n * sizeof(*a)), *b = a ? realloc(F->out, n * sizeof(*b)) : NULL;
		if (a)
			F->in = a;
		if (b)
			F->out = b;
		if (!a || !b)
			return UINT32_MAX;
		F->cap = n;
	}
	snap_stack_frames(s, old, F->in, n);
	size_t m = fold_frames(F, n);
	if (m == (size_t)-1)
		return UINT32_MAX;
	uint32_t node = 0;
	for (size_t k = m; k-- > 0;) {
		uint64_t key = (uint64_t)node << 32 | F->out[k];
		uint32_t child = u64map_get(&F->children, key);
		if (child == U64MAP_NONE) {
			if (grow_array(&F->nodes, &F->nodes_cap, F->n_nodes + 1, sizeof(*F->nodes), 1024))
				return UINT32_MAX;
			child = (uint32_t)F->n_nodes++;
			F->nodes[child].parent = node;
			F->nodes[child].frame = F->out[k];
			if (u64map_put(&F->children, key, child))
				return UINT32_MAX;
		}
		node = child;
	}
	if (u64map_put(&F->memo, old, node))
		return UINT32_MAX;
	return node;
}

static int cmp_stack(const void *pa, const void *pb)
{
	const struct snap_stack *a = pa, *b = pb;
	if (a->node != b->node)
		return a->node < b->node ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return a->proc < b->proc ? -1 : a->proc > b->proc;
}

static uint64_t sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* Maps each stack's node (into node[]) and merges the stacks that became one. */
static int remap_stacks(struct folder *F, struct snap_stack *st, size_t *n, uint32_t *node)
{
	for (size_t i = 0; i < *n; i++)
		if ((node[i] = refold(F, st[i].node)) == UINT32_MAX)
			return -1;
	for (size_t i = 0; i < *n; i++)
		st[i].node = node[i];
	if (*n == 0)
		return 0;
	qsort(st, *n, sizeof(*st), cmp_stack);
	size_t w = 0;
	for (size_t i = 1; i < *n; i++) {
		if (cmp_stack(&st[w], &st[i]) == 0) {
			st[w].charged = sat(st[w].charged, st[i].charged);
			st[w].reserved = sat(st[w].reserved, st[i].reserved);
			st[w].count = sat(st[w].count, st[i].count);
		} else {
			st[++w] = st[i];
		}
	}
	*n = w + 1;
	return 0;
}

static int cmp_link_nodes(const void *pa, const void *pb)
{
	const struct snap_link *a = pa, *b = pb;
	if (a->touch_node != b->touch_node)
		return a->touch_node < b->touch_node ? -1 : 1;
	return a->alloc_node < b->alloc_node ? -1 : a->alloc_node > b->alloc_node;
}

static int cmp_link_bytes(const void *pa, const void *pb)
{
	const struct snap_link *a = pa, *b = pb;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return cmp_link_nodes(pa, pb);
}

static int has_counter(const struct snap *s, const char *name)
{
	for (size_t i = 0; i < s->n_counters; i++)
		if (s->counters[i].name && !strcmp(s->counters[i].name, name) && s->counters[i].count)
			return 1;
	return 0;
}

long fold_snap(struct snap *s, const struct fold_options *o)
{
	struct folder F = { .s = s, .o = o, .frames_cap = s->n_frames };
	F.fold_natives = !has_counter(s, "options.native_frames");
	u64map_init(&F.labels);
	u64map_init(&F.children);
	u64map_init(&F.memo);
	long rc = -1;
	size_t most = s->n_stacks;
	if (s->n_live > most)
		most = s->n_live;
	if (s->n_tree_stacks > most)
		most = s->n_tree_stacks;
	if (s->n_other > most)
		most = s->n_other;
	if (2 * s->n_links > most)
		most = 2 * s->n_links;
	uint32_t *node = malloc((most ? most : 1) * sizeof(*node));
	if (!node || grow_array(&F.nodes, &F.nodes_cap, 1, sizeof(*F.nodes), 1024))
		goto out;
	F.nodes[0].parent = 0;
	F.nodes[0].frame = 0;
	F.n_nodes = 1;
	/* Every node is mapped before any is replaced: s stays whole when memory runs out. */
	for (size_t i = 0; i < s->n_links; i++)
		if ((node[2 * i] = refold(&F, s->links[i].touch_node)) == UINT32_MAX ||
		    (node[2 * i + 1] = refold(&F, s->links[i].alloc_node)) == UINT32_MAX)
			goto out;
	struct { struct snap_stack *st; size_t *n; } sets[] = {
		{ s->stacks, &s->n_stacks }, { s->live, &s->n_live }, { s->tree_stacks, &s->n_tree_stacks },
		{ s->other, &s->n_other },
	};
	for (size_t k = 0; k < sizeof(sets) / sizeof(sets[0]); k++)
		for (size_t i = 0; i < *sets[k].n; i++)
			if (refold(&F, sets[k].st[i].node) == UINT32_MAX)
				goto out;
	/* Nothing below allocates. */
	for (size_t i = 0; i < s->n_links; i++) {
		s->links[i].touch_node = node[2 * i];
		s->links[i].alloc_node = node[2 * i + 1];
	}
	if (s->n_links) {
		qsort(s->links, s->n_links, sizeof(*s->links), cmp_link_nodes);
		size_t w = 0;
		for (size_t i = 1; i < s->n_links; i++) {
			if (cmp_link_nodes(&s->links[w], &s->links[i]) == 0)
				s->links[w].bytes = sat(s->links[w].bytes, s->links[i].bytes);
			else
				s->links[++w] = s->links[i];
		}
		s->n_links = w + 1;
		qsort(s->links, s->n_links, sizeof(*s->links), cmp_link_bytes);
	}
	for (size_t k = 0; k < sizeof(sets) / sizeof(sets[0]); k++)
		if (remap_stacks(&F, sets[k].st, sets[k].n, node) < 0)
			goto out; /* cannot happen: every node is in the memo */
	free(s->nodes);
	s->nodes = F.nodes;
	s->n_nodes = F.n_nodes;
	F.nodes = NULL;
	rc = F.folded;
out:
	if (rc < 0)
		error("out of memory folding the stacks");
	free(node);
	free(F.nodes);
	free(F.in);
	free(F.out);
	u64map_fin(&F.labels);
	u64map_fin(&F.children);
	u64map_fin(&F.memo);
	return rc;
}

/* ---- your lines ------------------------------------------------------------------ */

static const struct snap *lines_snap;

static int str_cmp(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

/* Frames that read the same in a line compare equal. */
static int cmp_frames(uint32_t a, uint32_t b)
{
	if (a == b)
		return 0;
	if (a == UINT32_MAX || b == UINT32_MAX)
		return a == UINT32_MAX ? 1 : -1;
	const struct snap_frame *x = &lines_snap->frames[a], *y = &lines_snap->frames[b];
	int c;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if ((c = str_cmp(x->function, y->function)) || (c = str_cmp(x->file, y->file)))
		return c;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->kind == SNAP_FRAME_PYTHON || x->line)
		return 0;
	return a < b ? -1 : 1;
}

static int cmp_line_frames(const void *pa, const void *pb)
{
	const struct fold_line *a = pa, *b = pb;
	return cmp_frames(a->frame, b->frame);
}

static int cmp_line_charged(const void *pa, const void *pb)
{
	const struct fold_line *a = pa, *b = pb;
	if (a->charged != b->charged)
		return a->charged > b->charged ? -1 : 1;
	return cmp_frames(a->frame, b->frame);
}

struct fold_line *fold_lines(const struct snap *s, const struct fold_own *o, const struct snap_stack *st, size_t n,
			     size_t *n_lines)
{
	struct fold_line *v = calloc(n ? n : 1, sizeof(*v));
	uint32_t *frames = NULL;
	size_t cap = 0;
	*n_lines = 0;
	if (!v) {
		error("out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		size_t depth = snap_stack_frames(s, st[i].node, NULL, 0);
		if (grow_array(&frames, &cap, depth, sizeof(*frames), 64)) {
			free(frames);
			free(v);
			error("out of memory");
			return NULL;
		}
		snap_stack_frames(s, st[i].node, frames, depth);
		size_t k = fold_anchor(s, o, frames, depth);
		v[i].frame = k < depth ? frames[k] : UINT32_MAX;
		v[i].charged = st[i].charged;
		v[i].stacks = 1;
	}
	free(frames);
	lines_snap = s;
	qsort(v, n, sizeof(*v), cmp_line_frames);
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (w && cmp_frames(v[w - 1].frame, v[i].frame) == 0) {
			v[w - 1].charged = sat(v[w - 1].charged, v[i].charged);
			v[w - 1].stacks++;
		} else {
			v[w++] = v[i];
		}
	}
	qsort(v, w, sizeof(*v), cmp_line_charged);
	*n_lines = w;
	return v;
}

/* Appends text to buf at *len (size bytes in all), printable ASCII and valid UTF-8 kept, the rest as '?'. */
static void put_plain(char *buf, size_t *len, size_t size, const char *text)
{
	const unsigned char *p = (const unsigned char *)(text ? text : "");
	while (*p && *len + 1 < size) {
		size_t k = 1;
		if (*p >= 0xc2 && *p <= 0xf4) {
			size_t need = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : 2;
			for (k = 1; k < need && (p[k] & 0xc0) == 0x80; k++)
				;
			if (k < need || *len + k + 1 > size)
				k = 0;
		} else if (*p < 0x20 || *p >= 0x7f) {
			k = 0;
		}
		if (k == 0) {
			buf[(*len)++] = '?';
			p++;
			continue;
		}
		memcpy(buf + *len, p, k);
		*len += k;
		p += k;
	}
	buf[*len] = '\0';
}

void fold_frame_brief(const struct snap *s, uint32_t fi, char *buf, size_t size)
{
	size_t len = 0;
	char num[48];
	if (size == 0)
		return;
	buf[0] = '\0';
	if (fi >= s->n_frames)
		return;
	const struct snap_frame *f = &s->frames[fi];
	const char *module = f->module >= 0 && (size_t)f->module < s->n_modules ? s->modules[f->module].path : NULL;
	const char *mbase = module ? strrchr(module, '/') : NULL;
	mbase = mbase ? mbase + 1 : module;
	if (f->function && f->function[0]) {
		put_plain(buf, &len, size, f->function);
	} else if (f->kind == SNAP_FRAME_PYTHON) {
		put_plain(buf, &len, size, "?");
	} else {
		if (mbase)
			put_plain(buf, &len, size, mbase);
		snprintf(num, sizeof(num), mbase ? " + 0x%llx" : "0x%llx", (unsigned long long)f->offset);
		put_plain(buf, &len, size, num);
		return;
	}
	if (f->file && f->file[0]) {
		const char *base = f->file[0] == '<' ? f->file : strrchr(f->file, '/');
		base = !base ? f->file : base[0] == '/' ? base + 1 : base;
		put_plain(buf, &len, size, " (");
		put_plain(buf, &len, size, base);
		if (f->line) {
			snprintf(num, sizeof(num), ":%u", (unsigned)f->line);
			put_plain(buf, &len, size, num);
		}
		put_plain(buf, &len, size, ")");
	} else if (mbase && f->function[0] != '[') {
		put_plain(buf, &len, size, " (");
		put_plain(buf, &len, size, mbase);
		put_plain(buf, &len, size, ")");
	}
}
