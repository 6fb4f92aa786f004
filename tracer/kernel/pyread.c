/*
 * Python frames read by the kernel, the user side (kernel/pyread.h). The
 * layout is the one tracer/stacks/pylayout.c gives and pystack_detect
 * chose for the process: the same offsets serve the ptrace path's reader
 * and the kernel's.
 */
#include "tracer/kernel/pyread.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tracer/core/session.h"
#include "tracer/kernel/pyread_rec.h"
#include "tracer/stacks/capture.h"
#include "tracer/stacks/pystack.h"

#ifdef HAVE_BPF
#include <bpf/bpf.h>
#endif

_Static_assert(KPY_MAX_FRAMES == PY_MAX_FRAMES, "the kernel's reader reads as deep as the ptrace path's");

static unsigned short off(uint16_t v)
{
	return v == PYL_NONE ? KPY_NONE : v;
}

int pyread_describe(int fd, const struct pyproc *py, pid_t pid, char *why, size_t size)
{
	if (py->state != PY_READY || !py->l) {
		snprintf(why, size, "its CPython is not one ptfil reads");
		return -1;
	}
	const struct pylayout *l = py->l;
	struct kpy_proc k;
	memset(&k, 0, sizeof(k));
	k.runtime = py->runtime;
	k.off[KPY_RUNTIME_INTERP_HEAD] = off(l->runtime_interp_head);
	k.off[KPY_INTERP_NEXT] = off(l->interp_next);
	k.off[KPY_INTERP_THREADS_HEAD] = off(l->interp_threads_head);
	k.off[KPY_TS_NEXT] = off(l->ts_next);
	k.off[KPY_TS_NATIVE_THREAD_ID] = off(l->ts_native_thread_id);
	k.off[KPY_TS_CFRAME] = off(l->ts_cframe);
	k.off[KPY_CFRAME_CURRENT] = off(l->cframe_current);
	k.off[KPY_TS_CURRENT_FRAME] = off(l->ts_current_frame);
	k.off[KPY_FRAME_CODE] = off(l->frame_code);
	k.off[KPY_FRAME_PREVIOUS] = off(l->frame_previous);
	k.off[KPY_FRAME_INSTR] = off(l->frame_instr);
	k.off[KPY_FRAME_OWNER] = off(l->frame_owner);
	k.off[KPY_FRAME_IS_ENTRY] = off(l->frame_is_entry);
	/* The thread state's fields are read one by one; a frame's in one read of its first bytes. */
	if (k.off[KPY_RUNTIME_INTERP_HEAD] == KPY_NONE || k.off[KPY_INTERP_NEXT] == KPY_NONE ||
	    k.off[KPY_INTERP_THREADS_HEAD] == KPY_NONE || k.off[KPY_TS_NEXT] == KPY_NONE ||
	    k.off[KPY_TS_NATIVE_THREAD_ID] == KPY_NONE ||
	    (k.off[KPY_TS_CFRAME] == KPY_NONE ? k.off[KPY_TS_CURRENT_FRAME] == KPY_NONE
					      : k.off[KPY_CFRAME_CURRENT] == KPY_NONE)) {
		snprintf(why, size, "CPython 3.%u's layout lacks a field the kernel's reader needs", l->minor);
		return -1;
	}
	unsigned need = 0;
	static const int words[] = { KPY_FRAME_CODE, KPY_FRAME_PREVIOUS, KPY_FRAME_INSTR };
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		unsigned o = k.off[words[i]];
		if (o == KPY_NONE || o + 8u > KPY_FRAME_BYTES) {
			snprintf(why, size, "CPython 3.%u's frames keep a field the kernel's reader needs past its %d bytes",
				 l->minor, KPY_FRAME_BYTES);
			return -1;
		}
		if (o + 8u > need)
			need = o + 8u;
	}
	if (k.off[KPY_FRAME_OWNER] == KPY_NONE || k.off[KPY_FRAME_OWNER] + 1u > KPY_FRAME_BYTES ||
	    (k.off[KPY_FRAME_IS_ENTRY] != KPY_NONE && k.off[KPY_FRAME_IS_ENTRY] + 1u > KPY_FRAME_BYTES)) {
		snprintf(why, size, "CPython 3.%u's frames keep a field the kernel's reader needs past its %d bytes",
			 l->minor, KPY_FRAME_BYTES);
		return -1;
	}
	if (k.off[KPY_FRAME_OWNER] + 1u > need)
		need = k.off[KPY_FRAME_OWNER] + 1u;
	if (k.off[KPY_FRAME_IS_ENTRY] != KPY_NONE && k.off[KPY_FRAME_IS_ENTRY] + 1u > need)
		need = k.off[KPY_FRAME_IS_ENTRY] + 1u;
	k.frame_bytes = (unsigned short)need;
	/* The code object's name fields, in one read. */
	unsigned lo = l->code_filename, hi = l->code_filename;
	const uint16_t names[3] = { l->code_filename, l->code_qualname, l->code_linetable };
	for (int i = 0; i < 3; i++) {
		if (names[i] == PYL_NONE) {
			snprintf(why, size, "CPython 3.%u's layout lacks a field the kernel's reader needs", l->minor);
			return -1;
		}
		lo = names[i] < lo ? names[i] : lo;
		hi = names[i] > hi ? names[i] : hi;
	}
	if (hi + 8u - lo > KPY_CODE_BYTES) {
		snprintf(why, size, "CPython 3.%u's code objects keep their names further apart than the kernel's reader reads",
			 l->minor);
		return -1;
	}
	k.code_lo = (unsigned short)lo;
	k.code_bytes = (unsigned short)(hi + 8u - lo);
	k.off[KPY_CODE_FILENAME] = (unsigned short)(l->code_filename - lo);
	k.off[KPY_CODE_QUALNAME] = (unsigned short)(l->code_qualname - lo);
	k.off[KPY_CODE_LINETABLE] = (unsigned short)(l->code_linetable - lo);
	/* Its PID namespace: a thread state names its thread by the id it has there. */
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat(path, &st)) {
		snprintf(why, size, "its PID namespace cannot be read (%s)", path);
		return -1;
	}
	k.ns_dev = (unsigned long long)st.st_dev;
	k.ns_ino = (unsigned long long)st.st_ino;
