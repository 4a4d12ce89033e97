// SPDX-License-Identifier: GPL-2.0
#include "daemon/export/exports.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

#include "daemon/export/flamegraph.h"
#include "daemon/export/fsmb.h"
#include "daemon/symbols/kallsyms.h"
#include "daemon/sys/error.h"

namespace stackmapd {

namespace {

using nlohmann::json;

std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

void stat_line(std::string& out, const char* name, const std::string& value) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%-11s ", (std::string(name) + ":").c_str());
  out += buf;
  out += value;
  out += '\n';
}

json stack_json(const StackRecord& s, const Kallsyms* ksyms) {
  json ips = json::array(), syms = json::array();
  for (uint64_t ip : s.ips) {
    ips.push_back(hex(ip));
    syms.push_back(symbolize(ip, ksyms));
  }
  return json{{"stack_id", s.stack_id},
              {"ref_count", s.ref_count},
              {"depth", s.ips.size()},
              {"ips", ips},
              {"symbols", syms}};
}

const char* counter_name(int c) {
  switch (c) {
    case SMC_HITS: return "hits";
    case SMC_INSERTS: return "inserts";
    case SMC_DROP_POOL_FULL: return "drop_pool_full";
    case SMC_DROP_PROBE_LIMIT: return "drop_probe_limit";
    case SMC_DROP_BUSY: return "drop_busy";
    case SMC_DROP_STACK_ERROR: return "drop_stack_error";
    case SMC_DROP_NO_KERNEL_STACK: return "drop_no_kernel_stack";
    case SMC_DROP_RINGBUF_FULL: return "drop_ringbuf_full";
    case SMC_DROP_RESETTING: return "drop_resetting";
    case SMC_DROP_NESTED: return "drop_nested";
  }
  return "unknown";
}

// The lines after the per-epoch counters, in stat and JSON alike.
std::vector<std::pair<const char*, uint64_t>> extra_stats(const TableStats& st) {
  return {{"resets", st.resets},
          {"events_total", st.events_total},
          {"verify_ok", st.verify_ok},
          {"verify_mismatch", st.verify_mismatch},
          {"stale_records", st.stale_records},
          {"bad_records", st.bad_records}};
}

}  // namespace

std::string symbolize(uint64_t ip, const Kallsyms* ksyms) {
  return ksyms ? ksyms->format(ip) : hex(ip);
}

std::string format_stack_map(const std::vector<StackRecord>& stacks, const Kallsyms* ksyms) {
  std::string out;
  for (const auto& s : stacks) {
    out += "stack_id " + std::to_string(s.stack_id) + " [ref " + std::to_string(s.ref_count) +
           ", depth " + std::to_string(s.ips.size()) + "]\n";
    for (size_t i = 0; i < s.ips.size(); ++i)
      out += "  [" + std::to_string(i) + "] " + symbolize(s.ips[i], ksyms) + "\n";
    out += '\n';
  }
  return out;
}

std::string format_stat(const TableStats& st) {
  std::string out;
  // The RFC's five lines first, in its layout: scripts grep them.
  stat_line(out, "entries", std::to_string(st.entries) + " / " + std::to_string(st.pool_size));
  stat_line(out, "table_size", std::to_string(st.table_size));
  stat_line(out, "hits", std::to_string(st.get(SMC_HITS)));
  stat_line(out, "drops", std::to_string(st.drops()));
  // Like the RFC, no rate line where no event gave it a value.
  if (auto rate = st.hit_rate_percent()) stat_line(out, "hit_rate", std::to_string(*rate) + "%");
  if (auto rate = st.reuse_rate_percent())
    stat_line(out, "reuse_rate", std::to_string(*rate) + "%");
  stat_line(out, "events", std::to_string(st.events()));
  for (int c = SMC_INSERTS; c < SMC_NR; ++c)
    stat_line(out, counter_name(c), std::to_string(st.counters[c]));
  stat_line(out, "pool_full", st.pool_full() ? "yes" : "no");
  for (const auto& [name, value] : extra_stats(st)) stat_line(out, name, std::to_string(value));
  return out;
}

std::string format_stacks_json(const std::vector<StackRecord>& stacks, const Kallsyms* ksyms) {
  json arr = json::array();
  for (const auto& s : stacks) arr.push_back(stack_json(s, ksyms));
  return arr.dump(2) + "\n";
}

