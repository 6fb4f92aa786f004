/* Indexes ELF files with libelf so that module offsets turn into function names, file bytes and unwind tables. */
#include "symbols/sym.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <lzma.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/grow.h"
#include "symbols/debugfile.h"
#include "symbols/srcline.h"

#define SYM_PAGE_MASK (~(uint64_t)0xfff)
/* MiniDebugInfo larger than this once uncompressed is refused (real ones are a few hundred KiB). */
#define SYM_MAX_MINI ((size_t)256 << 20)

/* One PT_LOAD segment; off is a module offset, foff a file offset into image. */
struct sym_seg {
	uint64_t off, filesz, memsz, foff;
};

/* One function; start and end are link-time virtual addresses, not module offsets. */
struct sym_ent {
	uint64_t start, end;
	uint64_t maxend;       /* greatest end among this and every earlier entry: bounds the backward walk in lookups */
	const char *name;      /* points into a kept Elf's string table */
	unsigned rank;         /* binding preference, only while sorting */
};

struct sym_file {
	Elf *elf;              /* kept open: sym_read copies from its image */
	Elf *dbg;              /* separate debug file whose names we point into, or NULL */
	enum debugfile_how dbg_how;
	Elf *mini;             /* MiniDebugInfo (.gnu_debugdata) read into mini_buf, or NULL */
	char *mini_buf;
	enum sym_names names;
	char *name;            /* the path as the target names it, for messages */
	char *link;            /* .gnu_debuglink's file name, or NULL */
	uint32_t link_crc;
	Dwarf *dw;             /* the DWARF that sym_source reads (own or dbg), once looked for */
	struct srcline *sl;    /* lookups in it */
	int dw_state;          /* 0 not looked for, 1 open, -1 none */
	Elf *dw_elf;           /* the Elf that dw reads when the background open made it (owned), or NULL */
	/* sym_prepare_lines: the debug file's path and identity, and the job's state (under lines_lock) */
	char *dbg_path;
	dev_t dbg_dev;
	ino_t dbg_ino;
	int prep;              /* 0 none, 1 queued, 2 being opened, 3 done: prep_elf, prep_dw */
	Elf *prep_elf;
	Dwarf *prep_dw;
	struct sym_file *prep_next;
	int fetched;           /* debuginfod asked already */
	Elf *dbg_old;          /* a local debug file replaced by debuginfod's: names may point into it */
	const unsigned char *image;
	size_t image_size;
	uint64_t bias;         /* virtual address of module offset 0 */
	struct sym_seg *segs;
	size_t nsegs;
	struct sym_ent *syms;
	size_t nsyms;
	char *build_id;
	int has_eh;
	uint64_t eh_off, eh_size;
	struct stat st;        /* of the file when opened: its identity when it has no build id */
};

static int libelf_ready(void)
{
	static int state; /* 0 unknown, 1 ready, -1 unusable */

	if (state == 0)
		state = elf_version(EV_CURRENT) == EV_NONE ? -1 : 1;
	if (state < 0)
		return error("cannot use libelf: %s", elf_errmsg(-1));
	return 0;
}

/*
 * Reads the file open on fd (named name in messages) as a 64-bit little-endian
 * x86-64 executable or shared object, and fills *st. The descriptor stays the
 * caller's: libelf has the whole file mapped (or read) once this returns, so a
 * process with hundreds of libraries need not hold hundreds of descriptors.
 * quiet suppresses reports (optional debug files).
 */
static Elf *open_elf_fd(int fd, const char *name, int quiet, struct stat *st)
{
	Elf *e = NULL;
	GElf_Ehdr eh;
	const char *why = NULL;

	if (fstat(fd, st) < 0) {
		if (!quiet)
			error_errno("cannot stat %s", name);
		return NULL;
	}
	if (!S_ISREG(st->st_mode)) {
		why = "not a regular file";
		goto fail;
	}
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		why = "not an ELF file";
		goto fail;
	}
	if (!gelf_getehdr(e, &eh)) {
		why = "bad ELF header";
		goto fail;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64) {
		why = "not an ELF64 x86-64 object";
		goto fail;
	}
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) {
		why = "not an executable or shared object";
		goto fail;
	}
	if (elf_cntl(e, ELF_C_FDREAD) < 0) {
		why = elf_errmsg(-1);
		goto fail;
	}
	return e;
fail:
	if (!quiet)
		error("cannot read %s: %s", name, why);
	if (e)
		elf_end(e);
	return NULL;
}

