// SPDX-License-Identifier: GPL-2.0
// The OpenTelemetry profiles encoder (daemon/export/otlp.h), read back with
// the tests' own wire reader; tests/otlp_test.sh has protoc decode it with
// the schema, tests/otlp_push_test.sh pushes it to a receiver.
#include "daemon/export/otlp.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "daemon/export/otlp_protos.h"
#include "daemon/sys/error.h"
#include "tests/proto_reader.h"

namespace stackmapd {
namespace {

using testing::Field;
using testing::fields_of;
using testing::parse_message;
using testing::varints_of;

std::vector<std::vector<Field>> messages(const std::vector<Field>& m, uint32_t number) {
  std::vector<std::vector<Field>> out;
  for (const Field& f : fields_of(m, number)) out.push_back(parse_message(f.bytes));
  return out;
}

uint64_t one(const std::vector<Field>& m, uint32_t number) {
  auto v = varints_of(m, number);
  return v.empty() ? 0 : v.at(0);
}

// One request, decoded: its dictionary's tables, and per resource its
// attributes and its profiles' (type, unit, samples).
struct Request {
  std::string bytes;
  std::vector<Field> dict;
  std::vector<std::string> strings;
  std::vector<std::vector<Field>> locations, functions, stacks, attributes, mappings;
  struct Profile {
    std::string type, unit;
    std::vector<std::vector<Field>> samples;
    std::vector<Field> fields;
  };
  struct Resource {
    std::map<std::string, std::string> attributes;
    std::string scope;
    std::vector<Profile> profiles;
  };
  std::vector<Resource> resources;

  explicit Request(std::string b) : bytes(std::move(b)) {
    const std::vector<Field> req = parse_message(bytes);
    dict = parse_message(fields_of(req, otlp::kDictionary).at(0).bytes);
    for (const Field& f : fields_of(dict, otlp::kStringTable)) strings.emplace_back(f.bytes);
    locations = messages(dict, otlp::kLocationTable);
    functions = messages(dict, otlp::kFunctionTable);
    stacks = messages(dict, otlp::kStackTable);
    attributes = messages(dict, otlp::kAttributeTable);
    mappings = messages(dict, otlp::kMappingTable);
    for (const auto& rp : messages(req, otlp::kResourceProfiles)) {
      Resource r;
      for (const auto& kv : messages(messages(rp, otlp::kResource).at(0), otlp::kAttributes)) {
        const auto value = parse_message(fields_of(kv, otlp::kKeyValue).at(0).bytes);
        r.attributes[std::string(fields_of(kv, otlp::kKey).at(0).bytes)] =
            fields_of(value, otlp::kStringValue).empty()
                ? std::to_string(one(value, otlp::kIntValue))
                : std::string(fields_of(value, otlp::kStringValue).at(0).bytes);
      }
      const auto sp = messages(rp, otlp::kScopeProfiles).at(0);
      r.scope = fields_of(messages(sp, otlp::kScope).at(0), otlp::kName).at(0).bytes;
      for (const auto& p : messages(sp, otlp::kProfiles)) {
        const auto vt = messages(p, otlp::kSampleType).at(0);
        r.profiles.push_back({strings.at(one(vt, otlp::kTypeStrindex)),
                              strings.at(one(vt, otlp::kUnitStrindex)), messages(p, otlp::kSamples),
                              p});
      }
      resources.push_back(std::move(r));
    }
  }