std::string format_json(const Snapshot& snap, const Kallsyms* ksyms) {
  const TableStats& st = snap.stats;
  // Rates are null without events (the stat file then has no line): present, so a reader
  // can tell "no events yet" from a writer that lacks the field.
  auto rate = [](std::optional<uint64_t> r) { return r ? json(*r) : json(nullptr); };
  json stats{{"entries", st.entries},
             {"max_entries", st.pool_size},
             {"table_size", st.table_size},
             {"hits", st.get(SMC_HITS)},
             {"drops", st.drops()},
             {"hit_rate", rate(st.hit_rate_percent())},
             {"reuse_rate", rate(st.reuse_rate_percent())},
             {"pool_full", st.pool_full()}};
  stats["events"] = st.events();
  for (int c = SMC_INSERTS; c < SMC_NR; ++c) stats[counter_name(c)] = st.counters[c];
  for (const auto& [name, value] : extra_stats(st)) stats[name] = value;
  json stacks = json::array();
  for (const auto& s : snap.stacks) stacks.push_back(stack_json(s, ksyms));
  json doc{{"bits", snap.bits},
           {"hash_seed", snap.hash_seed},
           {"table_size", st.table_size},
           {"stats", stats},
           {"stacks", stacks}};
  if (!snap.kernel.release.empty())
    doc["kernel"] = {{"release", snap.kernel.release},
                     {"build_id", snap.kernel.build_id},
                     {"text", hex(snap.kernel.text_address)}};
  return doc.dump(2) + "\n";
}

std::string format_top(const std::vector<StackRecord>& stacks, size_t n, const Kallsyms* ksyms) {
  std::vector<const StackRecord*> order;
  uint64_t total = 0;
  for (const auto& s : stacks) {
    order.push_back(&s);
    total += s.ref_count;
  }
  n = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [](const StackRecord* a, const StackRecord* b) {
                      return a->ref_count != b->ref_count ? a->ref_count > b->ref_count
                                                          : a->stack_id < b->stack_id;
                    });
  std::string out = std::to_string(total) + " events, " + std::to_string(stacks.size()) +
                    " unique stacks; top " + std::to_string(n) + ":\n";
  for (size_t i = 0; i < n; ++i) {
    const StackRecord& s = *order[i];
    char head[160];
    snprintf(head, sizeof(head), "\n#%zu stack_id %u: %llu events (%.2f%%), depth %zu\n", i + 1,
             s.stack_id, static_cast<unsigned long long>(s.ref_count),
             total ? 100.0 * static_cast<double>(s.ref_count) / static_cast<double>(total) : 0.0,
             s.ips.size());
    out += head;
    for (uint64_t ip : s.ips) out += "    " + symbolize(ip, ksyms) + "\n";
  }
  return out;
}

void prepare_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error("cannot create output directory " + dir + ": " + ec.message() +
                ": choose a writable --output directory");
  std::string probe = dir + "/.stackmapd-write-test-XXXXXX";
  int fd = mkstemp(probe.data());
  if (fd < 0)
    throw Error("output directory " + dir + " is not writable: " + std::strerror(errno) +
                ": choose a writable --output directory");
  close(fd);
  unlink(probe.c_str());
}

void write_file_atomic(const std::string& path, const std::string& content, mode_t mode,
                       gid_t group) {
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw Error("cannot create a file beside " + path + ": " + std::strerror(errno));
  auto fail = [&](const char* what) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    throw Error(std::string("cannot ") + what + " " + path + ": " + std::strerror(err) +
                ": check free space and permissions");
  };
  if (fchmod(fd, mode) != 0) fail("set the mode of");
  if (group != kNoGroup && fchown(fd, static_cast<uid_t>(-1), group) != 0) fail("set the group of");
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) fail("sync");
  if (close(fd) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw Error("cannot write " + path + ": " + std::strerror(err));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw Error("cannot replace " + path + ": " + std::strerror(err));
  }
}

void write_flame_outputs(const std::vector<SymbolizedStack>& stacks, const std::string& folded,
                         const std::string& svg, const std::string& title, std::ostream& out) {
  if (folded == "-") out << format_folded(stacks);
  else if (!folded.empty()) write_file_atomic(folded, format_folded(stacks), 0640);
  if (!svg.empty()) {
    FlameGraphOptions opt;
    opt.title = title;
    write_file_atomic(svg, render_flamegraph_svg(stacks, opt), 0640);
  }
}

void check_writable_parent(const std::string& path, const char* option) {
  if (path.empty() || path == "-") return;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (access(parent.c_str(), W_OK) != 0)
    throw Error(std::string(option) + " " + path + ": cannot write in " + parent.string() + ": " +
                std::strerror(errno));
}

void write_exports(const std::string& dir, const Snapshot& snap, const Kallsyms* ksyms,
                   gid_t group) {
  constexpr mode_t kPrivate = 0640;
  write_file_atomic(dir + "/stack_map_bin", fsmb_encode(snap.stacks), kPrivate, group);
  write_file_atomic(dir + "/stack_map.json", format_json(snap, ksyms), kPrivate, group);
  write_file_atomic(dir + "/stack_map", format_stack_map(snap.stacks, ksyms), kPrivate, group);
  write_file_atomic(dir + "/stack_map_stat", format_stat(snap.stats), kPrivate, group);
  if (!snap.kernel.release.empty())
    write_file_atomic(dir + "/stack_map.kernel", snap.kernel.to_text(), kPrivate, group);
}

}  // namespace stackmapd