static int index_segments(struct sym_file *f, const char *path)
{
	size_t n, nload = 0;
	GElf_Phdr ph;
	uint64_t lowest = UINT64_MAX;

	if (elf_getphdrnum(f->elf, &n) < 0)
		return error("cannot read %s: no program headers", path);
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(f->elf, (int)i, &ph) && ph.p_type == PT_LOAD)
			nload++;
	if (nload == 0)
		return error("cannot read %s: no loadable segments", path);
	f->segs = calloc(nload, sizeof(*f->segs));
	if (!f->segs)
		return error_errno("cannot index %s", path);
	/* The base is where file offset 0 lands, which the lowest-offset segment decides (0x400000 for non-PIE). */
	for (size_t i = 0; i < n; i++) {
		if (gelf_getphdr(f->elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset < lowest) {
			lowest = ph.p_offset;
			f->bias = (ph.p_vaddr & SYM_PAGE_MASK) - (ph.p_offset & SYM_PAGE_MASK);
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(f->elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_GNU_EH_FRAME) {
			f->has_eh = 1;
			f->eh_off = ph.p_vaddr - f->bias;
			f->eh_size = ph.p_memsz;
		}
		if (ph.p_type != PT_LOAD)
			continue;
		struct sym_seg *s = &f->segs[f->nsegs++];
		s->off = ph.p_vaddr - f->bias;
		s->memsz = ph.p_memsz;
		s->foff = ph.p_offset;
		/* A truncated or lying header must not let sym_read run off the image. */
		s->filesz = ph.p_filesz < ph.p_memsz ? ph.p_filesz : ph.p_memsz;
		if (s->foff > f->image_size)
			s->filesz = 0;
		else if (s->filesz > f->image_size - s->foff)
			s->filesz = f->image_size - s->foff;
	}
	return 0;
}

static char *hex_string(const unsigned char *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char *s = malloc(2 * n + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = digits[p[i] >> 4];
		s[2 * i + 1] = digits[p[i] & 15];
	}
	s[2 * n] = '\0';
	return s;
}

/* The build id in one block of notes, as hex; NULL when absent. */
static char *build_id_in(Elf_Data *d)
{
	size_t pos = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	while (d && pos < d->d_size && (next = gelf_getnote(d, pos, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 &&
		    memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0)
			return hex_string((const unsigned char *)d->d_buf + desc_off, nh.n_descsz);
		pos = next;
	}
	return NULL;
}

/* Sections first; the program headers cover files whose section headers were stripped. */
static void find_build_id(struct sym_file *f)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	GElf_Phdr ph;
	size_t n;

	while (!f->build_id && (scn = elf_nextscn(f->elf, scn)) != NULL)
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_NOTE)
			f->build_id = build_id_in(elf_getdata(scn, NULL));
	if (f->build_id || elf_getphdrnum(f->elf, &n) < 0)
		return;
	for (size_t i = 0; i < n && !f->build_id; i++) {
		if (!gelf_getphdr(f->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		Elf_Type t = ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR;
		f->build_id = build_id_in(elf_getdata_rawchunk(f->elf, (int64_t)ph.p_offset, ph.p_filesz, t));
	}
}

static Elf_Scn *find_section(Elf *e, GElf_Word type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn)) != NULL)
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type)
			return scn;
	return NULL;
}

static unsigned bind_rank(unsigned bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

struct sym_vec {
	struct sym_ent *v;
	size_t n, cap;
};

/* Adds a function symbol to out. Returns 0, or -1 when out of memory. */
static int add_func(struct sym_vec *out, const GElf_Sym *s, const char *name)
{
	unsigned type = GELF_ST_TYPE(s->st_info);
	if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_value == 0 || s->st_shndx == SHN_UNDEF ||
	    !name || !*name)
		return 0;
	if (grow_array(&out->v, &out->cap, out->n + 1, sizeof(*out->v), 256))
		return -1;
	struct sym_ent *x = &out->v[out->n++];
	x->start = s->st_value;
	x->end = s->st_size ? s->st_value + s->st_size : 0;
	x->maxend = 0;
	x->name = name;
	x->rank = bind_rank(GELF_ST_BIND(s->st_info));
	return 0;
}

/* Appends the functions of one symbol table; -1 only when memory runs out. */
static int collect(struct sym_vec *out, Elf *e, Elf_Scn *scn)
{
	GElf_Shdr sh;
	GElf_Sym s;
	Elf_Data *d, *str;

	if (!scn || !gelf_getshdr(scn, &sh) || (d = elf_getdata(scn, NULL)) == NULL)
		return 0;
	/*
	 * A 64-bit table in memory (native byte order: libelf converted or mapped
	 * it) is read in place: libc's debug table of 10,000 symbols in a third of
	 * the time gelf_getsym and elf_strptr take, symbol by symbol.
	 */
	Elf_Scn *strscn = elf_getscn(e, sh.sh_link);
	if (gelf_getclass(e) == ELFCLASS64 && d->d_type == ELF_T_SYM && d->d_buf && strscn &&
	    (str = elf_getdata(strscn, NULL)) != NULL && str->d_buf && str->d_size &&
	    ((const char *)str->d_buf)[str->d_size - 1] == '\0') {
		const Elf64_Sym *v = d->d_buf;
		const char *names = str->d_buf;
		for (size_t i = 0; i < d->d_size / sizeof(*v); i++) {
			s = v[i];
			if (add_func(out, &s, s.st_name < str->d_size ? names + s.st_name : NULL))
				return -1;
		}
		return 0;
	}
	size_t entsize = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT);
	size_t count = entsize ? d->d_size / entsize : 0;
	for (size_t i = 0; i < count; i++)
		if (gelf_getsym(d, (int)i, &s) && add_func(out, &s, elf_strptr(e, sh.sh_link, s.st_name)))
			return -1;
	return 0;
}

