// SPDX-License-Identifier: GPL-2.0
// Unwind tables (daemon/unwind/) against binutils' own reading of the same
// CFI: `readelf --debug-dump=frames-interp` on Debian's binaries, on a program
// built here with -O2 -fomit-frame-pointer, and on hand-written CFI whose rows
// are known exactly (PLT expression, undefined return address, rbp frames).
#include "daemon/unwind/cfi_table.h"

#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/sys/error.h"
#include "daemon/sys/unique_fd.h"
#include "daemon/unwind/cfi_cache.h"

namespace stackmapd {
namespace {

#if defined(__x86_64__)

std::string run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return out;
}

// One row as readelf prints it: the CFA and the rbp and ra columns ("" when
// the FDE has no rbp column).
struct ReadelfRow {
  uint64_t loc = 0;
  std::string cfa, rbp, ra;
};
struct ReadelfFde {
  uint64_t start = 0, end = 0;
  bool signal = false;  // its CIE's augmentation has 'S'
  std::vector<ReadelfRow> rows;
};

// The FDEs of `section` in `readelf -wF` of `path`; an FDE without rows of
// its own gets its CIE's initial row, as readelf leaves it unprinted.
std::vector<ReadelfFde> readelf_frames(const std::string& path, const std::string& section) {
  std::istringstream in(run("readelf --debug-dump=frames-interp --debug-dump=no-follow-links '" +
                            path + "' 2>/dev/null"));
  struct Cie {
    bool signal = false;
    ReadelfRow row;
  };
  std::map<std::string, Cie> cies;
  std::vector<ReadelfFde> fdes;
  std::vector<std::string> columns;
  Cie* cie = nullptr;
  ReadelfFde* fde = nullptr;
  bool wanted = false;
  std::string line;
  auto finish = [&] {
    if (fde && fde->rows.empty()) {
      fde->rows.push_back(cie->row);
      fde->rows.back().loc = fde->start;
    }
    fde = nullptr;
  };
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (line.starts_with("Contents of the ")) {
      finish();
      wanted = line == "Contents of the " + section + " section:";
    } else if (!wanted || w.empty()) {
      continue;
    } else if (w.size() >= 5 && w[3] == "CIE") {
      finish();
      cie = &cies[w[0]];
      cie->signal = w[4].find('S') != std::string::npos;
      fde = nullptr;
    } else if (w.size() >= 6 && w[3] == "FDE") {
      finish();
      cie = &cies.at(w[4].substr(4));         // cie=OFFSET
      const std::string pc = w[5].substr(3);  // pc=START..END
      fdes.push_back({std::stoull(pc.substr(0, pc.find("..")), nullptr, 16),
                      std::stoull(pc.substr(pc.find("..") + 2), nullptr, 16),
                      cie->signal,
                      {}});
      fde = &fdes.back();
    } else if (w[0] == "LOC") {
      columns.assign(w.begin() + 1, w.end());
    } else if (w[0].size() == 16 && w.size() == columns.size() + 1 && cie) {
      ReadelfRow r{std::stoull(w[0], nullptr, 16), w[1], "", ""};
      for (size_t i = 1; i < columns.size(); ++i) {
        if (columns[i] == "rbp") r.rbp = w[i + 1];
        if (columns[i] == "ra") r.ra = w[i + 1];
      }
      if (fde) fde->rows.push_back(r);
      else cie->row = r;
    }
  }
  finish();
  return fdes;
}

std::string describe(const smt_unwind_row& r) {
  static const char* const kCfa[] = {"none",   "rsp",         "rbp",       "plt",      "end",
                                     "signal", "unsupported", "rsp deref", "rbp deref"};
  static const char* const kRbp[] = {"same", "at", "lost"};
  const unsigned cfa = SMT_UNWIND_CFA_RULE(r.rules), rbp = SMT_UNWIND_RBP_RULE(r.rules);
  std::string s = cfa < 9 ? kCfa[cfa] : "?";
  if (cfa == SMT_CFA_RSP || cfa == SMT_CFA_RBP || cfa == SMT_CFA_PLT)
    s += "+" + std::to_string(r.cfa_off);
  if (cfa == SMT_CFA_RSP_DEREF || cfa == SMT_CFA_RBP_DEREF)
    s += " *" + std::to_string(SMT_CFA_DEREF_AT(r.cfa_off)) + "+" +
         std::to_string(SMT_CFA_DEREF_ADD(r.cfa_off));
  s += std::string(" rbp ") + (rbp < 3 ? kRbp[rbp] : "?");
  if (rbp == SMT_RBP_AT_CFA) s += " c" + std::to_string(r.rbp_off * 8);
  return s;
}

