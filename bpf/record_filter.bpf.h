/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --filter on a tracepoint's raw record (its tracefs format's layout; the
 * first 8 bytes, the common fields, are not the record's: the kernel puts a
 * pt_regs pointer there for BPF, so common_pid comes from the task). The
 * interpreter is stackmapd/event_filter.h; this file gives it its reads.
 * Included by bpfloader_compat.bpf.h for the daemon's own object only.
 */
#ifndef STACKMAPD_RECORD_FILTER_BPF_H
#define STACKMAPD_RECORD_FILTER_BPF_H

static __always_inline int smt_filter_read_num(__u64 *v, __u32 size, __u64 addr)
{
	if (size > 8)
		return -1;
	return bpf_probe_read_kernel(v, size, (const void *)addr);
}

static __always_inline int smt_filter_read_str(char *dst, __u32 size, __u64 addr)
{
	if (size > SMT_FILTER_STR_MAX)
		return -1;
	return bpf_probe_read_kernel(dst, size, (const void *)addr);
}

static __always_inline void smt_filter_comm(char comm[16])
{
	current_comm((struct smt_comm *)comm);
}

static __always_inline __u32 smt_filter_pid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

static __always_inline __u32 smt_filter_cpu(void)
{
	return bpf_get_smp_processor_id();
}

#include "stackmapd/event_filter.h"

/* Whether the session's --filter leaves this record out. The filter's size
 * is frozen .rodata: without one the verifier drops all of this. */
static __always_inline int record_filtered_out(void *ctx, const volatile struct smt_config *cfg,
					       struct stack_buf *buf)
{
	return cfg->filter.nr &&
	       !smt_filter_match(&cfg->filter, (__u64)(unsigned long)ctx, buf->filter_str);
}

#endif /* STACKMAPD_RECORD_FILTER_BPF_H */
