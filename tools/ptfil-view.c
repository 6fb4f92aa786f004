/*
 * ptfil-view: reads a snapshot (or two, for a diff) and prints it as a
 * report, JSON, folded stacks, an SVG flame graph, an HTML page or a pprof
 * profile.
 */
#include "tools/view.h"
#include "tools/flame.h"
#include "common/error.h"
#include "common/snap.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PTFIL_VERSION
#define PTFIL_VERSION "unknown"
#endif

#define EXIT_USAGE 2

enum format { FMT_TEXT, FMT_JSON, FMT_FOLDED, FMT_SVG, FMT_HTML, FMT_PPROF };

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: ptfil-view [OPTIONS] SNAPSHOT\n"
		"       ptfil-view --diff [OPTIONS] BEFORE AFTER\n"
		"Show the peak-memory profile in a snapshot written by ptfil: a report, a flame\n"
		"graph, an HTML page, folded stacks, JSON or a pprof profile.\n"
		"\n"
		"Output (the text report unless one of these is given):\n"
		"  -j, --json         one JSON document (docs/json-output.md)\n"
		"  -F, --folded       folded stacks, 'outer;...;inner BYTES' per line, for\n"
		"                     flamegraph.pl, inferno and speedscope\n"
		"  -s, --svg          an interactive flame graph as one SVG file\n"
		"  -H, --html         a self-contained HTML report: flame graph, timeline, tables\n"
		"  -P, --pprof        every stack as a gzip-compressed pprof profile (for go tool\n"
		"                     pprof, speedscope, Pyroscope, Parca): inuse_space (charged\n"
		"                     bytes, the default), reserved_space and inuse_objects\n"
		"  -o, --output FILE  write to FILE instead of standard output ('-': standard\n"
		"                     output)\n"
		"\n"
		"What to show:\n"
		"  -D, --diff         compare two snapshots: the stacks that grew or shrank\n"
		"                     from BEFORE to AFTER (with --pprof: AFTER's profile)\n"
		"  -L, --live         what was still live at the end of the run, instead of\n"
		"                     the peak\n"
		"  -p, --pid PID      one process of a followed run alone: the main process's\n"
		"                     own report, or a child's snapshot (found beside SNAPSHOT)\n"
		"                     instead of the whole tree and its combined peak\n"
		"  -n, --top N        show the N largest stacks, functions and processes\n"
		"                     (default %d, and 20 processes; 0 for all); JSON lists\n"
		"                     every stack unless --top is given\n"
		"  -d, --depth N      show at most N frames per stack in the report (default: 12,\n"
		"                     fewer when many stacks are shown, so each stays short);\n"
		"                     your own code's frames are shown past it\n"
		"      --own PATH     your code is the files and modules under PATH (again for\n"
		"                     more): it anchors each stack and 'your lines'; without\n"
		"                     it, what is not Python's library, site-packages or the\n"
		"                     system's\n"
		"      --raw-frames   every frame as recorded: no folding of Python's import\n"
		"                     machinery into '[import MODULE]' or of a module's unnamed\n"
		"                     native frames into one (JSON is never folded)\n"
		"  -h, --help         show this help and exit\n"
		"  -V, --version      show the version and exit\n"
		"\n"
		"Exit status: 0 on success, 1 if a snapshot cannot be read or the output cannot\n"
		"be written, 2 on a usage error.\n",
		VIEW_DEFAULT_TOP);
}

static void usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "%s: ", error_progname());
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'ptfil-view --help' for more information.\n");
	exit(EXIT_USAGE);
}

static size_t parse_count(const char *arg)
{
	char *end;
	if (!*arg || strspn(arg, "0123456789") != strlen(arg))
		usage_error("invalid number '%s'", arg);
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 10);
	if (errno || v > 1000000000ull)
		usage_error("number too large '%s'", arg);
	return (size_t)v;
}

static void set_format(enum format *fmt, enum format want, const char *opt)
{
	if (*fmt != FMT_TEXT && *fmt != want)
		usage_error("%s cannot be combined with another output format", opt);
	*fmt = want;
}

/*
 * The output: standard output, or with --output a temporary file beside FILE
 * renamed over it once complete, so a failed run (full disk, bad snapshot)
 * never leaves a truncated report where a good one was.
 */
struct output {
	FILE *fp;
	const char *path;  /* NULL for standard output */
	char *tmp;
};

static int output_open(struct output *o, const char *path)
{
	o->path = path;
	o->tmp = NULL;
	if (!path) {
		o->fp = stdout;
		return 0;
	}
	size_t n = strlen(path) + 32;
	o->tmp = malloc(n);
	if (!o->tmp)
		return error("out of memory");
	snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
	int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		error_errno("%s: cannot create", path);
		free(o->tmp);
		o->tmp = NULL;
		return -1;
	}
	o->fp = fdopen(fd, "w");
	if (!o->fp) {
		close(fd);
		unlink(o->tmp);
		free(o->tmp);
		o->tmp = NULL;
		return error("out of memory");
	}
	return 0;
}

