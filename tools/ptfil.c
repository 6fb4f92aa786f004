/* ptfil's main: parse the command line, hand the work to tracer/. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fold.h"
#include "common/snap.h"
#include "tracer/kernel/kheap.h"
#include "tools/live_ui.h"
#include "tracer/tracer.h"

#define DEFAULT_INTERVAL_MS 100

/* On a usage error: the synopsis and where the rest is, not the whole help. */
static void short_usage(void)
{
	fprintf(stderr,
		"Usage: ptfil launch [OPTIONS] -- PROGRAM [ARGS...]\n"
		"       ptfil attach [OPTIONS] PID\n"
		"Try 'ptfil --help' for more information.\n");
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ptfil launch [OPTIONS] -- PROGRAM [ARGS...]\n"
		"       ptfil attach [OPTIONS] PID\n"
		"       ptfil --help | --version\n"
		"\n"
		"Profile the peak memory of PROGRAM from the outside (ptrace), charging\n"
		"memory by what is resident, not by what is reserved, and write a snapshot\n"
		"of the peak that ptfil-view reads.\n"
		"\n"
		"launch runs PROGRAM under ptfil from its first instruction. attach profiles\n"
		"the running process PID until Ctrl-C (SIGINT), SIGTERM, SIGHUP, --duration\n"
		"or its exit, then removes every breakpoint and detaches: PID runs on as if\n"
		"ptfil had never been there.\n"
		"\n"
		"Options:\n"
		"  -o, --output FILE     write the snapshot to FILE (default: ptfil-NAME-PID.gz\n"
		"                        in the current directory). It is rewritten at new peaks,\n"
		"                        at most once a second, so it survives kill -9 of ptfil.\n"
		"                        A symlink is followed; a device or a FIFO (/dev/stdout)\n"
		"                        is written in place, once, at the end\n"
		"  -f, --follow-forks    profile every process the program starts, each to its\n"
		"                        own snapshot FILE-without-.gz.CHILDPID.gz; without it,\n"
		"                        children run unprofiled\n"
		"  -M, --max-peak SIZE   launch: a memory budget; when the peak (with -f, the\n"
		"                        combined peak of the whole tree; without, also any\n"
		"                        child's own VmHWM) is above SIZE, say so with the\n"
		"                        top stack and exit with status 97 once the program\n"
		"                        is done (its own failure status wins).\n"
		"                        SIZE in bytes, or with K, M, G or T (binary): 512M, 2G\n"
		"  -d, --duration SECONDS  attach: detach after SECONDS\n"
		"  -i, --interval MS     poll residency every MS milliseconds for the timeline\n"
		"                        (default %d; 0 turns the poll off)\n"
		"  -l, --large-block BYTES  charge heap blocks of BYTES or more by their resident\n"
		"                        pages, smaller ones by their size (default 65536;\n"
		"                        K and M suffixes: 64K, 1M)\n"
		"  -m, --mappings-only   no malloc-family breakpoints: charge only anonymous\n"
		"                        mappings and brk heap growth, by residency, each to\n"
		"                        the stack that made the system call (the allocator's\n"
		"                        own calls included); a first look at a program that\n"
		"                        allocates millions of blocks a second, at little cost\n"
		"  -n, --native          Python programs (CPython 3.11 to 3.13): keep every\n"
		"                        native frame, the interpreter's own too; by default\n"
		"                        a stack shows its Python frames (function, file,\n"
		"                        line) and the native calls under the innermost one\n"
		"  -c, --charge VIEW     which code memory is charged to: touch (the code\n"
		"                        that made each page resident: its first write, seen\n"
		"                        as a page fault by the kernel; root, or CAP_BPF and\n"
		"                        CAP_PERFMON), alloc (the code that allocated it:\n"
		"                        malloc family and mappings), both (touch, with the\n"
		"                        alloc view beside it), or auto: touch where the fault\n"
		"                        path can run and the program runs no Python, else\n"
		"                        alloc with one line saying why (default auto, or\n"
		"                        $PTFIL_CHARGE)\n"
		"  -e, --heap-events WAY  how the malloc family is seen: uprobe (kernel\n"
		"                        uprobes: root, or CAP_BPF and CAP_PERFMON, and Linux\n"
		"                        6.6 or later; an order of magnitude cheaper), ptrace\n"
		"                        (breakpoints: anyone who may ptrace the program), or\n"
		"                        auto: uprobe when allowed, else ptrace with one line\n"
		"                        saying why (default auto, or $PTFIL_HEAP_EVENTS).\n"
		"                        Python programs keep ptrace (frames read at each call)\n"
		"  -x, --exact-sizes     charge each heap block at the size asked for; by\n"
		"                        default a block of glibc's malloc family is charged\n"
		"                        at its usable size on every path (what\n"
		"                        malloc_usable_size says: up to 15 bytes more, 24 at\n"
		"                        least); on the ptrace path one more stop per malloc\n"
		"                        (or $PTFIL_EXACT_SIZES=1)\n"
		"      --own PATH        your own code is the files and modules under PATH\n"
		"                        (again for more); by default, what is not Python's\n"
		"                        library, site-packages or the system's. It names\n"
		"                        'your lines' at the end and in the live view\n"
		"  -L, --live            a full-screen view on the terminal while ptfil traces:\n"
		"                        memory now and at the peak, the timeline, the largest\n"
		"                        stacks (p: now or at the peak; arrows and Enter: a\n"
		"                        stack's frames; q: close it, and under attach detach)\n"
		"  -q, --quiet           print nothing on stderr but errors\n"
		"  -h, --help            show this help\n"
		"  -V, --version         show the version\n"
		"\n"
		"kill -USR1 of ptfil writes what is live now to FILE-without-.gz.live-N.gz.\n"
		"\n"
		"launch exits with PROGRAM's exit status, or 128+N when it was killed by\n"
		"signal N; 127 when PROGRAM cannot be found, 126 when it cannot be run;\n"
		"97 when PROGRAM exited 0 but the peak (or a child's) was over --max-peak.\n"
		"attach exits with 0 once detached (or PID exited) and the snapshot written;\n"
		"3 when PID does not exist or is a zombie, 4 when ptfil may not trace it\n"
		"(another user, kernel.yama.ptrace_scope, no CAP_SYS_PTRACE), 5 when it is\n"
		"already traced (a debugger), 2 when PID is ptfil itself or its parent.\n"
		"Both: 2 for a usage error or an output FILE that cannot be written (checked\n"
		"before PROGRAM starts or PID is touched), 1 when ptfil itself failed.\n",
		DEFAULT_INTERVAL_MS);
}