// What the row at a readelf row must be. "exp" is `exp`'s rule where given
// (the PLT's in .plt), the signal frame's under an 'S' CIE, else a rule the
// walker cannot follow.
smt_unwind_row expected(const ReadelfRow& r, bool signal, const smt_unwind_row* exp) {
  smt_unwind_row e{};
  smt_cfa_rule cfa = SMT_CFA_UNSUPPORTED;
  smt_rbp_rule rbp = SMT_RBP_LOST;
  if (signal) {
    e.rules = SMT_UNWIND_RULES(SMT_CFA_SIGNAL, SMT_RBP_LOST);
    return e;
  }
  for (const char* reg : {"rsp+", "rbp+"}) {
    if (!r.cfa.starts_with(reg)) continue;
    const long off = std::stol(r.cfa.substr(4));
    if (off < 0 || off > SMT_UNWIND_CFA_OFF_MAX) break;
    cfa = reg[1] == 's' ? SMT_CFA_RSP : SMT_CFA_RBP;
    e.cfa_off = static_cast<uint16_t>(off);
  }
  if (r.cfa == "exp" && exp) {
    cfa = static_cast<smt_cfa_rule>(SMT_UNWIND_CFA_RULE(exp->rules));
    e.cfa_off = exp->cfa_off;
  }
  if (r.ra == "u") {
    cfa = SMT_CFA_END;
  } else if (r.ra != "c-8") {
    cfa = SMT_CFA_UNSUPPORTED;
  }
  if (cfa != SMT_CFA_RSP && cfa != SMT_CFA_RBP && cfa != SMT_CFA_PLT && cfa != SMT_CFA_RSP_DEREF &&
      cfa != SMT_CFA_RBP_DEREF)
    e.cfa_off = 0;
  if (r.rbp.empty() || r.rbp == "u" || r.rbp == "s") {
    rbp = SMT_RBP_SAME;
  } else if (r.rbp.starts_with("c")) {
    const long off = std::stol(r.rbp.substr(1));
    if (off % 8 == 0 && off >= SMT_UNWIND_RBP_OFF_MIN && off <= SMT_UNWIND_RBP_OFF_MAX) {
      rbp = SMT_RBP_AT_CFA;
      e.rbp_off = static_cast<int8_t>(off / 8);
    }
  }
  e.rules = SMT_UNWIND_RULES(cfa, rbp);
  return e;
}

using Range = std::pair<uint64_t, uint64_t>;

// [start, end) of section `name` of the ELF file at `path`; {0, 0} if none.
Range section_range(const std::string& path, const char* name) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  elf_version(EV_CURRENT);
  Elf* elf = elf_begin(fd.get(), ELF_C_READ, nullptr);
  Range out{0, 0};
  size_t strndx;
  if (elf && elf_getshdrstrndx(elf, &strndx) == 0) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      const char* n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, strndx, sh.sh_name) : nullptr;
      if (n && std::string(n) == name) out = {sh.sh_addr, sh.sh_addr + sh.sh_size};
    }
  }
  if (elf) elf_end(elf);
  return out;
}

struct Agreement {
  size_t checked = 0, mismatches = 0;
  std::string first;  // the first few mismatches
};

