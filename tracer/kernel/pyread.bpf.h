/*
 * CPython's frame chain read by the kernel, at the event (docs/heap-events.md,
 * "Python frames read by the kernel"): included by both kernel event
 * sources' programs (kheap.bpf.c, faults.bpf.c) after ring.bpf.h. For a
 * thread of a process ptfil described (pyprocs, written by
 * tracer/kernel/pyread.c from the layout tracer/stacks/pylayout.c chose), it
 * finds the thread's thread state, walks its frames innermost first and
 * writes per frame its code object, its instruction pointer and the code
 * object's name fields into a record of its own (pyread_rec.h), put into the
 * ring just before the event's record.
 * ptfil names the code objects (tracer/stacks/pystack.c, pystack_name), once
 * each. A read that fails marks the record; nothing is guessed.
 *
 * The path, as the ptrace path's reader takes it: _PyRuntime.interpreters.head
 * -> PyInterpreterState.threads.head -> the thread state whose
 * native_thread_id is the thread's id in its own PID namespace (remembered
 * per thread, checked at each use) -> its current frame (through its
 * _PyCFrame in 3.11 and 3.12) -> _PyInterpreterFrame.previous ...
 */
#ifndef PTFIL_PYREAD_BPF_H
#define PTFIL_PYREAD_BPF_H

#include "tracer/kernel/pyread_rec.h"

/* The processes whose Python frames are read (tgid -> what ptfil found of their CPython). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct kpy_proc);
} pyprocs SEC(".maps");

/* Per thread (by its global tid): its thread state, found by a scan, checked at each use; its last frames' hash. */
struct kpy_thread {
	__u64 ts;
	__u32 tgid;
	__u32 pad;
	__u64 known;              /* the hash of the last frames whose code objects were all known */
};
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct kpy_thread);
} pythreads SEC(".maps");

/*
 * The code objects ptfil has named (code object -> KPY_CODE_KEY), written by
 * ptfil (pyread.c). A frame whose code object is not here is one ptfil must
 * name before it can be freed (a module's body, run once at its import): the
 * thread is stopped, with the back-pressure signal, until ptfil has read its
 * record. An entry lost to the LRU costs one stop more.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} pycodes SEC(".maps");

/* One walk's state and its record (too big for the BPF stack); bpf_loop's steps find it here. */
struct kpy_scratch {
	struct kpy_rec r;
	struct kpy_proc p;        /* the process's description, copied for the steps */
	__u64 cur;                /* the frame to read next */
	__u64 interp, ts, found;  /* the scan: the interpreter and thread state looked at, the one found */
	__u64 own;                /* the thread's id in its own PID namespace */
	__u64 hash;               /* of the frames read: the same hash, the same Python stack */
	__u32 interps;
	__u32 unknown;            /* frames whose code object ptfil was not known to have named */
	__u8 buf[KPY_FRAME_BYTES + 8];
	__u8 cbuf[KPY_CODE_BYTES + 8];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kpy_scratch);
} pywalk SEC(".maps");

static __always_inline struct kpy_scratch *kpy_scratch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&pywalk, &zero);
}

static __always_inline int kpy_word(__u64 addr, __u64 *v)
{
	return bpf_probe_read_user(v, sizeof(*v), (void *)addr) ? -1 : 0;
}

/* A word of the frame read into buf, at a field's offset (below KPY_FRAME_BYTES: pyread.c checks). */
static __always_inline __u64 kpy_field(struct kpy_scratch *s, __u16 off)
{
	__u64 v;
	__builtin_memcpy(&v, s->buf + (off & (KPY_FRAME_BYTES - 1)), sizeof(v));
	return v;
}

/* One step of the scan for the thread state naming s->own: one thread state, or on to the next interpreter. */
static long kpy_scan_step(__u64 index, void *ctx)
{
	struct kpy_scratch *s = kpy_scratch();
	if (!s)
		return 1;
	if (!s->ts) {
		__u64 next, head;
		if (++s->interps >= KPY_INTERPS || !s->interp ||
		    kpy_word(s->interp + s->p.off[KPY_INTERP_NEXT], &next) || !next)
			return 1;
		s->interp = next;
		if (kpy_word(next + s->p.off[KPY_INTERP_THREADS_HEAD], &head))
			return 1;
		s->ts = head;
		return 0;
	}
	__u64 id, next;
	if (kpy_word(s->ts + s->p.off[KPY_TS_NATIVE_THREAD_ID], &id))
		return 1;
	if ((__u32)id == (__u32)s->own) {
		s->found = s->ts;
		return 1;
	}
	if (kpy_word(s->ts + s->p.off[KPY_TS_NEXT], &next))
		return 1;
	s->ts = next;
	return 0;
}

