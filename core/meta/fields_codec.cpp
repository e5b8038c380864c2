#include "fields_codec.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace mnemo {

namespace {

void put32(std::string& o, uint32_t v) { o.append(reinterpret_cast<const char*>(&v), 4); }
void put64(std::string& o, uint64_t v) { o.append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string& o, const std::string& s) {
  put64(o, s.size());
  o += s;
}

struct Reader {
  const unsigned char* d;
  uint64_t size;
  uint64_t& at;
  void need(uint64_t n) const {
    if (n > size - at) fail(Code::corrupt, "a fields record ends before its contents");
  }
  uint32_t u32() {
    need(4);
    uint32_t v;
    std::memcpy(&v, d + at, 4);
    at += 4;
    return v;
  }
  uint64_t u64() {
    need(8);
    uint64_t v;
    std::memcpy(&v, d + at, 8);
    at += 8;
    return v;
  }
  std::string str(uint64_t limit) {
    const uint64_t n = u64();
    if (n > limit) fail(Code::corrupt, "a fields record holds a string past the limits");
    need(n);
    std::string s(reinterpret_cast<const char*>(d + at), n);
    at += n;
    return s;
  }
};

}  // namespace

void encode_fields(const FieldsIn& f, std::string& o) {
  put32(o, f.set);
  put_str(o, f.key);
  put32(o, static_cast<uint32_t>(f.ns.size()));
  for (const auto& p : f.ns) put_str(o, p);
  put32(o, static_cast<uint32_t>(f.tags.size()));
  for (const auto& t : f.tags) put_str(o, t);
  put32(o, static_cast<uint32_t>(f.attrs.size()));
  for (const auto& [name, v] : f.attrs) {
    put_str(o, name);
    put32(o, static_cast<uint32_t>(v.type));
    if (v.type == ValueType::str)
      put_str(o, v.s);
    else if (v.type == ValueType::f64) {
      uint64_t b;
      std::memcpy(&b, &v.d, 8);
      put64(o, b);
    } else {
      put64(o, static_cast<uint64_t>(v.i));
    }
  }
  put_str(o, f.payload);
}

FieldsIn decode_fields(const unsigned char* data, uint64_t size, uint64_t& at) {
  Reader r{data, size, at};
  FieldsIn f;
  f.set = r.u32();
  f.key = r.str(kMaxKeyBytes);
  uint32_t n = r.u32();
  if (n > kMaxNamespaceDepth) fail(Code::corrupt, "a fields record's namespace is too deep");
  for (uint32_t i = 0; i < n; ++i) f.ns.push_back(r.str(kMaxNameBytes));
  n = r.u32();
  if (n > kMaxTags) fail(Code::corrupt, "a fields record holds too many tags");
  for (uint32_t i = 0; i < n; ++i) f.tags.push_back(r.str(kMaxNameBytes));
  n = r.u32();
  if (n > kMaxAttributes) fail(Code::corrupt, "a fields record holds too many attributes");
  for (uint32_t i = 0; i < n; ++i) {
    std::string name = r.str(kMaxNameBytes);
    ValueIn v;
    const uint32_t t = r.u32();
    if (t < 1 || t > 4) fail(Code::corrupt, "a fields record holds an unknown value type");
    v.type = static_cast<ValueType>(t);
    if (v.type == ValueType::str) {
      v.s = r.str(kMaxNameBytes);
    } else {
      const uint64_t b = r.u64();
      if (v.type == ValueType::f64)
        std::memcpy(&v.d, &b, 8);
      else
        v.i = static_cast<int64_t>(b);
    }
    f.attrs.emplace_back(std::move(name), std::move(v));
  }
  f.payload = r.str(kMaxPayloadBytes);
  check_fields(f, "a journaled or saved memory", true);
  return f;
}

void check_fields(const FieldsIn& f, const std::string& where, bool corrupt) {
  auto bad = [&](const std::string& what) {
    fail(corrupt ? Code::corrupt : Code::invalid_argument, where + ": " + what);
  };
  if (f.set & ~uint32_t{kFieldAll}) bad("set holds bits other than MNEMO_FIELD_*");
  if (f.key.size() > kMaxKeyBytes) bad("the key is longer than MNEMO_MAX_KEY_BYTES");
  // No write can give a NUL byte (C strings): a record holding one is damaged.
  if (f.key.find('\0') != std::string::npos) bad("the key holds a NUL byte");
  if (f.ns.size() > kMaxNamespaceDepth) bad("the namespace is deeper than MNEMO_MAX_NAMESPACE_DEPTH");
  if (f.tags.size() > kMaxTags) bad("more tags than MNEMO_MAX_TAGS");
  if (f.attrs.size() > kMaxAttributes) bad("more attributes than MNEMO_MAX_ATTRIBUTES");
  if (f.payload.size() > kMaxPayloadBytes) bad("the payload is larger than MNEMO_MAX_PAYLOAD_BYTES");
  auto name_ok = [&](const std::string& s, const char* what) {
    if (s.empty()) bad(std::string(what) + " is empty");
    if (s.size() > kMaxNameBytes) bad(std::string(what) + " is longer than MNEMO_MAX_NAME_BYTES");
    if (s.find('\0') != std::string::npos) bad(std::string(what) + " holds a NUL byte");
  };
  for (const auto& p : f.ns) name_ok(p, "a namespace part");
  for (const auto& t : f.tags) name_ok(t, "a tag");
  for (const auto& [name, v] : f.attrs) {
    name_ok(name, "an attribute name");
    switch (v.type) {
      case ValueType::i64: break;
      case ValueType::f64:
        if (!std::isfinite(v.d)) bad("attribute '" + name + "' is a DOUBLE that is NaN or infinite");
        break;
      case ValueType::boolean:
        if (v.i != 0 && v.i != 1) bad("attribute '" + name + "' is a BOOL that is not 0 or 1");
        break;
      case ValueType::str:
        if (v.s.size() > kMaxNameBytes) bad("attribute '" + name + "' is a string longer than MNEMO_MAX_NAME_BYTES");
        if (v.s.find('\0') != std::string::npos) bad("attribute '" + name + "' is a string holding a NUL byte");
        break;
      default: bad("attribute '" + name + "' has an unknown value type");
    }
  }
}

bool fields_match_set(const FieldsIn& f) {
  const uint32_t held = (f.key.empty() ? 0u : uint32_t{kFieldKey}) | (f.ns.empty() ? 0u : uint32_t{kFieldNamespace}) |
                        (f.tags.empty() ? 0u : uint32_t{kFieldTags}) |
                        (f.attrs.empty() ? 0u : uint32_t{kFieldAttributes}) |
                        (f.payload.empty() ? 0u : uint32_t{kFieldPayload});
  return f.set == held;
}

}  // namespace mnemo