static size_t leading_underscores(const char *s)
{
	size_t n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

/*
 * Orders by address, then by the name a user would recognise: GLOBAL before
 * WEAK before LOCAL, the public spelling before internal ones (malloc before
 * __libc_malloc), then by name, so the winner never depends on table order.
 */
static int cmp_ent(const void *pa, const void *pb)
{
	const struct sym_ent *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	size_t ua = leading_underscores(a->name), ub = leading_underscores(b->name);
	if (ua != ub)
		return ua < ub ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The end of the loaded segment holding vaddr v, or 0. */
static uint64_t segment_end(const struct sym_file *f, uint64_t v)
{
	uint64_t off = v - f->bias;

	for (size_t i = 0; i < f->nsegs; i++)
		if (off >= f->segs[i].off && off - f->segs[i].off < f->segs[i].memsz)
			return f->segs[i].off + f->segs[i].memsz + f->bias;
	return 0;
}

/* Sorts, keeps one name per address, and gives size-0 symbols the room up to the next one. */
static void finish_index(struct sym_file *f, struct sym_vec *vec)
{
	size_t n = 0;

	if (vec->n)
		qsort(vec->v, vec->n, sizeof(*vec->v), cmp_ent);
	for (size_t i = 0; i < vec->n; i++) {
		if (n && vec->v[n - 1].start == vec->v[i].start) {
			if (vec->v[i].end > vec->v[n - 1].end)
				vec->v[n - 1].end = vec->v[i].end;
			continue;
		}
		vec->v[n++] = vec->v[i];
	}
	for (size_t i = 0; i < n; i++) {
		struct sym_ent *x = &vec->v[i];
		if (x->end <= x->start) {
			uint64_t lim = segment_end(f, x->start);
			if (i + 1 < n && (lim == 0 || vec->v[i + 1].start < lim))
				lim = vec->v[i + 1].start;
			x->end = lim > x->start ? lim : x->start + 1;
		}
		x->maxend = i && vec->v[i - 1].maxend > x->end ? vec->v[i - 1].maxend : x->end;
	}
	f->syms = vec->v;
	f->nsyms = n;
}

static Elf_Scn *section_named(Elf *e, const char *want)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(e, &shstrndx) < 0)
		return NULL;
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstrndx, sh.sh_name) : NULL;
		if (n && strcmp(n, want) == 0)
			return sh.sh_type == SHT_NOBITS ? NULL : scn;
	}
	return NULL;
}

static int has_dwarf(Elf *e)
{
	GElf_Shdr sh;
	Elf_Scn *scn = e ? section_named(e, ".debug_info") : NULL;
	return scn && gelf_getshdr(scn, &sh) && sh.sh_size > 0;
}

/* .gnu_debuglink: a file name, NUL, padding to 4 bytes, then the debug file's CRC-32. */
static void find_debuglink(struct sym_file *f)
{
	Elf_Scn *scn = section_named(f->elf, ".gnu_debuglink");
	Elf_Data *d = scn ? elf_rawdata(scn, NULL) : NULL;
	if (!d || !d->d_buf || d->d_size < 8)
		return;
	const char *p = d->d_buf;
	size_t len = strnlen(p, d->d_size);
	size_t at = (len + 4) & ~(size_t)3;
	if (len == 0 || at + 4 > d->d_size)
		return;
	memcpy(&f->link_crc, p + at, 4);
	f->link = strndup(p, len);
}

/*
 * MiniDebugInfo: an xz-compressed ELF file in .gnu_debugdata holding the
 * symbol table that strip removed (Fedora and others ship it instead of
 * nothing). 0 with f->mini set, or -1 (silently) when there is none or it
 * does not decode.
 */
static int read_mini(struct sym_file *f)
{
	Elf_Scn *scn = section_named(f->elf, ".gnu_debugdata");
	Elf_Data *d = scn ? elf_rawdata(scn, NULL) : NULL;
	if (!d || !d->d_buf || d->d_size == 0)
		return -1;
	lzma_stream st = LZMA_STREAM_INIT;
	if (lzma_stream_decoder(&st, UINT64_MAX, 0) != LZMA_OK)
		return -1;
	size_t cap = d->d_size * 4 + 4096;
	char *buf = malloc(cap);
	lzma_ret r = LZMA_OK;
	st.next_in = d->d_buf;
	st.avail_in = d->d_size;
	while (buf) {
		st.next_out = (uint8_t *)buf + st.total_out;
		st.avail_out = cap - st.total_out;
		r = lzma_code(&st, LZMA_FINISH);
		if (r == LZMA_STREAM_END || (r != LZMA_OK && r != LZMA_BUF_ERROR) || st.avail_out > 0)
			break;
		char *more = cap < SYM_MAX_MINI ? realloc(buf, cap * 2) : NULL;
		if (!more) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = more;
		cap *= 2;
	}
	size_t size = (size_t)st.total_out;
	lzma_end(&st);
	if (!buf || r != LZMA_STREAM_END) {
		free(buf);
		return -1;
	}
	Elf *e = elf_memory(buf, size);
	if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64) {
		if (e)
			elf_end(e);
		free(buf);
		return -1;
	}
	f->mini = e;
	f->mini_buf = buf;
	return 0;
}

/*
 * The function index, from the best table there is: the object's own
 * .symtab; else the debug file's (with .dynsym: a debug file's .symtab can
 * lack what the linker added to the dynamic table); else MiniDebugInfo's
 * (with .dynsym, which it leaves out by design); else .dynsym alone.
 */
static int index_symbols(struct sym_file *f)
{
	struct sym_vec vec = { 0 };
	Elf_Scn *symtab = find_section(f->elf, SHT_SYMTAB);
	Elf_Scn *dsym = f->dbg ? find_section(f->dbg, SHT_SYMTAB) : NULL;
	int rc = 0;

	f->names = SYM_NAMES_NONE;
	if (symtab) {
		rc = collect(&vec, f->elf, symtab);
		f->names = SYM_NAMES_FULL;
	} else {
		if (dsym) {
			rc = collect(&vec, f->dbg, dsym);
			f->names = SYM_NAMES_FULL;
		} else if (f->mini || read_mini(f) == 0) {
			rc = collect(&vec, f->mini, find_section(f->mini, SHT_SYMTAB));
			f->names = SYM_NAMES_MINI;
		}
		if (rc == 0)
			rc = collect(&vec, f->elf, find_section(f->elf, SHT_DYNSYM));
	}
	if (rc < 0) {
		free(vec.v);
		return error("cannot index %s: out of memory", f->name);
	}
	if (f->names == SYM_NAMES_NONE && vec.n)
		f->names = SYM_NAMES_EXPORTS;
	free(f->syms);
	f->syms = NULL;
	f->nsyms = 0;
	finish_index(f, &vec);
	return 0;
}