// Every readelf row's pc, and every FDE's end that no other FDE covers, looked
// up in the table. An "exp" CFA in .plt is the PLT's; in one of `exp`'s
// ranges, that range's rule.
struct ExpRange {
  Range range;
  smt_unwind_row rule;  // its CFA rule and cfa_off
};
smt_unwind_row cfa_rule(smt_cfa_rule rule, uint16_t cfa_off) {
  smt_unwind_row r{};
  r.rules = SMT_UNWIND_RULES(rule, SMT_RBP_SAME);
  r.cfa_off = cfa_off;
  return r;
}
Agreement compare_with_readelf(const std::string& path, const CfiTable& t,
                               std::vector<ExpRange> exp = {}) {
  const auto fdes = readelf_frames(path, t.section);
  exp.push_back({section_range(path, ".plt"), cfa_rule(SMT_CFA_PLT, 11)});
  Agreement a;
  auto check = [&](uint64_t pc, const smt_unwind_row& want, const std::string& why) {
    const smt_unwind_row* got = t.find(pc);
    const std::string g = got ? describe(*got) : "no row", w = describe(want);
    ++a.checked;
    if (g == w) return;
    if (++a.mismatches <= 5) {
      std::ostringstream s;
      s << "  0x" << std::hex << pc << " (" << why << "): table " << g << ", readelf " << w << "\n";
      a.first += s.str();
    }
  };
  std::vector<Range> covered;
  for (const ReadelfFde& f : fdes) {
    if (f.start == f.end) continue;
    covered.emplace_back(f.start, f.end);
    for (const ReadelfRow& r : f.rows) {
      const smt_unwind_row* rule = nullptr;
      for (const ExpRange& x : exp)
        if (r.loc >= x.range.first && r.loc < x.range.second) rule = &x.rule;
      check(r.loc, expected(r, f.signal, rule), f.rows.size() == 1 ? "FDE start" : "row");
    }
  }
  smt_unwind_row none{};
  none.rules = SMT_UNWIND_RULES(SMT_CFA_NONE, SMT_RBP_SAME);
  for (const auto& [start, end] : covered) {
    bool inside = false;
    for (const auto& [s, e] : covered) inside = inside || (end >= s && end < e);
    if (!inside) check(end, none, "past an FDE");
  }
  return a;
}

void expect_agrees_with_readelf(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) GTEST_SKIP() << path << " is not installed here";
  const CfiTable t = build_cfi_table(path);
  EXPECT_EQ(t.section, ".eh_frame");
  EXPECT_FALSE(t.build_id.empty());
  EXPECT_EQ(t.undecodable_fdes, 0u);
  const Agreement a = compare_with_readelf(path, t);
  EXPECT_GT(a.checked, t.fdes) << path;
  EXPECT_EQ(a.mismatches, 0u) << path << ": " << a.mismatches << " of " << a.checked
                              << " pcs differ from readelf, first:\n"
                              << a.first;
  for (size_t i = 1; i < t.rows.size(); ++i)
    ASSERT_LT(t.rows[i - 1].pc, t.rows[i].pc) << path << ": rows unsorted at " << i;
}

size_t count_rule(const CfiTable& t, smt_cfa_rule rule) {
  size_t n = 0;
  for (const smt_unwind_row& r : t.rows) n += SMT_UNWIND_CFA_RULE(r.rules) == rule;
  return n;
}

