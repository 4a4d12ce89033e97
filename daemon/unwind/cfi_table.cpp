// SPDX-License-Identifier: GPL-2.0
#include "daemon/unwind/cfi_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "daemon/symbols/user_maps.h"
#include "daemon/sys/error.h"
#include "daemon/sys/untrusted_file.h"
#include "daemon/unwind/fde_ranges.h"

namespace stackmapd {

namespace {

// x86_64's DWARF register numbers.
constexpr unsigned kRbp = 6, kRsp = 7, kRip = 16;

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};
struct DwarfCloser {
  void operator()(Dwarf* d) const { dwarf_end(d); }
};
struct CfiCloser {
  void operator()(Dwarf_CFI* c) const { dwarf_cfi_end(c); }
};

Elf_Scn* find_section(Elf* elf, const char* name, GElf_Shdr* shdr) {
  size_t strndx;
  if (elf_getshdrstrndx(elf, &strndx) != 0) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    // An empty section (ld leaves an empty .eh_frame behind) counts as none.
    if (!gelf_getshdr(scn, shdr) || shdr->sh_type == SHT_NOBITS || shdr->sh_size == 0) continue;
    const char* n = elf_strptr(elf, strndx, shdr->sh_name);
    if (n && strcmp(n, name) == 0) return scn;
  }
  return nullptr;
}

// The table's base, the page of the lowest PT_LOAD (0 for shared objects and
// PIEs), and the executable PT_LOADs.
void read_segments(Elf* elf, CfiTable* t) {
  size_t n = 0;
  uint64_t base = UINT64_MAX;
  if (elf_getphdrnum(elf, &n) != 0) n = 0;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    base = std::min(base, ph.p_vaddr);
    if (ph.p_flags & PF_X) t->segments.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
  }
  t->base = base == UINT64_MAX ? 0 : base & ~uint64_t{0xfff};
}

bool is_breg(const Dwarf_Op& op, unsigned reg, int64_t* off) {
  if (op.atom == DW_OP_bregx && op.number == reg) {
    *off = static_cast<int64_t>(op.number2);
    return true;
  }
  if (op.atom == DW_OP_breg0 + reg) {
    *off = static_cast<int64_t>(op.number);
    return true;
  }
  return false;
}

// binutils' PLT stub CFA: rsp + 8 + ((rip & 15) >= N) << 3, N = 11 (10 in
// some variants). Returns N, or 0 when `ops` is another expression.
uint16_t plt_threshold(const Dwarf_Op* ops, size_t n) {
  static constexpr uint8_t kShape[] = {DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, 0,
                                       DW_OP_ge,    DW_OP_lit3,   DW_OP_shl,   DW_OP_plus};
  if (n != sizeof(kShape)) return 0;
  for (size_t i = 0; i < n; ++i)
    if (kShape[i] && ops[i].atom != kShape[i]) return 0;
  if (ops[0].number != 8 || ops[1].number != 0) return 0;
  if (ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit31) return 0;
  return static_cast<uint16_t>(ops[4].atom - DW_OP_lit0);
}

// OpenSSL's "CFA = *(rsp|rbp + AT) + ADD": its rule, AT and ADD packed in
// *off; SMT_CFA_UNSUPPORTED when `ops` is another expression or out of range.
smt_cfa_rule deref_rule(const Dwarf_Op* ops, size_t n, uint16_t* off) {
  int64_t at = 0;
  if (n != 3 || ops[1].atom != DW_OP_deref || ops[2].atom != DW_OP_plus_uconst)
    return SMT_CFA_UNSUPPORTED;
  const bool rsp = is_breg(ops[0], kRsp, &at);
  if (!rsp && !is_breg(ops[0], kRbp, &at)) return SMT_CFA_UNSUPPORTED;
  const uint64_t add = ops[2].number;
  if (at < 0 || at > SMT_CFA_DEREF_AT_MAX || at % 8 || add > SMT_CFA_DEREF_ADD_MAX || add % 8)
    return SMT_CFA_UNSUPPORTED;
  *off = SMT_CFA_DEREF_OFF(static_cast<uint64_t>(at), add);
  return rsp ? SMT_CFA_RSP_DEREF : SMT_CFA_RBP_DEREF;
}