/* A separate debug file on this machine, when the object lacks a symbol table or DWARF. */
static void find_debug_file(struct sym_file *f, const char *root)
{
	if (find_section(f->elf, SHT_SYMTAB) && has_dwarf(f->elf))
		return;
	int fd = debugfile_find(f->name, root, f->build_id, f->link, f->link_crc, &f->dbg_how);
	if (fd < 0)
		return;
	struct stat st;
	f->dbg = open_elf_fd(fd, f->name, 1, &st);
	/* Where sym_prepare_lines opens it again, checked to be this very file. */
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = f->dbg ? readlink(link, path, sizeof(path) - 1) : -1;
	if (n > 0) {
		path[n] = '\0';
		f->dbg_path = strdup(path);
		f->dbg_dev = st.st_dev;
		f->dbg_ino = st.st_ino;
	}
	close(fd);
	if (!f->dbg)
		f->dbg_how = DEBUGFILE_NONE;
}

struct sym_file *sym_open_fd_at(int fd, const char *name, const char *root)
{
	struct sym_file *f;

	if (libelf_ready() < 0)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->name = strdup(name))) {
		free(f);
		error_errno("cannot open %s", name);
		return NULL;
	}
	f->elf = open_elf_fd(fd, name, 0, &f->st);
	if (!f->elf)
		goto fail;
	f->image = (const unsigned char *)elf_rawfile(f->elf, &f->image_size);
	if (!f->image) {
		error("cannot read %s: %s", name, elf_errmsg(-1));
		goto fail;
	}
	if (index_segments(f, name) < 0)
		goto fail;
	find_build_id(f);
	find_debuglink(f);
	find_debug_file(f, root);
	if (index_symbols(f) < 0)
		goto fail;
	return f;
fail:
	sym_close(f);
	return NULL;
}

struct sym_file *sym_open_fd(int fd, const char *name)
{
	return sym_open_fd_at(fd, name, NULL);
}

struct sym_file *sym_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		error_errno("cannot open %s", path);
		return NULL;
	}
	struct sym_file *f = sym_open_fd(fd, path);
	close(fd);
	return f;
}

enum sym_names sym_names(const struct sym_file *f)
{
	return f->names;
}

/*
 * The background open of sym_prepare_lines: one worker thread, started with
 * the first job, takes the queued files in order. It opens each debug file
 * again by its path (its own Elf: libelf's objects are not shared between
 * threads) and lets libdw decompress its sections there; dwarf_of takes the
 * result, or takes back a job not started yet and does it itself.
 */
static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lines_queued = PTHREAD_COND_INITIALIZER, lines_done = PTHREAD_COND_INITIALIZER;
static struct sym_file *lines_head, *lines_tail;
static int lines_worker; /* 0 not started, 1 running, -1 could not start */

static void lines_open(struct sym_file *f)
{
	Elf *e = NULL;
	Dwarf *dw = NULL;
	int fd = open(f->dbg_path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == f->dbg_dev && st.st_ino == f->dbg_ino &&
	    (e = open_elf_fd(fd, f->name, 1, &st)) != NULL && has_dwarf(e))
		dw = dwarf_begin_elf(e, DWARF_C_READ, NULL);
	if (fd >= 0)
		close(fd);
	pthread_mutex_lock(&lines_lock);
	f->prep_elf = e;
	f->prep_dw = dw;
	f->prep = 3;
	pthread_cond_broadcast(&lines_done);
	pthread_mutex_unlock(&lines_lock);
}

static void *lines_main(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&lines_lock);
		while (!lines_head)
			pthread_cond_wait(&lines_queued, &lines_lock);
		struct sym_file *f = lines_head;
		if (!(lines_head = f->prep_next))
			lines_tail = NULL;
		f->prep_next = NULL;
		f->prep = 2;
		pthread_mutex_unlock(&lines_lock);
		lines_open(f);
	}
	return NULL;
}

