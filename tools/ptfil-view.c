/* ptfil-view: reads a snapshot and prints it as a report or as JSON. */
#include "tools/view.h"
#include "common/error.h"
#include "common/snap.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PTFIL_VERSION
#define PTFIL_VERSION "unknown"
#endif

#define EXIT_USAGE 2

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: ptfil-view [OPTIONS] SNAPSHOT\n"
		"Print the peak-memory report of a snapshot written by ptfil.\n"
		"\n"
		"  -j, --json      print one JSON document (docs/json-output.md) instead of the report\n"
		"  -n, --top N     show the N largest stacks at the peak (default %d; 0 for all);\n"
		"                  JSON lists every stack unless --top is given\n"
		"  -d, --depth N   show at most N frames per stack in the report (default: 12,\n"
		"                  fewer when many stacks are shown, so the report fits a screen)\n"
		"  -h, --help      show this help and exit\n"
		"  -V, --version   show the version and exit\n"
		"\n"
		"Exit status: 0 on success, 1 if the snapshot cannot be read, 2 on a usage error.\n",
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "top", required_argument, NULL, 'n' },
		{ "depth", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct view_options o = { .top = VIEW_DEFAULT_TOP };
	int json = 0, c;

	error_set_progname("ptfil-view");
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jn:d:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'n':
			o.top = parse_count(optarg);
			o.top_set = 1;
			break;
		case 'd':
			o.depth = parse_count(optarg);
			if (o.depth == 0)
				usage_error("--depth must be at least 1, not '%s'", optarg);
			break;
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
	if (optind == argc)
		usage_error("%s", "missing SNAPSHOT");
	if (optind + 1 < argc)
		usage_error("unexpected argument '%s' (one SNAPSHOT only)", argv[optind + 1]);

	struct snap s;
	if (snap_read(argv[optind], &s) < 0) {
		snap_fin(&s);
		return 1;
	}
	int rc = json ? view_json(stdout, &s, &o) : view_text(stdout, &s, &o);
	snap_fin(&s);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		error_errno("cannot write the report");
		return 1;
	}
	return rc < 0 ? 1 : 0;
}
