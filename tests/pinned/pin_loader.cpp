// SPDX-License-Identifier: GPL-2.0
// Loads a BPF object the way Android's bpfloader does and pins it the way it
// names pins, so `stackmapd --pinned` is tested against what a phone has:
//   - the program type comes from the section prefix (tracepoint/, perf_event/);
//   - maps are sized by the ELF file; an object with global data (.rodata,
//     .bss, .data) or subprograms is refused, as bpfloader cannot load it;
//   - DIR/prog_<obj>_<section, '/' -> '_'> and DIR/map_<obj>_<map>.
// Usage: pin_loader OBJECT.o DIR   (DIR on bpffs; created if missing)
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/bpf/loader_pins.h"

namespace {

int fail(const std::string& why) {
  std::fprintf(stderr, "pin_loader: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage: pin_loader OBJECT.o DIR");
  const std::string path = argv[1], dir = argv[2];
  const std::string obj_name = std::filesystem::path(path).stem();
  if (obj_name != "stackmapd") return fail("bpfloader would name these pins after " + obj_name);
  mkdir(dir.c_str(), 0700);

  bpf_object* obj = bpf_object__open_file(path.c_str(), nullptr);
  if (!obj) return fail("cannot open " + path + ": " + std::strerror(errno));
  bpf_map* map;
  bpf_object__for_each_map(map, obj) {
    if (bpf_map__is_internal(map))
      return fail(std::string("global data (") + bpf_map__name(map) +
                  "): bpfloader creates no maps for it");
  }
  const struct {
    const char* prefix;
    bpf_prog_type type;
  } kinds[] = {{"tracepoint/", BPF_PROG_TYPE_TRACEPOINT},
               {"perf_event/", BPF_PROG_TYPE_PERF_EVENT}};
  bpf_program* prog;
  bpf_object__for_each_program(prog, obj) {
    const std::string sec = bpf_program__section_name(prog);
    bool known = false;
    for (const auto& k : kinds)
      if (sec.rfind(k.prefix, 0) == 0) bpf_program__set_type(prog, k.type), known = true;
    if (!known) return fail("section " + sec + " is no program type bpfloader knows");
  }
  std::vector<size_t> insns;
  bpf_object__for_each_program(prog, obj) insns.push_back(bpf_program__insn_cnt(prog));
  if (int err = bpf_object__load(obj))
    return fail("load failed: " + std::string(std::strerror(-err)));
  // bpfloader loads each section alone: refuse a program libbpf had to
  // append subprograms (.text) to.
  size_t i = 0;
  bpf_object__for_each_program(prog, obj) {
    if (bpf_program__insn_cnt(prog) != insns[i++])
      return fail(std::string(bpf_program__section_name(prog)) +
                  " calls subprograms: bpfloader loads each section alone");
  }
  bpf_object__for_each_map(map, obj) {
    const std::string pin = dir + "/" + stackmapd::LoaderPins::map_pin(bpf_map__name(map));
    if (bpf_map__pin(map, pin.c_str())) return fail("cannot pin " + pin);
  }
  bpf_object__for_each_program(prog, obj) {
    const std::string pin =
        dir + "/" + stackmapd::LoaderPins::prog_pin(bpf_program__section_name(prog));
    if (bpf_program__pin(prog, pin.c_str())) return fail("cannot pin " + pin);
  }
  bpf_object__close(obj);  // the pins keep everything alive, as after bpfloader exits
  return 0;
}