void sym_prepare_lines(struct sym_file *f)
{
	if (!f || f->dw_state != 0 || f->prep || !f->dbg_path || has_dwarf(f->elf) || !has_dwarf(f->dbg))
		return;
	pthread_mutex_lock(&lines_lock);
	if (lines_worker == 0) {
		pthread_attr_t a;
		pthread_t t;
		sigset_t all, old;
		/* The worker takes no signal: they are the tracer's, handled in its own thread. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		lines_worker = pthread_attr_init(&a) == 0 && pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
			       pthread_create(&t, &a, lines_main, NULL) == 0 ? 1 : -1;
		pthread_attr_destroy(&a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (lines_worker > 0) {
		f->prep = 1;
		if (lines_tail)
			lines_tail->prep_next = f;
		else
			lines_head = f;
		lines_tail = f;
		pthread_cond_signal(&lines_queued);
	}
	pthread_mutex_unlock(&lines_lock);
}

/*
 * Ends f's background open: a job not started is taken off the queue, one
 * under way is waited for. Returns 1 with its Elf and Dwarf (either may be
 * NULL) when it had run, else 0.
 */
static int lines_collect(struct sym_file *f, Elf **e, Dwarf **dw)
{
	if (!f->prep)
		return 0;
	pthread_mutex_lock(&lines_lock);
	int ran = 0;
	if (f->prep == 1) {
		struct sym_file **p = &lines_head, *prev = NULL;
		while (*p && *p != f)
			prev = *p, p = &(*p)->prep_next;
		if (*p) {
			*p = f->prep_next;
			if (lines_tail == f)
				lines_tail = prev;
		}
		f->prep_next = NULL;
	} else {
		while (f->prep == 2)
			pthread_cond_wait(&lines_done, &lines_lock);
		*e = f->prep_elf;
		*dw = f->prep_dw;
		f->prep_elf = NULL;
		f->prep_dw = NULL;
		ran = 1;
	}
	f->prep = 0;
	pthread_mutex_unlock(&lines_lock);
	return ran;
}

/* The DWARF: the object's own, else the debug file's; opened on first use (or by sym_prepare_lines). */
static Dwarf *dwarf_of(struct sym_file *f)
{
	if (f->dw_state == 0) {
		f->dw_state = -1;
		Elf *pe = NULL;
		Dwarf *pdw = NULL;
		if (lines_collect(f, &pe, &pdw) && !pdw && pe)
			elf_end(pe), pe = NULL;
		if (pdw) {
			f->dw = pdw;
			f->dw_elf = pe;
		}
		Elf *e = has_dwarf(f->elf) ? f->elf : has_dwarf(f->dbg) ? f->dbg : NULL;
		if (f->dw || (e && (f->dw = dwarf_begin_elf(e, DWARF_C_READ, NULL)) != NULL)) {
			if ((f->sl = srcline_new(f->dw)) != NULL) {
				f->dw_state = 1;
			} else {
				dwarf_end(f->dw);
				f->dw = NULL;
				if (f->dw_elf)
					elf_end(f->dw_elf);
				f->dw_elf = NULL;
			}
		}
	}
	return f->dw;
}

int sym_has_lines(struct sym_file *f)
{
	return dwarf_of(f) != NULL;
}

const char *sym_debug_origin(const struct sym_file *f)
{
	if (f->dw_state == 1 && !has_dwarf(f->dbg))
		return "the object itself";
	switch (f->dbg_how) {
	case DEBUGFILE_BUILD_ID: return "a debug file found by build id";
	case DEBUGFILE_LINK: return "a debug file found by .gnu_debuglink";
	case DEBUGFILE_DEBUGINFOD: return "debuginfod";
	case DEBUGFILE_NONE: break;
	}
	return f->names == SYM_NAMES_MINI ? "MiniDebugInfo" : NULL;
}

int sym_source(struct sym_file *f, uint64_t offset, struct sym_srcframe *out)
{
	Dwarf *dw = dwarf_of(f);
	return dw ? srcline_lookup(f->sl, offset + f->bias, out) : 0;
}

int sym_fetch_debug(struct sym_file *f, const char **why)
{
	if (dwarf_of(f))
		return 0;
	if (f->fetched) {
		*why = "asked already";
		return -1;
	}
	f->fetched = 1;
	int fd = debugfile_fetch(f->build_id, why);
	if (fd < 0)
		return -1;
	struct stat st;
	Elf *e = open_elf_fd(fd, f->name, 1, &st);
	close(fd);
	if (!e) {
		*why = "the server's file is not an x86-64 ELF debug file";
		return -1;
	}
	/* The names indexed so far may point into the debug file they came from: it stays open. */
	if (f->dbg)
		f->dbg_old = f->dbg;
	f->dbg = e;
	free(f->dbg_path); /* the background open is for the local file only */
	f->dbg_path = NULL;
	f->dbg_how = DEBUGFILE_DEBUGINFOD;
	f->dw_state = 0;
	if (f->names != SYM_NAMES_FULL && find_section(e, SHT_SYMTAB) && index_symbols(f) < 0)
		return *why = "out of memory", -1;
	if (!dwarf_of(f))
		*why = "the server's file has no DWARF";
	return f->dw ? 0 : -1;
}

void sym_close(struct sym_file *f)
{
	if (!f)
		return;
	Elf *pe = NULL;
	Dwarf *pdw = NULL;
	if (lines_collect(f, &pe, &pdw)) {
		if (pdw)
			dwarf_end(pdw);
		if (pe)
			elf_end(pe);
	}
	free(f->syms);
	free(f->segs);
	free(f->build_id);
	free(f->name);
	free(f->link);
	free(f->dbg_path);
	srcline_close(f->sl);
	if (f->dw)
		dwarf_end(f->dw);
	if (f->dw_elf)
		elf_end(f->dw_elf);
	if (f->dbg)
		elf_end(f->dbg);
	if (f->dbg_old)
		elf_end(f->dbg_old);
	if (f->mini)
		elf_end(f->mini);
	free(f->mini_buf);
	if (f->elf)
		elf_end(f->elf);
	free(f);
}

const char *sym_build_id(const struct sym_file *f)
{
	return f->build_id;
}

const char *sym_lookup(const struct sym_file *f, uint64_t offset, uint64_t *delta)
{
	uint64_t v = offset + f->bias;
	size_t lo = 0, hi = f->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->syms[mid].start <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* The innermost symbol wins when one lies inside another; maxend stops the walk as soon as none can cover v. */
	for (size_t j = lo; j-- > 0;) {
		const struct sym_ent *x = &f->syms[j];
		if (v < x->end) {
			if (delta)
				*delta = v - x->start;
			return x->name;
		}
		if (x->maxend <= v)
			break;
	}
	return NULL;
}

int sym_read(const struct sym_file *f, uint64_t offset, void *buf, size_t len)
{
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct sym_seg *s = &f->segs[i];
		if (offset < s->off)
			continue;
		uint64_t rel = offset - s->off;
		if (rel > s->filesz || len > s->filesz - rel)
			continue;
		memcpy(buf, f->image + s->foff + rel, len);
		return 0;
	}
	return -1;
}

int sym_file_offset_to_module(const struct sym_file *f, uint64_t foff, uint64_t *offset)
{
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct sym_seg *s = &f->segs[i];
		if (foff >= s->foff && foff - s->foff < s->filesz) {
			*offset = s->off + (foff - s->foff);
			return 0;
		}
	}
	return -1;
}

