// SPDX-License-Identifier: GPL-2.0
#include "daemon/symbols/kallsyms.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <system_error>

#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

// kallsyms gives start addresses only, so a symbol ends where the next one starts. The last
// symbol before a hole (end of core text before the __init text, the last function of a module)
// really ends much earlier, and an ip in the hole would print a made-up size. No function is
// anywhere near 1 MiB long, so a larger distance marks such a hole and the ip stays unresolved.
constexpr uint64_t max_symbol_size = uint64_t{1} << 20;

constexpr std::string_view line_format = "<hex address> <type> <name>, then optionally [<module>]";

struct Line {
  uint64_t addr;
  char type;
  std::string_view name;
  std::string_view module;
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Only code can be on a stack: t/T are functions, w/W weak functions. Data (d/D/b/B/r/R) and
// absolute (a/A) symbols would otherwise cut the size of the function before them.
bool is_text(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

// "ffffffff81000000 T _stext" or "ffffffffc0a01000 t foo_init\t[mod]".
std::optional<Line> parse_line(std::string_view text) {
  Line line{};
  const char* end = text.data() + text.size();
  auto [after_addr, ec] = std::from_chars(text.data(), end, line.addr, 16);
  if (ec != std::errc() || after_addr == text.data()) return std::nullopt;
  std::string_view rest(after_addr, end - after_addr);
  if (rest.size() < 4 || rest[0] != ' ' || is_blank(rest[1]) || rest[2] != ' ') {
    return std::nullopt;
  }
  line.type = rest[1];
  rest.remove_prefix(3);
  const size_t name_end = std::min(rest.find_first_of(" \t"), rest.size());
  line.name = rest.substr(0, name_end);
  if (line.name.empty() || line.name.size() > std::numeric_limits<uint16_t>::max()) {
    return std::nullopt;
  }
  rest.remove_prefix(name_end);
  if (rest.empty()) return line;
  const size_t module_start = rest.find_first_not_of(" \t");
  if (module_start == std::string_view::npos) return std::nullopt;
  rest.remove_prefix(module_start);
  if (rest.size() < 3 || rest.front() != '[' || rest.back() != ']') return std::nullopt;
  line.module = rest.substr(1, rest.size() - 2);
  if (line.module.find_first_of(" \t[]") != std::string_view::npos) return std::nullopt;
  return line;
}

std::string malformed_line_error(const std::string& source, size_t line_number,
                                 std::string_view line) {
  constexpr size_t max_quoted = 80;  // enough to recognize the line, short enough for one line
  std::string quoted(line.substr(0, max_quoted));
  if (line.size() > max_quoted) quoted += "...";
  return source + " line " + std::to_string(line_number) + " is malformed (\"" + quoted +
         "\"): expected \"" + std::string(line_format) + "\"; pass an unmodified copy of " +
         "/proc/kallsyms";
}

std::string read_error(const std::string& path, int err) {
  std::string fix = "check the path";
  if (err == EACCES || err == EPERM) {
    fix = "run as root";
  } else if (err == ENOENT) {
    fix = "check the path (/proc/kallsyms needs a kernel built with CONFIG_KALLSYMS)";
  }
  return "cannot read " + path + ": " + std::generic_category().message(err) + ": " + fix;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void append_hex(std::string& out, uint64_t value) {
  char buf[16];  // 64 bits are at most 16 hex digits
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, 16);
  out += "0x";
  out.append(buf, result.ptr);
}

}  // namespace

// Builds a table line by line, so /proc/kallsyms (~10 MB of text) is parsed in
// chunks rather than held whole: a whole copy set the daemon's peak memory.
class Kallsyms::Builder {
 public:
  explicit Builder(std::string source) : source_(std::move(source)) {}