TEST(CfiTable, LibcAgreesWithReadelf) {
  expect_agrees_with_readelf("/lib/x86_64-linux-gnu/libc.so.6");
  const CfiTable t = build_cfi_table("/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(count_rule(t, SMT_CFA_PLT), 1u);     // its .plt
  EXPECT_GE(count_rule(t, SMT_CFA_END), 1u);     // clone3's child, the thread's root
  EXPECT_EQ(count_rule(t, SMT_CFA_SIGNAL), 1u);  // __restore_rt
}
TEST(CfiTable, LdSoAgreesWithReadelf) { expect_agrees_with_readelf("/lib64/ld-linux-x86-64.so.2"); }
TEST(CfiTable, GzipAgreesWithReadelf) {
  expect_agrees_with_readelf("/usr/bin/gzip");
  EXPECT_GE(count_rule(build_cfi_table("/usr/bin/gzip"), SMT_CFA_END), 1u);  // _start
}
TEST(CfiTable, Python311AgreesWithReadelf) { expect_agrees_with_readelf("/usr/bin/python3.11"); }

// A program built here: work() as gcc -O2 -fomit-frame-pointer compiles it (a
// frame of 16 KiB, calls back through qsort), and hand-written CFI whose rows
// are known to the byte.
constexpr const char* kProgram = R"(#include <stdlib.h>
static int cmp(const void* a, const void* b) {
  long x = *(const long*)a, y = *(const long*)b;
  return (x > y) - (x < y);
}
__attribute__((noinline)) long work(long n, long seed) {
  long buf[2048];
  for (long i = 0; i < n && i < 2048; ++i) buf[i] = (seed * (i + 1)) % 977;
  qsort(buf, n, sizeof(long), cmp);
  return buf[0] + buf[n - 1];
}
asm(".text\n"
    ".p2align 4\n.globl fp_frame\nfp_frame:\n.cfi_startproc\n"
    "push %rbp\n.cfi_def_cfa_offset 16\n.cfi_offset %rbp, -16\n"
    "mov %rsp, %rbp\n.cfi_def_cfa_register %rbp\nnop\n"
    "pop %rbp\n.cfi_def_cfa %rsp, 8\n.cfi_restore %rbp\nret\n.cfi_endproc\n"
    ".p2align 4\n.globl root_frame\nroot_frame:\n.cfi_startproc\n.cfi_undefined %rip\n"
    "xor %ebp, %ebp\nret\n.cfi_endproc\n"
    ".p2align 4\n.globl plt_like\nplt_like:\n.cfi_startproc\n"
    ".cfi_escape 0x0f,0x0b,0x77,0x08,0x80,0x00,0x3f,0x1a,0x3b,0x2a,0x33,0x24,0x22\n"
    "ret\n.cfi_endproc\n.globl plt_like_end\nplt_like_end:\n"
    ".p2align 4\n.globl deref_rsp\nderef_rsp:\n.cfi_startproc\n"
    ".cfi_escape 0x0f,0x05,0x77,0x28,0x06,0x23,0x08\n"  // CFA = *(rsp + 40) + 8
    "ret\n.cfi_endproc\n.globl deref_rsp_end\nderef_rsp_end:\n"
    ".p2align 4\n.globl deref_rbp\nderef_rbp:\n.cfi_startproc\n"
    ".cfi_escape 0x0f,0x06,0x76,0x98,0x01,0x06,0x23,0x40\n"  // CFA = *(rbp + 152) + 64
    "ret\n.cfi_endproc\n.globl deref_rbp_end\nderef_rbp_end:\n"
    ".p2align 4\n.globl deref_odd\nderef_odd:\n.cfi_startproc\n"
    ".cfi_escape 0x0f,0x05,0x77,0x29,0x06,0x23,0x08\n"  // *(rsp + 41): not a saved rsp
    "ret\n.cfi_endproc\n"
    ".p2align 4\n.globl odd_expr\nodd_expr:\n.cfi_startproc\n"
    ".cfi_escape 0x0f,0x0b,0x77,0x08,0x80,0x00,0x3f,0x1a,0x3b,0x2a,0x33,0x24,0x1c\n"
    "ret\n.cfi_endproc\n"
    ".p2align 4\n.globl big_frame\nbig_frame:\n.cfi_startproc\n"
    "sub $0x20000, %rsp\n.cfi_adjust_cfa_offset 0x20000\n"
    "add $0x20000, %rsp\n.cfi_adjust_cfa_offset -0x20000\nret\n.cfi_endproc\n"
    ".p2align 4\n.globl ra_elsewhere\nra_elsewhere:\n.cfi_startproc\n.cfi_offset %rip, -16\n"
    "ret\n.cfi_endproc\n");
int main(int argc, char** argv) { (void)argv; return (int)work(argc + 100, argc) & 1; }
)";

class BuiltHere : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/cfi_table_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/prog.c") << kProgram;
    run("cc -O2 -fomit-frame-pointer -o " + dir_ + "/prog " + dir_ + "/prog.c");
    // No .eh_frame: the CFI is in .debug_frame only.
    run("cc -shared -nostdlib -O2 -fomit-frame-pointer -g -fno-asynchronous-unwind-tables "
        "-fno-unwind-tables -DNO_MAIN -o " +
        dir_ + "/debug_frame.so -x c - <<'EOF'\n" +
        std::string(kProgram).substr(0, std::string(kProgram).find("asm(")) + "EOF\n");
    std::istringstream nm(run("nm --defined-only " + dir_ + "/prog"));
    std::string addr, kind, name;
    while (nm >> addr >> kind >> name) symbols_[name] = std::stoull(addr, nullptr, 16);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::string row_at(const CfiTable& t, const char* symbol, uint64_t offset) {
    const smt_unwind_row* r = t.find(symbols_.at(symbol) + offset);
    return r ? describe(*r) : "no row";
  }

  static inline std::string dir_;
  static inline std::map<std::string, uint64_t> symbols_;
};

