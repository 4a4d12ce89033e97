// SPDX-License-Identifier: GPL-2.0
// Loads an object the way Android's platform bpfloader of one layout family
// does, and pins it as that loader names and owns pins, so that
// `stackmapd --pinned` is tested on what a phone would have:
//   - family r behaves as Android 11's loader (32/20-byte definitions; only
//     tracepoint/, kprobe/ and skfilter/ sections), family s as Android 14
//     QPR2..16 (120/92 bytes, announced by size_of_* sections; perf_event/ too);
//   - it refuses, naming the rule, an object that some loader of the family
//     would skip, fail or abort on (tests/bpfloader/loader_rules.h);
//   - maps are created from the `maps` definitions, each code section is
//     loaded alone with only its LD_IMM64 map relocations applied;
//   - DIR/map_<obj>_<map> chowned and chmodded as the def says (R: chown
//     then chmod; U and later: chmod then chown), DIR/prog_<obj>_<section,
//     '/' -> '_'> 0440.
// Usage: pin_loader FAMILY OBJECT.o DIR   (DIR on bpffs; created if missing)
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "daemon/bpf/loader_pins.h"
#include "daemon/sys/unique_fd.h"
#include "tests/bpfloader/loader_rules.h"

using namespace stackmapd::bpfloader;

namespace {

int fail(const std::string& why) {
  std::fprintf(stderr, "pin_loader: %s\n", why.c_str());
  return 1;
}

// The object name in pin names: the file name up to its last '.', and from
// U on also up to its last '@'.
std::string object_name(const std::string& path, const Family& family) {
  std::string name = std::filesystem::path(path).filename();
  name = name.substr(0, name.rfind('.'));
  if (family.last >= kU && name.rfind('@') != std::string::npos)
    name = name.substr(0, name.rfind('@'));
  return name;
}

bool set_owner(const std::string& pin, bool chown_first, uint32_t uid, uint32_t gid,
               uint32_t mode) {
  if (chown_first) return chown(pin.c_str(), uid, gid) == 0 && chmod(pin.c_str(), mode) == 0;
  return chmod(pin.c_str(), mode) == 0 && chown(pin.c_str(), uid, gid) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return fail("usage: pin_loader FAMILY OBJECT.o DIR (FAMILY r or s)");
  const Family* family = family_named(argv[1]);
  if (!family) return fail(std::string("family ") + argv[1] + ": use r or s");
  const std::string path = argv[2], dir = argv[3];
  const std::string obj = object_name(path, *family);
  if (obj != "stackmapd") return fail("bpfloader would name these pins after " + obj);
  // The loader this one stands for: R for family r, QPR2..B for family s.
  const Release release = family->first == kR ? kR : kUQpr2;
  try {
    LoaderElf elf(path);
    const std::vector<std::string> broken = check(elf, *family);
    if (!broken.empty()) {
      for (const auto& line : broken) std::fprintf(stderr, "pin_loader: %s\n", line.c_str());
      return fail(path + ": refused: a " + release_name(family->first) + ".." +
                  release_name(family->last) + " bpfloader would not load it as built");
    }
    const ObjectDefs defs = read_defs(elf, *family);
    mkdir(dir.c_str(), 01777);

    std::vector<stackmapd::UniqueFd> fds;  // the pins keep everything alive afterwards
    std::map<std::string, int> map_fds;
    const bool chown_first = release < kU;
    for (const auto& m : defs.maps) {
      LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = m.def.r.map_flags);
      const std::string kernel_name = m.name.substr(0, 15);
      stackmapd::UniqueFd fd(bpf_map_create(static_cast<bpf_map_type>(m.def.r.type),
                                            kernel_name.c_str(), m.def.r.key_size,
                                            m.def.r.value_size, m.def.r.max_entries, &opts));
      if (!fd) return fail("cannot create map " + m.name + ": " + std::strerror(errno));
      const std::string pin = dir + "/" + stackmapd::LoaderPins::map_pin(m.name);
      if (bpf_obj_pin(fd.get(), pin.c_str()) != 0)
        return fail("cannot pin " + pin + ": " + std::strerror(errno));
      const uint32_t uid = release >= kU ? m.def.uid : m.def.r.zero;
      if (!set_owner(pin, chown_first, uid, m.def.r.gid, m.def.r.mode))
        return fail("cannot set the owner and mode of " + pin + ": " + std::strerror(errno));
      map_fds[m.name] = fd.get();
      fds.push_back(std::move(fd));
    }
    for (const auto& p : defs.programs) {
      if (p.known_from > release) {
        std::fprintf(stderr, "pin_loader: %s ignores section %s (known from %s)\n",
                     release_name(release), p.code->name.c_str(), release_name(p.known_from));
        continue;
      }
      std::vector<bpf_insn> insns(p.code->data.size() / sizeof(bpf_insn));
      std::memcpy(insns.data(), p.code->data.data(), insns.size() * sizeof(bpf_insn));
      for (const auto& r : p.relocations) {
        bpf_insn& insn = insns[r.offset / sizeof(bpf_insn)];
        insn.src_reg = BPF_PSEUDO_MAP_FD;
        insn.imm = map_fds.at(r.symbol);
      }
      std::vector<char> log(1 << 20);
      LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_level = 0);
      const std::string name = p.function.substr(0, 15);
      stackmapd::UniqueFd fd(bpf_prog_load(static_cast<bpf_prog_type>(p.prog_type), name.c_str(),
                                           defs.license.c_str(), insns.data(), insns.size(),
                                           &opts));
      if (!fd) {
        const int err = errno;
        opts.log_buf = log.data();
        opts.log_size = log.size();
        opts.log_level = 1;
        bpf_prog_load(static_cast<bpf_prog_type>(p.prog_type), name.c_str(), defs.license.c_str(),
                      insns.data(), insns.size(), &opts);
        const std::string text(log.data());
        return fail("cannot load " + p.code->name + ": " + std::strerror(err) +
                    ": verifier: " + text.substr(text.size() > 600 ? text.size() - 600 : 0));
      }
      const std::string pin = dir + "/" + stackmapd::LoaderPins::prog_pin(p.code->name);
      if (bpf_obj_pin(fd.get(), pin.c_str()) != 0)
        return fail("cannot pin " + pin + ": " + std::strerror(errno));
      if (!set_owner(pin, release < kT, p.def->r.uid, p.def->r.gid, 0440))
        return fail("cannot set the owner and mode of " + pin + ": " + std::strerror(errno));
      fds.push_back(std::move(fd));
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}
