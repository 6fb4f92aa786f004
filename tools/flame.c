/* The frame tree: stacks merged by frame label, outermost first (see flame.h). */
#include "tools/flame.h"
#include "tools/view.h"
#include "common/error.h"
#include "common/fold.h"
#include "common/grow.h"

#include <stdlib.h>
#include <string.h>

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* FNV-1a: labels come from the file, so a hash with no fixed worst case matters less than speed here. */
static uint64_t hash_bytes(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t hash_pair(uint32_t a, uint32_t b)
{
	uint64_t h = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* ---- labels ---------------------------------------------------------------- */

/*
 * Appends the safe form of text to buf, which holds *len bytes and has room
 * for limit bytes plus the NUL: control bytes and invalid UTF-8 as \xHH, cut
 * at a character boundary with "..." when it does not fit.
 */
static void put_safe(char *buf, size_t *len, const char *text, size_t limit)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t left = strlen(text);

	while (left) {
		size_t n = view_utf8_len(p, left);
		int esc = n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f));
		if (esc)
			n = 1;
		size_t need = esc ? 4 : n;
		/* The last character may use the room the ellipsis would need. */
		size_t room = left == n ? limit : (limit >= 3 ? limit - 3 : 0);
		if (*len + need > room) {
			for (int i = 0; i < 3 && *len < limit; i++)
				buf[(*len)++] = '.';
			break;
		}
		if (esc)
			snprintf(buf + *len, 5, "\\x%02x", *p);
		else
			memcpy(buf + *len, p, n);
		*len += need;
		p += n;
		left -= n;
	}
	buf[*len] = '\0';
}

const char *flame_python_file(const char *file)
{
	const char *lib = fold_python_library(file);
	return lib ? lib : file;
}

/* Appends at most max bytes of text to raw at *n. */
static void put_raw(char *raw, size_t *n, const char *text, size_t max)
{
	size_t len = strnlen(text, max);
	memcpy(raw + *n, text, len);
	*n += len;
}

/*
 * "FUNCTION (SHORTFILE:LINE)" made safe into buf. Each piece is copied raw up
 * to PIECE bytes: a piece cut there is longer than any label, so the safe
 * form is cut (with "...") before it reaches the cut, as if the whole text
 * had been there.
 */
#define PIECE (FLAME_LABEL_MAX + 8)
static void python_label(const struct snap_frame *fr, int with_line, char *buf, size_t limit)
{
	char raw[2 * PIECE + 32];
	size_t n = 0, len = 0;
	const char *file = fr->file && fr->file[0] ? flame_python_file(fr->file) : "?";

	put_raw(raw, &n, fr->function && fr->function[0] ? fr->function : "?", PIECE);
	put_raw(raw, &n, " (", 2);
	put_raw(raw, &n, file, PIECE);
	if (with_line && fr->line)
		n += (size_t)snprintf(raw + n, sizeof(raw) - n, ":%u", (unsigned)fr->line);
	raw[n++] = ')';
	raw[n] = '\0';
	put_safe(buf, &len, raw, limit);
}

void flame_function_label(const struct snap *s, uint32_t fi, char *buf, size_t size)
{
	const struct snap_frame *fr = &s->frames[fi];
	if (fr->kind != SNAP_FRAME_PYTHON) {
		flame_label(s, fi, buf, size);
		return;
	}
	buf[0] = '\0';
	python_label(fr, 0, buf, size - 1 < FLAME_LABEL_MAX ? size - 1 : FLAME_LABEL_MAX);
}

