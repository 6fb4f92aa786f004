/* Source lines and inlined calls from DWARF (see srcline.h). */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "common/u64map.h"
#include "symbols/srcline.h"
#include "symbols/sym.h"

char *srcline_tidy(const char *path)
{
	if (!path)
		return NULL;
	size_t n = strlen(path);
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	size_t k = 0;
	const char *p = path;
	if (*p == '/')
		out[k++] = *p++;
	while (*p) {
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len && !(len == 1 && *p == '.')) {
			if (k && out[k - 1] != '/')
				out[k++] = '/';
			memcpy(out + k, p, len);
			k += len;
		}
		p += len;
		while (*p == '/')
			p++;
	}
	out[k] = '\0';
	if (!k) {  /* "." alone: keep what was given */
		free(out);
		return strdup(path);
	}
	return out;
}

/* A function's name: its linkage name demangled (C++), else its plain name; through abstract origins. */
static char *die_name(Dwarf_Die *d)
{
	Dwarf_Attribute a;
	const char *link = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_linkage_name, &a));
	if (!link)
		link = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &a));
	if (link) {
		char *dm = sym_demangle(link);
		return dm ? dm : strdup(link);
	}
	const char *name = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_name, &a));
	return name ? strdup(name) : NULL;
}

static int put(struct sym_srcframe *out, int *n, Dwarf_Die *fn, const char *file, Dwarf_Word line, int inlined)
{
	struct sym_srcframe *f = &out[(*n)++];
	f->function = fn ? die_name(fn) : NULL;
	f->file = srcline_tidy(file);
	f->line = line <= UINT32_MAX ? (uint32_t)line : 0;
	f->inlined = inlined;
	return (fn && !f->function) || (file && !f->file) ? -1 : 0;
}

/* One function's code range, by the offset of its DIE. */
struct fn_range {
	uint64_t lo, hi;
	Dwarf_Off die;
};

/* The functions of one compile unit, sorted by address. */
struct cu_funcs {
	struct fn_range *v;
	size_t n, cap;
	int failed;
};

struct srcline {
	Dwarf *dw;
	struct u64map cus;     /* CU DIE offset -> index in cu */
	struct cu_funcs *cu;
	size_t n_cu, cap_cu;
};

struct srcline *srcline_new(Dwarf *dw)
{
	struct srcline *sl = calloc(1, sizeof(*sl));
	if (sl) {
		sl->dw = dw;
		u64map_init(&sl->cus);
	}
	return sl;
}

void srcline_close(struct srcline *sl)
{
	if (!sl)
		return;
	for (size_t i = 0; i < sl->n_cu; i++)
		free(sl->cu[i].v);
	free(sl->cu);
	u64map_fin(&sl->cus);
	free(sl);
}

static int add_func(Dwarf_Die *fn, void *arg)
{
	struct cu_funcs *c = arg;
	Dwarf_Addr base, start, end;
	ptrdiff_t off = 0;
	while ((off = dwarf_ranges(fn, off, &base, &start, &end)) > 0) {
		if (end <= start)
			continue;
		if (c->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 64;
			struct fn_range *v = realloc(c->v, cap * sizeof(*v));
			if (!v) {
				c->failed = 1;
				return DWARF_CB_ABORT;
			}
			c->v = v;
			c->cap = cap;
		}
		c->v[c->n++] = (struct fn_range){ start, end, dwarf_dieoffset(fn) };
	}
	return DWARF_CB_OK;
}

