/* Loaded objects: the maps of a process read here, parsed by symbols/, each object's file found through the target and verified. */
#include "tracer/stacks/modules.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/error.h"
#include "common/grow.h"
#include "symbols/maps.h"
#include "symbols/sym.h"

int modreg_init(struct modreg *r)
{
	memset(r, 0, sizeof(*r));
	u64map_init(&r->failed);
	r->cache = sym_cache_new();
	return r->cache ? 0 : -1;
}

static int warm_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct modreg *r = arg;
	const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	if (!base || (strncmp(base + 1, "libc.so.", 8) != 0 && strncmp(base + 1, "ld-linux", 8) != 0))
		return 0;
	int fd = open(info->dlpi_name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct sym_file *f = sym_open_fd(fd, info->dlpi_name);
	close(fd);
	/* Only a file with a build id: the target's copy is matched by it (verified_file). */
	if (f && sym_build_id(f) && (f = sym_cache_add(r->cache, f)) != NULL)
		sym_prepare_lines(f);
	else
		sym_close(f);
	return 0;
}

void modreg_warm(struct modreg *r)
{
	dl_iterate_phdr(warm_one, r);
}

void modreg_fin(struct modreg *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].path);
		free(r->v[i].build_id);
		free(r->v[i].package);
		free(r->v[i].eh_own);
	}
	free(r->v);
	sym_cache_free(r->cache);
	u64map_fin(&r->failed);
	memset(r, 0, sizeof(*r));
}

/* Whether registry entry x is the object maps entry e belongs to, mapped at base. */
static int is_mapping(const struct modreg_entry *x, const struct maps_entry *e, uint64_t base)
{
	return x->base == base && x->inode == e->inode && x->dev_major == e->dev_major &&
	       x->dev_minor == e->dev_minor && strcmp(x->path, e->path) == 0;
}

int modreg_same(const struct modreg *r, uint32_t a, uint32_t b)
{
	const struct modreg_entry *x = &r->v[a], *y = &r->v[b];
	return a == b || (x->base == y->base && x->inode == y->inode && x->dev_major == y->dev_major &&
			  x->dev_minor == y->dev_minor && strcmp(x->path, y->path) == 0);
}

int modreg_is_glibc(struct modreg *r, uint32_t gid)
{
	if (gid >= r->n)
		return 0;
	struct modreg_entry *e = &r->v[gid];
	if (!e->glibc)
		e->glibc = !e->copy && sym_is_glibc(e->sym) ? 1 : -1;
	return e->glibc > 0;
}

/* The target's memory at one module, for symbols/: module offsets from base, read through thread tid. */
struct mapped {
	pid_t tid;
	uint64_t base;
};

static int read_mapped(void *ctx, uint64_t off, void *buf, size_t len)
{
	const struct mapped *m = ctx;
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)(m->base + off), len };
	return process_vm_readv(m->tid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return (h ^ 0xff) * 0x100000001b3ULL;
}

/*
 * The file of the object maps entry e (the mapping of its file offset 0, at
 * base) belongs to, if one can be verified to be the image mapped in the
 * process whose thread tid is alive; NULL otherwise, with *why saying why (or
 * NULL when symbols/ has reported it already). mapped_id is the build id read
 * from the image in memory (NULL when it has none).
 */
