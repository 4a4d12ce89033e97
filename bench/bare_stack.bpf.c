// SPDX-License-Identifier: GPL-2.0
/*
 * Reference programs for the ns/event benchmark (bench/run.py):
 *  - bare_get_stack: only bpf_get_stack() of 64 frames into a per-CPU buffer,
 *    the floor any stack tracer pays (the unwinder);
 *  - count_only: one per-CPU counter increment, the floor of any BPF program
 *    on the tracepoint (entry/exit of the program itself).
 */
#include "kernel_types.h"
#include <bpf/bpf_helpers.h>

struct bare_buf {
	__u64 ips[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bare_buf);
	__uint(max_entries, 1);
} bare_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} bare_count SEC(".maps");

SEC("tracepoint")
int bare_get_stack(void *ctx)
{
	__u32 zero = 0;
	struct bare_buf *b = bpf_map_lookup_elem(&bare_scratch, &zero);

	if (!b)
		return 0;
	bpf_get_stack(ctx, b->ips, sizeof(b->ips), 0);
	return 0;
}

SEC("tracepoint")
int count_only(void *ctx)
{
	__u32 zero = 0;
	__u64 *c = bpf_map_lookup_elem(&bare_count, &zero);

	if (c)
		*c += 1;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