  void add(std::string_view text_line) {
    ++line_number_;
    const std::optional<Line> line = parse_line(text_line);
    if (!line) throw Error(malformed_line_error(source_, line_number_, text_line));
    any_line_ = true;
    all_zero_ = all_zero_ && line->addr == 0;
    if (line->name == "_text" && line->module.empty()) result_.text_address_ = line->addr;
    if (!is_text(line->type)) return;
    // Arena offsets are 32 bits.
    if (result_.arena_.size() + line->name.size() + line->module.size() >
        std::numeric_limits<uint32_t>::max())
      throw Error(source_ + " holds more than 4 GiB of names: pass a copy of /proc/kallsyms");
    Symbol symbol{line->addr, static_cast<uint32_t>(result_.arena_.size()), 0,
                  static_cast<uint16_t>(line->name.size()), 0};
    result_.arena_ += line->name;
    if (!line->module.empty()) {
      // /proc/kallsyms lists each module's symbols together, so remembering the last module
      // name stores each one once.
      if (line->module != last_module_) {
        last_module_ = line->module;
        last_module_offset_ = static_cast<uint32_t>(result_.arena_.size());
        result_.arena_ += line->module;
      }
      symbol.module_offset = last_module_offset_;
      symbol.module_len = static_cast<uint16_t>(line->module.size());
    }
    result_.symbols_.push_back(symbol);
  }

  Kallsyms finish() {
    std::vector<Symbol>& symbols = result_.symbols_;
    if (symbols.empty()) {
      throw Error(source_ +
                  " has no text symbols (types t, T, w, W): pass a copy of /proc/kallsyms");
    }
    // Aliases share an address (_text and _stext). The kernel's %pS picks the first alias in
    // its table, which is also the order /proc/kallsyms prints core symbols in, so a stable
    // sort and keeping the first of each address gives the same name and is deterministic for
    // modules too.
    std::stable_sort(symbols.begin(), symbols.end(),
                     [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; });
    symbols.erase(std::unique(symbols.begin(), symbols.end(),
                              [](const Symbol& a, const Symbol& b) { return a.addr == b.addr; }),
                  symbols.end());
    symbols.shrink_to_fit();
    result_.arena_.shrink_to_fit();
    result_.addresses_hidden_ = any_line_ && all_zero_;
    return std::move(result_);
  }

 private:
  const std::string source_;
  Kallsyms result_;
  bool any_line_ = false;
  bool all_zero_ = true;
  std::string last_module_;
  uint32_t last_module_offset_ = 0;
  size_t line_number_ = 0;
};

Kallsyms Kallsyms::load(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw Error(read_error(path, errno));
  Builder builder(path);
  // /proc files report size 0: read until EOF, a chunk per read (not a line: that is what keeps
  // 200k lines fast), carrying a line cut by the chunk's end over to the next.
  std::string chunk(size_t{64} << 10, '\0');
  size_t carried = 0;
  for (;;) {
    if (carried == chunk.size()) chunk.resize(chunk.size() * 2);  // a line longer than a chunk
    const ssize_t n = ::read(fd.get(), chunk.data() + carried, chunk.size() - carried);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(read_error(path, errno));
    }
    const std::string_view text(chunk.data(), carried + static_cast<size_t>(n));
    if (n == 0) {
      if (!text.empty()) builder.add(text);
      break;
    }
    size_t pos = 0;
    for (size_t eol; (eol = text.find('\n', pos)) != std::string_view::npos; pos = eol + 1)
      builder.add(text.substr(pos, eol - pos));
    carried = text.size() - pos;
    std::memmove(chunk.data(), chunk.data() + pos, carried);
  }
  return builder.finish();
}

