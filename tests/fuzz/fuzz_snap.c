/*
 * The libFuzzer target for the snapshot reader: every input is read as a
 * snapshot from memory and, when it is gzip or one time in eight, from a file
 * (through zlib, which passes text through: both reads must then agree); every
 * snapshot that reads is rendered by every renderer, so a hostile file that
 * slips past the reader crashes here first.
 * Built and run by tests/fuzz/fuzz.mk (make fuzz, fuzz-run, fuzz-regress).
 */
#include "common/error.h"
#include "common/snap.h"
#include "tools/flame.h"
#include "tools/view.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *devnull;
/*
 * The other side of a diff, besides the input itself: a small snapshot whose
 * frames share names with the seeds (main, main_big_map, the Python frames of
 * seed-python.txt), so that a diff has stacks that grew, shrank, appeared and
 * went.
 */
static struct snap other;
static const char other_text[] =
	"ptfil-snapshot 2\n"
	"s 0.1.0\nV 0\ns launch\no 1\ns ./other\na 2\ni 1\nT 1700000000\nd 3\nx 0\n"
	"w 1048576\nz 4096\np 1.5 1048576 2097152 1048576\n"
	"s /bin/other\nm 3 - 400000\ns main\nf 0 1300 4\ns main_big_map\nf 0 1234 5\n"
	"s thread_fn\nf 0 1200 6\nf -1 7f0000001000 -\n"
	"s <module>\ns demo.py\ny 30 7 8\ns make_arrays\ny 12 9 8\n"
	"n 0 0\nn 1 1\nn 1 2\nn 0 3\nn 0 4\nn 5 5\n"
	"k 2 m 1048576 1048576 1\nk 3 h 4096 8192 3\nk 4 p 8192 8192 1\nk 1 b 4096 4096 1\n"
	"k 6 h 65536 65536 2\n"
	"l 2 m 1048576 1048576 1\nl 3 h 100 100 1\n"
	"t 0 0 0\nt 1.5 1048576 1048576\ns signal\nc 7 1\ne\n";

/*
 * The same program in the touch view, with the alloc view beside it and the
 * links between them: a diff across two views, and one within the touch view.
 */
static struct snap other_touch;
static const char other_touch_text[] =
	"ptfil-snapshot 5\n"
	"s 0.1.0\nV 0\ns launch\no 1\ns ./other\na 2\ni 1\nT 1700000000\nd 3\nx 0\n"
	"w 1048576\nz 4096\np 1.5 1114112 135266304 1048576\ns touch\nv 3\n"
	"s /bin/other\nm 4 - 400000\ns main\nf 0 1300 5\ns main_big_map\nf 0 1234 6\n"
	"s fill\nf 0 1200 7\nf -1 7f0000001000 -\n"
	"n 0 0\nn 1 1\nn 1 2\nn 0 3\n"
	"k 3 t 1048576 1048576 256\nk 4 t 65536 65536 16\nk 1 p 0 0 0\n"
	"l 3 t 4096 4096 1\n"
	"K 2 m 1048576 134217728 1\nK 1 h 65536 65536 2\nK 4 p 4096 4096 1\n"
	"X 3 2 1048576\nX 4 1 65536\nX 0 0 0\nX 4 2 1\n"
	"t 0 0 0\nt 1.5 1114112 1048576\ne\n";

/* A memory file holding the input, for snap_read (which takes a path). */
static int memfd = -1;
static char memfd_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Rejections are the expected outcome; libFuzzer's own report stays on stderr. */
	error_set_progname("fuzz_snap");
	error_set_quiet(1);
	devnull = fopen("/dev/null", "w");
	if (!devnull) {
		perror("fuzz_snap: /dev/null");
		abort();
	}
	memfd = memfd_create("fuzz_snap", MFD_CLOEXEC);
	if (memfd < 0) {
		perror("fuzz_snap: memfd_create");
		abort();
	}
	snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
	if (snap_read_mem(other_text, sizeof(other_text) - 1, "other", &other) != 0 ||
	    snap_read_mem(other_touch_text, sizeof(other_touch_text) - 1, "other-touch", &other_touch) != 0) {
		fprintf(stderr, "fuzz_snap: a built-in snapshot does not read\n");
		abort();
	}
	return 0;
}

