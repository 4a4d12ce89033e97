// SPDX-License-Identifier: GPL-2.0
// One error type for everything a user can get wrong: its message is one line that names the
// problem and the fix; cmd/ prints it as "stackmapd: <message>" and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace stackmapd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace stackmapd
