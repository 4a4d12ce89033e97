// SPDX-License-Identifier: GPL-2.0
#include "daemon/bpf/attachments.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "daemon/sys/error.h"
#include "daemon/sys/preflight.h"
#include "stackmapd.skel.h"
#include "stackmapd/bpfloader_abi.h"

namespace stackmapd {

namespace {

uint64_t tracepoint_id(const Tracepoint& tp) {
  const std::string path = mount_tracefs_events() + "/" + tp.category + "/" + tp.name + "/id";
  std::ifstream in(path);
  uint64_t id = 0;
  if (!(in >> id))
    throw Error("cannot attach to tracepoint " + tp.str() + ": no " + path +
                ": check that it is listed in /sys/kernel/tracing/available_events");
  return id;
}

// One event on CPU 0 is enough: the program runs wherever the tracepoint fires.
UniqueFd open_tracepoint(const Tracepoint& tp, uint64_t id) {
  perf_event_attr attr = {};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = id;
  attr.sample_period = 1;
  UniqueFd fd = open_perf_event(&attr, 0);
  if (!fd)
    throw Error("cannot open tracepoint " + tp.str() + ": " + std::strerror(errno) +
                ": needs CAP_PERFMON (or root)");
  return fd;
}

// --pinned: what the cookie would carry, stored under `key` before the
// program is attached (bpf/bpfloader_maps.bpf.h).
void set_cookie(int cookies_fd, uint32_t key, uint64_t cookie, const std::string& what) {
  if (bpf_map_update_elem(cookies_fd, &key, &cookie, BPF_ANY) != 0)
    throw Error("cannot attach to " + what + ": cannot write the pinned cookies map (" +
                std::strerror(errno) + "): at most " + std::to_string(SMT_MAX_COOKIES) +
                " tracepoints, and the daemon needs write access to the pins");
}

}  // namespace

Attachments::Attachments(const BpfObject& object, const SessionConfig& config)
    : object_(object),
      events_(config.events),
      kprobe_fallback_(config.kprobe_fallback),
      profile_hz_(config.profile_hz),
      filter_cpu_(config.filter_cpu) {
  for (const auto& tp : events_) source_of(tp.str());
  // fentry has no multi-attach on this kernel: each function gets its own
  // copy of the object, sharing every map of the main one. A kprobe
  // function needs nothing loaded: the main object's program serves all.
  size_t skipped = 0;
  std::string first_error;
  for (const auto& fn : config.functions) {
    const auto source = static_cast<uint32_t>(sources_.size());
    Function f{fn.name, fn.required, fn.kprobe_because, source, {}, {}};
    if (!fn.kprobe()) {
      try {
        f.object = object_.load_function(fn.name, source);
      } catch (const Error& e) {
        if (!kprobe_fallback_ && fn.required) throw;
        if (!kprobe_fallback_) {
          if (skipped++ == 0) first_error = e.what();
          continue;
        }
        f.kprobe_because = e.what();
      }
    }
    functions_.push_back(std::move(f));
    sources_.push_back(fn.name);
  }
  if (skipped)
    spdlog::warn("skipped {} of {} functions matched by -f globs, e.g.: {}", skipped,
                 config.functions.size(), first_error);
  std::map<std::string, uint32_t> uprobe_sources;  // a USDT probe's sites share theirs
  for (const UprobeTarget& u : config.uprobes) {
    auto [it, added] = uprobe_sources.emplace(u.source, static_cast<uint32_t>(sources_.size()));
    if (added) sources_.push_back(u.source);
    uprobes_.push_back({u, it->second});
  }
  if (config.filter_pids.size() == 1) uprobe_pid_ = static_cast<int>(config.filter_pids.front());
  if (profile_hz_) {
    profile_source_ = static_cast<uint32_t>(sources_.size());
    sources_.push_back("profile");
  }
  if (object_.offcpu_prog() >= 0) {
    offcpu_source_ = static_cast<uint32_t>(sources_.size());
    sources_.push_back("offcpu");
  }
}

// Puts back the sources a failed attach added.
class Attachments::SourcesGuard {
 public:
  explicit SourcesGuard(Attachments& a)
      : a_(a), sources_(a.sources_.size()), tracepoints_(a.tracepoint_sources_) {}
  ~SourcesGuard() {
    if (committed_) return;
    a_.sources_.resize(sources_);
    a_.tracepoint_sources_ = std::move(tracepoints_);
  }
  void commit() { committed_ = true; }

