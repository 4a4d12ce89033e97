/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Layouts and limits shared by the BPF program (bpf/) and the daemon (daemon/).
 * Only __u32/__u64 types and plain C: this header is compiled by clang -target bpf
 * (after bpf/kernel_types.h) and by the host C++ compiler.
 */
#ifndef STACKMAPD_ABI_H
#define STACKMAPD_ABI_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define SMT_STATIC_ASSERT static_assert
#else
#define SMT_STATIC_ASSERT _Static_assert
#endif

#include "stackmapd/abi/table.h"
#include "stackmapd/abi/filter.h"
#include "stackmapd/abi/session.h"
#include "stackmapd/abi/trace.h"
#include "stackmapd/abi/records.h"
#include "stackmapd/abi/batch.h"
#include "stackmapd/abi/unwind.h"

#endif /* STACKMAPD_ABI_H */
