// SPDX-License-Identifier: GPL-2.0
#include "daemon/run/option_table.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <stdexcept>

namespace stackmapd {

CLI::Option* OptionTable::add(OptionTraits traits, CLI::Option* option) {
  options_.emplace_back(option, traits);
  return option;
}

void OptionTable::check_complete() const {
  std::vector<std::string> missing;
  for (const CLI::Option* option : app_.get_options()) {
    if (option == app_.get_help_ptr()) continue;
    if (std::none_of(options_.begin(), options_.end(),
                     [&](const auto& o) { return o.first == option; }))
      missing.push_back(option->get_name());
  }
  if (!missing.empty())
    throw std::logic_error(name_list(missing) +
                           " declared without traits: add them through OptionTable::add");
}

OptionTraits OptionTable::traits(const std::string& name) const {
  const CLI::Option* option = app_.get_option(name);
  for (const auto& [o, traits] : options_)
    if (o == option) return traits;
  throw std::logic_error(name + " has no traits");
}

std::vector<std::string> OptionTable::given(bool (*which)(const OptionTraits&)) const {
  std::vector<std::string> names;
  for (const auto& [option, traits] : options_)
    if (option->count() > 0 && which(traits)) names.push_back(option->get_name());
  return names;
}

std::string name_list(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size(); i++) {
    if (i > 0) list += i + 1 == names.size() ? " and " : ", ";
    list += names[i];
  }
  return list;
}

}  // namespace stackmapd
