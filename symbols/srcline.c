/* Source lines and inlined calls from DWARF (see srcline.h). */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

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

int srcline_lookup(Dwarf *dw, uint64_t vaddr, struct sym_srcframe *out)
{
	Dwarf_Die cudie;
	if (!dw || !dwarf_addrdie(dw, vaddr, &cudie))
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

	/*
	 * The innermost scope holding vaddr, then the scopes that hold that DIE
	 * in the compiled function's own tree: dwarf_getscopes alone goes on,
	 * after an inlined call, into the inlined function's abstract definition.
	 */
	Dwarf_Die *scopes = NULL;
	int ns = dwarf_getscopes(&cudie, vaddr, &scopes);
	if (ns > 0) {
		Dwarf_Die inner = scopes[0];
		free(scopes);
		scopes = NULL;
		ns = dwarf_getscopes_die(&inner, &scopes);
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