int sym_eh_frame_hdr(const struct sym_file *f, uint64_t *offset, uint64_t *size)
{
	if (!f->has_eh)
		return -1;
	*offset = f->eh_off;
	*size = f->eh_size;
	return 0;
}

/* --- .eh_frame without .eh_frame_hdr ------------------------------------- */

/* A bounded reader over the bytes of .eh_frame; vaddr is the link-time address of p. */
struct eh_cursor {
	const uint8_t *p, *end;
	uint64_t vaddr;
};

static int eh_bytes(struct eh_cursor *c, void *out, size_t n)
{
	if ((size_t)(c->end - c->p) < n)
		return -1;
	memcpy(out, c->p, n);
	c->p += n;
	c->vaddr += n;
	return 0;
}

static int eh_leb(struct eh_cursor *c, int is_signed, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (eh_bytes(c, &b, 1) < 0 || shift > 63)
			return -1;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (is_signed && shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	*out = v;
	return 0;
}

/* A pointer in encoding enc (DW_EH_PE_*): absolute or pc-relative, the forms linkers write in .eh_frame. */
static int eh_pointer(struct eh_cursor *c, uint8_t enc, uint64_t *out)
{
	uint64_t at = c->vaddr, v = 0;
	uint16_t u16;
	uint32_t u32;

	if (enc == 0xff || (enc & 0x80))
		return -1; /* omitted, or indirect */
	switch (enc & 0x0f) {
	case 0x00: case 0x04: case 0x0c:
		if (eh_bytes(c, &v, 8) < 0)
			return -1;
		break;
	case 0x01: case 0x09:
		if (eh_leb(c, (enc & 0x0f) == 0x09, &v) < 0)
			return -1;
		break;
	case 0x02:
		if (eh_bytes(c, &u16, 2) < 0)
			return -1;
		v = u16;
		break;
	case 0x0a:
		if (eh_bytes(c, &u16, 2) < 0)
			return -1;
		v = (uint64_t)(int64_t)(int16_t)u16;
		break;
	case 0x03:
		if (eh_bytes(c, &u32, 4) < 0)
			return -1;
		v = u32;
		break;
	case 0x0b:
		if (eh_bytes(c, &u32, 4) < 0)
			return -1;
		v = (uint64_t)(int64_t)(int32_t)u32;
		break;
	default:
		return -1;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10:
		v += at;
		break;
	default:
		return -1; /* text-, data- or function-relative: not in .eh_frame of x86-64 objects */
	}
	*out = v;
	return 0;
}

/*
 * The pointer encoding of the FDEs whose CIE starts at cie (its length field),
 * in .eh_frame [start, end) linked at vaddr. Returns 0, or -1 when it cannot be read.
 */
static int eh_fde_encoding(const uint8_t *start, const uint8_t *end, uint64_t vaddr, const uint8_t *cie, uint8_t *enc)
{
	struct eh_cursor c = { cie, end, vaddr + (uint64_t)(cie - start) };
	uint32_t len, id;
	uint8_t version, b;
	uint64_t skip;

	*enc = 0x00; /* absolute, the default without 'R' */
	if (eh_bytes(&c, &len, 4) < 0 || len == 0xffffffff || len > (uint64_t)(end - c.p))
		return -1;
	c.end = c.p + len;
	if (eh_bytes(&c, &id, 4) < 0 || id != 0 || eh_bytes(&c, &version, 1) < 0 || (version != 1 && version != 3))
		return -1;
	const char *aug = (const char *)c.p;
	size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
	if (aug_len == (size_t)(c.end - c.p))
		return -1;
	c.p += aug_len + 1;
	c.vaddr += aug_len + 1;
	if (aug[0] != 'z')
		return aug[0] ? -1 : 0; /* no augmentation data: the default, or a form not known */
	if (eh_leb(&c, 0, &skip) < 0 || eh_leb(&c, 1, &skip) < 0)
		return -1; /* code and data alignment factors */
	if (version == 1 ? eh_bytes(&c, &b, 1) < 0 : eh_leb(&c, 0, &skip) < 0)
		return -1; /* return address register */
	if (eh_leb(&c, 0, &skip) < 0)
		return -1; /* augmentation data length */
	for (const char *a = aug + 1; *a; a++) {
		switch (*a) {
		case 'R':
			return eh_bytes(&c, enc, 1);
		case 'P':
			if (eh_bytes(&c, &b, 1) < 0 || eh_pointer(&c, b & 0x7f, &skip) < 0)
				return -1;
			break;
		case 'L':
			if (eh_bytes(&c, &b, 1) < 0)
				return -1;
			break;
		case 'S': case 'B': case 'G':
			break;
		default:
			return -1;
		}
	}
	return 0;
}

static int cmp_fde(const void *pa, const void *pb)
{
	const struct sym_fde *a = pa, *b = pb;

	return a->pc < b->pc ? -1 : a->pc > b->pc;
}

int sym_eh_frame_table(const struct sym_file *f, struct sym_fde **table, size_t *n)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int found = 0;

	*table = NULL;
	*n = 0;
	if (elf_getshdrstrndx(f->elf, &shstrndx) < 0)
		return -1;
	while (!found && (scn = elf_nextscn(f->elf, scn)) != NULL) {
		const char *name;
		found = gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS && sh.sh_addr &&
			(name = elf_strptr(f->elf, shstrndx, sh.sh_name)) && strcmp(name, ".eh_frame") == 0;
	}
	if (!found || sh.sh_offset > f->image_size || sh.sh_size > f->image_size - sh.sh_offset || sh.sh_addr < f->bias)
		return -1;
	const uint8_t *start = f->image + sh.sh_offset, *end = start + sh.sh_size;
	struct sym_fde *v = NULL;
	size_t cap = 0, k = 0;
	struct eh_cursor c = { start, end, sh.sh_addr };

	while (c.p + 4 <= end) {
		struct eh_cursor entry = c;
		uint32_t len32, id;
		uint64_t len;
		if (eh_bytes(&c, &len32, 4) < 0 || len32 == 0)
			break; /* the terminator */
		len = len32;
		if (len32 == 0xffffffff && eh_bytes(&c, &len, 8) < 0)
			break;
		if (len > (uint64_t)(end - c.p) || len < 4)
			break;
		struct eh_cursor body = { c.p, c.p + len, c.vaddr };
		c.p += len;
		c.vaddr += len;
		const uint8_t *id_at = body.p;
		if (eh_bytes(&body, &id, 4) < 0 || id == 0)
			continue; /* a CIE */
		/* An FDE: id is the distance back to its CIE. */
		if (id > (uint64_t)(id_at - start))
			continue;
		uint8_t enc;
		uint64_t pc, range;
		if (eh_fde_encoding(start, end, sh.sh_addr, id_at - id, &enc) < 0 || eh_pointer(&body, enc, &pc) < 0 ||
		    eh_pointer(&body, enc & 0x0f, &range) < 0)
			continue;
		if (pc == 0 || range == 0 || pc < f->bias)
			continue; /* discarded by the linker */
		uint64_t pc_off = pc - f->bias, fde_off = entry.vaddr - f->bias;
		if (pc_off > INT32_MAX || fde_off > INT32_MAX)
			continue;
		if (grow_array(&v, &cap, k + 1, sizeof(*v), 1024)) {
			free(v);
			return error("cannot index the unwind table of an object: out of memory");
		}
		v[k].pc = (int32_t)pc_off;
		v[k].fde = (int32_t)fde_off;
		k++;
	}
	if (k == 0) {
		free(v);
		return -1;
	}
	qsort(v, k, sizeof(*v), cmp_fde);
	*table = v;
	*n = k;
	return 0;
}