void flame_label(const struct snap *s, uint32_t fi, char *buf, size_t size)
{
	const struct snap_frame *fr = &s->frames[fi];
	size_t len = 0, limit = size - 1 < FLAME_LABEL_MAX ? size - 1 : FLAME_LABEL_MAX;

	buf[0] = '\0';
	if (fr->kind == SNAP_FRAME_PYTHON) {
		python_label(fr, 1, buf, limit);
		return;
	}
	if (fr->function && fr->function[0]) {
		put_safe(buf, &len, fr->function, limit);
		return;
	}
	if (fr->module >= 0 && (size_t)fr->module < s->n_modules) {
		/* " + 0x" and at most 16 digits always fit: the module's name is cut instead. */
		char off[32];
		int n = snprintf(off, sizeof(off), " + 0x%llx", (unsigned long long)fr->offset);
		put_safe(buf, &len, view_basename(s->modules[fr->module].path), limit - (size_t)n);
		memcpy(buf + len, off, (size_t)n + 1);
		return;
	}
	snprintf(buf, size, "0x%llx", (unsigned long long)fr->offset);
}

static int intern(struct flame *f, const char *text, uint32_t *out)
{
	size_t n = strlen(text);
	if (f->n_labels * 2 >= f->label_cap) {
		size_t cap = f->label_cap ? f->label_cap * 2 : 1024;
		uint32_t *idx = malloc(cap * sizeof(*idx));
		if (!idx)
			return error("out of memory");
		memset(idx, 0xff, cap * sizeof(*idx));
		for (size_t i = 0; i < f->n_labels; i++) {
			size_t h = hash_bytes(f->labels[i], strlen(f->labels[i])) & (cap - 1);
			while (idx[h] != FLAME_NONE)
				h = (h + 1) & (cap - 1);
			idx[h] = (uint32_t)i;
		}
		free(f->label_index);
		f->label_index = idx;
		f->label_cap = cap;
	}
	size_t h = hash_bytes(text, n) & (f->label_cap - 1);
	for (; f->label_index[h] != FLAME_NONE; h = (h + 1) & (f->label_cap - 1)) {
		if (strcmp(f->labels[f->label_index[h]], text) == 0) {
			*out = f->label_index[h];
			return 0;
		}
	}
	if (grow_array(&f->labels, &f->labels_cap, f->n_labels + 1, sizeof(*f->labels), 256))
		return error("out of memory");
	char *copy = malloc(n + 1);
	if (!copy)
		return error("out of memory");
	memcpy(copy, text, n + 1);
	f->labels[f->n_labels] = copy;
	f->label_index[h] = (uint32_t)f->n_labels;
	*out = (uint32_t)f->n_labels++;
	return 0;
}

/* ---- nodes ------------------------------------------------------------------ */

static int grow_child_index(struct flame *f)
{
	size_t cap = f->child_cap ? f->child_cap * 2 : 1024;
	uint32_t *idx = malloc(cap * sizeof(*idx));
	if (!idx)
		return error("out of memory");
	memset(idx, 0xff, cap * sizeof(*idx));
	for (size_t i = 1; i < f->n_nodes; i++) {
		size_t h = hash_pair(f->nodes[i].parent, f->nodes[i].label) & (cap - 1);
		while (idx[h] != FLAME_NONE)
			h = (h + 1) & (cap - 1);
		idx[h] = (uint32_t)i;
	}
	free(f->child_index);
	f->child_index = idx;
	f->child_cap = cap;
	return 0;
}

/*
 * What a node made for a frame takes from it (see struct flame_node): one
 * per frame of the snapshot, so kept small.
 */
struct proto {
	uint32_t label, module, func, file, line;
	int python, inlined, process;
};

/*
 * A native frame merged into a node that has others: the node keeps a file
 * and a line only where all its frames agree, and says whether they were all,
 * some or none inlined. (A Python node's file and line are in its label.)
 */
static void merge(struct flame_node *n, const struct proto *proto)
{
	if (n->python)
		return;
	if (n->file != proto->file) {
		n->file = FLAME_NONE;
		n->line = 0;
	} else if (n->line != proto->line) {
		n->line = 0;
	}
	if (n->inlined != proto->inlined)
		n->inlined = FLAME_INLINED_SOME;
}

/*
 * The child of parent labelled like proto, made if new from proto (the first
 * frame met with a label gives the node its module and func; the file, line
 * and inlining are merged over all, see merge).
 */
