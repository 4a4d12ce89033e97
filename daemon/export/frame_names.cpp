// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/frame_names.h"

#include "daemon/export/exports.h"
#include "daemon/symbols/kallsyms.h"

namespace stackmapd {

FrameNames::FrameNames(const Snapshot& snap, const Kallsyms* ksyms, const FunctionNames* names)
    : snap_(snap), kernel_(snap.frames.size()) {
  callstacks(snap);  // interned, or this would name nothing
  for (size_t id = 0; id < snap.frames.size(); ++id) {
    const Frame& f = snap.frames[id];
    if (f.user) continue;
    Kernel& k = kernel_[id];
    kernel_ids_.emplace(f.addr, static_cast<uint32_t>(id));
    if (ksyms) {
      if (auto m = ksyms->lookup(f.addr)) k.fn = {std::string(m->name), std::string(m->module)};
      k.text = ksyms->format(f.addr);
    } else if (auto it = names ? names->find(f.addr) : FunctionNames::const_iterator{};
               names && it != names->end()) {
      k.fn = it->second;
      k.text = k.fn.module.empty() ? k.fn.name : k.fn.name + " [" + k.fn.module + "]";
    } else {
      k.text = symbolize(f.addr, nullptr);
    }
  }
}

std::vector<std::string> FrameNames::text(uint32_t frame) const {
  if (snap_.frames[frame].user) return user_frame_names(snap_.user, user(frame), true);
  return {kernel_[frame].text};
}

std::vector<std::string> FrameNames::flame(uint32_t frame) const {
  if (snap_.frames[frame].user) return user_frame_names(snap_.user, user(frame), false);
  const Kernel& k = kernel_[frame];
  return {k.fn.name.empty() ? k.text : flame_frame_name(k.fn.name, k.fn.module)};
}

std::string FrameNames::function(uint32_t frame) const {
  const Kernel& k = kernel_[frame];
  if (k.fn.name.empty()) return "";
  return k.fn.module.empty() ? k.fn.name : k.fn.name + " [" + k.fn.module + "]";
}

std::string FrameNames::kernel_text(uint64_t ip) const {
  auto it = kernel_ids_.find(ip);
  return it == kernel_ids_.end() ? symbolize(ip, nullptr) : kernel_[it->second].text;
}

const UserFrame& FrameNames::user(uint32_t frame) const {
  const Frame& f = snap_.frames[frame];
  return snap_.user.stacks.at(f.ustack).frames[f.index];
}

std::string flame_frame_name(std::string_view name, std::string_view module) {
  std::string out(name);
  if (!module.empty()) {
    out += "_[";
    out += module;
    out += ']';
  }
  return out;
}

}  // namespace stackmapd
