// SPDX-License-Identifier: GPL-2.0
#include "daemon/source/event_filter.h"

#include <cctype>
#include <cstring>
#include <vector>

#include "daemon/source/filter_numbers.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

// A parsed expression: predicates at the leaves, `left`/`right` child nodes.
struct Node {
  enum Kind { kPred, kAnd, kOr, kNot } kind = kPred;
  int left = -1, right = -1;
  unsigned leaves = 1;
  smt_filter_pred pred{};
};

// What a predicate's field is, as ftrace's filter_assign_type() tells them apart.
struct Operand {
  smt_filter_field field;
  uint32_t offset = 0, size = 0;
  bool is_signed = false;
  bool is_string() const {
    return field == SMT_FF_STATIC_STR || field == SMT_FF_DYN_STR || field == SMT_FF_REL_STR ||
           field == SMT_FF_COMM;
  }
};

bool contains(const std::string& s, std::string_view what) {
  return s.find(what) != std::string::npos;
}

// The expression around `column` for a one-line message: unprintable bytes
// (NUL included) shown as '?', long ones cut around the column.
std::string excerpt(std::string_view expr, size_t column) {
  constexpr size_t kWidth = 60;
  size_t from = 0;
  std::string out;
  if (expr.size() > kWidth) {
    from = column > kWidth / 2 ? std::min(column - kWidth / 2, expr.size() - kWidth) : 0;
    if (from) out = "...";
  }
  for (char c : expr.substr(from, kWidth))
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (from + kWidth < expr.size()) out += "...";
  return out;
}

class Parser {
 public:
  Parser(std::string_view expr, const EventFormat& format) : s_(expr), format_(format) {}