static int cmp_range(const void *pa, const void *pb)
{
	const struct fn_range *a = pa, *b = pb;
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The functions of the CU cudie, indexed on first use: a CU is walked once, not once per address. */
static struct cu_funcs *cu_funcs(struct srcline *sl, Dwarf_Die *cudie)
{
	uint64_t key = dwarf_dieoffset(cudie);
	uint32_t i = u64map_get(&sl->cus, key);
	if (i != U64MAP_NONE)
		return &sl->cu[i];
	if (sl->n_cu == sl->cap_cu) {
		size_t cap = sl->cap_cu ? 2 * sl->cap_cu : 16;
		struct cu_funcs *v = realloc(sl->cu, cap * sizeof(*v));
		if (!v)
			return NULL;
		sl->cu = v;
		sl->cap_cu = cap;
	}
	struct cu_funcs *c = &sl->cu[sl->n_cu];
	memset(c, 0, sizeof(*c));
	dwarf_getfuncs(cudie, add_func, c, 0);
	if (c->failed || u64map_put(&sl->cus, key, (uint32_t)sl->n_cu)) {
		free(c->v);
		return NULL;
	}
	qsort(c->v, c->n, sizeof(*c->v), cmp_range);
	sl->n_cu++;
	return c;
}

/*
 * The scopes holding vaddr inside the function that holds it, innermost
 * first, the function last, into a malloc'd array: found from the CU's
 * function index, then down that function's own tree (lexical blocks,
 * inlined calls). Returns their number, 0 when no indexed function holds vaddr.
 */
static int scopes_in_function(struct srcline *sl, Dwarf_Die *cudie, uint64_t vaddr, Dwarf_Die **out)
{
	struct cu_funcs *c = cu_funcs(sl, cudie);
	if (!c || c->n == 0)
		return 0;
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->v[mid].lo <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Ranges do not nest (functions do not overlap): the last one starting at or below vaddr, if it reaches it. */
	if (lo == 0 || vaddr >= c->v[lo - 1].hi)
		return 0;
	Dwarf_Die chain[64];
	int n = 0;
	if (!dwarf_offdie(sl->dw, c->v[lo - 1].die, &chain[0]))
		return 0;
	n = 1;
	for (int descended = 1; descended && n < 64;) {
		descended = 0;
		Dwarf_Die child;
		if (dwarf_child(&chain[n - 1], &child) != 0)
			break;
		do {
			int tag = dwarf_tag(&child);
			if (tag != DW_TAG_lexical_block && tag != DW_TAG_inlined_subroutine && tag != DW_TAG_try_block &&
			    tag != DW_TAG_catch_block)
				continue;
			if (dwarf_haspc(&child, vaddr) == 1) {
				chain[n++] = child;
				descended = 1;
				break;
			}
		} while (dwarf_siblingof(&child, &child) == 0);
	}
	*out = malloc((size_t)n * sizeof(**out));
	if (!*out)
		return 0;
	for (int i = 0; i < n; i++)
		(*out)[i] = chain[n - 1 - i];
	return n;
}

int srcline_lookup(struct srcline *sl, uint64_t vaddr, struct sym_srcframe *out)
{
	Dwarf_Die cudie;
	if (!sl || !dwarf_addrdie(sl->dw, vaddr, &cudie))
		return 0;
	const char *file = NULL;
	int lineno = 0;
	Dwarf_Line *ln = dwarf_getsrc_die(&cudie, vaddr);
	if (ln) {
		file = dwarf_linesrc(ln, NULL, NULL);
		if (dwarf_lineno(ln, &lineno) || lineno < 0)
			lineno = 0;
	}
	Dwarf_Word line = (Dwarf_Word)lineno;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (dwarf_getsrcfiles(&cudie, &files, &nfiles))
		files = NULL;
	/* DWARF 5 numbers the CU's own file 0; before it, file 0 means none. */
	Dwarf_Half version = 4;
	if (dwarf_cu_info(cudie.cu, &version, NULL, NULL, NULL, NULL, NULL, NULL))
		version = 4;

	Dwarf_Die *scopes = NULL;
	int ns = scopes_in_function(sl, &cudie, vaddr, &scopes);
	if (ns == 0) {
		/*
		 * Not in the index (a function dwarf_getfuncs does not list):
		 * libdw's own walk, over the whole CU. The innermost scope holding
		 * vaddr, then the scopes holding that DIE in the compiled
		 * function's tree: dwarf_getscopes alone goes on, after an inlined
		 * call, into the inlined function's abstract definition.
		 */
		ns = dwarf_getscopes(&cudie, vaddr, &scopes);
		if (ns > 0) {
			Dwarf_Die inner = scopes[0];
			free(scopes);
			scopes = NULL;
			ns = dwarf_getscopes_die(&inner, &scopes);
		}
	}
	int n = 0, rc = 0;
	for (int i = 0; i < ns && rc == 0; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag == DW_TAG_subprogram || tag == DW_TAG_entry_point) {
			rc = put(out, &n, &scopes[i], file, line, 0);
			free(scopes);
			return rc ? (srcline_free(out, (size_t)n), -1) : n;
		}
		if (tag != DW_TAG_inlined_subroutine)
			continue;  /* lexical blocks */
		/* Inlining deeper than we keep: the innermost calls are shown, the outer ones skipped. */
		if (n < SRCLINE_MAX - 1)
			rc = put(out, &n, &scopes[i], file, line, 1);
		/* The next frame out stands where this call was made. */
		Dwarf_Attribute a;
		Dwarf_Word cf = 0, cl = 0;
		if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &a), &cf))
			cf = 0;
		if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &a), &cl))
			cl = 0;
		file = files && cf < nfiles && (cf || version >= 5) ? dwarf_filesrc(files, cf, NULL, NULL) : NULL;
		line = cl;
	}
	free(scopes);
	if (rc == 0 && n == 0 && file)  /* a line but no function: code outside any subprogram entry */
		rc = put(out, &n, NULL, file, line, 0);
	if (rc) {
		srcline_free(out, (size_t)n);
		return -1;
	}
	return n;
}

void srcline_free(struct sym_srcframe *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].function);
		free(v[i].file);
		v[i].function = v[i].file = NULL;
	}
}
