// SPDX-License-Identifier: GPL-2.0
#include "tests/bpfloader/loader_rules.h"

#include <elf.h>
#include <linux/bpf.h>

#include <cstring>
#include <set>

namespace stackmapd::bpfloader {

namespace {

const Family kFamilies[] = {
    {"r", kR, kUQpr2, sizeof(smt_bpfloader_map_def_r), sizeof(smt_bpfloader_prog_def_r)},
    {"s", kS, kB, sizeof(smt_bpfloader_map_def), sizeof(smt_bpfloader_prog_def)},
};

// Code-section prefixes the loaders of /system/etc/bpf know, with the first
// release that does (note 2.3); U and later fail an object with any other
// program type there.
struct Prefix {
  const char* prefix;
  uint32_t type;
  Release from;
};
const Prefix kPrefixes[] = {
    {"tracepoint/", BPF_PROG_TYPE_TRACEPOINT, kR},  {"kprobe/", BPF_PROG_TYPE_KPROBE, kR},
    {"skfilter/", BPF_PROG_TYPE_SOCKET_FILTER, kR}, {"perf_event/", BPF_PROG_TYPE_PERF_EVENT, kT},
    {"kretprobe/", BPF_PROG_TYPE_KPROBE, kU},       {"uprobe/", BPF_PROG_TYPE_KPROBE, kU},
    {"uretprobe/", BPF_PROG_TYPE_KPROBE, kU},
};

const Prefix* prefix_of(const std::string& section) {
  for (const auto& p : kPrefixes)
    if (section.rfind(p.prefix, 0) == 0) return &p;
  return nullptr;
}

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

bool is_code(const Section& s) {
  return s.type == SHT_PROGBITS && (s.flags & SHF_EXECINSTR) && !s.data.empty();
}

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof(b), "0x%x", v);
  return b;
}

// The gating fields S..U QPR2 compare with their version: loaded when
// min <= version < max for every release of the family that reads them.
void check_versions(std::vector<std::string>& out, const std::string& what, const Family& family,
                    uint32_t min, uint32_t max) {
  for (int r = std::max<int>(family.first, kS); r <= std::min<int>(family.last, kUQpr2); ++r) {
    const uint32_t v = loader_version(static_cast<Release>(r));
    if (v < min || v >= max)
      out.push_back(what + ": bpfloader_min_ver " + hex(min) + ", bpfloader_max_ver " + hex(max) +
                    " skip it on " + release_name(static_cast<Release>(r)) + " (loader " + hex(v) +
                    "): use min 0 and max 0x10000");
  }
}

void check_kvers(std::vector<std::string>& out, const std::string& what, uint32_t min,
                 uint32_t max) {
  if (max != SMT_KVER_INF)
    out.push_back(what + ": max_kver " + hex(max) +
                  (max ? " bounds the kernels" : " skips it on every release") +
                  ": set it to 0xffffffff (KVER_INF)");
  if (min != SMT_KVER_NONE)
    out.push_back(what + ": min_kver " + hex(min) +
                  " means different kernels on R (LINUX_VERSION_CODE) and S+ (a<<24|b<<16|c): "
                  "set it to 0");
}

void check_strings(std::vector<std::string>& out, const std::string& what, const char* selinux,
                   const char* subdir) {
  if (!all_zero(selinux, 32))
    out.push_back(what +
                  ": selinux_context is set: T and U reject or re-pin it for "
                  "/system/etc/bpf; leave it empty");
  if (!all_zero(subdir, 32))
    out.push_back(what +
                  ": pin_subdir is set: T and U fail it for /system/etc/bpf; leave it "
                  "empty");
}