static unsigned parse_ms(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v > 3600000)
		die_status(2, "invalid --interval '%s' (milliseconds, 0 to 3600000)", s);
	return (unsigned)v;
}

static unsigned long long parse_bytes(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned long long mult = 1;
	if (*end == 'k' || *end == 'K')
		mult = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mult = 1024 * 1024, end++;
	if (!*s || *s == '-' || *end || errno || v == 0 || v > (1ULL << 40) / mult)
		die_status(2, "invalid --large-block '%s' (bytes, optionally with K or M)", s);
	return v * mult;
}

/* --max-peak: bytes, or a number with K, M, G or T (powers of 1024), optionally followed by "B" or "iB". */
static unsigned long long parse_size(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	double mult = 1;
	switch (*end) {
	case 'k': case 'K': mult = 1024.0; end++; break;
	case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
	case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: break;
	}
	if (mult > 1 && (!strcmp(end, "B") || !strcmp(end, "iB")))
		end += strlen(end);
	if (!*s || *s == '-' || *end || errno || !(v > 0) || v * mult >= 1e18 || v * mult < 1)
		die_status(2, "invalid --max-peak '%s' (bytes, or with K, M, G or T: 512M, 2G)", s);
	return (unsigned long long)(v * mult);
}

static double parse_seconds(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !(v > 0) || v > 1e7)
		die_status(2, "invalid --duration '%s' (seconds, more than 0)", s);
	return v;
}

static int parse_pid(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v <= 0 || v > 0x3fffffff)
		die_status(2, "'%s' is not a process id (ptfil attach PID)", s);
	return (int)v;
}

static int parse_charge(const char *s, const char *what, struct tracer_opts *o)
{
	static const char *const names[] = { "auto", "touch", "alloc", "both" };
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			o->charge = i;
			return 0;
		}
	error("invalid %s '%s' (auto, touch, alloc or both)", what, s);
	return -1;
}

static int parse_events(const char *s, const char *what, struct tracer_opts *o)
{
	enum heap_events e;
	if (kheap_parse(s, &e)) {
		error("invalid %s '%s' (auto, uprobe or ptrace)", what, s);
		return -1;
	}
	o->heap_events = (int)e;
	return 0;
}

/* --live: the view draws on the terminal (/dev/tty), whatever stdout and stderr are. */
static const struct live_ui live_view = { live_ui_publish, live_ui_quit, live_ui_stop };

static int start_live(struct tracer_opts *o)
{
	/* Only checked here: the view starts in the process that traces (under attach, a child of this one). */
	if (live_ui_start())
		return -1;
	o->live = &live_view;
	return 0;
}