/* A renderer's -1 (out of memory, or a renderer not written yet) is an answer, not a crash. */
static void render_flame(const struct snap *s, const struct snap *b, enum flame_set set)
{
	struct view_options o = { .top = VIEW_DEFAULT_TOP, .set = set,
				  .name_a = "fuzz-a", .name_b = b ? "fuzz-b" : NULL };
	struct flame f;

	if (flame_build(&f, s, b, set) == 0) {
		if (b) {
			view_diff_text(devnull, s, b, &f, &o);
			view_diff_json(devnull, s, b, &f, &o);
		}
		view_folded(devnull, s, b, &f, &o);
		view_svg(devnull, s, b, &f, &o);
		view_html(devnull, s, b, &f, &o);
	}
	flame_fin(&f);
}

static void render_all(const struct snap *s)
{
	struct view_options o = { .top = VIEW_DEFAULT_TOP, .set = FLAME_PEAK, .name_a = "fuzz" };

	view_text(devnull, s, &o);
	view_json(devnull, s, &o);
	o.top = 3;
	o.top_set = 1;
	o.depth = 2;
	view_text(devnull, s, &o);
	view_json(devnull, s, &o);

	render_flame(s, NULL, FLAME_PEAK);
	render_flame(s, NULL, FLAME_LIVE);
	render_flame(s, NULL, FLAME_TREE);
	/* A diff of the snapshot against itself (every node matched, nothing grew), and against another. */
	render_flame(s, s, FLAME_PEAK);
	render_flame(s, s, FLAME_LIVE);
	render_flame(s, s, FLAME_TREE);
	render_flame(s, &other, FLAME_PEAK);
	render_flame(&other, s, FLAME_LIVE);
	render_flame(s, &other_touch, FLAME_PEAK);
	render_flame(&other_touch, s, FLAME_PEAK);
	view_pprof(devnull, s, NULL, &o);
	fflush(devnull);
	clearerr(devnull);
}