void check_section_values(std::vector<std::string>& out, const LoaderElf& elf,
                          const Family& family) {
  const bool s = family.first == kS;
  const struct {
    const char* name;
    uint32_t want;
  } sizes[] = {{"size_of_bpf_map_def", family.map_size},
               {"size_of_bpf_prog_def", family.prog_size}};
  for (const auto& [name, want] : sizes) {
    const Section* sec = elf.section(name);
    if (!sec) {
      if (s)
        out.push_back(std::string("no ") + name + " section: S..U QPR2 then split by " +
                      (want == family.map_size ? "32" : "20") + " bytes: add it, holding " +
                      std::to_string(want));
      continue;
    }
    uint64_t v = 0;
    if (sec->data.size() != 4 && sec->data.size() != 8) {
      out.push_back(std::string(name) + " is " + std::to_string(sec->data.size()) +
                    " bytes: store a 4- or 8-byte little-endian " + std::to_string(want));
      continue;
    }
    std::memcpy(&v, sec->data.data(), sec->data.size());
    if (v != want)
      out.push_back(std::string(name) + " says " + std::to_string(v) + ", the definitions are " +
                    std::to_string(want) + " bytes: S..U QPR2 split the section by it; store " +
                    std::to_string(want));
  }
  const auto min = elf.section_u32("bpfloader_min_ver");
  const auto max = elf.section_u32("bpfloader_max_ver");
  if (s && (!min || !max))
    out.push_back("no bpfloader_min_ver/bpfloader_max_ver sections: add them (0 and 0x10000)");
  for (const char* name : {"bpfloader_min_ver", "bpfloader_max_ver"}) {
    const Section* sec = elf.section(name);
    if (sec && sec->data.size() != 4)
      out.push_back(std::string(name) + " is " + std::to_string(sec->data.size()) +
                    " bytes: store a 4-byte little-endian u32");
  }
  check_versions(out, "the object", family, min.value_or(0), max.value_or(SMT_BPFLOADER_MAX_VER));
  if (elf.section("bpfloader_min_required_ver"))
    out.push_back(
        "bpfloader_min_required_ver fails (not skips) the object on older loaders: "
        "remove the section");
}

}  // namespace

const char* release_name(Release r) {
  static const char* names[] = {"Android 11 (R)", "Android 12 (S)",  "Android 13 (T)",
                                "Android 14 (U)", "Android 14 QPR2", "Android 15 (V)",
                                "Android 16 (B)"};
  return r < kReleases ? names[r] : "?";
}

uint32_t loader_version(Release r) {
  switch (r) {
    case kS: return 2;
    case kT: return 19;
    case kU: return 38;
    case kUQpr2: return 41;
    default: return 0;  // R reads no version; V and B check none
  }
}

const Family* family_named(const std::string& name) {
  for (const auto& f : kFamilies)
    if (name == f.name) return &f;
  return nullptr;
}

ObjectDefs read_defs(const LoaderElf& elf, const Family& family) {
  ObjectDefs out;
  if (const Section* lic = elf.section("license"))
    out.license.assign(reinterpret_cast<const char*>(lic->data.data()),
                       strnlen(reinterpret_cast<const char*>(lic->data.data()), lic->data.size()));
  if (const Section* maps = elf.section("maps")) {
    const std::vector<Symbol> names = elf.symbols_in(maps->index);
    for (size_t i = 0; (i + 1) * family.map_size <= maps->data.size(); ++i) {
      MapDef m{};
      // S..U QPR2 zero-fill, set these defaults, then copy what is there.
      m.def.bpfloader_max_ver = SMT_BPFLOADER_MAX_VER;
      m.def.max_kver = SMT_KVER_INF;
      std::memcpy(&m.def, maps->data.data() + i * family.map_size, family.map_size);
      m.name = i < names.size() ? names[i].name : "";
      out.maps.push_back(m);
    }
  }
  std::vector<Symbol> def_names;
  const Section* progs = elf.section("progs");
  if (progs) def_names = elf.symbols_in(progs->index);
  for (const auto& sec : elf.sections) {
    if (!is_code(sec)) continue;
    const Prefix* p = prefix_of(sec.name);
    if (!p) continue;
    Program prog;
    prog.code = &sec;
    prog.prog_type = p->type;
    prog.known_from = p->from;
    // R and S take the first symbol of any type; T+ the first function.
    for (const auto& sym : elf.symbols_in(sec.index))
      if (family.first == kR || sym.type == STT_FUNC) {
        prog.function = sym.name;
        break;
      }
    for (size_t i = 0; progs && i < def_names.size(); ++i) {
      if (def_names[i].name != prog.function + "_def") continue;
      if ((i + 1) * family.prog_size > progs->data.size()) break;
      smt_bpfloader_prog_def d{};
      d.bpfloader_max_ver = SMT_BPFLOADER_MAX_VER;
      std::memcpy(&d, progs->data.data() + i * family.prog_size, family.prog_size);
      prog.def = d;
    }
    prog.relocations = elf.relocations(sec);
    out.programs.push_back(std::move(prog));
  }
  return out;
}