static int child(struct flame *f, uint32_t parent, const struct proto *proto, uint32_t *out)
{
	uint32_t label = proto->label;
	if (f->n_nodes * 2 >= f->child_cap && grow_child_index(f) < 0)
		return -1;
	size_t h = hash_pair(parent, label) & (f->child_cap - 1);
	for (; f->child_index[h] != FLAME_NONE; h = (h + 1) & (f->child_cap - 1)) {
		const struct flame_node *n = &f->nodes[f->child_index[h]];
		if (n->parent == parent && n->label == label) {
			*out = f->child_index[h];
			merge(&f->nodes[*out], proto);
			return 0;
		}
	}
	if (f->n_nodes >= UINT32_MAX - 1)
		return error("too many stack frames to merge");
	if (grow_array(&f->nodes, &f->nodes_cap, f->n_nodes + 1, sizeof(*f->nodes), 1024))
		return error("out of memory");
	struct flame_node *n = &f->nodes[f->n_nodes];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->label = label;
	n->module = proto->module;
	n->func = proto->func;
	n->file = proto->file;
	n->line = proto->line;
	n->python = proto->python;
	n->inlined = proto->inlined;
	n->process = proto->process;
	n->pids = FLAME_NONE;
	n->depth = f->nodes[parent].depth + 1;
	if (n->depth > f->max_depth)
		f->max_depth = n->depth;
	f->child_index[h] = (uint32_t)f->n_nodes;
	*out = (uint32_t)f->n_nodes++;
	return 0;
}

static unsigned kind_bit(char kind)
{
	switch (kind) {
	case SNAP_KIND_MMAP: return FLAME_KIND_MMAP;
	case SNAP_KIND_BRK: return FLAME_KIND_BRK;
	case SNAP_KIND_HEAP: return FLAME_KIND_HEAP;
	case SNAP_KIND_TOUCH: return FLAME_KIND_TOUCH;
	default: return FLAME_KIND_PSEUDO;
	}
}

/*
 * What a node of frame fi is made of: label, module, func, file, line,
 * python, inlined, interned into f. module_of caches the modules' names (FLAME_NONE
 * until interned); buf has room for a label.
 */
static int frame_proto(struct flame *f, const struct snap *s, uint32_t fi, uint32_t *module_of,
		       char *buf, struct proto *proto)
{
	const struct snap_frame *fr = &s->frames[fi];

	memset(proto, 0, sizeof(*proto));
	proto->module = proto->file = FLAME_NONE;
	flame_label(s, fi, buf, FLAME_LABEL_MAX + 1);
	if (intern(f, buf, &proto->label) < 0)
		return -1;
	proto->func = proto->label;
	if (fr->kind == SNAP_FRAME_PYTHON) {
		/* The label names the file already: no module, which views would show beside it. */
		size_t len = 0;
		proto->python = 1;
		proto->line = fr->line;
		flame_function_label(s, fi, buf, FLAME_LABEL_MAX + 1);
		if (intern(f, buf, &proto->func) < 0)
			return -1;
		put_safe(buf, &len, fr->file ? fr->file : "", FLAME_LABEL_MAX);
		return intern(f, buf, &proto->file);
	}
	proto->inlined = fr->inlined ? FLAME_INLINED_ALL : FLAME_INLINED_NONE;
	if (fr->file && fr->file[0]) {
		size_t len = 0;
		put_safe(buf, &len, fr->file, FLAME_LABEL_MAX);
		if (intern(f, buf, &proto->file) < 0)
			return -1;
		proto->line = fr->line;
	}
	int32_t mi = fr->module;
	if (mi >= 0 && (size_t)mi < s->n_modules) {
		if (module_of[mi] == FLAME_NONE) {
			size_t len = 0;
			put_safe(buf, &len, view_basename(s->modules[mi].path), FLAME_LABEL_MAX);
			if (intern(f, buf, &module_of[mi]) < 0)
				return -1;
		}
		proto->module = module_of[mi];
	}
	return 0;
}

