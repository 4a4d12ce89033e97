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

}  // namespace stackmapd
