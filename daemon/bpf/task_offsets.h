// SPDX-License-Identifier: GPL-2.0
// Where the BPF program finds the one task_struct field it reads
// (--user-stacks: self_exec_id, for the user stack marker in abi.h), from
// the running kernel's BTF, so the program needs no vmlinux.h or CO-RE.
#pragma once

#include <cstdint>

namespace stackmapd {

// task_struct.self_exec_id's byte offset, 0 when the BTF does not say (the
// marker then holds the tgid alone: an exec'd image may share stack ids
// with the image before only when their frames are equal too).
uint32_t exec_id_offset();

}  // namespace stackmapd