static struct sym_file *verified_file(struct modreg *r, pid_t tid, const struct maps_entry *e,
				      const struct sym_image *im, const char *mapped_id, const char **why)
{
	/* A file with the very build id in memory is the same build, wherever it was found. */
	struct sym_file *f = sym_cache_find(r->cache, mapped_id);
	if (f)
		return f;
	/*
	 * The mapped file itself (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE:
	 * it reaches a deleted file too), else its path as the target sees it
	 * (its root: a container's files, or the new file of an upgraded library).
	 */
	char paths[2][PATH_MAX + 64];
	snprintf(paths[0], sizeof(paths[0]), "/proc/%d/map_files/%llx-%llx", (int)tid,
		 (unsigned long long)e->start, (unsigned long long)e->end);
	int n = snprintf(paths[1], sizeof(paths[1]), "/proc/%d/root%s", (int)tid, e->path);
	*why = "its file cannot be opened";
	for (int k = 0; k < 2; k++) {
		if (k == 1 && (n < 0 || (size_t)n >= sizeof(paths[1])))
			break;
		int fd = open(paths[k], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st;
		int stat_ok = fstat(fd, &st) == 0;
		int same_inode = k == 0 || (stat_ok && major(st.st_dev) == e->dev_major &&
					    minor(st.st_dev) == e->dev_minor && st.st_ino == e->inode && !e->deleted);
		int fresh = 0;
		f = !mapped_id && stat_ok ? sym_cache_find_file(r->cache, &st) : NULL;
		if (!f) {
			/* Its debug files are looked for as the target sees them too (a container's /usr/lib/debug). */
			char root[64];
			snprintf(root, sizeof(root), "/proc/%d/root", (int)tid);
			f = sym_open_fd_at(fd, e->path, root);
			fresh = 1;
		}
		close(fd);
		if (!f) {
			*why = NULL; /* symbols/ said why; and when the mapped file itself is unreadable, no other will do */
			if (k == 0)
				break;
			continue;
		}
		const char *file_id = sym_build_id(f);
		int ok;
		if (mapped_id && file_id) {
			ok = strcmp(mapped_id, file_id) == 0;
			*why = "the file there now has another build id: replaced on disk since it was loaded?";
		} else if (mapped_id || file_id) {
			ok = 0;
			*why = "the file there now is another build (a build id on one side only)";
		} else {
			/* No build id anywhere: only the mapped inode itself, with the very headers in memory. */
			ok = same_inode && sym_image_same_headers(f, im);
			*why = "it has no build id, and the file there now is not the one mapped";
		}
		if (ok)
			return fresh ? sym_cache_add(r->cache, f) : f;
		if (fresh)
			sym_close(f);
	}
	return NULL;
}

/*
 * A new entry at the registry's end (not counted in r->n yet) for the object
 * of maps entry e mapped at base, taking build_id (freed when it fails).
 * NULL out of memory.
 */
static struct modreg_entry *new_entry(struct modreg *r, const struct maps_entry *e, uint64_t base, char *build_id)
{
	char *path = strdup(e->path);
	if (!path || grow_array(&r->v, &r->cap, r->n + 1, sizeof(*r->v), 32)) {
		free(path);
		free(build_id);
		return NULL;
	}
	struct modreg_entry *x = &r->v[r->n];
	memset(x, 0, sizeof(*x));
	x->path = path;
	x->base = base;
	x->dev_major = e->dev_major;
	x->dev_minor = e->dev_minor;
	x->inode = e->inode;
	x->build_id = build_id;
	return x;
}

/*
 * The registry id of the object maps entry e belongs to, mapped at base in
 * the process whose thread tid is alive; registered (its file verified) when
 * new. Returns -1 out of memory.
 */
static int64_t modreg_resolve(struct modreg *r, const struct maps *maps, const struct maps_entry *e, uint64_t base,
			      pid_t pid, pid_t tid)
{
	struct mapped mem = { tid, base };
	struct sym_image im = { read_mapped, &mem };
	char *mapped_id = NULL;
	int readable = sym_image_build_id(&im, &mapped_id) == 0;
	for (size_t i = r->n; i-- > 0;) {
		const struct modreg_entry *x = &r->v[i];
		if (is_mapping(x, e, base) && (x->build_id ? mapped_id && strcmp(x->build_id, mapped_id) == 0 : !mapped_id)) {
			free(mapped_id);
			return (int64_t)i;
		}
	}
	struct modreg_entry *x = new_entry(r, e, base, mapped_id);
	if (!x)
		return -1;
	/* The mapping of file offset 0 names the file in map_files, and holds the headers. */
	const struct maps_entry *head = maps_find(maps, base);
	if (!head || head->start != base)
		head = e;
	uint64_t key = hash_str(hash_str(0xcbf29ce484222325ULL, e->path), mapped_id);
	key = (key ^ e->inode) * 0x100000001b3ULL ^ ((uint64_t)e->dev_major << 32 | e->dev_minor);
	const char *why = "its ELF headers cannot be read in its memory";
	if (u64map_get(&r->failed, key) != U64MAP_NONE)
		why = NULL; /* reported already */
	else if (readable)
		x->sym = verified_file(r, tid, head, &im, mapped_id, &why);
	if (!x->sym && u64map_get(&r->failed, key) == U64MAP_NONE) {
		if (why)
			warning("cannot verify %s, mapped in process %d: %s; it is not hooked and its file is not used "
				"for unwinding or names (its memory is still charged)", e->path, (int)pid, why);
		if (u64map_put(&r->failed, key, 1))
			return -1;
	}
	return (int64_t)r->n++;
}

void modmap_init(struct modmap *m) { memset(m, 0, sizeof(*m)); }

void modmap_fin(struct modmap *m)
{
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		ssize_t got = read(fd, buf + n, cap - n);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			buf = NULL;
			break;
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n == cap && grow_array(&buf, &cap, n + 1, 1, 0)) {
			free(buf);
			buf = NULL;
		}
	}
	int saved = errno;
	close(fd);
	errno = saved;
	*len = n;
	return buf;
}

