/* Separate debug files: by build id, by debuglink, from debuginfod (see debugfile.h). */
#include <dirent.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "symbols/debugfile.h"

#define DEFAULT_DEBUG_DIR "/usr/lib/debug"
#define MAX_DIRS 16

size_t debugfile_dirs(const char *const **dirs)
{
	static const char *v[MAX_DIRS];
	static size_t n;
	static int done;
	static char *copy;
	if (!done) {
		done = 1;
		const char *env = getenv("PTFIL_DEBUG_DIRS");
		if (env && *env && (copy = strdup(env)) != NULL) {
			char *save = NULL;
			for (char *d = strtok_r(copy, ":", &save); d && n < MAX_DIRS; d = strtok_r(NULL, ":", &save))
				if (*d == '/')  /* relative directories would depend on where ptfil runs */
					v[n++] = d;
		} else {
			v[n++] = DEFAULT_DEBUG_DIR;
		}
	}
	*dirs = v;
	return n;
}

/* The GNU build id in the notes of the ELF file open on fd, as hex into out (at least 129 bytes); 0 or -1. */
static int file_build_id(int fd, char *out)
{
	int rc = -1;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while (e && rc && (scn = elf_nextscn(e, scn)) != NULL) {
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || (d = elf_getdata(scn, NULL)) == NULL)
			continue;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off, next;
		while (rc && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 && nh.n_descsz <= 64 &&
			    memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0) {
				const unsigned char *p = (const unsigned char *)d->d_buf + desc_off;
				for (size_t i = 0; i < nh.n_descsz; i++)
					sprintf(out + 2 * i, "%02x", p[i]);
				rc = 0;
			}
			off = next;
		}
	}
	if (e)
		elf_end(e);
	return rc;
}

static uint32_t file_crc(int fd)
{
	unsigned char buf[1 << 16];
	uLong crc = crc32(0, NULL, 0);
	ssize_t n;
	off_t at = 0;
	while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
		crc = crc32(crc, buf, (uInt)n);
		at += n;
	}
	return (uint32_t)crc;
}

/* A regular file at path, or -1. */
static int open_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int by_build_id(const char *root, const char *dir, const char *id)
{
	char p[PATH_MAX];
	size_t len = strlen(id);
	if (len < 3 || len > 128)
		return -1;
	int n = snprintf(p, sizeof(p), "%s%s/.build-id/%.2s/%s.debug", root, dir, id, id + 2);
	return n > 0 && (size_t)n < sizeof(p) ? open_file(p) : -1;
}

/* Opens p when it is the debug file wanted: the same build id, or without one the same CRC. */
static int matching(const char *p, const char *self, const char *build_id, uint32_t crc)
{
	char id[160];
	if (strcmp(p, self) == 0)
		return -1;
	int fd = open_file(p);
	if (fd < 0)
		return -1;
	if (build_id ? file_build_id(fd, id) == 0 && strcmp(id, build_id) == 0 : file_crc(fd) == crc)
		return fd;
	close(fd);
	return -1;
}

int debugfile_find(const char *path, const char *root, const char *build_id, const char *link, uint32_t crc,
		   enum debugfile_how *how)
{
	const char *const *dirs;
	size_t ndirs = debugfile_dirs(&dirs);
	const char *roots[2] = { root && *root ? root : NULL, "" };
	int fd;

	*how = DEBUGFILE_NONE;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	for (int r = 0; r < 2; r++)
		for (size_t i = 0; build_id && roots[r] && i < ndirs; i++)
			if ((fd = by_build_id(roots[r], dirs[i], build_id)) >= 0) {
				*how = DEBUGFILE_BUILD_ID;
				return fd;
			}
	if (!link || !*link || strchr(link, '/') || !path || *path != '/')
		return -1;
	/* The object's directory as the target names it: "/usr/lib/x86_64-linux-gnu" for its libc. */
	const char *slash = strrchr(path, '/');
	int dlen = (int)(slash - path);
	char p[PATH_MAX], self[PATH_MAX];
	for (int r = 0; r < 2; r++) {
		if (!roots[r])
			continue;
		snprintf(self, sizeof(self), "%s%s", roots[r], path);
		int n = snprintf(p, sizeof(p), "%s%.*s/%s", roots[r], dlen, path, link);
		if (n > 0 && (size_t)n < sizeof(p) && (fd = matching(p, self, build_id, crc)) >= 0)
			goto found;
		n = snprintf(p, sizeof(p), "%s%.*s/.debug/%s", roots[r], dlen, path, link);
		if (n > 0 && (size_t)n < sizeof(p) && (fd = matching(p, self, build_id, crc)) >= 0)
			goto found;
		for (size_t i = 0; i < ndirs; i++) {
			n = snprintf(p, sizeof(p), "%s%s%.*s/%s", roots[r], dirs[i], dlen, path, link);
			if (n > 0 && (size_t)n < sizeof(p) && (fd = matching(p, self, build_id, crc)) >= 0)
				goto found;
		}
	}
	return -1;
found:
	*how = DEBUGFILE_LINK;
	return fd;
}

