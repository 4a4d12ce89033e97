/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The event path's scratch buffer, the value of the `scratch` map in every
 * build (maps.bpf.h, bpfloader_maps.bpf.h).
 */
#ifndef STACKMAPD_STACK_BUF_BPF_H
#define STACKMAPD_STACK_BUF_BPF_H

#include "stackmapd/abi.h"

/* 512 bytes of frames do not fit beside the rest on the 512-byte BPF stack.
 * One buffer per CPU and nesting level: an fentry program may run inside a
 * tracepoint program's event, and a sampling one inside either. */
struct stack_buf {
	/* Room for the frames cut (SMT_MAX_STRIP_FRAMES) and one frame more
	 * than is kept: a full buffer means a deeper stack. */
	__u64 ips[SMT_MAX_STRIP_FRAMES + SMT_MAX_DEPTH + 1];
	__u32 verify_countdown;
	__u32 at_entry;				 /* the event's cookie has SMT_COOKIE_AT_ENTRY */
	__u64 uips[SMT_MAX_DEPTH];		 /* --user-stacks: frames, then the marker */
	char filter_str[SMT_FILTER_STR_MAX + 1]; /* --filter: a record's string */
};

#endif /* STACKMAPD_STACK_BUF_BPF_H */