#ifdef HAVE_BPF
	uint32_t key = (uint32_t)pid;
	if (fd < 0 || bpf_map_update_elem(fd, &key, &k, BPF_ANY)) {
		snprintf(why, size, "the kernel's reader cannot take another process");
		return -1;
	}
	return 0;
#else
	(void)fd;
	snprintf(why, size, "ptfil was built without BPF");
	return -1;
#endif
}

void pyread_forget(int fd, pid_t pid)
{
#ifdef HAVE_BPF
	uint32_t key = (uint32_t)pid;
	if (fd >= 0)
		bpf_map_delete_elem(fd, &key);
#else
	(void)fd;
	(void)pid;
#endif
}

int pyread_keep(struct tracer *T, const void *rec, size_t len, int pycodes_fd)
{
	const struct kpy_rec *r = rec;
	size_t head = offsetof(struct kpy_rec, f);
	if (len < head || r->n > KPY_MAX_FRAMES || len < head + (size_t)r->n * sizeof(struct kpy_frame))
		return -1;
	struct tracee *t = tracer_find(T, (pid_t)r->tid);
	if (!t || t->p->pid != (pid_t)r->tgid)
		return -1;
	static struct pyraw raw[KPY_MAX_FRAMES];
	for (unsigned i = 0; i < r->n; i++) {
		uint64_t c = r->f[i].code;
#ifdef HAVE_BPF
		if (c & KPY_UNKNOWN) {
			/* Named now, while its thread is stopped; told as named even if it cannot be, or it would stop again. */
			uint64_t code = c & ~KPY_FLAGS, key = KPY_CODE_KEY(&r->f[i]);
			bpf_map_update_elem(pycodes_fd, &code, &key, BPF_ANY);
		}
#else
		(void)pycodes_fd;
#endif
		raw[i] = (struct pyraw){ .addr = 0, .code = c & ~KPY_FLAGS, .instr = r->f[i].instr,
					 .last_of_call = (c & KPY_LAST_OF_CALL) != 0,
					 .owner = (c & KPY_GENERATOR) ? PY_OWNED_BY_GENERATOR : PY_OWNED_BY_THREAD,
					 .have_hdr = 1, .filename = r->f[i].filename, .qualname = r->f[i].qualname,
					 .linetable = r->f[i].linetable };
	}
	unsigned flags = (r->flags & KPY_CUT ? CAPTURE_PY_CUT : 0) | (r->flags & KPY_FAILED ? CAPTURE_PY_FAILED : 0) |
			 (r->flags & KPY_NO_THREAD ? CAPTURE_PY_NO_THREAD : 0);
	return capture_keep_python(t, raw, r->n, flags);
}