/* True when some executable mapping comes from the same file as e. */
static int has_code(const struct maps *maps, const struct maps_entry *e)
{
	for (size_t i = 0; i < maps->n; i++) {
		const struct maps_entry *o = &maps->v[i];
		if ((o->perms & MAPS_X) && o->inode == e->inode && o->dev_major == e->dev_major &&
		    o->dev_minor == e->dev_minor && o->path && strcmp(o->path, e->path) == 0)
			return 1;
	}
	return 0;
}

/*
 * The maps text of process pid, and in *tid a thread of it that is alive
 * (whose /proc entries show its memory): pid itself, or when its maps read
 * empty (a leader that exited) the first thread whose maps do not. NULL after
 * error() when pid's maps cannot be read at all.
 */
static char *maps_text(pid_t pid, size_t *len, pid_t *tid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	*tid = pid;
	char *text = slurp(path, len);
	if (!text) {
		error_errno("cannot read %s", path);
		return NULL;
	}
	if (*len)
		return text;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		char *end;
		long t = strtol(de->d_name, &end, 10);
		if (*end || t <= 0 || t == pid)
			continue;
		char tpath[96];
		snprintf(tpath, sizeof(tpath), "/proc/%d/task/%ld/maps", (int)pid, t);
		size_t tlen;
		char *ttext = slurp(tpath, &tlen);
		if (ttext && tlen) {
			free(text);
			text = ttext;
			*len = tlen;
			*tid = (pid_t)t;
			break;
		}
		free(ttext);
	}
	if (d)
		closedir(d);
	return text;
}

static int maps_read(pid_t pid, struct maps *maps, pid_t *tid)
{
	size_t len;
	char *text = maps_text(pid, &len, tid);
	if (!text) {
		maps->v = NULL;
		maps->n = 0;
		return -1;
	}
	int rc = maps_parse(text, len, maps);
	free(text);
	return rc;
}

int proc_maps_read(pid_t pid, struct maps *maps)
{
	pid_t tid;
	return maps_read(pid, maps, &tid);
}