std::vector<std::string> check(const LoaderElf& elf, const Family& family) {
  std::vector<std::string> out;
  if (!elf.elf64_le_bpf || elf.elf_type != ET_REL)
    out.push_back(
        "not a 64-bit little-endian BPF relocatable object: build with clang -target bpf");
  if (elf.shstrndx != elf.symtab_strtab)
    out.push_back(
        "section and symbol names are in different string tables: the loader reads "
        "symbol names from the section-header one; do not rewrite the object with a "
        "tool that splits .strtab");

  // Sections no platform loader reads, whose users then fail verification,
  // and the one that reboots the phone.
  for (const auto& s : elf.sections) {
    if (s.name == "critical")
      out.push_back("a critical section: a failure to load then reboots the device; remove it");
    else if (s.name == ".maps" || s.name.rfind(".maps.", 0) == 0)
      out.push_back("section " + s.name +
                    ": libbpf BTF maps, which no platform loader creates: "
                    "define maps in the maps section");
    else if (s.name.rfind(".bss", 0) == 0 || s.name.rfind(".data", 0) == 0 ||
             s.name.rfind(".rodata", 0) == 0)
      out.push_back("section " + s.name +
                    ": global data, for which no map is created: use a "
                    "one-entry array map");
    else if (s.name == ".BTF" || s.name == ".BTF.ext" || s.name.rfind(".rel.BTF", 0) == 0)
      out.push_back("section " + s.name +
                    ": BTF (-g) makes R and S look up \"_def\" and T/U fork "
                    "btfloader: build without -g");
    else if (s.name == ".text" && !s.data.empty())
      out.push_back(
          ".text holds code: subprograms are never loaded; make every helper "
          "__always_inline");
    else if (s.type == SHT_RELA)
      out.push_back("section " + s.name + ": RELA relocations, which the loader never applies");
    else if (is_code(s) && s.name != ".text" && !prefix_of(s.name))
      out.push_back("code section " + s.name +
                    ": a prefix no loader of /system/etc/bpf accepts (U+ fail the object, older "
                    "ones ignore it): use tracepoint/, kprobe/ or perf_event/");
  }
  check_section_values(out, elf, family);

  const ObjectDefs defs = read_defs(elf, family);
  if (defs.license != "GPL")
    out.push_back("license is \"" + defs.license +
                  "\": the programs call GPL-only helpers "
                  "(bpf_get_stack, bpf_probe_read_kernel): put \"GPL\" in the license section");

  // Maps: exactly one global object symbol per definition, in order.
  const Section* maps = elf.section("maps");
  if (!maps || maps->data.empty())
    out.push_back("no maps section: Q fails the object and the programs have no maps");
  else {
    if (maps->data.size() % family.map_size)
      out.push_back("maps is " + std::to_string(maps->data.size()) + " bytes, not a multiple of " +
                    std::to_string(family.map_size) + ": the " + family.name +
                    " loaders split it by that stride (and R overflows its copy)");
    const std::vector<Symbol> names = elf.symbols_in(maps->index);
    const size_t structs = maps->data.size() / family.map_size;
    if (names.size() != structs)
      out.push_back("maps holds " + std::to_string(structs) + " definitions but " +
                    std::to_string(names.size()) +
                    " symbols: a static map adds a nameless section symbol; make every map a "
                    "global, one symbol each");
    for (size_t i = 0; i < names.size(); ++i) {
      const Symbol& s = names[i];
      if (s.type != STT_OBJECT || s.bind != STB_GLOBAL || s.size != family.map_size ||
          s.value != i * family.map_size)
        out.push_back("map symbol \"" + s.name + "\" at " + std::to_string(s.value) +
                      " is not a global " + std::to_string(family.map_size) +
                      "-byte object at definition " + std::to_string(i) +
                      ": declare each map as one global struct");
    }
  }
  std::set<std::string> map_names;
  for (const auto& m : defs.maps) {
    const std::string what = "map " + m.name;
    map_names.insert(m.name);
    const smt_bpfloader_map_def& d = m.def;
    if (d.r.zero != 0)
      out.push_back(what + ": offset 20 (R..T uid, U+ 'zero') is " + std::to_string(d.r.zero) +
                    ": U+ abort() (a boot loop), R..T fail chmod after chown: set it to 0");
    if (d.r.mode & ~0777U)
      out.push_back(what + ": mode " + hex(d.r.mode) + " has bits beyond 0777: use 0600..0660");
    if (!(d.r.mode & 0600))
      out.push_back(what + ": mode " + hex(d.r.mode) +
                    " keeps even its owner out: use 0600 or "
                    "0660");
    if (d.r.type == BPF_MAP_TYPE_RINGBUF &&
        (d.r.key_size || d.r.value_size || d.r.max_entries < 4096 ||
         d.r.max_entries > (256U << 20) || (d.r.max_entries & (d.r.max_entries - 1))))
      out.push_back(what +
                    ": a ring buffer has key and value size 0 and a power-of-two size "
                    "from 4 KiB to 256 MiB");
    if (family.first == kS) {
      check_versions(out, what, family, d.bpfloader_min_ver, d.bpfloader_max_ver);
      check_kvers(out, what, d.min_kver, d.max_kver);
      check_strings(out, what, d.selinux_context, d.pin_subdir);
      if (d.shared) out.push_back(what + ": shared pins it as map__" + m.name + ": clear it");
      if (d.ignore_on)
        out.push_back(what + ": ignore_on bits " + hex(d.ignore_on) +
                      " skip it on some builds or CPUs: clear them");
      if (!all_zero(d.pad0, sizeof(d.pad0)))
        out.push_back(what + ": padding is not zero: zero-initialise the definition");
      if (d.uid != SMT_AID_ROOT)
        out.push_back(what + ": uid " + std::to_string(d.uid) +
                      ": S and T never read it (root); keep maps root-owned, share by gid");
    }
  }

  // Programs: one function at offset 0, its <function>_def, only map relocations.
  const Section* progs = elf.section("progs");
  if (!progs)
    out.push_back(
        "no progs section: V and B fail the object, U fails each program: add "
        "<function>_def definitions");
  else if (progs->data.size() % family.prog_size)
    out.push_back("progs is " + std::to_string(progs->data.size()) + " bytes, not a multiple of " +
                  std::to_string(family.prog_size) + ": the " + family.name +
                  " loaders split it by that stride");
  std::set<std::string> used_defs;
  if (defs.programs.empty()) out.push_back("no program section: nothing would be loaded");
  for (const auto& p : defs.programs) {
    const std::string what = "program " + p.code->name;
    size_t funcs = 0;
    for (const auto& s : elf.symbols_in(p.code->index))
      if (s.type == STT_FUNC) {
        ++funcs;
        if (s.value != 0 || s.size != p.code->data.size() || s.bind != STB_GLOBAL)
          out.push_back(what + ": function " + s.name +
                        " does not fill the section from offset "
                        "0: the loader loads the whole section as one program");
      }
    if (funcs != 1)
      out.push_back(what + ": " + std::to_string(funcs) +
                    " functions: put exactly one in each "
                    "program section");
    if (p.code->name.find('$') != std::string::npos)
      out.push_back(what + ": a '$' changes its pin name: remove it");
    if (!p.def) {
      out.push_back(what + ": no " + p.function + "_def in progs" +
                    (p.function.empty() ? " (a nameless symbol comes first: built with -g?)" : "") +
                    ": U..B refuse it, R..T load it unowned and ungated; define it");
    } else {
      used_defs.insert(p.function + "_def");
      const smt_bpfloader_prog_def& d = *p.def;
      if (d.r.uid != SMT_AID_ROOT)
        out.push_back(what + ": uid " + std::to_string(d.r.uid) +
                      ": R and S chown before chmod and then fail: use root (0), share by gid");
      check_kvers(out, what, d.r.min_kver, d.r.max_kver);
      if (d.r.ignore_on)
        out.push_back(what + ": ignore_on bits " + hex(d.r.ignore_on) +
                      " skip it on some builds or CPUs: clear them");
      if (!all_zero(d.r.pad0, sizeof(d.r.pad0)))
        out.push_back(what + ": padding is not zero: zero-initialise the definition");
      if (family.first == kS) {
        check_versions(out, what, family, d.bpfloader_min_ver, d.bpfloader_max_ver);
        check_strings(out, what, d.selinux_context, d.pin_subdir);
      }
    }
    for (const auto& r : p.relocations) {
      if (!map_names.count(r.symbol))
        out.push_back(what + ": a relocation against \"" + r.symbol +
                      "\", which names no map: the loader ignores it and the verifier rejects "
                      "the program");
      else if (r.offset + 8 > p.code->data.size() ||
               p.code->data[r.offset] != (BPF_LD | BPF_IMM | BPF_DW))
        out.push_back(what + ": a map relocation at " + std::to_string(r.offset) +
                      " is not on a 64-bit immediate load");
    }
  }
  if (progs)
    for (const auto& s : elf.symbols_in(progs->index))
      if (!used_defs.count(s.name))
        out.push_back("progs: " + s.name +
                      " names no program section's function: it must be "
                      "<function>_def, a global of " +
                      std::to_string(family.prog_size) + " bytes");
  return out;
}

}  // namespace stackmapd::bpfloader
