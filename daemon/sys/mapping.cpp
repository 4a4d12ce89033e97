// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/mapping.h"

#include <cerrno>
#include <cstring>

#include "daemon/sys/error.h"

namespace stackmapd {

Mapping::Mapping(int fd, size_t len, int prot, off_t offset, const std::string& what) {
  void* p = mmap(nullptr, len, prot, MAP_SHARED, fd, offset);
  if (p == MAP_FAILED) throw Error("cannot mmap " + what + ": " + std::strerror(errno));
  addr_ = p;
  len_ = len;
}

Mapping Mapping::reserve(size_t len, const std::string& what) {
  void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error("cannot reserve address space for " + what + ": " + std::strerror(errno));
  Mapping m;
  m.addr_ = p;
  m.len_ = len;
  return m;
}

}  // namespace stackmapd