// The CFA rule of `frame`, its offset in *off.
smt_cfa_rule cfa_rule(Dwarf_Frame* frame, uint16_t* off) {
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_cfa(frame, &ops, &n) != 0 || n == 0) return SMT_CFA_UNSUPPORTED;
  int64_t o = 0;
  if (n == 1 && (is_breg(ops[0], kRsp, &o) || is_breg(ops[0], kRbp, &o))) {
    if (o < 0 || o > SMT_UNWIND_CFA_OFF_MAX) return SMT_CFA_UNSUPPORTED;
    *off = static_cast<uint16_t>(o);
    return is_breg(ops[0], kRsp, &o) ? SMT_CFA_RSP : SMT_CFA_RBP;
  }
  if (const uint16_t threshold = plt_threshold(ops, n)) {
    *off = threshold;
    return SMT_CFA_PLT;
  }
  return deref_rule(ops, n, off);
}

// Where register `reg` of the caller is saved as "at CFA + *off"; false for
// any other rule. *same: the rule is same_value; *undefined: undefined.
bool saved_at_cfa(Dwarf_Frame* frame, unsigned reg, int64_t* off, bool* same, bool* undefined) {
  Dwarf_Op mem[3];
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  *same = *undefined = false;
  if (dwarf_frame_register(frame, static_cast<int>(reg), mem, &ops, &n) != 0) return false;
  if (n == 0) {
    *same = ops == nullptr;
    *undefined = ops != nullptr;
    return false;
  }
  if (ops[0].atom != DW_OP_call_frame_cfa) return false;
  if (n == 1) {
    *off = 0;
    return true;
  }
  if (n == 2 && ops[1].atom == DW_OP_plus_uconst) {
    *off = static_cast<int64_t>(ops[1].number);  // libdw stores the signed offset here
    return true;
  }
  return false;
}

// The row of `frame` (its pc left 0).
smt_unwind_row row_of(Dwarf_Frame* frame, unsigned ra_reg, bool signal) {
  smt_unwind_row row{};
  if (signal) {
    row.rules = SMT_UNWIND_RULES(SMT_CFA_SIGNAL, SMT_RBP_LOST);
    return row;
  }
  uint16_t cfa_off = 0;
  smt_cfa_rule cfa = cfa_rule(frame, &cfa_off);
  int64_t off = 0;
  bool same = false, undefined = false;
  const bool ra_saved = saved_at_cfa(frame, ra_reg, &off, &same, &undefined);
  if (undefined) cfa = SMT_CFA_END;
  else if (ra_reg != kRip || !ra_saved || off != -8) cfa = SMT_CFA_UNSUPPORTED;
  if (cfa == SMT_CFA_RSP || cfa == SMT_CFA_RBP || cfa == SMT_CFA_PLT || cfa == SMT_CFA_RSP_DEREF ||
      cfa == SMT_CFA_RBP_DEREF)
    row.cfa_off = cfa_off;
  smt_rbp_rule rbp = SMT_RBP_LOST;
  if (saved_at_cfa(frame, kRbp, &off, &same, &undefined)) {
    if (off % 8 == 0 && off >= SMT_UNWIND_RBP_OFF_MIN && off <= SMT_UNWIND_RBP_OFF_MAX) {
      rbp = SMT_RBP_AT_CFA;
      row.rbp_off = static_cast<int8_t>(off / 8);
    }
  } else if (same) {
    rbp = SMT_RBP_SAME;
  }
  row.rules = SMT_UNWIND_RULES(cfa, rbp);
  return row;
}

bool same_rules(const smt_unwind_row& a, const smt_unwind_row& b) {
  return a.rules == b.rules && a.cfa_off == b.cfa_off && a.rbp_off == b.rbp_off;
}

class RowWriter {
 public:
  RowWriter(CfiTable* t, const std::string& path) : t_(t), path_(path) {}
  void add(uint64_t vaddr, smt_unwind_row row) {
    if (vaddr - t_->base > UINT32_MAX)
      throw Error("unwind table of " + path_ + ": code lies 4 GiB or more past its base (" +
                  "rows hold 32-bit pcs): no table, its frames use frame pointers");
    row.pc = static_cast<uint32_t>(vaddr - t_->base);
    if (!t_->rows.empty() && t_->rows.back().pc == row.pc) t_->rows.pop_back();
    if (!t_->rows.empty() && same_rules(t_->rows.back(), row)) return;
    t_->rows.push_back(row);
  }

 private:
  CfiTable* t_;
  const std::string& path_;
};

