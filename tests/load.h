// SPDX-License-Identifier: GPL-2.0
// A workload that makes the kernel allocate from slab caches (each open()
// allocates a struct file and more), for tests that need events.
#pragma once

#include <fcntl.h>
#include <unistd.h>

inline void generate_allocations(int rounds) {
  for (int i = 0; i < rounds; ++i) {
    int fd = open("/proc/self/stat", O_RDONLY);
    if (fd >= 0) {
      char buf[256];
      (void)!read(fd, buf, sizeof(buf));
      close(fd);
    }
  }
}
