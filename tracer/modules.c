/* Loaded objects: /proc/PID/maps read here, parsed and resolved by symbols/. */
#include "tracer/modules.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "symbols/maps.h"
#include "symbols/sym.h"

int modreg_init(struct modreg *r)
{
	memset(r, 0, sizeof(*r));
	r->cache = sym_cache_new();
	return r->cache ? 0 : -1;
}

void modreg_fin(struct modreg *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].path);
	free(r->v);
	sym_cache_free(r->cache);
	memset(r, 0, sizeof(*r));
}

static int64_t modreg_get(struct modreg *r, const char *path, uint64_t base)
{
	for (size_t i = r->n; i-- > 0;)
		if (r->v[i].base == base && strcmp(r->v[i].path, path) == 0)
			return (int64_t)i;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 32;
		struct modreg_entry *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -1;
		r->v = v;
		r->cap = cap;
	}
	struct modreg_entry *e = &r->v[r->n];
	memset(e, 0, sizeof(*e));
	e->path = strdup(path);
	if (!e->path)
		return -1;
	e->base = base;
	e->sym = sym_cache_get(r->cache, path);
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
		if (n == cap) {
			char *b = realloc(buf, cap *= 2);
			if (!b)
				free(buf);
			buf = b;
		}
	}
	close(fd);
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

int proc_maps_read(pid_t pid, struct maps *maps)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	size_t len;
	char *text = slurp(path, &len);
	if (!text) {
		maps->v = NULL;
		maps->n = 0;
		return error_errno("cannot read %s", path);
	}
	int rc = maps_parse(text, len, maps);
	free(text);
	return rc;
}

int modmap_load(struct modmap *m, struct modreg *r, pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	struct maps maps;
	if (proc_maps_read(pid, &maps)) {
		maps_fin(&maps);
		return -1;
	}
	struct modrange *v = calloc(maps.n ? maps.n : 1, sizeof(*v));
	if (!v) {
		maps_fin(&maps);
		return error("out of memory reading %s", path);
	}
	size_t n = 0;
	m->stack_start = m->stack_end = 0;
	for (size_t i = 0; i < maps.n; i++) {
		const struct maps_entry *e = &maps.v[i];
		/* Objects with code only: data files (ld.so.cache, locale archives) hold no frames. */
		if (e->path && !has_code(&maps, e))
			continue;
		if (e->path && strcmp(e->path, "[stack]") == 0) {
			m->stack_start = e->start;
			m->stack_end = e->end;
		}
		uint64_t base;
		if (!e->path || e->path[0] != '/' || maps_module_base(&maps, e, &base))
			continue;
		int64_t gid = modreg_get(r, e->path, base);
		if (gid < 0)
			continue;
		v[n].start = e->start;
		v[n].end = e->end;
		v[n].gid = (uint32_t)gid;
		v[n].perms = e->perms;
		n++;
	}
	maps_fin(&maps);
	free(m->v);
	m->v = v;
	m->n = n;
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