void flame_process_label(const struct snap_proc *p, char *buf, size_t size)
{
	size_t len = 0, limit = size - 1 < FLAME_LABEL_MAX ? size - 1 : FLAME_LABEL_MAX;
	char word[FLAME_LABEL_MAX + 1];
	const char *cmd = p->command ? p->command : "";
	size_t n = strcspn(cmd, " ");

	buf[0] = '\0';
	/* The first word is argv[0]; a longer one is cut, and put_safe marks the cut. */
	if (n > FLAME_LABEL_MAX)
		n = FLAME_LABEL_MAX;
	memcpy(word, cmd, n);
	word[n] = '\0';
	const char *base = view_basename(word);
	if (!*base || !strcmp(base, "/")) {
		snprintf(buf, size, "[pid %d]", p->pid);
		return;
	}
	put_safe(buf, &len, base, limit);
}

/* What add_snapshot keeps while it merges one snapshot's groups of stacks. */
struct build {
	const struct snap *s;
	int slot;
	uint32_t *map;          /* trie node -> tree node, valid where gen[node] == cur */
	uint32_t *gen;
	uint32_t cur;
	uint32_t *touched;      /* the trie nodes of the current group, n_nodes at most */
	uint32_t *module_of;    /* module -> label of its base name, FLAME_NONE until interned */
	struct proto *proto_of; /* per frame: its label and the rest a new node takes */
	char *buf;
};

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/*
 * Merges the n stacks st[] under the tree node root (the tree's root, or a
 * process node). Each trie node the stacks reach maps to a tree node,
 * computed in index order (a trie parent has a smaller index), so the work is
 * linear in the trie nodes the group reaches and not in stacks x depth.
 */
static int add_group(struct flame *f, struct build *b, const struct snap_stack *const *st, size_t n, uint32_t root)
{
	const struct snap *s = b->s;
	size_t k = 0;
	uint32_t cur = ++b->cur;

	/* Only the nodes some stack reaches are merged: mark them first. */
	for (size_t i = 0; i < n; i++) {
		uint32_t node = st[i]->node;
		while (node != 0 && node < s->n_nodes && b->gen[node] != cur) {
			b->gen[node] = cur;
			b->map[node] = FLAME_NONE;
			b->touched[k++] = node;
			if (s->nodes[node].parent >= node)
				break;
			node = s->nodes[node].parent;
		}
	}
	if (k > s->n_nodes / 16) {
		/* Most of the trie: one pass over it is cheaper than sorting. */
		k = 0;
		for (size_t i = 1; i < s->n_nodes; i++)
			if (b->gen[i] == cur)
				b->touched[k++] = (uint32_t)i;
	} else {
		qsort(b->touched, k, sizeof(*b->touched), cmp_u32);
	}
	for (size_t t = 0; t < k; t++) {
		uint32_t i = b->touched[t];
		const struct snap_node *sn = &s->nodes[i];
		uint32_t parent = root;
		if (sn->parent != 0 && sn->parent < i && b->gen[sn->parent] == cur && b->map[sn->parent] != FLAME_NONE)
			parent = b->map[sn->parent];  /* else a broken trie: cannot happen after snap_read */
		if (sn->frame >= s->n_frames) {
			b->map[i] = parent;
			continue;
		}
		struct proto *proto = &b->proto_of[sn->frame];
		if (proto->label == FLAME_NONE &&
		    frame_proto(f, s, sn->frame, b->module_of, b->buf, proto) < 0)
			return -1;
		if (child(f, parent, proto, &b->map[i]) < 0)
			return -1;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t node = root;
		if (st[i]->node != 0 && st[i]->node < s->n_nodes && b->gen[st[i]->node] == cur &&
		    b->map[st[i]->node] != FLAME_NONE)
			node = b->map[st[i]->node];
		if (node == root) {
			/* A stack with no frame gets one, so that every stack is a node of its own. */
			struct proto none = { .module = FLAME_NONE, .file = FLAME_NONE };
			if (intern(f, FLAME_NO_STACK, &none.label) < 0)
				return -1;
			none.func = none.label;
			if (child(f, root, &none, &node) < 0)
				return -1;
		}
		struct flame_node *nd = &f->nodes[node];
		int slot = b->slot;
		nd->self_charged[slot] = sat_add(nd->self_charged[slot], st[i]->charged);
		nd->self_reserved[slot] = sat_add(nd->self_reserved[slot], st[i]->reserved);
		nd->self_count[slot] = sat_add(nd->self_count[slot], st[i]->count);
		nd->kinds |= kind_bit(st[i]->kind);
	}
	return 0;
}

