/*
 * The drainer's unwind of a fault record's stack copy (fault -U), to time what the fault path
 * leaves to ptfil per stack: libunwind's remote API over the copy and the program's module
 * files (their .eh_frame_hdr tables), caching per module, no ptrace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <gelf.h>
#include <libelf.h>
#include <libunwind.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "fault.h"
#include "unwind.h"

extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
					      unw_proc_info_t *pi, int need_unwind_info, void *arg);

struct mapping {
	uint64_t start, end, off;
	int mod;
};

struct module {
	char path[256];
	const unsigned char *file;	/* the whole file, mapped */
	size_t size;
	uint64_t bias, hdr, count, lo, hi;	/* load bias, .eh_frame_hdr address, FDEs, text range */
	int ok;
};

/* libunwind (as Debian builds it) blocks every signal around each of its locks: two system
 * calls a time, many per unwind. The drainer is one thread that never unwinds itself, so
 * inside fu_unwind sigprocmask does nothing (ptfil's tracer/unwind.c does the same). */
static int in_libunwind;

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	if (in_libunwind) {
		if (old)
			sigemptyset(old);
		return 0;
	}
	int rc = pthread_sigmask(how, set, old);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}

static struct mapping maps[512];
static struct module mods[128];
static int nmaps, nmods;
static pid_t upid;
static unw_addr_space_t as;

/* The unwind in progress. */
static const uint64_t *cur_regs;
static const unsigned char *cur_stack;
static uint64_t cur_sp, cur_len;
long fu_remote_reads;

static int module_of(const char *path)
{
	for (int i = 0; i < nmods; i++)
		if (!strcmp(mods[i].path, path))
			return i;
	if (nmods == 128)
		return -1;
	struct module *m = &mods[nmods];
	memset(m, 0, sizeof(*m));
	snprintf(m->path, sizeof(m->path), "%s", path);
	char p[300];
	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)upid, path);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0) {
		m->file = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m->file == MAP_FAILED)
			m->file = NULL;
		m->size = st.st_size;
	}
	if (fd >= 0)
		close(fd);
	return nmods++;
}

/* .eh_frame_hdr's address (unbiased) and FDE count, in the encoding every linker writes. */
static void module_tables(struct module *m, uint64_t first_start)
{
	if (!m->file)
		return;
	elf_version(EV_CURRENT);
	Elf *e = elf_memory((char *)m->file, m->size);
	GElf_Ehdr eh;
	size_t shstrndx;
	if (!e || !gelf_getehdr(e, &eh) || elf_getshdrstrndx(e, &shstrndx))
		goto out;
	uint64_t minv = UINT64_MAX;
	for (size_t i = 0; i < eh.e_phnum; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < minv)
			minv = ph.p_vaddr & ~4095ull;
	}
	m->bias = eh.e_type == ET_DYN ? first_start - minv : 0;
	for (Elf_Scn *s = NULL; (s = elf_nextscn(e, s));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(s, &sh))
			continue;
		const char *n = elf_strptr(e, shstrndx, sh.sh_name);
		if (!n || strcmp(n, ".eh_frame_hdr") || sh.sh_offset + 12 > m->size)
			continue;
		const unsigned char *h = m->file + sh.sh_offset;
		if (h[0] != 1 || h[1] != 0x1b || h[2] != 0x03 || h[3] != 0x3b)
			break;
		uint32_t count;
		memcpy(&count, h + 8, 4);
		m->hdr = sh.sh_addr;
		m->count = count;
		m->ok = 1;
	}
out:
	if (e)
		elf_end(e);
}

static void read_maps(void)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)upid);
	FILE *f = fopen(path, "r");
	nmaps = 0;
	while (f && fgets(line, sizeof(line), f) && nmaps < 512) {
		unsigned long long lo, hi, off;
		char perms[8], file[300] = "";
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %299s", &lo, &hi, perms, &off, file) < 4 || file[0] != '/')
			continue;
		int mi = module_of(file);
		if (mi < 0)
			continue;
		struct module *m = &mods[mi];
		if (off == 0 && !m->ok && !m->hdr)
			module_tables(m, lo);
		if (perms[2] == 'x') {
			if (!m->lo || lo < m->lo)
				m->lo = lo;
			if (hi > m->hi)
				m->hi = hi;
		}
		maps[nmaps++] = (struct mapping){ lo, hi, off, mi };
	}
	if (f)
		fclose(f);
}

static struct mapping *mapping_of(uint64_t addr)
{
	for (int i = 0; i < nmaps; i++)
		if (addr >= maps[i].start && addr < maps[i].end)
			return &maps[i];
	return NULL;
}

