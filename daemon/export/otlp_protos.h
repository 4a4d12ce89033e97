// SPDX-License-Identifier: GPL-2.0
// The field numbers of OpenTelemetry's protos that --otlp and the push write
// (daemon/export/otlp.h), each checked against the .proto its comment names
// (github.com/open-telemetry/opentelemetry-proto, opentelemetry/proto/...),
// at ac2c4b5 (2026-08-18): the profiles signal's v1development schema with
// the shared ProfilesDictionary and its stack_table. A number here is the
// format: a wrong one is dropped as unknown by a receiver without a word.
// tests/otlp/opentelemetry-proto holds those files, which the tests decode with.
#pragma once

#include <cstdint>

namespace stackmapd::otlp {

// collector/profiles/v1development/profiles_service.proto (ExportProfilesServiceRequest);
// profiles/v1development/profiles.proto's ProfilesData has the same two
// fields: a --otlp file is both.
enum ExportProfilesServiceRequest : uint32_t { kResourceProfiles = 1, kDictionary = 2 };

// profiles/v1development/profiles.proto (ProfilesDictionary)
enum ProfilesDictionary : uint32_t {
  kMappingTable = 1,
  kLocationTable = 2,
  kFunctionTable = 3,
  kLinkTable = 4,
  kStringTable = 5,
  kAttributeTable = 6,
  kStackTable = 7,
};
// profiles/v1development/profiles.proto (ResourceProfiles)
enum ResourceProfiles : uint32_t { kResource = 1, kScopeProfiles = 2, kResourceSchemaUrl = 3 };
// profiles/v1development/profiles.proto (ScopeProfiles)
enum ScopeProfiles : uint32_t { kScope = 1, kProfiles = 2, kScopeSchemaUrl = 3 };
// profiles/v1development/profiles.proto (Profile)
enum Profile : uint32_t {
  kSampleType = 1,
  kSamples = 2,
  kTimeUnixNano = 3,  // fixed64
  kDurationNano = 4,
  kPeriodType = 5,
  kPeriod = 6,
};
// profiles/v1development/profiles.proto (Link)
enum Link : uint32_t { kTraceId = 1, kSpanId = 2 };
// profiles/v1development/profiles.proto (ValueType)
enum ValueType : uint32_t { kTypeStrindex = 1, kUnitStrindex = 2 };
// profiles/v1development/profiles.proto (Sample)
enum Sample : uint32_t { kStackIndex = 1, kSampleAttributeIndices = 2, kValues = 4 };
// profiles/v1development/profiles.proto (Mapping)
enum Mapping : uint32_t {
  kMemoryStart = 1,
  kMemoryLimit = 2,
  kFileOffset = 3,
  kFilenameStrindex = 4,
  kMappingAttributeIndices = 5,
};
// profiles/v1development/profiles.proto (Stack)
enum Stack : uint32_t { kLocationIndices = 1 };
// profiles/v1development/profiles.proto (Location)
enum Location : uint32_t {
  kMappingIndex = 1,
  kAddress = 2,
  kLines = 3,
  kLocationAttributeIndices = 4
};
// profiles/v1development/profiles.proto (Line)
enum Line : uint32_t { kFunctionIndex = 1, kLine = 2 };
// profiles/v1development/profiles.proto (Function)
enum Function : uint32_t {
  kNameStrindex = 1,
  kSystemNameStrindex = 2,
  kFunctionFilenameStrindex = 3
};
// profiles/v1development/profiles.proto (KeyValueAndUnit)
enum KeyValueAndUnit : uint32_t { kKeyStrindex = 1, kValue = 2 };

// common/v1/common.proto (AnyValue)
enum AnyValue : uint32_t { kStringValue = 1, kBoolValue = 2, kIntValue = 3 };
// common/v1/common.proto (KeyValue)
enum KeyValue : uint32_t { kKey = 1, kKeyValue = 2 };
// common/v1/common.proto (InstrumentationScope)
enum InstrumentationScope : uint32_t { kName = 1, kVersion = 2 };
// resource/v1/resource.proto (Resource)
enum Resource : uint32_t { kAttributes = 1 };

}  // namespace stackmapd::otlp