/* For sorting a tree's stacks (and processes) by the process node they go under, then by index. */
struct keyed {
	uint32_t key;
	uint32_t index;
};

static int cmp_keyed(const void *pa, const void *pb)
{
	const struct keyed *a = pa, *b = pb;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return (a->index > b->index) - (a->index < b->index);
}

/*
 * The process nodes of a FLAME_TREE tree: proc_node[p] for each process p
 * that holds a stack (FLAME_NONE for the others), one node per label, whose
 * pids text names the processes merged into it.
 */
static int process_nodes(struct flame *f, const struct snap *s, uint32_t *proc_node, char *buf)
{
	struct keyed *v = malloc((s->n_procs ? s->n_procs : 1) * sizeof(*v));
	size_t n = 0;
	if (!v)
		return error("out of memory");
	for (size_t i = 0; i < s->n_procs; i++)
		proc_node[i] = FLAME_NONE;
	for (size_t i = 0; i < s->n_tree_stacks; i++) {
		uint32_t p = s->tree_stacks[i].proc;
		if (p >= s->n_procs || proc_node[p] != FLAME_NONE)
			continue;
		struct proto proto = { .module = FLAME_NONE, .file = FLAME_NONE, .process = 1 };
		flame_process_label(&s->procs[p], buf, FLAME_LABEL_MAX + 1);
		if (intern(f, buf, &proto.label) < 0)
			goto fail;
		proto.func = proto.label;
		if (child(f, FLAME_ROOT, &proto, &proc_node[p]) < 0)
			goto fail;
		v[n].key = proc_node[p];
		v[n++].index = (uint32_t)p;
	}
	/* "pid 1234" or "pids 1234, 1240, and 3 more", per node. */
	qsort(v, n, sizeof(*v), cmp_keyed);
	for (size_t i = 0; i < n;) {
		size_t j = i, len = 0;
		while (j < n && v[j].key == v[i].key)
			j++;
		len = (size_t)snprintf(buf, FLAME_LABEL_MAX + 1, "pid%s", j - i > 1 ? "s" : "");
		for (size_t k = i; k < j && k - i < FLAME_PIDS_MAX; k++)
			len += (size_t)snprintf(buf + len, FLAME_LABEL_MAX + 1 - len, "%s %d", k > i ? "," : "",
						s->procs[v[k].index].pid);
		if (j - i > FLAME_PIDS_MAX)
			snprintf(buf + len, FLAME_LABEL_MAX + 1 - len, " and %zu more", j - i - FLAME_PIDS_MAX);
		/* A node met in an earlier slot (a diff) keeps its text. */
		if (f->nodes[v[i].key].pids == FLAME_NONE && intern(f, buf, &f->nodes[v[i].key].pids) < 0)
			goto fail;
		i = j;
	}
	free(v);
	return 0;
fail:
	free(v);
	return -1;
}