TEST_F(BuiltHere, OmitFramePointerFunctionRows) {
  const CfiTable t = build_cfi_table(dir_ + "/prog");
  EXPECT_EQ(row_at(t, "work", 0), "rsp+8 rbp same");
  // Its 16 KiB of locals reach the CFA offset somewhere in it, with rsp, never
  // rbp; its rows end where its FDE does.
  bool big = false;
  for (const smt_unwind_row* r = t.find(symbols_.at("work"));
       SMT_UNWIND_CFA_RULE(r->rules) != SMT_CFA_NONE; ++r) {
    EXPECT_EQ(SMT_UNWIND_CFA_RULE(r->rules), SMT_CFA_RSP) << describe(*r);
    big = big || r->cfa_off > 2048 * 8;
  }
  EXPECT_TRUE(big) << "no row of work() holds its 16 KiB frame";
  auto range = [&](const std::string& name) {
    return Range{symbols_.at(name), symbols_.at(name + "_end")};
  };
  const Agreement a = compare_with_readelf(
      dir_ + "/prog", t,
      {{range("plt_like"), cfa_rule(SMT_CFA_PLT, 11)},
       {range("deref_rsp"), cfa_rule(SMT_CFA_RSP_DEREF, SMT_CFA_DEREF_OFF(40, 8))},
       {range("deref_rbp"), cfa_rule(SMT_CFA_RBP_DEREF, SMT_CFA_DEREF_OFF(152, 64))}});
  EXPECT_EQ(a.mismatches, 0u) << a.first;
}

TEST_F(BuiltHere, HandWrittenCfiRows) {
  const CfiTable t = build_cfi_table(dir_ + "/prog");
  EXPECT_EQ(row_at(t, "fp_frame", 0), "rsp+8 rbp same");
  EXPECT_EQ(row_at(t, "fp_frame", 1), "rsp+16 rbp at c-16");  // after push %rbp
  EXPECT_EQ(row_at(t, "fp_frame", 4), "rbp+16 rbp at c-16");  // after mov %rsp, %rbp
  EXPECT_EQ(row_at(t, "fp_frame", 5), "rbp+16 rbp at c-16");
  EXPECT_EQ(row_at(t, "fp_frame", 6), "rsp+8 rbp same");  // after pop %rbp
  EXPECT_EQ(row_at(t, "fp_frame", 7), "none rbp same");   // the padding: no FDE
  EXPECT_EQ(row_at(t, "root_frame", 0), "end rbp same");
  EXPECT_EQ(row_at(t, "plt_like", 0), "plt+11 rbp same");
  EXPECT_EQ(row_at(t, "odd_expr", 0), "unsupported rbp same");
  EXPECT_EQ(row_at(t, "deref_rsp", 0), "rsp deref *40+8 rbp same");
  EXPECT_EQ(row_at(t, "deref_rbp", 0), "rbp deref *152+64 rbp same");
  EXPECT_EQ(row_at(t, "deref_odd", 0), "unsupported rbp same");
  EXPECT_EQ(row_at(t, "big_frame", 0), "rsp+8 rbp same");
  EXPECT_EQ(row_at(t, "big_frame", 7), "unsupported rbp same");  // 128 KiB: past cfa_off
  EXPECT_EQ(row_at(t, "big_frame", 14), "rsp+8 rbp same");
  EXPECT_EQ(row_at(t, "ra_elsewhere", 0), "unsupported rbp same");
}

TEST_F(BuiltHere, DebugFrameWhenNoEhFrame) {
  const std::string so = dir_ + "/debug_frame.so";
  const CfiTable t = build_cfi_table(so);
  EXPECT_EQ(t.section, ".debug_frame");
  EXPECT_GE(t.fdes, 2u);  // cmp, work
  const Agreement a = compare_with_readelf(so, t);
  EXPECT_GE(a.checked, 4u);
  EXPECT_EQ(a.mismatches, 0u) << a.first;
}

TEST(CfiCache, BuildsAFileOnceWhateverPathNamesIt) {
  CfiCache cache([](const std::string& path) { return build_cfi_table(path); });
  const auto a = cache.get("/lib64/ld-linux-x86-64.so.2");
  const auto b = cache.get("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(cache.builds(), 1u);
  EXPECT_NE(cache.get("/usr/bin/gzip").get(), a.get());
  EXPECT_EQ(cache.builds(), 2u);
}

TEST(CfiTable, SaysWhyAFileHasNoTable) {
  try {
    build_cfi_table("/etc/hostname");
    FAIL() << "a text file got a table";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unwind table of /etc/hostname: not an ELF file");
  }
}

#else

TEST(CfiTable, SaysItIsX86_64Only) {
  try {
    build_cfi_table("/proc/self/exe");
    FAIL() << "a table for another architecture";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x86_64 only"), std::string::npos) << e.what();
  }
}

#endif  // __x86_64__

}  // namespace
}  // namespace stackmapd
