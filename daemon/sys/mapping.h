// SPDX-License-Identifier: GPL-2.0
// A move-only owner of one mmap() region, unmapped in its destructor.
#pragma once

#include <sys/mman.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>

namespace stackmapd {

class Mapping {
 public:
  Mapping() = default;
  // mmap(MAP_SHARED) of `len` bytes of `fd` at `offset`; throws Error naming
  // `what` (say what the kernel must support there) and the errno.
  Mapping(int fd, size_t len, int prot, off_t offset, const std::string& what);
  // `len` bytes of address space, inaccessible and backed by nothing, for
  // MAP_FIXED mappings over it (munmap of the whole range unmaps those too).
  static Mapping reserve(size_t len, const std::string& what);
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      len_ = std::exchange(o.len_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  void* get() const { return addr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(addr_);
  }
  size_t size() const { return len_; }
  void reset() {
    if (addr_) munmap(addr_, len_);
    addr_ = nullptr;
    len_ = 0;
  }

 private:
  void* addr_ = nullptr;
  size_t len_ = 0;
};

}  // namespace stackmapd