Kallsyms Kallsyms::parse(std::string_view text) {
  Builder builder("kallsyms");
  for (size_t pos = 0; pos < text.size();) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    builder.add(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  return builder.finish();
}

std::optional<Kallsyms::Match> Kallsyms::lookup(uint64_t ip) const {
  const auto next =
      std::upper_bound(symbols_.begin(), symbols_.end(), ip,
                       [](uint64_t value, const Symbol& symbol) { return value < symbol.addr; });
  // Below the first symbol, or in the last one, whose end is unknown.
  if (next == symbols_.begin() || next == symbols_.end()) return std::nullopt;
  const Symbol& symbol = *(next - 1);
  const uint64_t size = next->addr - symbol.addr;
  // A symbol followed by another module's (or the core kernel's) is the last of its module, and
  // its end is unknown just as for the last symbol overall.
  if (size > max_symbol_size || module_of(*next) != module_of(symbol)) return std::nullopt;
  return Match{name_of(symbol), module_of(symbol), ip - symbol.addr, size};
}

std::vector<Kallsyms::Range> Kallsyms::ranges_of(
    const std::function<bool(std::string_view)>& wanted) const {
  std::vector<Range> out;
  for (size_t i = 0; i + 1 < symbols_.size(); ++i) {
    const Symbol& s = symbols_[i];
    if (!wanted(name_of(s))) continue;
    if (const std::optional<Match> m = lookup(s.addr)) out.push_back({s.addr, s.addr + m->size});
  }
  return out;
}

std::string Kallsyms::format(uint64_t ip) const {
  std::string out;
  const std::optional<Match> match = lookup(ip);
  if (!match) {
    append_hex(out, ip);
    return out;
  }
  out += match->name;
  out += '+';
  append_hex(out, match->offset);
  out += '/';
  append_hex(out, match->size);
  if (!match->module.empty()) {
    out += " [";
    out += match->module;
    out += ']';
  }
  return out;
}

Kallsyms Kallsyms::rebased(uint64_t runtime_text) const {
  if (text_address_ == 0)
    throw Error(
        "the symbol table has no _text symbol, so the KASLR slide cannot be applied: "
        "pass an unmodified kallsyms or vmlinux");
  const uint64_t slide = runtime_text - text_address_;  // modulo 2^64: either direction
  Kallsyms out;
  out.arena_ = arena_;
  for (const Symbol& s : symbols_)
    if (s.module_len == 0)
      out.symbols_.push_back({s.addr + slide, s.name_offset, 0, s.name_len, 0});
  // A slide keeps the order, except across the top of the address space.
  std::sort(out.symbols_.begin(), out.symbols_.end(),
            [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; });
  out.text_address_ = runtime_text;
  return out;
}

Kallsyms Kallsyms::from_vmlinux(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE)
    throw Error("libelf is unusable: " + std::string(elf_errmsg(-1)));
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw Error(read_error(path, errno));
  const std::unique_ptr<Elf, decltype(&elf_end)> owner(elf_begin(fd.get(), ELF_C_READ, nullptr),
                                                       &elf_end);
  Elf* elf = owner.get();
  if (!elf || elf_kind(elf) != ELF_K_ELF)
    throw Error(path + " is not an ELF file: pass the vmlinux (with symbols) of the traced kernel");
  // Given as kallsyms lines, so one parser gives both the same rules.
  Builder builder(path);
  std::string line;
  bool any = false;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_SYMTAB) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    const size_t count = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
    for (size_t i = 0; data && i < count; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF ||
          sym.st_shndx >= SHN_LORESERVE)
        continue;
      const int type = GELF_ST_TYPE(sym.st_info);
      if (type != STT_FUNC && type != STT_NOTYPE) continue;
      GElf_Shdr owner;
      Elf_Scn* section = elf_getscn(elf, sym.st_shndx);
      if (!section || !gelf_getshdr(section, &owner) || !(owner.sh_flags & SHF_EXECINSTR)) continue;
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      // Skip unnamed and mapping symbols ($x, $d on arm64).
      if (!name || !*name || name[0] == '$' || std::strpbrk(name, " \t\n")) continue;
      char addr[16];
      line.assign(addr, std::to_chars(addr, addr + sizeof(addr), sym.st_value, 16).ptr);
      line += GELF_ST_BIND(sym.st_info) == STB_LOCAL ? " t " : " T ";
      line += name;
      builder.add(line);
      any = true;
    }
  }
  if (!any) throw Error(path + " has no text symbols: pass a vmlinux that was not stripped");
  return builder.finish();
}

size_t Kallsyms::size() const { return symbols_.size(); }

bool Kallsyms::addresses_hidden() const { return addresses_hidden_; }

std::string_view Kallsyms::name_of(const Symbol& symbol) const {
  return std::string_view(arena_).substr(symbol.name_offset, symbol.name_len);
}

std::string_view Kallsyms::module_of(const Symbol& symbol) const {
  return std::string_view(arena_).substr(symbol.module_offset, symbol.module_len);
}

}  // namespace stackmapd