/* One step of the walk: the frame at s->cur. */
static long kpy_walk_step(__u64 index, void *ctx)
{
	struct kpy_scratch *s = kpy_scratch();
	if (!s || !s->cur)
		return 1;
	__u32 n = s->r.n;
	if (n >= KPY_MAX_FRAMES) {
		s->r.flags |= KPY_CUT;
		return 1;
	}
	__u64 len = s->p.frame_bytes & (2 * KPY_FRAME_BYTES - 1);
	if (len > KPY_FRAME_BYTES)
		len = KPY_FRAME_BYTES;
	if (!len || bpf_probe_read_user(s->buf, len, (void *)s->cur)) {
		s->r.flags |= KPY_FAILED;
		return 1;
	}
	__u8 owner = s->buf[s->p.off[KPY_FRAME_OWNER] & (KPY_FRAME_BYTES - 1)];
	if (owner >= 3) {
		/* A shim (3.12 and later): an eval loop call starts here; the frame before it was that call's outermost. */
		if (n)
			s->r.f[(n - 1) & (KPY_MAX_FRAMES - 1)].code |= KPY_LAST_OF_CALL;
	} else {
		/* 3.14's f_executable is tagged in its low bits; code objects are 8-aligned in every version. */
		__u64 code = kpy_field(s, s->p.off[KPY_FRAME_CODE]) & ~KPY_FLAGS;
		__u64 instr = kpy_field(s, s->p.off[KPY_FRAME_INSTR]);
		if (!code) {
			s->r.flags |= KPY_FAILED;
			return 1;
		}
		__u64 clen = s->p.code_bytes & (2 * KPY_CODE_BYTES - 1);
		if (clen > KPY_CODE_BYTES)
			clen = KPY_CODE_BYTES;
		if (!clen || bpf_probe_read_user(s->cbuf, clen, (void *)(code + s->p.code_lo))) {
			s->r.flags |= KPY_FAILED;
			return 1;
		}
		__u64 fl = owner == 1 ? KPY_GENERATOR : 0;
		__u16 entry = s->p.off[KPY_FRAME_IS_ENTRY];
		if (entry != KPY_NONE && s->buf[entry & (KPY_FRAME_BYTES - 1)])
			fl |= KPY_LAST_OF_CALL;
		struct kpy_frame *f = &s->r.f[n & (KPY_MAX_FRAMES - 1)];
		f->code = code | fl;
		f->instr = instr;
		__builtin_memcpy(&f->filename, s->cbuf + (s->p.off[KPY_CODE_FILENAME] & (KPY_CODE_BYTES - 1)), 8);
		__builtin_memcpy(&f->qualname, s->cbuf + (s->p.off[KPY_CODE_QUALNAME] & (KPY_CODE_BYTES - 1)), 8);
		__builtin_memcpy(&f->linetable, s->cbuf + (s->p.off[KPY_CODE_LINETABLE] & (KPY_CODE_BYTES - 1)), 8);
		s->r.n = n + 1;
		s->hash = (s->hash ^ code ^ (instr << 7) ^ fl) * 0x100000001b3ull;
	}
	s->cur = kpy_field(s, s->p.off[KPY_FRAME_PREVIOUS]);
	return 0;
}

/* One step of the look for code objects ptfil has not named: frame index. */
static long kpy_known_step(__u64 index, void *ctx)
{
	struct kpy_scratch *s = kpy_scratch();
	if (!s || index >= s->r.n)
		return 1;
	struct kpy_frame *f = &s->r.f[index & (KPY_MAX_FRAMES - 1)];
	__u64 code = f->code & ~KPY_FLAGS;
	__u64 *key = bpf_map_lookup_elem(&pycodes, &code);
	if (!key || *key != KPY_CODE_KEY(f)) {
		f->code |= KPY_UNKNOWN;
		s->unknown++;
	}
	return 0;
}

/*
 * Reads the calling thread's Python frames into the per-CPU record when its
 * process runs a CPython ptfil described. Returns the record (for
 * kpy_hash and kpy_emit), or NULL for a process without one.
 */