/* Finishes the output: ok says whether the renderer succeeded. Returns 0 or -1 after error(). */
static int output_close(struct output *o, int ok)
{
	int rc = 0;
	if (!o->path) {
		if (fflush(stdout) != 0 || ferror(stdout))
			return ok ? error_errno("cannot write the output") : -1;
		return ok ? 0 : -1;
	}
	if (fflush(o->fp) != 0 || ferror(o->fp) || fsync(fileno(o->fp)) != 0) {
		if (ok)
			error_errno("%s: cannot write", o->path);
		ok = 0;
	}
	if (fclose(o->fp) != 0 && ok) {
		error_errno("%s: cannot write", o->path);
		ok = 0;
	}
	if (ok && rename(o->tmp, o->path) != 0) {
		error_errno("%s: cannot rename %s to it", o->path, o->tmp);
		ok = 0;
	}
	if (!ok) {
		unlink(o->tmp);
		rc = -1;
	}
	free(o->tmp);
	return rc;
}

/*
 * --pid: the snapshot of process pid of the tree in main (read from path):
 * main itself (then shown without its tree), or the file its P record names,
 * beside path. The name comes from the file, so it must be a plain name: no
 * directory, not "." or "..". On success *s holds the process's snapshot and
 * main has been moved into it or released. Returns 0, or -1 after error().
 */
static int read_process(const char *path, struct snap *main, int pid, struct snap *s, struct view_options *o)
{
	const struct snap_proc *p = NULL;
	if (pid == main->pid) {
		*s = *main;
		snap_init(main);
		o->one_process = 1;
		return 0;
	}
	for (size_t i = 0; i < main->n_procs && !p; i++)
		if (main->procs[i].pid == pid && main->procs[i].file)
			p = &main->procs[i];
	for (size_t i = 0; i < main->n_procs && !p; i++)
		if (main->procs[i].pid == pid)
			p = &main->procs[i];
	if (!p) {
		if (!main->n_procs)
			return error("%s: no process %d: the snapshot has no process tree (ptfil --follow-forks writes one)",
				     path, pid);
		return error("%s: no process %d in its tree (ptfil-view %s lists them)", path, pid, path);
	}
	if (!p->file)
		return error("%s: process %d was not profiled, so it has no snapshot of its own%s", path, pid,
			     p->profiled ? "" : " (ptfil --follow-forks profiles children)");
	if (!*p->file || strchr(p->file, '/') || !strcmp(p->file, ".") || !strcmp(p->file, ".."))
		return error("%s: process %d's snapshot has an invalid file name (not a plain name in the same directory)",
			     path, pid);
	const char *slash = strrchr(path, '/');
	size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
	char *child = malloc(dir + strlen(p->file) + 1);
	if (!child)
		return error("out of memory");
	memcpy(child, path, dir);
	strcpy(child + dir, p->file);
	struct stat st;
	int rc;
	if (stat(child, &st) != 0 && errno == ENOENT)
		rc = error("%s: the snapshot of process %d is missing (written beside %s, it was moved or removed)",
			   child, pid, path);
	else
		rc = snap_read(child, s);
	free(child);
	return rc;
}

