/* Turns the text of /proc/PID/maps into sorted entries and finds module bases; never reads /proc itself. */
#include "symbols/maps.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/hex.h"

/* A cursor over one line; the text is not NUL-terminated, so every read is bounded by end. */
struct maps_cur {
	const char *p, *end;
};

/* At least one digit, no overflow: a silently wrapped address would put an entry in the wrong place. */
static int parse_hex(struct maps_cur *c, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = c->p;
	int d;

	while (c->p < c->end && (d = hexval(*c->p)) >= 0) {
		if (v >> 60)
			return -1;
		v = v << 4 | (uint64_t)d;
		c->p++;
	}
	if (c->p == start)
		return -1;
	*out = v;
	return 0;
}

static int parse_dec(struct maps_cur *c, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = c->p;

	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		c->p++;
	}
	if (c->p == start)
		return -1;
	*out = v;
	return 0;
}

static int expect(struct maps_cur *c, char ch)
{
	if (c->p >= c->end || *c->p != ch)
		return -1;
	c->p++;
	return 0;
}

static int parse_perms(struct maps_cur *c, unsigned *perms)
{
	static const char want[3] = { 'r', 'w', 'x' };
	static const unsigned bit[3] = { MAPS_R, MAPS_W, MAPS_X };
	unsigned v = 0;

	if (c->end - c->p < 4)
		return -1;
	for (int i = 0; i < 3; i++) {
		if (c->p[i] == want[i])
			v |= bit[i];
		else if (c->p[i] != '-')
			return -1;
	}
	if (c->p[3] == 's')
		v |= MAPS_SHARED;
	else if (c->p[3] != 'p')
		return -1;
	c->p += 4;
	*perms = v;
	return 0;
}

/* Fills e from one line (without its newline); on failure *why says which field, and e owns nothing. */
static int parse_line(const char *line, size_t len, struct maps_entry *e, const char **why)
{
	struct maps_cur c = { line, line + len };
	uint64_t major, minor;
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;

	memset(e, 0, sizeof(*e));
	if (memchr(line, '\0', len)) {
		*why = "NUL byte in line";
		return -1;
	}
	if (parse_hex(&c, &e->start) || expect(&c, '-') || parse_hex(&c, &e->end)) {
		*why = "bad address range";
		return -1;
	}
	if (e->start >= e->end) {
		*why = "empty or inverted address range";
		return -1;
	}
	if (expect(&c, ' ') || parse_perms(&c, &e->perms)) {
		*why = "bad permissions";
		return -1;
	}
	if (expect(&c, ' ') || parse_hex(&c, &e->offset)) {
		*why = "bad offset";
		return -1;
	}
	if (expect(&c, ' ') || parse_hex(&c, &major) || expect(&c, ':') || parse_hex(&c, &minor) ||
	    major > UINT32_MAX || minor > UINT32_MAX) {
		*why = "bad device";
		return -1;
	}
	e->dev_major = (unsigned)major;
	e->dev_minor = (unsigned)minor;
	if (expect(&c, ' ') || parse_dec(&c, &e->inode)) {
		*why = "bad inode";
		return -1;
	}
	if (c.p < c.end && *c.p != ' ' && *c.p != '\t') {
		*why = "junk after inode";
		return -1;
	}
	/* The kernel pads to a column before the path; the path itself may hold spaces. */
	while (c.p < c.end && (*c.p == ' ' || *c.p == '\t'))
		c.p++;
	size_t plen = (size_t)(c.end - c.p);
	if (plen == 0)
		return 0;
	if (plen > dlen && memcmp(c.end - dlen, deleted, dlen) == 0) {
		e->deleted = 1;
		plen -= dlen;
	}
	e->path = strndup(c.p, plen);
	if (!e->path) {
		*why = "out of memory";
		return -1;
	}
	return 0;
}

int maps_parse(const char *text, size_t len, struct maps *m)
{
	const char *p = text, *end = text + len;
	size_t lineno = 0, cap = 0;

	m->v = NULL;
	m->n = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *why = NULL;
		struct maps_entry e;

		lineno++;
		if (parse_line(p, (size_t)(eol - p), &e, &why) < 0)
			goto fail;
		/* maps_find relies on order; the kernel prints ascending, so anything else is not maps text. */
		if (m->n && e.start < m->v[m->n - 1].end) {
			free(e.path);
			why = "entries not ascending or overlapping";
			goto fail;
		}
		if (grow_array(&m->v, &cap, m->n + 1, sizeof(*m->v), 64)) {
			free(e.path);
			why = "out of memory";
			goto fail;
		}
		m->v[m->n++] = e;
		p = nl ? nl + 1 : end;
		continue;
fail:
		maps_fin(m);
		return error("cannot parse maps line %zu: %s", lineno, why);
	}
	return 0;
}

void maps_fin(struct maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

const struct maps_entry *maps_find(const struct maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	/* Find the first entry starting above addr; the one before it is the only candidate. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct maps_entry *e = &m->v[lo - 1];
	return addr < e->end ? e : NULL;
}

static int same_object(const struct maps_entry *a, const struct maps_entry *b)
{
	return a->inode == b->inode && a->path && b->path && strcmp(a->path, b->path) == 0;
}

int maps_module_base(const struct maps *m, const struct maps_entry *e, uint64_t *base)
{
	if (!e || maps_entry_is_anon(e) || e < m->v || e >= m->v + m->n)
		return -1;
	/*
	 * Walk down past anonymous entries (bss and guard gaps often sit between
	 * a module's mappings), not past another file: a module's mappings are
	 * never interleaved with another's, and a mapping of the object further
	 * down belongs to another placement of it (a second mapping of its code,
	 * as V8 makes of node's, has no offset-0 mapping of its own).
	 */
	for (size_t i = (size_t)(e - m->v) + 1; i-- > 0;) {
		const struct maps_entry *c = &m->v[i];
		if (same_object(c, e)) {
			if (c->offset == 0) {
				*base = c->start;
				return 0;
			}
		} else if (!maps_entry_is_anon(c)) {
			break;
		}
	}
	return -1;
}

int maps_entry_is_anon(const struct maps_entry *e)
{
	const char *p = e->path;

	if (!p)
		return 1;
	if (strcmp(p, "[heap]") == 0 || strcmp(p, "[stack]") == 0)
		return 1;
	/* Named anonymous memory (prctl PR_SET_VMA_ANON_NAME) and old kernels' per-thread stacks. */
	if (strncmp(p, "[stack:", 7) == 0 || strncmp(p, "[anon:", 6) == 0 || strncmp(p, "[anon_shmem:", 12) == 0)
		return 1;
	/* A shared anonymous mmap is backed by an unlinked shmem inode the kernel calls /dev/zero. */
	if (e->deleted && e->inode != 0 && strcmp(p, "/dev/zero") == 0)
		return 1;
	return 0;
}
