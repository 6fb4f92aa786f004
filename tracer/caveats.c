/* The launch-time warning about a privileged program that ptrace will run without its privilege (caveats.h). */
#include "tracer/caveats.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/error.h"

/* The file execvp would run for program into path (PATH_MAX bytes), and its status; -1 when there is none. */
static int find_program(const char *program, char *path, struct stat *st)
{
	if (!*program)
		return -1;
	if (strchr(program, '/')) {
		if (snprintf(path, PATH_MAX, "%s", program) >= PATH_MAX)
			return -1;
		return stat(path, st);
	}
	const char *dirs = getenv("PATH");
	char fallback[256];
	if (!dirs) {
		/* execvp's default search path when PATH is unset. */
		size_t n = confstr(_CS_PATH, fallback, sizeof(fallback));
		dirs = n > 0 && n <= sizeof(fallback) ? fallback : "/bin:/usr/bin";
	}
	for (const char *d = dirs;; d++) {
		const char *end = strchrnul(d, ':');
		int len = end == d ? snprintf(path, PATH_MAX, "%s", program) /* an empty entry: the current directory */
				   : snprintf(path, PATH_MAX, "%.*s/%s", (int)(end - d), d, program);
		/* execvp goes on past a file it cannot execute; a regular file it can is the one it runs. */
		if (len < PATH_MAX && stat(path, st) == 0 && S_ISREG(st->st_mode) && access(path, X_OK) == 0)
			return 0;
		if (!*end)
			return -1;
		d = end;
	}
}

static const char *user_name(uid_t uid, char *buf, size_t size)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		return pw->pw_name;
	snprintf(buf, size, "uid %u", (unsigned)uid);
	return buf;
}

static const char *group_name(gid_t gid, char *buf, size_t size)
{
	struct group *gr = getgrgid(gid);
	if (gr)
		return gr->gr_name;
	snprintf(buf, size, "gid %u", (unsigned)gid);
	return buf;
}

/* Appends ", text" (or text, first) to the list in what. */
static void add(char *what, size_t size, const char *text)
{
	size_t n = strlen(what);
	snprintf(what + n, size - n, "%s%s", n ? ", " : "", text);
}

void caveats_warn_launch(const char *program)
{
	/* Root keeps them: the kernel honours them when the tracer could trace the privileged program anyway. */
	if (geteuid() == 0)
		return;
	static char path[PATH_MAX];
	struct stat st;
	int saved = errno;
	if (find_program(program, path, &st) || !S_ISREG(st.st_mode)) {
		errno = saved;
		return;
	}
	char what[256] = "", one[128], buf[32];
	/* Set-user-ID or set-group-ID to ptfil's own user or group gains nothing: nothing is lost. */
	if ((st.st_mode & S_ISUID) && st.st_uid != geteuid()) {
		snprintf(one, sizeof(one), "set-user-ID %s", user_name(st.st_uid, buf, sizeof(buf)));
		add(what, sizeof(what), one);
	}
	/* Without group execute permission the set-group-ID bit means file locking, not a privilege. */
	if ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) && st.st_gid != getegid()) {
		snprintf(one, sizeof(one), "set-group-ID %s", group_name(st.st_gid, buf, sizeof(buf)));
		add(what, sizeof(what), one);
	}
	if (getxattr(path, "security.capability", NULL, 0) >= 0)
		add(what, sizeof(what), "given file capabilities");
	errno = saved;
	if (!*what)
		return;
	warning("%s is %s: traced by a user who is not root, it runs WITHOUT that privilege "
		"(the kernel ignores set-user-ID, set-group-ID and file capabilities in a traced program), "
		"so it may fail or behave differently than it does untraced; run ptfil as root to keep them",
		path, what);
}