void walk(Dwarf_CFI* cfi, const FdeRanges& fdes, CfiTable* t, const std::string& path) {
  RowWriter out(t, path);
  uint64_t covered = 0;  // end of the code the rows so far describe
  bool any = false;
  smt_unwind_row none{};
  none.rules = SMT_UNWIND_RULES(SMT_CFA_NONE, SMT_RBP_SAME);
  for (const FdeRange& r : fdes.ranges) {
    if (r.end <= covered) continue;                        // inside an FDE already walked
    if (any && r.start > covered) out.add(covered, none);  // a gap: no table there
    uint64_t pc = std::max(r.start, covered);
    while (pc < r.end) {
      Dwarf_Frame* frame = nullptr;
      Dwarf_Addr start = 0, end = 0;
      bool signal = false;
      if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) {
        smt_unwind_row bad{};
        bad.rules = SMT_UNWIND_RULES(SMT_CFA_UNSUPPORTED, SMT_RBP_LOST);
        out.add(pc, bad);
        break;
      }
      const int ra = dwarf_frame_info(frame, &start, &end, &signal);
      out.add(pc, row_of(frame, static_cast<unsigned>(ra), signal));
      free(frame);  // malloc'd by libdw
      pc = end > pc ? end : r.end;
    }
    covered = r.end;
    any = true;
    ++t->fdes;
  }
  if (any) out.add(covered, none);
}

}  // namespace

const smt_unwind_row* CfiTable::find(uint64_t vaddr) const {
  if (vaddr < base || vaddr - base > UINT32_MAX) return nullptr;
  const auto pc = static_cast<uint32_t>(vaddr - base);
  auto it = std::upper_bound(rows.begin(), rows.end(), pc,
                             [](uint32_t p, const smt_unwind_row& r) { return p < r.pc; });
  return it == rows.begin() ? nullptr : &*(it - 1);
}

std::optional<uint64_t> CfiTable::pc_off(uint64_t pgoff) const {
  // A mapping starts on the page of its segment's p_offset, and a file
  // offset maps to vaddr = offset + (p_vaddr - p_offset).
  for (const Segment& s : segments)
    if (pgoff >= (s.offset & ~uint64_t{0xfff}) && pgoff < s.offset + s.filesz)
      return s.vaddr - s.offset - base;
  return std::nullopt;
}

CfiTable build_cfi_table(const std::string& path) {
  std::string why;
  std::optional<OpenedFile> file = open_regular(path, Links::kernel, &why);
  if (!file) throw Error("unwind table of " + path + ": cannot open it (" + why + ")");
  return build_cfi_table(file->fd.get(), path);
}

CfiTable build_cfi_table(int fd, const std::string& path) {
  const std::string what = "unwind table of " + path + ": ";
  elf_version(EV_CURRENT);
  std::unique_ptr<Elf, ElfCloser> elf(elf_begin(fd, ELF_C_READ_MMAP, nullptr));
  GElf_Ehdr eh;
  if (!elf || !gelf_getehdr(elf.get(), &eh)) throw Error(what + "not an ELF file");
  if (eh.e_machine != EM_X86_64)
    throw Error(what + "unwind tables are built for x86_64 only for now (its e_machine is " +
                std::to_string(eh.e_machine) + ")");
  CfiTable t;
  t.build_id = elf_build_id(elf.get());
  read_segments(elf.get(), &t);
  const unsigned char* ident =
      reinterpret_cast<const unsigned char*>(elf_getident(elf.get(), nullptr));
  GElf_Shdr sh;
  if (Elf_Scn* scn = find_section(elf.get(), ".eh_frame", &sh)) {
    std::unique_ptr<Dwarf_CFI, CfiCloser> cfi(dwarf_getcfi_elf(elf.get()));
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!cfi || !data) throw Error(what + "its .eh_frame cannot be read");
    t.section = ".eh_frame";
    const FdeRanges fdes = fde_ranges(ident, data, true, sh.sh_addr);
    t.undecodable_fdes = fdes.undecodable;
    walk(cfi.get(), fdes, &t, path);
  } else if (Elf_Scn* dscn = find_section(elf.get(), ".debug_frame", &sh)) {
    std::unique_ptr<Dwarf, DwarfCloser> dw(dwarf_begin_elf(elf.get(), DWARF_C_READ, nullptr));
    Dwarf_CFI* cfi = dw ? dwarf_getcfi(dw.get()) : nullptr;  // owned by dw
    Elf_Data* data = elf_getdata(dscn, nullptr);
    if (!cfi || !data) throw Error(what + "its .debug_frame cannot be read");
    t.section = ".debug_frame";
    const FdeRanges fdes = fde_ranges(ident, data, false, 0);
    t.undecodable_fdes = fdes.undecodable;
    walk(cfi, fdes, &t, path);
  } else {
    throw Error(what + "it has neither .eh_frame nor .debug_frame (its frames use frame pointers)");
  }
  return t;
}

}  // namespace stackmapd