/* --- the image as loaded --------------------------------------------------- */

/* The ELF header of a loaded image, checked as open_elf checks a file's. */
static int image_ehdr(const struct sym_image *im, Elf64_Ehdr *eh)
{
	if (im->read(im->ctx, 0, eh, sizeof(*eh)) < 0 || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_machine != EM_X86_64 || eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 ||
	    eh->e_phnum == PN_XNUM)
		return -1;
	return 0;
}

#define SYM_MAX_NOTES (64 * 1024)

/* The build id in a block of notes (aligned to align), as hex; NULL when absent. */
static char *build_id_in_notes(const uint8_t *p, size_t n, size_t align)
{
	size_t pos = 0;

	while (n - pos >= 12) {
		uint32_t h[3];
		memcpy(h, p + pos, sizeof(h));
		size_t name = pos + 12;
		size_t desc = name + ((h[0] + align - 1) & ~(align - 1));
		size_t next = desc + ((h[1] + align - 1) & ~(align - 1));
		if (desc < name || next < desc || next > n || desc + h[1] > n)
			return NULL;
		if (h[2] == NT_GNU_BUILD_ID && h[0] == 4 && h[1] > 0 && memcmp(p + name, "GNU", 4) == 0)
			return hex_string(p + desc, h[1]);
		pos = next;
	}
	return NULL;
}

int sym_image_build_id(const struct sym_image *im, char **id)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	uint64_t lowest = UINT64_MAX, bias = 0;

	*id = NULL;
	if (image_ehdr(im, &eh) < 0)
		return -1;
	size_t n = eh.e_phnum < 64 ? eh.e_phnum : 64;
	if (im->read(im->ctx, eh.e_phoff, ph, n * sizeof(*ph)) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset < lowest) {
			lowest = ph[i].p_offset;
			bias = (ph[i].p_vaddr & SYM_PAGE_MASK) - (ph[i].p_offset & SYM_PAGE_MASK);
		}
	}
	if (lowest == UINT64_MAX)
		return -1;
	for (size_t i = 0; i < n && !*id; i++) {
		if (ph[i].p_type != PT_NOTE || ph[i].p_filesz == 0 || ph[i].p_filesz > SYM_MAX_NOTES ||
		    ph[i].p_vaddr < bias)
			continue;
		uint8_t *notes = malloc(ph[i].p_filesz);
		if (!notes)
			return -1;
		if (im->read(im->ctx, ph[i].p_vaddr - bias, notes, ph[i].p_filesz) == 0)
			*id = build_id_in_notes(notes, ph[i].p_filesz, ph[i].p_align == 8 ? 8 : 4);
		free(notes);
	}
	return 0;
}

int sym_image_same_headers(const struct sym_file *f, const struct sym_image *im)
{
	Elf64_Ehdr eh;
	uint8_t buf[64 * sizeof(Elf64_Phdr)];

	if (image_ehdr(im, &eh) < 0 || f->image_size < sizeof(eh) || memcmp(f->image, &eh, sizeof(eh)) != 0)
		return 0;
	size_t len = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
	if (len > sizeof(buf) || eh.e_phoff > f->image_size || len > f->image_size - eh.e_phoff ||
	    im->read(im->ctx, eh.e_phoff, buf, len) < 0)
		return 0;
	return memcmp(f->image + eh.e_phoff, buf, len) == 0;
}

/*
 * Files by what they are, not where they were found: the key is "id:" and the
 * build id, or for a file without one "file:" and its device, inode, size and
 * modification time. Open addressing over the keys' hashes.
 */
struct sym_cache_slot {
	char *key;
	struct sym_file *f;
};

struct sym_cache {
	struct sym_cache_slot *slots;
	size_t cap, n;         /* cap is a power of two */
};