/* The promises snap.h makes about a snapshot the reader accepted. */
static void check_snap(const struct snap *s)
{
	if (s->n_nodes < 1)
		abort();
	for (size_t i = 1; i < s->n_nodes; i++)
		if (s->nodes[i].parent >= i || s->nodes[i].frame >= s->n_frames)
			abort();
	for (size_t i = 0; i < s->n_frames; i++) {
		if (s->frames[i].module < -1 || s->frames[i].module >= (int64_t)s->n_modules)
			abort();
		/* Native frames carry a file, a line and the inlined mark from format 3 on (the `g` record). */
		if (s->frames[i].kind == SNAP_FRAME_PYTHON
		    ? s->version < 2 || s->frames[i].module != -1 || !s->frames[i].file || s->frames[i].inlined
		    : s->frames[i].kind != SNAP_FRAME_NATIVE ||
			      (s->version < 3 && (s->frames[i].file || s->frames[i].line || s->frames[i].inlined)) ||
			      (s->frames[i].inlined != 0 && s->frames[i].inlined != 1))
			abort();
	}
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->version < 3 && (s->modules[i].symbols || s->modules[i].package))
			abort();
	if (s->version < 4 && (s->n_procs || s->has_tree || s->n_tree_stacks))
		abort();
	for (size_t i = 0; i < s->n_tree_stacks; i++)
		if (s->tree_stacks[i].node >= s->n_nodes || s->tree_stacks[i].proc >= s->n_procs)
			abort();
	for (size_t i = 0; i < s->n_stacks; i++)
		if (s->stacks[i].node >= s->n_nodes)
			abort();
	for (size_t i = 0; i < s->n_live; i++)
		if (s->live[i].node >= s->n_nodes)
			abort();
	for (size_t i = 1; i < s->n_samples; i++)
		if (s->samples[i].time < s->samples[i - 1].time)
			abort();
	/*
	 * The views (format 5): alloc before, or without a `v`; only a touch
	 * snapshot has kind t, and the other view (never kind t) and the links,
	 * largest first, between nodes that exist.
	 */
	if (s->view != SNAP_VIEW_ALLOC && s->view != SNAP_VIEW_TOUCH)
		abort();
	if (s->version < 5 && (s->view != SNAP_VIEW_ALLOC || s->n_other || s->n_links))
		abort();
	if (s->view != SNAP_VIEW_TOUCH && (s->n_other || s->n_links))
		abort();
	const struct snap_stack *sets[] = { s->stacks, s->live, s->tree_stacks, s->other };
	const size_t counts[] = { s->n_stacks, s->n_live, s->n_tree_stacks, s->n_other };
	for (size_t k = 0; k < 4; k++)
		for (size_t i = 0; i < counts[k]; i++) {
			char kind = sets[k][i].kind;
			if (sets[k][i].node >= s->n_nodes || !strchr("mbhpt", kind) || !kind ||
			    (kind == SNAP_KIND_TOUCH && (s->view != SNAP_VIEW_TOUCH || k == 3)))
				abort();
		}
	for (size_t i = 0; i < s->n_links; i++) {
		if (s->links[i].touch_node >= s->n_nodes || s->links[i].alloc_node >= s->n_nodes)
			abort();
		if (i && s->links[i - 1].bytes < s->links[i].bytes)
			abort();
	}
}

static void render_and_fin(int rc, struct snap *s)
{
	if (rc == 0) {
		check_snap(s);
		render_all(s);
	}
	snap_fin(s);
}

/* Whether two reads of the same text gave the same snapshot, as far as its shape goes. */
static int same_shape(const struct snap *a, const struct snap *b)
{
	return a->argc == b->argc && a->n_modules == b->n_modules && a->n_frames == b->n_frames &&
	       a->n_nodes == b->n_nodes && a->n_stacks == b->n_stacks && a->n_live == b->n_live &&
	       a->view == b->view && a->n_other == b->n_other && a->n_links == b->n_links &&
	       a->n_samples == b->n_samples && a->n_counters == b->n_counters &&
	       a->pid == b->pid && a->peak.charged == b->peak.charged;
}

/* Writes the input to the memory file, from its start, cutting what an earlier input left. */
static int fill_memfd(const uint8_t *data, size_t size)
{
	if (ftruncate(memfd, 0) != 0)
		return -1;
	size_t done = 0;
	while (done < size) {
		ssize_t n = pwrite(memfd, data + done, size - done, (off_t)done);
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap mem, file;
	int gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
	/* Reading from a file costs more than the rest: text takes that path one time in eight. */
	int from_file = gzip || size % 8 == 0;

	int rc = snap_read_mem((const char *)data, size, "fuzz", &mem);
	if (!from_file) {
		render_and_fin(rc, &mem);
		return 0;
	}
	if (fill_memfd(data, size) != 0) {
		perror("fuzz_snap: cannot write the memory file");
		abort();
	}
	int frc = snap_read(memfd_path, &file);
	if (!gzip) {
		/* Text reads the same from memory and from a file (zlib passes it through). */
		if (frc != rc || (rc == 0 && !same_shape(&mem, &file))) {
			fprintf(stderr, "fuzz_snap: read from memory gives %d, from a file %d\n", rc, frc);
			abort();
		}
		snap_fin(&file);
		render_and_fin(rc, &mem);
	} else {
		render_and_fin(rc, &mem);
		render_and_fin(frc, &file);
	}
	return 0;
}
