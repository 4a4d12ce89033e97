/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the BPF programs (bpf/stackmapd.bpf.c in both builds, and the
 * benchmark's in bench/) take from the kernel, in place of a vmlinux.h dumped
 * from some kernel's BTF.
 *
 * Why the UAPI header is enough: the programs read two kernel fields, the
 * current task's comm and (--user-stacks) its self_exec_id, through bpf_get_current_task_btf() and a one-member
 * struct task_struct of their own that libbpf relocates against the running
 * kernel's BTF (CO-RE; the bpfloader object, which no loader relocates,
 * copies the name with bpf_get_current_comm() instead). Every context
 * (tracepoint, perf_event, fentry) is handed unchanged to bpf_get_stack()
 * and bpf_get_attach_cookie(), and every other structure they touch is their
 * own (include/stackmapd/abi.h).
 * What they do use is UAPI from <linux/bpf.h>: the __u32/__u64 types, map
 * types (ARRAY, PERCPU_ARRAY, RINGBUF), BPF_F_MMAPABLE, BPF_F_SKIP_FIELD_MASK
 * and the ring buffer's BPF_RB_* flags and queries. Those values are kernel
 * ABI: the same on every architecture, only ever appended to, so this one
 * header builds the x86 and the arm64 objects on any host, without its BTF.
 *
 * clang -target bpf does not search the multiarch include directory that
 * holds <asm/types.h> (included by <linux/types.h>); the build adds it with
 * -idirafter (CMakeLists.txt, STACKMAPD_BPF_CFLAGS). It only yields the same
 * int-ll64 integer types on every Linux architecture.
 *
 * A program that reads more of the kernel's structures (a typed tracepoint
 * context, bpf_tracing.h's PT_REGS_*) declares what it reads the same way.
 */
#ifndef STACKMAPD_KERNEL_TYPES_H
#define STACKMAPD_KERNEL_TYPES_H

#include <linux/bpf.h>

#endif /* STACKMAPD_KERNEL_TYPES_H */