/* Adds one snapshot's stacks of the given set into slot. */
static int add_snapshot(struct flame *f, const struct snap *s, enum flame_set set, int slot)
{
	const struct snap_stack *st = set == FLAME_LIVE ? s->live : set == FLAME_TREE ? s->tree_stacks : s->stacks;
	size_t n_st = set == FLAME_LIVE ? s->n_live : set == FLAME_TREE ? s->n_tree_stacks : s->n_stacks;
	size_t nn = s->n_nodes ? s->n_nodes : 1;
	struct build b = { .s = s, .slot = slot };
	const struct snap_stack **v = malloc((n_st ? n_st : 1) * sizeof(*v));
	struct keyed *order = NULL;
	uint32_t *proc_node = NULL;
	int rc = -1;

	b.map = malloc(nn * sizeof(*b.map));
	b.gen = calloc(nn, sizeof(*b.gen));
	b.touched = malloc(nn * sizeof(*b.touched));
	b.buf = malloc(FLAME_LABEL_MAX + 1);
	b.proto_of = malloc((s->n_frames ? s->n_frames : 1) * sizeof(*b.proto_of));
	b.module_of = malloc((s->n_modules ? s->n_modules : 1) * sizeof(*b.module_of));
	if (!v || !b.map || !b.gen || !b.touched || !b.buf || !b.proto_of || !b.module_of) {
		error("out of memory");
		goto out;
	}
	for (size_t i = 0; i < s->n_frames; i++)
		b.proto_of[i].label = FLAME_NONE;
	for (size_t i = 0; i < s->n_modules; i++)
		b.module_of[i] = FLAME_NONE;

	if (set != FLAME_TREE) {
		for (size_t i = 0; i < n_st; i++)
			v[i] = &st[i];
		rc = add_group(f, &b, v, n_st, FLAME_ROOT);
		goto out;
	}
	/* The combined peak: each process's stacks under its command's node, a group per node. */
	order = malloc((n_st ? n_st : 1) * sizeof(*order));
	proc_node = malloc((s->n_procs ? s->n_procs : 1) * sizeof(*proc_node));
	if (!order || !proc_node) {
		error("out of memory");
		goto out;
	}
	if (process_nodes(f, s, proc_node, b.buf) < 0)
		goto out;
	for (size_t i = 0; i < n_st; i++) {
		order[i].key = st[i].proc < s->n_procs ? proc_node[st[i].proc] : FLAME_ROOT;
		order[i].index = (uint32_t)i;
	}
	qsort(order, n_st, sizeof(*order), cmp_keyed);
	for (size_t i = 0; i < n_st; i++)
		v[i] = &st[order[i].index];
	for (size_t i = 0; i < n_st;) {
		size_t j = i;
		while (j < n_st && order[j].key == order[i].key)
			j++;
		if (add_group(f, &b, v + i, j - i, order[i].key) < 0)
			goto out;
		i = j;
	}
	rc = 0;
out:
	free(v);
	free(order);
	free(proc_node);
	free(b.map);
	free(b.gen);
	free(b.touched);
	free(b.buf);
	free(b.proto_of);
	free(b.module_of);
	return rc;
}

/* ---- ordering --------------------------------------------------------------- */

static const struct flame *sort_tree;

static uint64_t weight(const struct flame_node *n)
{
	return n->charged[0] > n->charged[1] ? n->charged[0] : n->charged[1];
}

static uint64_t weight_reserved(const struct flame_node *n)
{
	return n->reserved[0] > n->reserved[1] ? n->reserved[0] : n->reserved[1];
}

static int cmp_children(const void *pa, const void *pb)
{
	const struct flame_node *a = &sort_tree->nodes[*(const uint32_t *)pa];
	const struct flame_node *b = &sort_tree->nodes[*(const uint32_t *)pb];
	if (weight(a) != weight(b))
		return weight(a) > weight(b) ? -1 : 1;
	if (weight_reserved(a) != weight_reserved(b))
		return weight_reserved(a) > weight_reserved(b) ? -1 : 1;
	int c = strcmp(sort_tree->labels[a->label], sort_tree->labels[b->label]);
	if (c)
		return c;
	/* Same label under one parent cannot happen; keep the order total anyway. */
	return (*(const uint32_t *)pa > *(const uint32_t *)pb) - (*(const uint32_t *)pa < *(const uint32_t *)pb);
}