  // A sample's stack as "name@address" per location, leaf first.
  std::vector<std::string> frames(const std::vector<Field>& sample) const {
    std::vector<std::string> out;
    for (uint64_t l :
         varints_of(stacks.at(one(sample, otlp::kStackIndex)), otlp::kLocationIndices)) {
      const auto& loc = locations.at(l);
      const auto lines = messages(loc, otlp::kLines);
      std::string name = lines.empty()
                             ? ""
                             : strings.at(one(functions.at(one(lines[0], otlp::kFunctionIndex)),
                                              otlp::kNameStrindex));
      char addr[24];
      snprintf(addr, sizeof(addr), "%llx",
               static_cast<unsigned long long>(one(loc, otlp::kAddress)));
      out.push_back(name + "@" + addr);
    }
    return out;
  }
  // A sample's attributes as "key=value".
  std::set<std::string> attrs(const std::vector<Field>& sample) const {
    std::set<std::string> out;
    for (uint64_t a : varints_of(sample, otlp::kSampleAttributeIndices)) {
      const auto& kv = attributes.at(a);
      const auto value = messages(kv, otlp::kValue).at(0);
      std::string v = fields_of(value, otlp::kStringValue).empty()
                          ? std::to_string(one(value, otlp::kIntValue))
                          : std::string(fields_of(value, otlp::kStringValue).at(0).bytes);
      out.insert(strings.at(one(kv, otlp::kKeyStrindex)) + "=" + v);
    }
    return out;
  }
};

KeyCount key(uint32_t pid, std::string comm, uint64_t count, std::string cgroup = "/") {
  KeyCount k;
  k.key.pid = pid;
  k.key.comm = std::move(comm);
  k.key.cgroup = std::move(cgroup);
  k.count = count;
  k.weight = count * 1000;
  return k;
}

// Two stacks sharing their outermost frame, split by pid and comm.
Snapshot two_stacks() {
  Snapshot snap;
  snap.kernel.build_id = "00112233445566778899aabbccddeeff00112233";
  snap.stacks.push_back({7, 5, {0xffffffff81000010, 0xffffffff81000100}, 5000});
  snap.stacks.push_back(
      {42, 2, {0xffffffff81000020, 0xffffffff81000100, 0xffffffffc0000000}, 2000});
  snap.keys = KeySpec::parse("pid,comm");
  snap.keys_requested = true;
  snap.stacks[0].by = {key(812, "app", 3), key(1, "init", 2)};
  snap.stacks[1].by = {key(812, "app", 2)};
  return snap;
}

std::vector<std::string> otlp_of(Snapshot snap, OtlpOptions opt = {}) {
  static const FunctionNames table{{0xffffffff81000010, {"schedule", ""}},
                                   {0xffffffff81000020, {"kmem_cache_alloc", ""}},
                                   {0xffffffff81000100, {"do_syscall_64", ""}}};
  intern_callstacks(snap);
  return encode_otlp(snap, FrameNames(snap, nullptr, &table), opt);
}

// The tests of the tables: one resource, the host's, for all samples.
OtlpOptions host_resources() {
  OtlpOptions opt;
  opt.resources = OtlpResources::host;
  return opt;
}

TEST(OtlpTest, EveryTableStartsWithItsZeroValue) {
  Request r(otlp_of(two_stacks()).at(0));
  EXPECT_EQ(r.strings.at(0), "");
  for (const auto* table : {&r.locations, &r.functions, &r.stacks, &r.attributes, &r.mappings})
    EXPECT_TRUE(table->at(0).empty());
  const auto links = messages(r.dict, otlp::kLinkTable);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(fields_of(links[0], otlp::kTraceId).at(0).bytes.size(), 16u);
  EXPECT_EQ(fields_of(links[0], otlp::kSpanId).at(0).bytes.size(), 8u);
}

TEST(OtlpTest, EachLocationAndStackOnce) {
  Request r(otlp_of(two_stacks(), host_resources()).at(0));
  EXPECT_EQ(r.locations.size(), 1u + 4u);  // 4 distinct frames
  EXPECT_EQ(r.stacks.size(), 1u + 2u);     // 2 callstacks, 3 samples
  EXPECT_EQ(r.functions.size(), 1u + 4u);  // the unresolved address is its own
  std::set<std::string> names(r.strings.begin(), r.strings.end());
  EXPECT_EQ(r.strings.size(), names.size());
  ASSERT_EQ(r.resources.size(), 1u);
  const auto& samples = r.resources[0].profiles.at(0).samples;
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(r.frames(samples[0]), (std::vector<std::string>{"schedule@ffffffff81000010",
                                                            "do_syscall_64@ffffffff81000100"}));
  EXPECT_EQ(one(samples[0], otlp::kStackIndex), one(samples[1], otlp::kStackIndex));
  EXPECT_EQ(r.frames(samples[2]),
            (std::vector<std::string>{"kmem_cache_alloc@ffffffff81000020",
                                      "do_syscall_64@ffffffff81000100",
                                      "0xffffffffc0000000@ffffffffc0000000"}));
  // The kernel's mapping: its build id an attribute, its range every ip.
  ASSERT_EQ(r.mappings.size(), 2u);
  const auto& m = r.mappings[1];
  EXPECT_EQ(r.strings.at(one(m, otlp::kFilenameStrindex)), "[kernel.kallsyms]");
  EXPECT_EQ(one(m, otlp::kMemoryStart), 0xffffffff81000010u);
  EXPECT_EQ(one(m, otlp::kMemoryLimit), 0xffffffffc0000001u);
  for (const auto& loc : std::vector(r.locations.begin() + 1, r.locations.end()))
    EXPECT_EQ(one(loc, otlp::kMappingIndex), 1u);
  const auto& build_id = r.attributes.at(one(m, otlp::kMappingAttributeIndices));
  EXPECT_EQ(r.strings.at(one(build_id, otlp::kKeyStrindex)), "process.executable.build_id.gnu");
}

TEST(OtlpTest, KeysAreSampleAttributesEachOnce) {
  Request r(otlp_of(two_stacks(), host_resources()).at(0));
  const auto& samples = r.resources.at(0).profiles.at(0).samples;
  EXPECT_EQ(r.attrs(samples[0]), (std::set<std::string>{"process.pid=812", "thread.name=app"}));
  EXPECT_EQ(r.attrs(samples[1]), (std::set<std::string>{"process.pid=1", "thread.name=init"}));
  EXPECT_EQ(r.attrs(samples[2]), r.attrs(samples[0]));
  // 4 (key, value) pairs, the build id and the frames' one type
  EXPECT_EQ(r.attributes.size(), 1u + 4u + 1u + 1u);
}

TEST(OtlpTest, CountsAndWeightsAreProfilesOfTheirUnits) {
  Snapshot snap = two_stacks();
  OtlpOptions opt = host_resources();
  opt.time_nanos = 1'700'000'000'000'000'000;
  opt.duration_nanos = 5'000'000'000;
  opt.host_name = "box";
  Request plain(otlp_of(snap, opt).at(0));
  ASSERT_EQ(plain.resources.at(0).profiles.size(), 1u);
  snap.weight_unit = "ns";
  Request r(otlp_of(snap, opt).at(0));
  const auto& profiles = r.resources.at(0).profiles;
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_EQ(profiles[0].type + "/" + profiles[0].unit, "events/count");
  EXPECT_EQ(profiles[1].type + "/" + profiles[1].unit, "off_cpu/nanoseconds");
  std::vector<uint64_t> counts, weights;
  for (const auto& s : profiles[0].samples) counts.push_back(one(s, otlp::kValues));
  for (const auto& s : profiles[1].samples) weights.push_back(one(s, otlp::kValues));
  EXPECT_EQ(counts, (std::vector<uint64_t>{3, 2, 2}));
  EXPECT_EQ(weights, (std::vector<uint64_t>{3000, 2000, 2000}));
  const auto time = fields_of(profiles[0].fields, otlp::kTimeUnixNano);
  ASSERT_EQ(time.size(), 1u);
  EXPECT_EQ(time[0].wire_type, 1u);  // fixed64
  EXPECT_EQ(time[0].value, 1'700'000'000'000'000'000u);
  EXPECT_EQ(one(profiles[0].fields, otlp::kDurationNano), 5'000'000'000u);
  EXPECT_EQ(r.resources[0].attributes, (std::map<std::string, std::string>{
                                           {"host.name", "box"}, {"service.name", "stackmapd"}}));
  EXPECT_EQ(r.resources[0].scope, "stackmapd");

  snap.weight_unit = "bytes_alloc";
  Request bytes(otlp_of(snap, opt).at(0));
  EXPECT_EQ(bytes.resources.at(0).profiles.at(1).type + "/" + bytes.resources[0].profiles[1].unit,
            "bytes_alloc/bytes");
}

TEST(OtlpTest, ProfileHzCountsSamplesWithTheirPeriod) {
  OtlpOptions opt;
  opt.profile_hz = 99;
  Request r(otlp_of(two_stacks(), opt).at(0));
  const auto& p = r.resources.at(0).profiles.at(0);
  EXPECT_EQ(p.type + "/" + p.unit, "samples/count");
  EXPECT_EQ(one(p.fields, otlp::kPeriod), 1000000000u / 99);
}

TEST(OtlpTest, ContainerIdsFromEveryLayout) {
  const std::string id(64, 'a');
  const std::string id2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  const std::string uid = "6f1c2f4e-8f7a-4b4c-9c52-1a2b3c4d5e6f";
  std::string uid_ = uid;
  std::replace(uid_.begin(), uid_.end(), '-', '_');
  const std::vector<std::pair<std::string, ContainerIdentity>> cases = {
      {"/docker/" + id, {id, ""}},
      {"/system.slice/docker-" + id2 + ".scope", {id2, ""}},
      {"/system.slice/cri-containerd-" + id + ".scope", {id, ""}},
      {"/kubepods/burstable/pod" + uid + "/" + id2, {id2, uid}},
      {"/kubepods/pod" + uid + "/" + id, {id, uid}},
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid_ +
           ".slice/cri-containerd-" + id + ".scope",
       {id, uid}},
      {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uid_ + ".slice/crio-" +
           id2 + ".scope",
       {id2, uid}},
      {"/kubepods.slice/kubepods-pod" + uid_ + ".slice/docker-" + id + ".scope", {id, uid}},
      // not a container's
      {"/", {}},
      {"/user.slice/user-1000.slice/session-2.scope", {}},
      {"/system.slice/docker.service", {}},
      {"/docker/" + id.substr(1), {}},                  // 63 digits
      {"/kubepods/burstable/pod" + uid, {}},            // the pod's own cgroup
      {"/system.slice/docker-" + id2 + "x.scope", {}},  // not hex
  };
  for (const auto& [path, want] : cases) {
    const ContainerIdentity got = container_of_cgroup(path);
    EXPECT_EQ(got.container_id, want.container_id) << path;
    EXPECT_EQ(got.pod_uid, want.pod_uid) << path;
  }
}

TEST(OtlpTest, EachContainerIsAResource) {
  const std::string id(64, 'b');
  const std::string uid = "6f1c2f4e-8f7a-4b4c-9c52-1a2b3c4d5e6f";
  Snapshot snap = two_stacks();
  snap.keys = KeySpec::parse("pid,cgroup");
  snap.stacks[0].by = {key(812, "", 3, "/docker/" + id), key(1, "", 2, "/init.scope")};
  snap.stacks[1].by = {key(900, "", 2, "/kubepods/pod" + uid + "/" + id)};
  Request r(otlp_of(snap, host_resources()).at(0));
  ASSERT_EQ(r.resources.size(), 3u);
  EXPECT_FALSE(r.resources[0].attributes.contains("container.id"));
  EXPECT_EQ(r.resources[0].profiles.at(0).samples.size(), 1u);
  EXPECT_EQ(r.resources[1].attributes.at("container.id"), id);
  EXPECT_FALSE(r.resources[1].attributes.contains("k8s.pod.uid"));
  EXPECT_EQ(r.resources[2].attributes.at("container.id"), id);
  EXPECT_EQ(r.resources[2].attributes.at("k8s.pod.uid"), uid);
  EXPECT_EQ(r.attrs(r.resources[2].profiles.at(0).samples.at(0)),
            (std::set<std::string>{"process.pid=900",
                                   "stackmapd.cgroup=/kubepods/pod" + uid + "/" + id}));
}

TEST(OtlpTest, EachProcessIsAResourceByDefaultWithItsPid) {
  Request r(otlp_of(two_stacks()).at(0));  // --by pid,comm
  ASSERT_EQ(r.resources.size(), 2u);
  EXPECT_EQ(r.resources[0].attributes,
            (std::map<std::string, std::string>{{"process.pid", "812"},
                                                {"process.executable.name", "app"}}));
  EXPECT_EQ(r.resources[1].attributes,
            (std::map<std::string, std::string>{{"process.pid", "1"},
                                                {"process.executable.name", "init"}}));
  const auto& app = r.resources[0].profiles.at(0).samples;
  ASSERT_EQ(app.size(), 2u);  // its two stacks
  for (const auto& s : app) EXPECT_TRUE(r.attrs(s).contains("process.pid=812"));
  // Exited processes' pairs, folded into their comm (pid 0): a resource by name alone.
  Snapshot folded = two_stacks();
  folded.stacks[0].by[1].key.pid = 0;
  const Request f(otlp_of(folded).at(0));
  ASSERT_EQ(f.resources.size(), 2u);
  EXPECT_EQ(f.resources[1].attributes,
            (std::map<std::string, std::string>{{"process.executable.name", "init"}}));
  // By comm alone, auto keeps the host's resource.
  Snapshot by_comm = two_stacks();
  by_comm.keys = KeySpec::parse("comm");
  EXPECT_EQ(Request(otlp_of(by_comm).at(0)).resources.size(), 1u);
  OtlpOptions process;
  process.resources = OtlpResources::process;
  EXPECT_EQ(Request(otlp_of(by_comm, process).at(0)).resources.size(), 2u);
}

TEST(OtlpTest, AServiceFromItsSystemdUnit) {
  EXPECT_EQ(service_of_unit("nginx.service"), "nginx");
  EXPECT_EQ(service_of_unit("session-2.scope"), "session-2.scope");
  EXPECT_EQ(service_of_unit(""), "");
  const std::pair<std::string, std::string> cases[] = {
      {"/system.slice/nginx.service", "nginx"},
      {"/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", "foo"},
      {"/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope", "user@1000"},
      {"/system.slice/docker-" + std::string(64, 'a') + ".scope", ""},
      {"/init.scope", ""},
      {"/", ""},
      {"", ""},
      {"/.service", ""},
  };
  for (const auto& [path, want] : cases) EXPECT_EQ(service_of_cgroup(path), want) << path;

  Snapshot snap = two_stacks();
  snap.keys = KeySpec::parse("pid,unit");
  snap.stacks[0].by[0].key.unit = "nginx.service";
  snap.stacks[1].by[0].key.unit = "nginx.service";
  Request r(otlp_of(snap).at(0));
  ASSERT_EQ(r.resources.size(), 2u);
  EXPECT_EQ(r.resources[0].attributes.at("service.name"), "nginx");
  // No unit: no service.name, which receivers default from the executable.
  EXPECT_FALSE(r.resources[1].attributes.contains("service.name"));

  snap.keys = KeySpec::parse("pid,cgroup");
  snap.stacks[0].by[0].key.cgroup = "/system.slice/cron.service";
  snap.stacks[1].by[0].key.cgroup = "/system.slice/cron.service";
  EXPECT_EQ(Request(otlp_of(snap).at(0)).resources.at(0).attributes.at("service.name"), "cron");
  EXPECT_THROW(parse_otlp_resources("services"), Error);
  EXPECT_EQ(parse_otlp_resources("host"), OtlpResources::host);
}

// Pyroscope's name of a profile (pkg/ingester/otlp/convert.go): the period
// type's, refused empty, or off_cpu for "off_cpu:nanoseconds" with no period.
TEST(OtlpTest, ProfilesHaveTheNamePyroscopeGivesThem) {
  const auto period = [](const Request& r, size_t profile) {
    const auto& p = r.resources.at(0).profiles.at(profile).fields;
    const auto pt = messages(p, otlp::kPeriodType);
    if (pt.empty()) return std::string("none");
    return r.strings.at(one(pt[0], otlp::kTypeStrindex)) + "/" +
           r.strings.at(one(pt[0], otlp::kUnitStrindex)) + " " +
           std::to_string(one(p, otlp::kPeriod));
  };
  Snapshot snap = two_stacks();
  snap.sources = {"sched:sched_switch"};
  EXPECT_EQ(period(Request(otlp_of(snap, host_resources()).at(0)), 0), "sched_switch/count 1");
  snap.sources = {"sched:sched_switch", "kmem:kmem_cache_alloc"};
  EXPECT_EQ(period(Request(otlp_of(snap, host_resources()).at(0)), 0), "events/count 1");
  snap.sources = {"u:/usr/bin/x y:main"};
  EXPECT_EQ(period(Request(otlp_of(snap, host_resources()).at(0)), 0), "main/count 1");
  snap.sources = {"offcpu"};
  snap.weight_unit = "ns";
  const Request offcpu(otlp_of(snap, host_resources()).at(0));
  EXPECT_EQ(period(offcpu, 0), "offcpu/count 1");
  EXPECT_EQ(period(offcpu, 1), "none");
  snap.sources = {"kmem:kmalloc"};
  snap.weight_unit = "bytes_alloc";
  EXPECT_EQ(period(Request(otlp_of(snap, host_resources()).at(0)), 1), "kmalloc/count 1");
}

TEST(OtlpTest, UserFramesInTheirBinarysMappingByFileOffset) {
  Snapshot snap = two_stacks();
  snap.keys = KeySpec{};
  snap.keys_requested = false;
  snap.user.enabled = true;
  snap.user.binaries = {{"/usr/bin/app", "aabbccddeeff00112233445566778899aabbccdd"}};
  UserStack app;
  app.frames.push_back({0x55550000a130, 0, 0x1130, 0x1130, {"inl+0x4", "three+0x10"}, "w.c:12"});
  app.frames.push_back({0x7ffff000, -1, 0, 0, {}, ""});
  snap.user.stacks[3] = app;
  KeyCount k;
  k.key.ustack = 3;
  k.count = k.weight = 5;
  snap.stacks[0].by = {k};
  Request r(otlp_of(snap).at(0));
  ASSERT_EQ(r.mappings.size(), 3u);  // zero, the kernel, /usr/bin/app
  std::map<std::string, size_t> mapping;
  for (size_t i = 1; i < r.mappings.size(); ++i)
    mapping[r.strings.at(one(r.mappings[i], otlp::kFilenameStrindex))] = i;
  const auto& app_mapping = r.mappings.at(mapping.at("/usr/bin/app"));
  EXPECT_EQ(one(app_mapping, otlp::kMemoryStart), 0u);
  EXPECT_EQ(one(app_mapping, otlp::kMemoryLimit), 0x1131u);
  const auto& build_id = r.attributes.at(one(app_mapping, otlp::kMappingAttributeIndices));
  EXPECT_EQ(fields_of(messages(build_id, otlp::kValue).at(0), otlp::kStringValue).at(0).bytes,
            "aabbccddeeff00112233445566778899aabbccdd");
  const auto& samples = r.resources.at(0).profiles.at(0).samples;
  EXPECT_EQ(r.frames(samples.at(0)),
            (std::vector<std::string>{"schedule@ffffffff81000010", "do_syscall_64@ffffffff81000100",
                                      "inl@1130", "@7ffff000"}));
  // The inlined function and the one it is inlined into: two lines, file:line on the first.
  const auto lines =
      messages(r.locations.at(varints_of(r.stacks.at(one(samples[0], otlp::kStackIndex)),
                                         otlp::kLocationIndices)
                                  .at(2)),
               otlp::kLines);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(one(lines[0], otlp::kLine), 12u);
  const auto& fn = r.functions.at(one(lines[0], otlp::kFunctionIndex));
  EXPECT_EQ(r.strings.at(one(fn, otlp::kFunctionFilenameStrindex)), "w.c");
}

// A snapshot past 4 MiB: requests within it, each complete in itself
// (every index within its own tables), no sample lost or repeated.
TEST(OtlpTest, SplitsAtFourMebibytes) {
  Snapshot snap;
  snap.keys = KeySpec::parse("pid");
  snap.keys_requested = true;
  constexpr uint32_t kStacks = 4000, kDepth = 32;
  uint64_t total = 0;
  for (uint32_t s = 0; s < kStacks; ++s) {
    StackRecord r{s, 3, {}, 3};
    for (uint32_t d = 0; d < kDepth; ++d) r.ips.push_back(0xffffffff80000000u + s * 0x1000u + d);
    r.by = {key(s, "", 2), key(s + 1, "", 1)};
    snap.stacks.push_back(r);
    total += 3;
  }
  const std::vector<std::string> requests = otlp_of(snap);
  ASSERT_GE(requests.size(), 2u);
  uint64_t seen = 0;
  std::set<uint64_t> leaves;
  for (const std::string& bytes : requests) {
    EXPECT_LE(bytes.size(), kOtlpMaxRequestBytes);
    Request r(bytes);
    // A resource per pid: the samples of all of them.
    for (const auto& res : r.resources)
      for (const auto& s : res.profiles.at(0).samples) {
        seen += one(s, otlp::kValues);
        const auto frames = r.frames(s);  // throws on an index out of its tables
        ASSERT_EQ(frames.size(), kDepth);
        leaves.insert(std::stoull(frames[0].substr(frames[0].find('@') + 1), nullptr, 16));
      }
  }
  EXPECT_EQ(seen, total);
  EXPECT_EQ(leaves.size(), kStacks);
  // The first request comes near the limit: it is split by size, not by a count.
  EXPECT_GT(requests[0].size(), kOtlpMaxRequestBytes * 3 / 4);
}

TEST(OtlpTest, ASmallLimitSplitsEveryFewSamples) {
  Snapshot snap = two_stacks();
  OtlpOptions opt;
  opt.max_request_bytes = 4096 + 1200;
  const auto requests = otlp_of(snap, opt);
  EXPECT_GE(requests.size(), 2u);
  for (const auto& bytes : requests) EXPECT_LE(bytes.size(), opt.max_request_bytes);
  EXPECT_EQ(otlp_of(Snapshot{}).size(), 0u);
}

}  // namespace
}  // namespace stackmapd
