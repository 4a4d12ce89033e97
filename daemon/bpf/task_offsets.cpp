// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/task_offsets.h"

#include <bpf/btf.h>

#include <cstring>

namespace stackmapd {

uint32_t exec_id_offset() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return 0;
  uint32_t offset = 0;
  const int id = btf__find_by_name_kind(vmlinux, "task_struct", BTF_KIND_STRUCT);
  if (id > 0) {
    const btf_type* t = btf__type_by_id(vmlinux, id);
    const btf_member* m = btf_members(t);
    for (uint16_t i = 0; i < btf_vlen(t); ++i, ++m) {
      const char* name = btf__name_by_offset(vmlinux, m->name_off);
      // Little-endian: the low 32 bits of a u64 come first.
      if (name && std::strcmp(name, "self_exec_id") == 0) {
        offset = btf_member_bit_offset(t, i) / 8;
        break;
      }
    }
  }
  btf__free(vmlinux);
  return offset;
}

}  // namespace stackmapd