/* Inclusive sums (children have larger indexes), then sibling lists in order. */
static int finish(struct flame *f)
{
	for (size_t i = 0; i < f->n_nodes; i++) {
		struct flame_node *n = &f->nodes[i];
		for (int k = 0; k < 2; k++) {
			n->charged[k] = n->self_charged[k];
			n->reserved[k] = n->self_reserved[k];
			n->count[k] = n->self_count[k];
		}
	}
	for (size_t i = f->n_nodes; i-- > 1;) {
		struct flame_node *n = &f->nodes[i], *p = &f->nodes[n->parent];
		for (int k = 0; k < 2; k++) {
			p->charged[k] = sat_add(p->charged[k], n->charged[k]);
			p->reserved[k] = sat_add(p->reserved[k], n->reserved[k]);
			p->count[k] = sat_add(p->count[k], n->count[k]);
		}
		p->kinds |= n->kinds;
	}

	/* Children grouped by parent (a counting sort), then each group sorted. */
	size_t n = f->n_nodes;
	uint32_t *start = calloc(n + 1, sizeof(*start));
	uint32_t *order = malloc((n ? n : 1) * sizeof(*order));
	if (!start || !order) {
		free(start);
		free(order);
		return error("out of memory");
	}
	for (size_t i = 1; i < n; i++)
		start[f->nodes[i].parent + 1]++;
	for (size_t i = 0; i < n; i++)
		start[i + 1] += start[i];
	uint32_t *fill = malloc((n ? n : 1) * sizeof(*fill));
	if (!fill) {
		free(start);
		free(order);
		return error("out of memory");
	}
	memcpy(fill, start, n * sizeof(*fill));
	for (size_t i = 1; i < n; i++)
		order[fill[f->nodes[i].parent]++] = (uint32_t)i;
	free(fill);
	sort_tree = f;
	for (size_t p = 0; p < n; p++) {
		uint32_t a = start[p], b = start[p + 1];
		f->nodes[p].first_child = 0;
		if (a == b)
			continue;
		qsort(order + a, b - a, sizeof(*order), cmp_children);
		f->nodes[p].first_child = order[a];
		for (uint32_t k = a; k < b; k++)
			f->nodes[order[k]].next_sibling = k + 1 < b ? order[k + 1] : 0;
	}
	sort_tree = NULL;
	free(start);
	free(order);
	return 0;
}

int flame_build(struct flame *f, const struct snap *a, const struct snap *b, enum flame_set set)
{
	memset(f, 0, sizeof(*f));
	f->nodes_cap = 1024;
	f->nodes = calloc(f->nodes_cap, sizeof(*f->nodes));
	if (!f->nodes)
		return error("out of memory");
	f->n_nodes = 1;
	f->nodes[FLAME_ROOT].label = FLAME_NONE;
	f->nodes[FLAME_ROOT].module = FLAME_NONE;
	f->nodes[FLAME_ROOT].func = FLAME_NONE;
	f->nodes[FLAME_ROOT].file = FLAME_NONE;
	f->nodes[FLAME_ROOT].pids = FLAME_NONE;
	f->two = b != NULL;
	if (add_snapshot(f, a, set, 0) < 0 || (b && add_snapshot(f, b, set, 1) < 0) || finish(f) < 0) {
		flame_fin(f);
		return -1;
	}
	/* The hash indexes are only needed while building. */
	free(f->child_index);
	free(f->label_index);
	f->child_index = f->label_index = NULL;
	f->child_cap = f->label_cap = 0;
	return 0;
}

void flame_fin(struct flame *f)
{
	for (size_t i = 0; i < f->n_labels; i++)
		free(f->labels[i]);
	free(f->labels);
	free(f->nodes);
	free(f->child_index);
	free(f->label_index);
	memset(f, 0, sizeof(*f));
}

