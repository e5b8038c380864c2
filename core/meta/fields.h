// What a memory holds besides its vector (mnemo_memory_fields): a key, a
// namespace, tags, typed attributes and a payload. Strings other than the
// key and the payload are interned in the store's StringPool, so a record
// holds numbers and postings compare numbers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mnemo {

// The header's limits (mnemo.h), checked by the cabi before a write.
constexpr uint64_t kMaxKeyBytes = 1024;
constexpr uint64_t kMaxNameBytes = 1024;
constexpr uint32_t kMaxNamespaceDepth = 32;
constexpr uint32_t kMaxTags = 1024;
constexpr uint32_t kMaxAttributes = 256;
constexpr uint64_t kMaxPayloadBytes = uint64_t{16} << 20;

// Which fields a write sets (MNEMO_FIELD_*).
enum : uint32_t {
  kFieldKey = 1,
  kFieldNamespace = 2,
  kFieldTags = 4,
  kFieldAttributes = 8,
  kFieldPayload = 16,
  kFieldAll = 31
};

enum class ValueType : uint8_t { none = 0, i64 = 1, f64 = 2, boolean = 3, str = 4 };

// A value as written or compared: strings by their bytes.
struct ValueIn {
  ValueType type = ValueType::none;
  int64_t i = 0;  // i64, boolean (0 or 1)
  double d = 0;   // f64, finite
  std::string s;  // str
  bool operator==(const ValueIn& o) const { return type == o.type && i == o.i && d == o.d && s == o.s; }
};

// One memory's fields as a write gives them (checked, strings owned).
struct FieldsIn {
  uint32_t set = 0;  // kField* bits: the fields this write replaces
  std::string key;
  std::vector<std::string> ns;
  std::vector<std::string> tags;
  std::vector<std::pair<std::string, ValueIn>> attrs;
  std::string payload;
};

// A stored value: strings interned (s = pool id).
struct Value {
  ValueType type = ValueType::none;
  int64_t i = 0;
  double d = 0;
  uint32_t s = 0;
};

// One memory's stored fields; a memory without any has no record.
struct Record {
  std::string key;                                // empty: none
  uint32_t ns = 0;                                // NamespaceTable id; 0: none
  std::vector<uint32_t> tags;                     // pool ids, sorted, unique
  std::vector<std::pair<uint32_t, Value>> attrs;  // by name's pool id, sorted
  std::string payload;
  bool empty() const { return key.empty() && ns == 0 && tags.empty() && attrs.empty() && payload.empty(); }
};

}  // namespace mnemo