static int find_proc_info(unw_addr_space_t a, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg)
{
	struct mapping *mp = mapping_of(ip);
	if (!mp) {
		read_maps();	/* a library loaded since */
		mp = mapping_of(ip);
	}
	if (!mp || !mods[mp->mod].ok)
		return -UNW_ENOINFO;
	struct module *m = &mods[mp->mod];
	unw_dyn_info_t di;
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = m->lo;
	di.end_ip = m->hi;
	di.u.rti.segbase = m->bias + m->hdr;
	di.u.rti.table_data = m->bias + m->hdr + 12;
	di.u.rti.table_len = m->count * 8 / sizeof(unw_word_t);
	return _Ux86_64_dwarf_search_unwind_table(a, ip, &di, pi, need, arg);
}

static void put_unwind_info(unw_addr_space_t a, unw_proc_info_t *pi, void *arg)
{
	(void)a, (void)pi, (void)arg;
}

static int get_dyn_info_list_addr(unw_addr_space_t a, unw_word_t *addr, void *arg)
{
	(void)a, (void)addr, (void)arg;
	return -UNW_ENOINFO;
}

static int access_mem(unw_addr_space_t a, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	(void)a, (void)arg;
	if (write)
		return -UNW_EINVAL;
	if (addr >= cur_sp && addr + 8 <= cur_sp + cur_len) {
		memcpy(val, cur_stack + (addr - cur_sp), 8);
		return 0;
	}
	struct mapping *mp = mapping_of(addr);
	if (mp) {
		struct module *m = &mods[mp->mod];
		uint64_t fo = addr - mp->start + mp->off;
		if (m->file && fo + 8 <= m->size) {
			memcpy(val, m->file + fo, 8);
			return 0;
		}
	}
	struct iovec l = { val, 8 }, r = { (void *)(uintptr_t)addr, 8 };
	fu_remote_reads++;
	return process_vm_readv(upid, &l, 1, &r, 1, 0) == 8 ? 0 : -UNW_EINVAL;
}

static int access_reg(unw_addr_space_t a, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	static const int idx[] = {
		[UNW_X86_64_RAX] = FP_RAX, [UNW_X86_64_RDX] = FP_RDX, [UNW_X86_64_RCX] = FP_RCX,
		[UNW_X86_64_RBX] = FP_RBX, [UNW_X86_64_RSI] = FP_RSI, [UNW_X86_64_RDI] = FP_RDI,
		[UNW_X86_64_RBP] = FP_RBP, [UNW_X86_64_RSP] = FP_RSP, [UNW_X86_64_R8] = FP_R8,
		[UNW_X86_64_R9] = FP_R9, [UNW_X86_64_R10] = FP_R10, [UNW_X86_64_R11] = FP_R11,
		[UNW_X86_64_R12] = FP_R12, [UNW_X86_64_R13] = FP_R13, [UNW_X86_64_R14] = FP_R14,
		[UNW_X86_64_R15] = FP_R15, [UNW_X86_64_RIP] = FP_RIP,
	};
	(void)a, (void)arg;
	if (write || reg < 0 || reg > UNW_X86_64_RIP)
		return -UNW_EBADREG;
	*val = cur_regs[idx[reg]];
	return 0;
}

static int access_fpreg(unw_addr_space_t a, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)a, (void)reg, (void)val, (void)write, (void)arg;
	return -UNW_EBADREG;
}

static int resume(unw_addr_space_t a, unw_cursor_t *c, void *arg)
{
	(void)a, (void)c, (void)arg;
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t a, unw_word_t addr, char *buf, size_t len, unw_word_t *off, void *arg)
{
	(void)a, (void)addr, (void)buf, (void)len, (void)off, (void)arg;
	return -UNW_ENOINFO;
}

static unw_accessors_t acc = { find_proc_info, put_unwind_info, get_dyn_info_list_addr, access_mem, access_reg,
			       access_fpreg, resume, get_proc_name };

void fu_init(pid_t pid)
{
	upid = pid;
	as = unw_create_addr_space(&acc, 0);
	unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
}

int fu_unwind(const uint64_t *regs, const unsigned char *stack, uint64_t len, uint64_t *ips, int max)
{
	unw_cursor_t c;
	int n = 0;
	if (!nmaps)
		read_maps();
	cur_regs = regs;
	cur_stack = stack;
	cur_sp = regs[FP_RSP];
	cur_len = len;
	in_libunwind = 1;
	if (unw_init_remote(&c, as, NULL) < 0) {
		in_libunwind = 0;
		return 0;
	}
	do {
		unw_word_t ip;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || !ip)
			break;
		ips[n++] = ip;
	} while (n < max && unw_step(&c) > 0);
	in_libunwind = 0;
	return n;
}
