// SPDX-License-Identifier: GPL-2.0
// What each option of a tracing session's command line means besides its
// value, declared with the option (OptionTable::add). What depends on it is
// derived from the options given on the line (CLI11's count), never kept in a
// list beside them: whether `--top N` is the running daemon's to answer, what
// the tracefs backend refuses.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace stackmapd {

enum class OptionRole {
  shapes,   // what is recorded, or for how long: a session of its own
  output,   // what a session writes: a session of its own
  request,  // where to ask and how to print: the running daemon can answer with these
};

struct OptionTraits {
  OptionRole role;
  bool needs_bpf;  // nothing like it in the tracefs backend
};

inline constexpr OptionTraits kShapes{OptionRole::shapes, false};
inline constexpr OptionTraits kShapesBpf{OptionRole::shapes, true};
inline constexpr OptionTraits kOutput{OptionRole::output, false};
inline constexpr OptionTraits kOutputBpf{OptionRole::output, true};
inline constexpr OptionTraits kRequest{OptionRole::request, false};

class OptionTable {
 public:
  explicit OptionTable(CLI::App& app) : app_(app) {}

  CLI::App& app() const { return app_; }
  // Gives `option` (just added to app()) its traits; returns it for CLI11's chained calls.
  CLI::Option* add(OptionTraits traits, CLI::Option* option);
  // Throws std::logic_error naming the options of app() (--help aside) that
  // were added without traits: a new option cannot be forgotten.
  void check_complete() const;
  // The traits of the option CLI11 knows by `name` ("--bits", "-e");
  // std::logic_error if it has none.
  OptionTraits traits(const std::string& name) const;
  // The options given on the line whose traits pass `which`, by their long
  // names, in the order they were declared.
  std::vector<std::string> given(bool (*which)(const OptionTraits&)) const;

 private:
  CLI::App& app_;
  std::vector<std::pair<const CLI::Option*, OptionTraits>> options_;
};

// Names for a message: "--a", "--a and --b", "--a, --b and --c".
std::string name_list(const std::vector<std::string>& names);

}  // namespace stackmapd
