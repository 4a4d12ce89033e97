// SPDX-License-Identifier: GPL-2.0
// Where log lines go: to the journal, with priorities, when systemd runs us,
// else to stderr, each as "stackmapd: <message>". libbpf's messages (the
// verifier's log among them) take the same way, whole, at their own level.
#pragma once

#include <bpf/libbpf.h>

#include <cstdarg>

namespace stackmapd {

// The default logger and libbpf's print callback; call first in main().
void setup_logging();
// -v: debug lines too, libbpf's included; else info and above.
void set_verbose(bool verbose);

// libbpf's print callback as setup_logging() installs it: warnings to warn,
// info to info, debug to debug (dropped unless verbose), each message whole,
// however long (the verifier prints its whole log in one call).
int libbpf_print(enum libbpf_print_level level, const char* format, va_list args);

}  // namespace stackmapd