static __always_inline struct kpy_scratch *kpy_walk(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = (__u32)(id >> 32), tid = (__u32)id;
	struct kpy_proc *pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	if (!pp)
		return NULL;
	struct kpy_scratch *s = kpy_scratch();
	if (!s)
		return NULL;
	__builtin_memcpy(&s->p, pp, sizeof(s->p));
	s->r.kind = KPY_REC;
	s->r.tid = tid;
	s->r.tgid = tgid;
	s->r.n = 0;
	s->r.flags = 0;
	s->r.pad = 0;
	s->hash = 0xcbf29ce484222325ull;
	s->cur = 0;
	s->unknown = 0;

	/* The thread's id in its process's PID namespace: what native_thread_id holds. */
	struct bpf_pidns_info ns = {};
	s->own = bpf_get_ns_current_pid_tgid(s->p.ns_dev, s->p.ns_ino, &ns, sizeof(ns)) == 0 ? ns.pid : tid;

	/* The thread state: as remembered, if it still names the thread. */
	__u64 ts = 0, v;
	struct kpy_thread *known = bpf_map_lookup_elem(&pythreads, &tid);
	if (known && known->tgid == tgid && known->ts &&
	    kpy_word(known->ts + s->p.off[KPY_TS_NATIVE_THREAD_ID], &v) == 0 && (__u32)v == (__u32)s->own)
		ts = known->ts;
	if (!ts) {
		s->interps = 0;
		s->found = 0;
		s->ts = 0;
		if (kpy_word(s->p.runtime + s->p.off[KPY_RUNTIME_INTERP_HEAD], &s->interp) || !s->interp ||
		    kpy_word(s->interp + s->p.off[KPY_INTERP_THREADS_HEAD], &s->ts)) {
			s->r.flags |= KPY_FAILED;
			return s;
		}
		bpf_loop(KPY_MAX_THREADS + KPY_INTERPS, kpy_scan_step, NULL, 0);
		ts = s->found;
		if (!ts) {
			s->r.flags |= KPY_NO_THREAD;
			return s;
		}
		struct kpy_thread t = { .ts = ts, .tgid = tgid, .known = 0 };
		bpf_map_update_elem(&pythreads, &tid, &t, BPF_ANY);
	}

	/* Its current frame. */
	__u64 cur;
	__u16 cframe = s->p.off[KPY_TS_CFRAME];
	if (cframe != KPY_NONE) {
		__u64 cf;
		if (kpy_word(ts + cframe, &cf)) {
			s->r.flags |= KPY_FAILED;
			return s;
		}
		if (!cf)
			return s;
		if (kpy_word(cf + s->p.off[KPY_CFRAME_CURRENT], &cur)) {
			s->r.flags |= KPY_FAILED;
			return s;
		}
	} else if (kpy_word(ts + s->p.off[KPY_TS_CURRENT_FRAME], &cur)) {
		s->r.flags |= KPY_FAILED;
		return s;
	}
	s->cur = cur;
	bpf_loop(KPY_CHAIN, kpy_walk_step, NULL, 0);
	/* Steps ran out with frames left: a cut, not the end. */
	if (s->cur && !(s->r.flags & (KPY_CUT | KPY_FAILED)))
		s->r.flags |= KPY_CUT;
	/* Frames the thread's last event had, all named: no look-up. */
	struct kpy_thread *th = bpf_map_lookup_elem(&pythreads, &tid);
	if (s->r.n && (!th || th->known != s->hash)) {
		bpf_loop(KPY_MAX_FRAMES, kpy_known_step, NULL, 0);
		if (th)
			th->known = s->unknown ? 0 : s->hash;
	}
	return s;
}

static __always_inline __u64 kpy_hash(const struct kpy_scratch *s)
{
	return s->hash ^ s->r.flags ^ ((__u64)s->r.n << 40);
}

/*
 * Writes the record kpy_walk read into the ring (ptfil is not woken for it:
 * the event's record that follows decides), and stops the thread when a
 * code object in it is one ptfil has not named (counted: c_stops). Returns
 * 1 once written; a record that does not fit is counted lost (c_lost).
 */
static __always_inline int kpy_emit(struct kpy_scratch *s, __u32 c_lost, __u32 c_stops)
{
	__u64 n = s->r.n & (2 * KPY_MAX_FRAMES - 1);
	if (n > KPY_MAX_FRAMES)
		n = KPY_MAX_FRAMES;
	__u64 size = __builtin_offsetof(struct kpy_rec, f) + n * sizeof(struct kpy_frame);
	if (size > sizeof(s->r))
		size = sizeof(s->r);
	if (ring_output(&s->r, size, BPF_RB_NO_WAKEUP)) {
		count(c_lost);
		return 0;
	}
	if (s->unknown) {
		/* Stopped before it runs on, so that ptfil names these code objects while they live. */
		__u32 zero = 0;
		struct RING_CONFIG *c = bpf_map_lookup_elem(&config, &zero);
		if (c) {
			bpf_send_signal_thread((__u32)c->stop_signal);
			count(c_stops);
		}
	}
	return 1;
}

#endif