static int by_start(const void *a, const void *b)
{
	const struct modrange *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The registry id for code mapping e, which belongs to no module of its own
 * (maps_module_base found none): a copy of part of an object that v[0..n)
 * holds with a verified file. -1 when it is not one, -2 out of memory.
 */
static int64_t copy_of(struct modreg *r, const struct modrange *v, size_t n, const struct maps_entry *e)
{
	const struct modreg_entry *full = NULL;
	for (size_t i = 0; i < n && !full; i++) {
		const struct modreg_entry *x = &r->v[v[i].gid];
		if (x->sym && !x->copy && x->inode == e->inode && x->dev_major == e->dev_major &&
		    x->dev_minor == e->dev_minor && strcmp(x->path, e->path) == 0)
			full = x;
	}
	uint64_t off;
	if (!full || sym_file_offset_to_module(full->sym, e->offset, &off) || off > e->start)
		return -1;
	uint64_t base = e->start - off;
	for (size_t i = r->n; i-- > 0;)
		if (r->v[i].copy && is_mapping(&r->v[i], e, base) && r->v[i].sym == full->sym)
			return (int64_t)i;
	struct sym_file *sym = full->sym;
	char *id = full->build_id ? strdup(full->build_id) : NULL;
	struct modreg_entry *x = full->build_id && !id ? NULL : new_entry(r, e, base, id);
	if (!x)
		return -2;
	x->sym = sym;
	x->copy = 1;
	return (int64_t)r->n++;
}

int modmap_load(struct modmap *m, struct modreg *r, pid_t pid)
{
	struct maps maps;
	pid_t tid;
	if (maps_read(pid, &maps, &tid)) {
		maps_fin(&maps);
		return -1;
	}
	if (maps.n == 0) {
		maps_fin(&maps);
		return 0;
	}
	struct modrange *v = calloc(maps.n, sizeof(*v));
	if (!v) {
		maps_fin(&maps);
		return error("out of memory reading the maps of process %d", (int)pid);
	}
	size_t n = 0, copies = 0;
	int64_t last = -1;
	uint64_t stack_start = 0, stack_end = 0;
	for (size_t i = 0; i < maps.n; i++) {
		const struct maps_entry *e = &maps.v[i];
		/* Objects with code only: data files (ld.so.cache, locale archives) hold no frames. */
		if (e->path && !has_code(&maps, e))
			continue;
		if (e->path && strcmp(e->path, "[stack]") == 0) {
			stack_start = e->start;
			stack_end = e->end;
		}
		uint64_t base;
		if (!e->path || e->path[0] != '/')
			continue;
		if (maps_module_base(&maps, e, &base)) {
			copies += (e->perms & MAPS_X) != 0;
			continue;
		}
		/*
		 * The mappings of one object come one after another, and an object this
		 * process had mapped at the last reading is the one known: only a new
		 * one is read in memory and verified.
		 */
		int64_t gid = -1;
		const struct modrange *o;
		if (last >= 0 && is_mapping(&r->v[last], e, base))
			gid = last;
		else if ((o = modmap_find(m, base)) != NULL && is_mapping(&r->v[o->gid], e, base))
			gid = o->gid;
		else
			gid = modreg_resolve(r, &maps, e, base, pid, tid);
		if (gid < 0) {
			free(v);
			maps_fin(&maps);
			return error("out of memory reading the maps of process %d", (int)pid);
		}
		last = gid;
		v[n].start = e->start;
		v[n].end = e->end;
		v[n].gid = (uint32_t)gid;
		v[n].perms = e->perms;
		n++;
	}
	/* Code mapped apart from its object, once every object is known. */
	size_t whole = n;
	for (size_t i = 0; copies && i < maps.n; i++) {
		const struct maps_entry *e = &maps.v[i];
		uint64_t base;
		if (!(e->perms & MAPS_X) || !e->path || e->path[0] != '/' || !maps_module_base(&maps, e, &base))
			continue;
		int64_t gid = copy_of(r, v, whole, e);
		if (gid == -2) {
			free(v);
			maps_fin(&maps);
			return error("out of memory reading the maps of process %d", (int)pid);
		}
		if (gid < 0)
			continue;
		v[n].start = e->start;
		v[n].end = e->end;
		v[n].gid = (uint32_t)gid;
		v[n].perms = e->perms;
		n++;
	}
	if (n != whole)
		qsort(v, n, sizeof(*v), by_start);
	maps_fin(&maps);
	free(m->v);
	m->v = v;
	m->n = n;
	m->stack_start = stack_start;
	m->stack_end = stack_end;
	m->loads++;
	return 0;
}

const struct modrange *modmap_find(const struct modmap *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < m->n && m->v[lo].start <= addr)
		return &m->v[lo];
	return NULL;
}