/* launch and attach take the same options; --duration is attach's alone. */
static int cmd_run(int argc, char **argv, int attach)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "large-block", required_argument, NULL, 'l' },
		{ "follow-forks", no_argument, NULL, 'f' },
		{ "mappings-only", no_argument, NULL, 'm' },
		{ "native", no_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "heap-events", required_argument, NULL, 'e' },
		{ "charge", required_argument, NULL, 'c' },
		{ "exact-sizes", no_argument, NULL, 'x' },
		{ "max-peak", required_argument, NULL, 'M' },
		{ "own", required_argument, NULL, 'O' },
		{ "live", no_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct tracer_opts o;
	static struct fold_own own; /* for the whole run */
	int live = 0;
	memset(&o, 0, sizeof(o));
	o.interval_ms = DEFAULT_INTERVAL_MS;
	const char *events = getenv("PTFIL_HEAP_EVENTS");
	if (events && *events && parse_events(events, "PTFIL_HEAP_EVENTS", &o))
		return 2;
	const char *charge = getenv("PTFIL_CHARGE");
	if (charge && *charge && parse_charge(charge, "PTFIL_CHARGE", &o))
		return 2;
	const char *exact = getenv("PTFIL_EXACT_SIZES");
	o.exact_sizes = exact && *exact && strcmp(exact, "0") != 0;
	int c;
	/* '+': stop at the program's name, so its own options stay its own. */
	opterr = 0; /* said here, as "ptfil: ...", not as getopt's "launch: ..." */
	while ((c = getopt_long(argc, argv, "+:o:i:l:e:c:xfmnd:M:LqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': o.output = optarg; break;
		case 'i': o.interval_ms = parse_ms(optarg); break;
		case 'q': o.quiet = 1; break;
		case 'l': o.large_block = parse_bytes(optarg); break;
		case 'f': o.follow_forks = 1; break;
		case 'm': o.no_heap = 1; break;
		case 'n': o.native_frames = 1; break;
		case 'x': o.exact_sizes = 1; break;
		case 'L': live = 1; break;
		case 'O':
			if (!*optarg) {
				error("--own needs a path");
				short_usage();
				return 2;
			}
			if (fold_own_add(&own, optarg) < 0)
				return 2;
			o.own = &own;
			break;
		case 'M':
			if (attach) {
				error("--max-peak is for launch: it sets ptfil's exit status once the program is done");
				return 2;
			}
			o.max_peak = parse_size(optarg);
			break;
		case 'd':
			if (!attach) {
				error("--duration is for attach; a launched program runs to its end");
				return 2;
			}
			o.duration = parse_seconds(optarg);
			break;
		case 'e':
			if (parse_events(optarg, "--heap-events", &o))
				return 2;
			break;
		case 'c':
			if (parse_charge(optarg, "--charge", &o))
				return 2;
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("ptfil %s\n", PTFIL_VERSION); return 0;
		case ':':
		default: {
			/* A short option by its letter (it may be grouped: -qZ), a long one as it was written. */
			char letter[3] = { '-', (char)optopt, 0 };
			const char *opt = optopt && strncmp(argv[optind - 1], "--", 2) ? letter : argv[optind - 1];
			if (c == ':')
				error("option '%s' needs an argument", opt);
			else
				error("unknown option '%s'", opt);
			short_usage();
			return 2;
		}
		}
	}
	if (attach) {
		if (optind != argc - 1) {
			error("attach needs one process id: ptfil attach [OPTIONS] PID");
			return 2;
		}
		o.attach_pid = parse_pid(argv[optind]);
		/* Before PID is touched: a bad -o found at the end would throw the whole run away. */
		if (snap_output_check(o.output) || (live && start_live(&o)))
			return 2;
		int rc = tracer_attach(&o);
		live_ui_stop();
		return rc;
	}
	if (optind >= argc) {
		error("launch needs a program to run: ptfil launch [OPTIONS] -- PROGRAM [ARGS...]");
		return 2;
	}
	o.argv = argv + optind;
	if (snap_output_check(o.output) || (live && start_live(&o)))
		return 2;
	int rc = tracer_launch(&o);
	live_ui_stop();
	return rc < 0 ? 1 : rc;
}

int main(int argc, char **argv)
{
	error_set_progname("ptfil");
	if (argc < 2) {
		short_usage();
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
		printf("ptfil %s\n", PTFIL_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "launch") || !strcmp(cmd, "attach"))
		return cmd_run(argc - 1, argv + 1, !strcmp(cmd, "attach"));
	error("unknown command '%s' (try: ptfil --help)", cmd);
	return 2;
}