void flame_walk(const struct flame *f, uint32_t from,
		void (*fn)(const struct flame *f, uint32_t node, void *arg), void *arg)
{
	if (from >= f->n_nodes)
		return;
	/* Iterative pre-order: a deep tree must not deepen the C stack. */
	uint32_t n = from;
	for (;;) {
		fn(f, n, arg);
		if (f->nodes[n].first_child) {
			n = f->nodes[n].first_child;
			continue;
		}
		while (n != from && !f->nodes[n].next_sibling)
			n = f->nodes[n].parent;
		if (n == from)
			return;
		n = f->nodes[n].next_sibling;
	}
}

/* ---- per-function totals ----------------------------------------------------- */

static int cmp_funcs(const void *pa, const void *pb, const struct flame *f)
{
	const struct flame_func *a = pa, *b = pb;
	uint64_t wa = a->inclusive[0] > a->inclusive[1] ? a->inclusive[0] : a->inclusive[1];
	uint64_t wb = b->inclusive[0] > b->inclusive[1] ? b->inclusive[0] : b->inclusive[1];
	if (wa != wb)
		return wa > wb ? -1 : 1;
	uint64_t sa = a->self[0] > a->self[1] ? a->self[0] : a->self[1];
	uint64_t sb = b->self[0] > b->self[1] ? b->self[0] : b->self[1];
	if (sa != sb)
		return sa > sb ? -1 : 1;
	return strcmp(f->labels[a->label], f->labels[b->label]);
}

static int cmp_funcs_sorted(const void *a, const void *b)
{
	return cmp_funcs(a, b, sort_tree);
}

struct flame_func *flame_functions(const struct flame *f, size_t *n)
{
	/* active[func]: how many nodes on the current path count as that function (recursion counts once). */
	uint32_t *active = calloc(f->n_labels ? f->n_labels : 1, sizeof(*active));
	struct flame_func *fn = calloc(f->n_labels ? f->n_labels : 1, sizeof(*fn));
	uint8_t *used = calloc(f->n_labels ? f->n_labels : 1, 1);
	if (!active || !fn || !used) {
		free(active);
		free(fn);
		free(used);
		error("out of memory");
		return NULL;
	}
	for (size_t i = 0; i < f->n_labels; i++)
		fn[i].label = (uint32_t)i;

	/* Iterative depth-first walk, entering and leaving each node once. */
	uint32_t node = FLAME_ROOT;
	for (;;) {
		const struct flame_node *nd = &f->nodes[node];
		/* A process node is no function: the per-function totals are the code's. */
		if (node != FLAME_ROOT && !nd->process) {
			struct flame_func *x = &fn[nd->func];
			used[nd->func] = 1;
			for (int k = 0; k < 2; k++) {
				/* Only the outermost occurrence counts its subtree, so recursion is not double-counted. */
				if (active[nd->func] == 0)
					x->inclusive[k] = sat_add(x->inclusive[k], nd->charged[k]);
				x->self[k] = sat_add(x->self[k], nd->self_charged[k]);
			}
			active[nd->func]++;
		}
		if (nd->first_child) {
			node = nd->first_child;
			continue;
		}
		/* Leave this node and every ancestor whose children are done. */
		for (;;) {
			if (node == FLAME_ROOT)
				goto done;
			if (!f->nodes[node].process)
				active[f->nodes[node].func]--;
			if (f->nodes[node].next_sibling) {
				node = f->nodes[node].next_sibling;
				break;
			}
			node = f->nodes[node].parent;
		}
	}
done:
	free(active);
	size_t k = 0;
	for (size_t i = 0; i < f->n_labels; i++)
		if (used[i])
			fn[k++] = fn[i];
	free(used);
	sort_tree = f;
	qsort(fn, k, sizeof(*fn), cmp_funcs_sorted);
	sort_tree = NULL;
	*n = k;
	return fn;
}