int debugfile_have_servers(void)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	return urls && strspn(urls, " \t") < strlen(urls);
}

/* One client for the process, made on first use: it keeps its connections and its cache settings. */
static debuginfod_client *client;
static int failed;

void debugfile_fin(void)
{
	if (client)
		debuginfod_end(client);
	client = NULL;
}

int debugfile_fetch(const char *build_id, const char **why)
{
	if (!debugfile_have_servers()) {
		*why = "DEBUGINFOD_URLS is not set";
		return -1;
	}
	if (!build_id || !*build_id) {
		*why = "the object has no build id";
		return -1;
	}
	if (!client && !failed && (client = debuginfod_begin()) == NULL)
		failed = 1;
	if (!client) {
		*why = "the debuginfod client could not start";
		return -1;
	}
	int fd = debuginfod_find_debuginfo(client, (const unsigned char *)build_id, 0, NULL);
	if (fd >= 0)
		return fd;
	*why = fd == -ENOENT ? "no debuginfod server has it" : "the debuginfod servers could not be reached";
	return -1;
}

/* A name a file may be listed under (debugfile_packages), and which file it stands for. */
struct listed {
	char *name;
	size_t file;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct listed *)a)->name, ((const struct listed *)b)->name);
}

/* The names Debian may list the file at path under: as given, /lib or /usr/lib (merged /usr), a link's target. */
static size_t listed_names(const char *path, size_t file, struct listed *out)
{
	size_t n = 0;
	char alt[PATH_MAX + 8];
	if (strncmp(path, "/usr/", 5) == 0)
		snprintf(alt, sizeof(alt), "%s", path + 4);
	else
		snprintf(alt, sizeof(alt), "/usr%s", path);
	char *real = realpath(path, NULL);
	const char *v[3] = { path, alt, real && strcmp(real, path) != 0 ? real : NULL };
	for (size_t i = 0; i < 3; i++)
		if (v[i] && (out[n].name = strdup(v[i])) != NULL)
			out[n++].file = file;
	free(real);
	return n;
}

void debugfile_packages(const char *const *path, size_t n, char **pkg)
{
	for (size_t i = 0; i < n; i++)
		pkg[i] = NULL;
	struct listed *w = n ? calloc(3 * n, sizeof(*w)) : NULL;
	if (!w)
		return;
	size_t nw = 0, left = 0;
	for (size_t i = 0; i < n; i++)
		if (path[i] && *path[i] == '/') {
			nw += listed_names(path[i], i, w + nw);
			left++;
		}
	qsort(w, nw, sizeof(*w), by_name);
	/* One pass over every package's list, each line looked up among all the names wanted. */
	DIR *d = nw ? opendir("/var/lib/dpkg/info") : NULL;
	struct dirent *de;
	char line[PATH_MAX + 2];
	while (d && left && (de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		if (len < 6 || strcmp(de->d_name + len - 5, ".list") != 0)
			continue;
		char lp[PATH_MAX];
		snprintf(lp, sizeof(lp), "/var/lib/dpkg/info/%s", de->d_name);
		FILE *fp = fopen(lp, "re");
		if (!fp)
			continue;
		while (left && fgets(line, sizeof(line), fp)) {
			line[strcspn(line, "\n")] = '\0';
			struct listed key = { line, 0 }, *hit = bsearch(&key, w, nw, sizeof(*w), by_name);
			if (!hit || pkg[hit->file])
				continue;
			/* "libc6:amd64.list": the package is the name before the architecture. */
			size_t colon = strcspn(de->d_name, ":");
			if ((pkg[hit->file] = strndup(de->d_name, colon < len - 5 ? colon : len - 5)) != NULL)
				left--;
		}
		fclose(fp);
	}
	if (d)
		closedir(d);
	for (size_t i = 0; i < nw; i++)
		free(w[i].name);
	free(w);
}

char *debugfile_package(const char *path)
{
	char *pkg;
	debugfile_packages(&path, 1, &pkg);
	return pkg;
}
