/*
 * What both kernel event sources' BPF programs share (kheap.bpf.c,
 * faults.bpf.c): their ring buffer, per-CPU counters and configuration, and
 * the back-pressure rule. Included once by each, after it defines
 * RING_CONFIG (its configuration struct: stop_bytes, wake_bytes,
 * stop_signal), RING_NCOUNTERS, RING_C_STOPS (the counter of signals sent)
 * and RING_C_RETRIES (the counter of reservations tried again).
 */
#ifndef PTFIL_RING_BPF_H
#define PTFIL_RING_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 26);   /* sized by ptfil before loading */
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RING_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct RING_CONFIG);
} config SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		(*c)++;
}

/*
 * Before each record: past the stop mark the calling thread is sent a signal
 * (SIGSTOP; under attach SIGURG or SIGWINCH, kwait.c), which stops it in
 * ptrace's signal-delivery-stop (suppressed by ptfil once it has drained)
 * before it runs another instruction in user mode, so that each thread
 * writes at most one record past the mark. The submit flags: ptfil is woken
 * only past the wake mark, not at every record. may_stop: the calling thread
 * is one of a traced process's (never ptfil itself, another process writing
 * into a traced one, a kernel thread: their records are written unstopped).
 */
static __always_inline __u64 pressure_of(int may_stop)
{
	__u32 zero = 0;
	struct RING_CONFIG *c = bpf_map_lookup_elem(&config, &zero);
	__u64 unread = bpf_ringbuf_query(&ring, BPF_RB_AVAIL_DATA);
	if (!c)
		return 0;
	if (may_stop && c->stop_bytes && unread >= c->stop_bytes) {
		bpf_send_signal_thread((__u32)c->stop_signal);
		count(RING_C_STOPS);
	}
	return unread >= c->wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/*
 * The kernel can refuse a reservation in a ring with room. Measured on 6.18
 * (docs/heap-events.md section 4): under contention between CPUs about one
 * reservation in two million failed while the ring held at most one record
 * of its 64 KiB, and the same reservation tried again at once succeeded
 * every time. The likely cause is the ring's lock, a resilient spin lock
 * since 6.15, which may give up rather than wait. So a refused record is
 * tried again, RING_TRIES times in all, before it is counted lost; each try
 * again is counted (RING_C_RETRIES).
 */
#define RING_TRIES 4

static __always_inline void *ring_reserve(__u64 size)
{
	void *r = bpf_ringbuf_reserve(&ring, size, 0);
	for (int i = 1; i < RING_TRIES && !r; i++) {
		count(RING_C_RETRIES);
		r = bpf_ringbuf_reserve(&ring, size, 0);
	}
	return r;
}

/* bpf_ringbuf_output, tried again as ring_reserve is: 0 once written. */
static __always_inline long ring_output(void *data, __u64 size, __u64 flags)
{
	long e = bpf_ringbuf_output(&ring, data, size, flags);
	for (int i = 1; i < RING_TRIES && e; i++) {
		count(RING_C_RETRIES);
		e = bpf_ringbuf_output(&ring, data, size, flags);
	}
	return e;
}

static __always_inline __u64 pressure(void)
{
	return pressure_of(1);
}

#endif