static uint64_t hash_key(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static struct sym_cache_slot *cache_slot(struct sym_cache_slot *slots, size_t cap, const char *key)
{
	size_t i = (size_t)hash_key(key) & (cap - 1);

	while (slots[i].key && strcmp(slots[i].key, key) != 0)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

/* The key of a file with build id id, or of the file st describes when id is NULL; the caller frees it. */
static char *cache_key(const char *id, const struct stat *st)
{
	char *key;
	int n = id ? asprintf(&key, "id:%s", id)
		   : asprintf(&key, "file:%llu:%llu:%llu:%lld.%09ld", (unsigned long long)st->st_dev,
			      (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
			      (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
	return n < 0 ? NULL : key;
}

struct sym_cache *sym_cache_new(void)
{
	struct sym_cache *c = calloc(1, sizeof(*c));

	if (c) {
		c->cap = 64;
		c->slots = calloc(c->cap, sizeof(*c->slots));
	}
	if (!c || !c->slots) {
		free(c);
		error_errno("cannot create symbol cache");
		return NULL;
	}
	return c;
}

void sym_cache_free(struct sym_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->cap; i++) {
		free(c->slots[i].key);
		sym_close(c->slots[i].f);
	}
	free(c->slots);
	free(c);
}

static int cache_grow(struct sym_cache *c)
{
	size_t ncap = 2 * c->cap;
	struct sym_cache_slot *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -1;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slots[i].key)
			*cache_slot(ns, ncap, c->slots[i].key) = c->slots[i];
	free(c->slots);
	c->slots = ns;
	c->cap = ncap;
	return 0;
}

static struct sym_file *cache_find(struct sym_cache *c, const char *id, const struct stat *st)
{
	char *key = cache_key(id, st);
	struct sym_file *f = key ? cache_slot(c->slots, c->cap, key)->f : NULL;

	free(key);
	return f;
}

struct sym_file *sym_cache_find(struct sym_cache *c, const char *build_id)
{
	return build_id ? cache_find(c, build_id, NULL) : NULL;
}

struct sym_file *sym_cache_find_file(struct sym_cache *c, const struct stat *st)
{
	return cache_find(c, NULL, st);
}

struct sym_file *sym_cache_add(struct sym_cache *c, struct sym_file *f)
{
	char *key = cache_key(f->build_id, &f->st);

	if (!key || (2 * (c->n + 1) > c->cap && cache_grow(c) < 0)) {
		free(key);
		sym_close(f);
		error("out of memory caching symbols");
		return NULL;
	}
	struct sym_cache_slot *s = cache_slot(c->slots, c->cap, key);
	if (s->key) {
		/* The same build (or file) met again under another name: one index serves both. */
		free(key);
		if (s->f != f)
			sym_close(f);
		return s->f;
	}
	s->key = key;
	s->f = f;
	c->n++;
	return f;
}

static int dynamic(const struct sym_file *f, const char *name, int data, uint64_t *offset, uint64_t *size)
{
	Elf_Scn *scn = find_section(f->elf, SHT_DYNSYM);
	GElf_Shdr sh;
	Elf_Data *d;
	if (!scn || !gelf_getshdr(scn, &sh) || (d = elf_getdata(scn, NULL)) == NULL)
		return -1;
	size_t entsize = gelf_fsize(f->elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t count = entsize ? d->d_size / entsize : 0;
	for (size_t i = 0; i < count; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || s.st_value == 0)
			continue;
		unsigned type = GELF_ST_TYPE(s.st_info);
		if (data ? type != STT_OBJECT : type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		const char *n = elf_strptr(f->elf, sh.sh_link, s.st_name);
		if (n && strcmp(n, name) == 0) {
			*offset = s.st_value - f->bias;
			if (size)
				*size = s.st_size;
			return 0;
		}
	}
	return -1;
}

int sym_dynamic(const struct sym_file *f, const char *name, uint64_t *offset)
{
	return dynamic(f, name, 0, offset, NULL);
}

int sym_is_glibc(const struct sym_file *f)
{
	uint64_t off;
	return f && sym_dynamic(f, "gnu_get_libc_version", &off) == 0;
}

int sym_dynamic_extent(const struct sym_file *f, const char *name, uint64_t *offset, uint64_t *size)
{
	return dynamic(f, name, 0, offset, size);
}

int sym_dynamic_data(const struct sym_file *f, const char *name, uint64_t *offset)
{
	return dynamic(f, name, 1, offset, NULL);
}

int sym_entry(const struct sym_file *f, uint64_t *offset)
{
	GElf_Ehdr eh;
	if (!gelf_getehdr(f->elf, &eh) || eh.e_entry == 0)
		return -1;
	*offset = eh.e_entry - f->bias;
	return 0;
}

/*
 * The C++ runtime's demangler (libstdc++, the Itanium C++ ABI), loaded the
 * first time a C++ name is met: linked, libstdc++ would add 1.7 ms (measured)
 * to the start of every run, C++ program or not.
 */
typedef char *demangle_fn(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn *demangler(void)
{
	static demangle_fn *fn;
	static int tried;
	if (!tried) {
		tried = 1;
		void *lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (lib)
			*(void **)&fn = dlsym(lib, "__cxa_demangle");
		if (!fn)
			warning("C++ names are shown mangled: cannot load the demangler from libstdc++.so.6");
	}
	return fn;
}

char *sym_demangle(const char *name)
{
	int status = 0;
	if (!name || name[0] != '_' || name[1] != 'Z')
		return NULL;
	demangle_fn *demangle = demangler();
	if (!demangle)
		return NULL;
	char *d = demangle(name, NULL, NULL, &status);
	if (status != 0) {
		free(d);
		return NULL;
	}
	return d;
}