  smt_filter compile() {
    if (s_.size() > kMaxFilterBytes)
      throw Error("--filter is " + std::to_string(s_.size()) + " bytes long, more than " +
                  std::to_string(kMaxFilterBytes));
    skip_space();
    if (i_ == s_.size()) fail(i_, "empty filter: give predicates such as 'bytes_alloc >= 4096'");
    const int root = parse_or(0);
    skip_space();
    if (i_ < s_.size()) fail(i_, s_[i_] == ')' ? "too few '('" : "expected &&, || or the end");
    if (nodes_[root].leaves > SMT_FILTER_MAX_PREDS)
      fail(0, "too many terms: at most " + std::to_string(SMT_FILTER_MAX_PREDS) + " predicates");
    emit(root, SMT_FILTER_ACCEPT, SMT_FILTER_REJECT);
    return prog_;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw Error("--filter: " + what + " at column " + std::to_string(at + 1) + ": " +
                excerpt(s_, at));
  }

  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }

  bool eat(std::string_view token) {
    skip_space();
    if (s_.substr(i_, token.size()) != token) return false;
    i_ += token.size();
    return true;
  }

  int add(Node n) {
    nodes_.push_back(n);
    return static_cast<int>(nodes_.size() - 1);
  }

  int join(Node::Kind kind, int left, int right) {
    Node n;
    n.kind = kind;
    n.left = left;
    n.right = right;
    n.leaves = nodes_[left].leaves + nodes_[right].leaves;
    return add(n);
  }

  // or := and ('||' and)*; and := unary ('&&' unary)*: && binds tighter.
  int parse_or(unsigned depth) {
    int left = parse_and(depth);
    while (eat("||")) left = join(Node::kOr, left, parse_and(depth));
    return left;
  }

  int parse_and(unsigned depth) {
    int left = parse_unary(depth);
    while (eat("&&")) left = join(Node::kAnd, left, parse_unary(depth));
    return left;
  }

  // unary := '!' unary | '(' or ')' | predicate; '!' of "!=" is no negation.
  int parse_unary(unsigned depth) {
    skip_space();
    if (depth >= kMaxFilterDepth)
      fail(i_, "nested too deep: at most " + std::to_string(kMaxFilterDepth) + " '(' and '!'");
    if (i_ < s_.size() && s_[i_] == '!' && s_.substr(i_, 2) != "!=") {
      ++i_;
      Node n;
      n.kind = Node::kNot;
      n.left = parse_unary(depth + 1);
      n.leaves = nodes_[n.left].leaves;
      return add(n);
    }
    if (i_ < s_.size() && s_[i_] == '(') {
      const size_t open = i_++;
      const int inner = parse_or(depth + 1);
      if (!eat(")")) {
        skip_space();
        fail(i_ < s_.size() ? i_ : open,
             i_ < s_.size() ? "expected &&, || or ')'" : "too many '(': this one is not closed");
      }
      return inner;
    }
    return parse_pred();
  }

  Operand operand(std::string_view name, size_t at) const {
    if (name == "common_pid") return {SMT_FF_PID, 0, 4, true};
    if (name == "cpu" || name == "CPU" || name == "common_cpu") return {SMT_FF_CPU, 0, 4, true};
    if (name == "comm" || name == "COMM") return {SMT_FF_COMM, 0, 16, false};
    const std::string event =
        format_.system.empty() ? format_.name : format_.system + ":" + format_.name;
    if (name.substr(0, 7) == "common_")
      fail(at, std::string(name) +
                   " is not in the record a BPF program sees (the kernel puts a pointer over "
                   "the common fields): use --backend tracefs");
    const EventField* f = format_.find(name);
    if (!f) {
      std::string fields;
      for (const EventField& e : format_.fields) fields += (fields.empty() ? "" : ", ") + e.name;
      fail(at, "field not found: '" + std::string(name) + "' (" + event +
                   " has: " + (fields.empty() ? "" : fields + ", ") + "common_pid, comm, cpu)");
    }
    if (f->offset > UINT16_MAX) fail(at, std::string(name) + " lies past 64 KiB of the record");
    const std::string& t = f->type;
    if (contains(t, "char") && contains(t, "__data_loc")) return {SMT_FF_DYN_STR, f->offset, 4};
    if (contains(t, "char") && contains(t, "__rel_loc")) return {SMT_FF_REL_STR, f->offset, 4};
    if (contains(t, "char") && contains(t, "[")) {
      if (f->size > UINT8_MAX) fail(at, std::string(name) + " is a string of more than 255 bytes");
      return {SMT_FF_STATIC_STR, f->offset, f->size};
    }
    if (t == "char *" || t == "const char *")
      fail(at, std::string(name) + " is a " + t +
                   ": --filter reads no strings through pointers (--backend tracefs does)");
    if (contains(t, "[") || (f->size != 1 && f->size != 2 && f->size != 4 && f->size != 8))
      fail(at, "illegal operation for field type: " + std::string(name) + " is " + t);
    return {SMT_FF_NUMBER, f->offset, f->size, f->is_signed};
  }

  // field op value
  int parse_pred() {
    skip_space();
    const size_t name_at = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      ++i_;
    if (i_ == name_at)
      fail(name_at, i_ == s_.size() ? "expected a predicate after this"
                                    : "expected a field name, '(' or '!'");
    const std::string_view name = s_.substr(name_at, i_ - name_at);
    const Operand o = operand(name, name_at);
    skip_space();
    const size_t op_at = i_;
    static constexpr std::string_view kOps[] = {"~", "!=", "==", "<=", "<", ">=", ">", "&"};
    std::string_view op;
    for (std::string_view candidate : kOps)
      if (s_.substr(i_, candidate.size()) == candidate) {
        op = candidate;
        break;
      }
    if (op.empty()) fail(op_at, "invalid operator: expected ==, !=, <, <=, >, >=, & or ~");
    i_ += op.size();
    skip_space();
    Node n;
    smt_filter_pred& p = n.pred;
    p.field = static_cast<__u8>(o.field);
    p.offset = static_cast<__u16>(o.offset);
    p.size = static_cast<__u8>(o.size);
    p.is_signed = o.is_signed;
    const size_t value_at = i_;
    const char c = i_ < s_.size() ? s_[i_] : '\0';
    if (i_ < s_.size() && (c == '"' || c == '\'')) {
      if (op != "==" && op != "!=" && op != "~")
        fail(value_at,
             "illegal operation for field type: strings take ==, != or ~, not " + std::string(op));
      if (!o.is_string())
        fail(value_at, "expecting numeric field: " + std::string(name) + " is a number");
      const size_t close = s_.find(c, i_ + 1);
      if (close == std::string_view::npos) fail(value_at, "missing matching quote");
      string_pred(p, op, s_.substr(i_ + 1, close - i_ - 1), value_at);
      i_ = close + 1;
    } else if (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      if (o.is_string())
        fail(value_at,
             "expecting string field: " + std::string(name) + " is a string: quote the value");
      if (op == "~") fail(op_at, "illegal operation for field type: ~ takes strings");
      size_t end = i_ + (c == '-');
      while (end < s_.size() && std::isalnum(static_cast<unsigned char>(s_[end]))) ++end;
      const std::string_view text = s_.substr(i_, end - i_);
      const std::optional<uint64_t> v = o.is_signed ? parse_signed(text) : parse_unsigned(text);
      if (!v)
        fail(value_at, "illegal integer value '" + std::string(text) + "' for " +
                           (o.is_signed ? "a signed" : "an unsigned") + " field");
      i_ = end;
      p.value = as_field(*v, o.size, o.is_signed);
      p.negate = op == "!=";
      p.op = op == "==" || op == "!=" ? SMT_FO_EQ
             : op == "<"              ? SMT_FO_LT
             : op == "<="             ? SMT_FO_LE
             : op == ">"              ? SMT_FO_GT
             : op == ">="             ? SMT_FO_GE
                                      : SMT_FO_BAND;
    } else {
      fail(value_at, "invalid value (did you forget quotes?)");
    }
    return add(n);
  }

  // ==, != and ~ on a string: ftrace's filter_build_regex() and
  // filter_parse_regex() pick the match kind.
  void string_pred(smt_filter_pred& p, std::string_view op, std::string_view text, size_t at) {
    p.op = SMT_FO_FULL;
    p.negate = op == "!=";
    if (op == "~") {
      if (!text.empty() && text[0] == '!') {
        p.negate = 1;
        text.remove_prefix(1);
      }
      bool front_star = false;
      if (!text.empty() && !std::isdigit(static_cast<unsigned char>(text[0]))) {
        for (size_t k = 0; k < text.size(); ++k) {
          if (text[k] == '*') {
            if (k == 0) {
              p.op = SMT_FO_END;
              front_star = true;
            } else if (k == text.size() - 1) {
              p.op = p.op == SMT_FO_END ? SMT_FO_MIDDLE : SMT_FO_FRONT;
              text = text.substr(0, k);
              break;
            } else {
              p.op = SMT_FO_GLOB;
              break;
            }
          } else if (text[k] == '[' || text[k] == '?' || text[k] == '\\') {
            p.op = SMT_FO_GLOB;
            break;
          }
        }
        if (p.op != SMT_FO_GLOB && front_star) text.remove_prefix(1);
      }
    }
    if (text.find('\0') != std::string_view::npos) fail(at, "a NUL byte in a string");
    std::string tokens;
    if (p.op == SMT_FO_GLOB) {
      tokens = glob_tokens(text, at);
      text = tokens;
    }
    if (text.size() >= SMT_FILTER_PATTERN_MAX)
      fail(at, "string of " + std::to_string(text.size()) + " bytes: at most " +
                   std::to_string(SMT_FILTER_PATTERN_MAX - 1));
    if (patterns_ == SMT_FILTER_MAX_PATTERNS)
      fail(at, "too many strings: at most " + std::to_string(SMT_FILTER_MAX_PATTERNS));
    std::memcpy(prog_.patterns[patterns_], text.data(), text.size());
    p.pattern = static_cast<__u8>(patterns_++);
    p.pattern_len = static_cast<__u8>(text.size());
  }

  // A full glob as the tokens the interpreter runs (abi/filter.h), read as
  // the kernel's glob_match() reads it: '*', '?', '[...]' spans a or a-b
  // (the first may be ']'; "[!" inverts; unclosed, '[' is literal), a backslash
  // makes the next byte literal.
  std::string glob_tokens(std::string_view g, size_t at) {
    std::string out;
    for (size_t i = 0; i < g.size();) {
      const unsigned char ch = static_cast<unsigned char>(g[i]);
      if (ch == '*' || ch == '?') {
        out += static_cast<char>(ch == '*' ? SMT_GLOB_STAR : SMT_GLOB_ANY);
        ++i;
        continue;
      }
      if (ch == '[') {
        if (const size_t end = glob_class(g, i + 1, at); end) {
          out += static_cast<char>(SMT_GLOB_CLASS + classes_ - 1);
          i = end;
          continue;
        }
      } else if (ch == '\\') {
        if (++i == g.size())
          break;  // a trailing backslash matches the string's end, as the end does
      }
      const unsigned char lit = static_cast<unsigned char>(g[i++]);
      if (lit < SMT_GLOB_CLASS + SMT_FILTER_MAX_CLASSES) fail(at, "a control byte in a glob");
      out += static_cast<char>(lit);
    }
    return out;
  }

  // The class whose spans start at g[j] (after '['): its bitmap in the next
  // classes slot and the index past its ']', or 0 when it is not closed.
  size_t glob_class(std::string_view g, size_t j, size_t at) {
    const bool inverted = j < g.size() && g[j] == '!';
    j += inverted;
    __u8 bits[32] = {};
    if (j >= g.size()) return 0;
    unsigned char a = static_cast<unsigned char>(g[j++]);
    for (;;) {
      unsigned char b = a;
      if (j < g.size() && g[j] == '-' && (j + 1 >= g.size() || g[j + 1] != ']')) {
        if (j + 1 >= g.size()) return 0;
        b = static_cast<unsigned char>(g[j + 1]);
        j += 2;
      }
      for (unsigned c = a; c <= b; ++c) bits[c >> 3] |= static_cast<__u8>(1u << (c & 7));
      if (j >= g.size()) return 0;
      a = static_cast<unsigned char>(g[j++]);
      if (a == ']') break;
    }
    if (classes_ == SMT_FILTER_MAX_CLASSES)
      fail(at, "too many [classes]: at most " + std::to_string(SMT_FILTER_MAX_CLASSES));
    for (unsigned k = 0; k < 32; ++k)
      prog_.classes[classes_][k] = inverted ? static_cast<__u8>(~bits[k]) : bits[k];
    prog_.classes[classes_][0] &= static_cast<__u8>(~1u);  // the string's end is no byte
    ++classes_;
    return j;
  }

  // Predicates in the order they appear; a node's code jumps to `yes` when
  // it holds and to `no` when not, both past its own predicates.
  void emit(int node, __u8 yes, __u8 no) {
    const Node& n = nodes_[node];
    switch (n.kind) {
      case Node::kPred: {
        smt_filter_pred& p = prog_.preds[prog_.nr++];
        p = n.pred;
        p.on_true = yes;
        p.on_false = no;
        return;
      }
      case Node::kNot: emit(n.left, no, yes); return;
      case Node::kAnd:
      case Node::kOr: {
        const __u8 right = static_cast<__u8>(prog_.nr + nodes_[n.left].leaves);
        if (n.kind == Node::kAnd) emit(n.left, right, no);
        else emit(n.left, yes, right);
        emit(n.right, yes, no);
        return;
      }
    }
  }

  std::string_view s_;
  const EventFormat& format_;
  size_t i_ = 0;
  std::vector<Node> nodes_;
  smt_filter prog_{};
  unsigned patterns_ = 0;
  unsigned classes_ = 0;
};

}  // namespace

smt_filter compile_filter(std::string_view expr, const EventFormat& format) {
  return Parser(expr, format).compile();
}

bool same_filter(const smt_filter& a, const smt_filter& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

}  // namespace stackmapd