 private:
  Attachments& a_;
  size_t sources_;
  std::map<std::string, uint32_t> tracepoints_;
  bool committed_ = false;
};

uint32_t Attachments::source_of(const std::string& name) {
  auto [it, added] = tracepoint_sources_.emplace(name, static_cast<uint32_t>(sources_.size()));
  if (added) sources_.push_back(name);
  return it->second;
}

Attachments::TracepointLink Attachments::attach_tracepoint(const Tracepoint& tp,
                                                           const TracepointLinks& a,
                                                           const TracepointLinks& b) {
  // The cookie tells the shared program which source fired, where its
  // weight is and how much of the raw record --trace copies.
  const uint64_t id = tracepoint_id(tp);
  const uint64_t cookie = SMT_COOKIE(source_of(tp.str()), tp.raw_len, tp.weight_field);
  const std::string what = "tracepoint " + tp.str();
  const std::vector<int>& progs = object_.tracepoint_slots();
  if (progs.empty())
    return {attach_perf_event(object_.tracepoint_prog(), open_tracepoint(tp, id), cookie, what)};
  uint32_t slot = 0;
  auto busy = [&](uint32_t s) {
    for (const auto* links : {&a, &b})
      for (const auto& [name, l] : *links)
        if (l.slot == s) return true;
    return false;
  };
  while (slot < progs.size() && busy(slot)) ++slot;
  if (slot == progs.size())
    throw Error("cannot attach to " + what + ": --pinned attaches at most " +
                std::to_string(progs.size()) + " tracepoints at once (the pinned copies " +
                LoaderPins::prog_pin(LoaderPins::tracepoint_section(0)) +
                "..): trace fewer, or use stackmapd's own object");
  set_cookie(object_.cookies_fd(), slot, cookie, what);
  return {attach_perf_event_ioctl(progs[slot], open_tracepoint(tp, id), what), slot};
}

std::vector<BpfLink> Attachments::attach_uprobes() const {
  std::vector<BpfLink> links;
  for (const Uprobe& u : uprobes_) {
    bpf_uprobe_opts opts = {};
    opts.sz = sizeof(opts);
    opts.ref_ctr_offset = u.target.ref_ctr_offset;  // USDT: the kernel counts the semaphore
    opts.bpf_cookie = SMT_COOKIE(u.source, 0, u.target.weight_field) |
                      (u.target.at_entry ? SMT_COOKIE_AT_ENTRY : 0);
    BpfLink link(bpf_program__attach_uprobe_opts(object_.uprobe_prog(), uprobe_pid_,
                                                 u.target.binary.c_str(), u.target.offset, &opts));
    if (!link)
      throw Error("cannot attach a uprobe to " + u.target.source + " (file offset " +
                  std::to_string(u.target.offset) + "): " + std::strerror(errno) +
                  ": needs root and a kernel with CONFIG_UPROBE_EVENTS");
    links.push_back(std::move(link));
  }
  return links;
}

PerfLink Attachments::attach_offcpu() const {
  if (object_.offcpu_prog() < 0) return {};
  const Tracepoint tp{"sched", "sched_switch", 0};
  return attach_perf_event(object_.offcpu_prog(), open_tracepoint(tp, tracepoint_id(tp)),
                           offcpu_source_, "--offcpu on sched:sched_switch");
}

std::vector<PerfLink> Attachments::attach_profile() const {
  std::vector<PerfLink> links;
  if (!profile_hz_) return links;
  perf_event_attr attr = {};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = profile_hz_;
  const bool pinned = object_.cookies_fd() >= 0;
  if (pinned)
    set_cookie(object_.cookies_fd(), SMT_PROFILE_COOKIE_KEY, profile_source_, "--profile");
  for (int cpu : online_cpus()) {
    if (filter_cpu_ != SMT_ANY_CPU && static_cast<uint32_t>(cpu) != filter_cpu_) continue;
    UniqueFd fd = open_perf_event(&attr, cpu);
    if (!fd)
      throw Error("cannot sample CPU " + std::to_string(cpu) + " at " +
                  std::to_string(profile_hz_) + " Hz: " + std::strerror(errno) +
                  (errno == EINVAL ? ": above kernel.perf_event_max_sample_rate?" : ""));
    const std::string what = "CPU " + std::to_string(cpu) + " sampling";
    links.push_back(
        pinned ? attach_perf_event_ioctl(object_.profile_prog(), std::move(fd), what)
               : attach_perf_event(object_.profile_prog(), std::move(fd), profile_source_, what));
  }
  return links;
}

BpfLink Attachments::attach_function(size_t i, std::string* kprobe_because,
                                     std::string* error) const {
  const Function& fn = functions_[i];
  *kprobe_because = fn.kprobe_because;
  if (fn.kprobe_because.empty()) {
    BpfLink link(bpf_program__attach_trace(fn.object->progs.stackmapd_fentry));
    if (link) return link;
    *error = "cannot trace function " + fn.name + " with fentry (" + std::strerror(errno) +
             "): it must not be marked notrace";
    if (!kprobe_fallback_) return {};
    *kprobe_because = *error;
  }
  LIBBPF_OPTS(bpf_kprobe_opts, opts, .bpf_cookie = SMT_COOKIE(fn.source, 0, 0));
  BpfLink link(bpf_program__attach_kprobe_opts(object_.kprobe_program(), fn.name.c_str(), &opts));
  if (!link)
    *error = "cannot trace function " + fn.name + " with a kprobe (" + std::strerror(errno) +
             "): it must exist and not be listed in /sys/kernel/debug/kprobes/blacklist";
  return link;
}

std::string Attachments::mechanism_line() const {
  size_t fentry = 0, kprobes = 0;
  const std::string* because = nullptr;
  for (const auto& fn : functions_) {
    if (!fn.link) continue;
    if (fn.kprobe_because.empty()) {
      ++fentry;
    } else {
      ++kprobes;
      if (!because) because = &fn.kprobe_because;
    }
  }
  auto count = [](size_t n) { return std::to_string(n) + (n == 1 ? " function" : " functions"); };
  if (!fentry && !kprobes) return "-f: no function attached";
  std::string line = "-f:";
  if (fentry) line += " fentry on " + count(fentry);
  if (fentry && kprobes) line += ",";
  if (kprobes) line += " kprobes on " + count(kprobes) + " (no fentry: " + *because + ")";
  return line;
}

void Attachments::attach() {
  if (attached_) return;
  // Everything into locals first: a throw closes what this call attached.
  SourcesGuard guard(*this);
  TracepointLinks tracepoints;
  for (const auto& tp : events_)
    if (!tracepoints.count(tp.str()))
      tracepoints.emplace(tp.str(), attach_tracepoint(tp, tracepoints, tracepoint_links_));
  std::vector<BpfLink> links(functions_.size());
  std::vector<std::string> kprobe_because(functions_.size());
  size_t skipped = 0;
  std::string first_error;
  for (size_t i = 0; i < functions_.size(); ++i) {
    std::string why;
    links[i] = attach_function(i, &kprobe_because[i], &why);
    if (links[i]) continue;
    if (functions_[i].required) throw Error(why);
    if (skipped++ == 0) first_error = why;
  }
  std::vector<BpfLink> uprobes = attach_uprobes();
  std::vector<PerfLink> profile = attach_profile();
  PerfLink offcpu = attach_offcpu();

  tracepoint_links_ = std::move(tracepoints);
  offcpu_link_ = std::move(offcpu);
  for (size_t i = 0; i < functions_.size(); ++i) {
    functions_[i].link = std::move(links[i]);
    functions_[i].kprobe_because = std::move(kprobe_because[i]);
  }
  profile_links_ = std::move(profile);
  uprobe_links_ = std::move(uprobes);
  attached_ = true;
  guard.commit();
  if (skipped)
    spdlog::warn("skipped {} of {} functions matched by -f globs, e.g.: {}", skipped,
                 functions_.size(), first_error);
  if (!functions_.empty() && !announced_) spdlog::info("{}", mechanism_line());
  announced_ = true;
}

void Attachments::reattach(const std::vector<Tracepoint>& events) {
  if (attached_) {
    SourcesGuard guard(*this);
    TracepointLinks next;
    for (const auto& tp : events)
      if (!tracepoint_links_.count(tp.str()) && !next.count(tp.str()))  // a throw closes only these
        next.emplace(tp.str(), attach_tracepoint(tp, tracepoint_links_, next));
    for (const auto& tp : events) {
      auto kept = tracepoint_links_.find(tp.str());
      if (kept != tracepoint_links_.end()) next.insert(tracepoint_links_.extract(kept));
    }
    std::swap(tracepoint_links_, next);  // `next` now holds the removed ones, closed here
    guard.commit();
  }
  events_ = events;
}

void Attachments::detach() {
  tracepoint_links_.clear();
  profile_links_.clear();
  offcpu_link_ = {};
  uprobe_links_.clear();
  for (auto& fn : functions_) fn.link.reset();
  attached_ = false;
}

}  // namespace stackmapd