static int render(FILE *out, enum format fmt, int diff, const struct snap *a, const struct snap *b,
		  const struct view_options *o)
{
	if (!diff && fmt == FMT_TEXT)
		return view_text(out, a, o);
	if (!diff && fmt == FMT_JSON)
		return view_json(out, a, o);
	if (fmt == FMT_PPROF)
		return view_pprof(out, a, b, o);

	struct flame f;
	int rc = flame_build(&f, a, b, o->set);
	if (rc == 0) {
		switch (fmt) {
		case FMT_TEXT: rc = view_diff_text(out, a, b, &f, o); break;
		case FMT_JSON: rc = view_diff_json(out, a, b, &f, o); break;
		case FMT_FOLDED: rc = view_folded(out, a, b, &f, o); break;
		case FMT_SVG: rc = view_svg(out, a, b, &f, o); break;
		case FMT_HTML: rc = view_html(out, a, b, &f, o); break;
		case FMT_PPROF: break;
		}
	}
	flame_fin(&f);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "folded", no_argument, NULL, 'F' },
		{ "svg", no_argument, NULL, 's' },
		{ "html", no_argument, NULL, 'H' },
		{ "pprof", no_argument, NULL, 'P' },
		{ "output", required_argument, NULL, 'o' },
		{ "diff", no_argument, NULL, 'D' },
		{ "live", no_argument, NULL, 'L' },
		{ "pid", required_argument, NULL, 'p' },
		{ "top", required_argument, NULL, 'n' },
		{ "depth", required_argument, NULL, 'd' },
		{ "own", required_argument, NULL, 'O' },
		{ "raw-frames", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct view_options o = { .top = VIEW_DEFAULT_TOP, .set = FLAME_PEAK };
	enum format fmt = FMT_TEXT;
	const char *output = NULL;
	int diff = 0, c, pid = 0;
	struct fold_own own = { NULL, 0 };

	error_set_progname("ptfil-view");
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jFsHPo:DLp:n:d:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': set_format(&fmt, FMT_JSON, "--json"); break;
		case 'F': set_format(&fmt, FMT_FOLDED, "--folded"); break;
		case 's': set_format(&fmt, FMT_SVG, "--svg"); break;
		case 'H': set_format(&fmt, FMT_HTML, "--html"); break;
		case 'P': set_format(&fmt, FMT_PPROF, "--pprof"); break;
		case 'o':
			if (!*optarg)
				usage_error("%s", "--output needs a file name");
			output = strcmp(optarg, "-") ? optarg : NULL;
			break;
		case 'D': diff = 1; break;
		case 'L': o.set = FLAME_LIVE; break;
		case 'p': {
			size_t v = parse_count(optarg);
			if (v == 0 || v > 2147483647)
				usage_error("invalid pid '%s'", optarg);
			pid = (int)v;
			break;
		}
		case 'n':
			o.top = parse_count(optarg);
			o.top_set = 1;
			break;
		case 'd':
			o.depth = parse_count(optarg);
			if (o.depth == 0)
				usage_error("--depth must be at least 1, not '%s'", optarg);
			break;
		case 'O':
			if (!*optarg)
				usage_error("%s", "--own needs a path");
			if (fold_own_add(&own, optarg) < 0)
				return 1;
			o.own = &own;
			break;
		case 'R': o.raw_frames = 1; break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ptfil-view %s\n", PTFIL_VERSION);
			return 0;
		case ':':
			usage_error("option '%s' needs an argument", argv[optind - 1]);
			break;
		default:
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	int want = diff ? 2 : 1;
	if (argc - optind < want)
		usage_error("%s", diff ? "--diff needs two snapshots, BEFORE and AFTER" : "missing SNAPSHOT");
	if (argc - optind > want)
		usage_error(diff ? "unexpected argument '%s' (--diff compares two snapshots)"
				 : "unexpected argument '%s' (one SNAPSHOT only; --diff compares two)",
			    argv[optind + want]);
	if ((fmt == FMT_TEXT || fmt == FMT_JSON) && o.set == FLAME_LIVE && !diff)
		usage_error("%s", "--live applies to --folded, --svg, --html, --pprof and --diff (the report and JSON show what was live at the end)");
	if (pid && diff)
		usage_error("%s", "--pid cannot be combined with --diff");
	if (fmt == FMT_PPROF && !output && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "%s: --pprof writes binary data: give --output FILE or redirect standard output\n",
			error_progname());
		return EXIT_USAGE;
	}
	o.name_a = argv[optind];
	o.name_b = diff ? argv[optind + 1] : NULL;

	/* Both snapshots are read before anything is written, so a bad one leaves no output. */
	struct snap a, b;
	int rc = snap_read(o.name_a, &a);
	snap_init(&b);
	if (rc == 0 && diff)
		rc = snap_read(o.name_b, &b);
	if (rc == 0 && pid) {
		struct snap main_snap = a;
		snap_init(&a);
		rc = read_process(o.name_a, &main_snap, pid, &a, &o);
		snap_fin(&main_snap);
	}
	/*
	 * Stacks read as their author's code: import machinery and unnamed
	 * native frames folded, except in JSON (a program's input keeps every
	 * frame) and with --raw-frames.
	 */
	if (rc == 0 && !o.raw_frames && fmt != FMT_JSON) {
		struct fold_options fo = { .imports = 1, .natives = 1 };
		if (fold_snap(&a, &fo) < 0 || (diff && fold_snap(&b, &fo) < 0))
			rc = -1;
	}
	/* A followed run's flame graph is its combined peak; --pid or --live shows one process. */
	if (rc == 0 && o.set == FLAME_PEAK && !o.one_process && a.has_tree && (!diff || b.has_tree))
		o.set = FLAME_TREE;
	if (rc == 0) {
		struct output out;
		rc = output_open(&out, output);
		if (rc == 0) {
			rc = render(out.fp, fmt, diff, &a, diff ? &b : NULL, &o);
			rc = output_close(&out, rc == 0);
		}
	}
	snap_fin(&a);
	snap_fin(&b);
	fold_own_fin(&own);
	return rc < 0 ? 1 : 0;
}
