#include "fields_image.h"

#include <cmath>
#include <cstring>

namespace fz {

namespace {

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_str(std::string& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b += s;
}

struct Reader {
  const std::string& b;
  uint64_t end;
  uint64_t& at;
  std::string* why;
  bool ok = true;
  template <class T>
  T get() {
    T v{};
    if (!ok || end - at < sizeof v) return ok = false, *why = "fields: short", v;
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str(uint64_t limit) {
    const uint64_t n = get<uint64_t>();
    if (!ok) return {};
    if (n > limit || n > end - at) return ok = false, *why = "fields: string length", std::string();
    std::string s = b.substr(at, n);
    at += n;
    return s;
  }
};

bool name_ok(const std::string& s) { return !s.empty() && s.find('\0') == std::string::npos; }

}  // namespace

void encode_fields(const fm::Write& w, std::string& o) {
  put<uint32_t>(o, w.set);
  put_str(o, w.key);
  put<uint32_t>(o, static_cast<uint32_t>(w.ns.size()));
  for (const auto& p : w.ns) put_str(o, p);
  put<uint32_t>(o, static_cast<uint32_t>(w.tags.size()));
  for (const auto& t : w.tags) put_str(o, t);
  put<uint32_t>(o, static_cast<uint32_t>(w.attrs.size()));
  for (const auto& [name, v] : w.attrs) {
    put_str(o, name);
    put<uint32_t>(o, static_cast<uint32_t>(v.index() + 1));  // INT 1, DOUBLE 2, BOOL 3, STRING 4
    switch (v.index()) {
      case 0: put<int64_t>(o, std::get<0>(v)); break;
      case 1: put<double>(o, std::get<1>(v)); break;
      case 2: put<int64_t>(o, std::get<2>(v) ? 1 : 0); break;
      default: put_str(o, std::get<3>(v)); break;
    }
  }
  put_str(o, w.payload);
}

bool decode_fields(const std::string& b, uint64_t end, uint64_t& at, fm::Write* out, std::string* why) {
  Reader r{b, end, at, why};
  fm::Write w;
  w.set = r.get<uint32_t>();
  w.key = r.str(MNEMO_MAX_KEY_BYTES);
  uint32_t n = r.get<uint32_t>();
  if (!r.ok) return false;
  if (n > MNEMO_MAX_NAMESPACE_DEPTH) return *why = "fields: namespace depth", false;
  for (uint32_t i = 0; i < n && r.ok; ++i) w.ns.push_back(r.str(MNEMO_MAX_NAME_BYTES));
  n = r.get<uint32_t>();
  if (!r.ok) return false;
  if (n > MNEMO_MAX_TAGS) return *why = "fields: tag count", false;
  for (uint32_t i = 0; i < n && r.ok; ++i) w.tags.push_back(r.str(MNEMO_MAX_NAME_BYTES));
  n = r.get<uint32_t>();
  if (!r.ok) return false;
  if (n > MNEMO_MAX_ATTRIBUTES) return *why = "fields: attribute count", false;
  for (uint32_t i = 0; i < n && r.ok; ++i) {
    std::string name = r.str(MNEMO_MAX_NAME_BYTES);
    const uint32_t type = r.get<uint32_t>();
    if (!r.ok) return false;
    fm::Value v;
    switch (type) {
      case 1: v = r.get<int64_t>(); break;
      case 2: {
        const double d = r.get<double>();
        if (r.ok && !std::isfinite(d)) return *why = "fields: a DOUBLE not finite", false;
        v = d;
        break;
      }
      case 3: {
        const int64_t x = r.get<int64_t>();
        if (r.ok && x != 0 && x != 1) return *why = "fields: a BOOL not 0 or 1", false;
        v = x == 1;
        break;
      }
      case 4: {
        std::string s = r.str(MNEMO_MAX_NAME_BYTES);
        if (s.find('\0') != std::string::npos) return *why = "fields: NUL in a string value", false;
        v = std::move(s);
        break;
      }
      default: return *why = "fields: value type", false;
    }
    if (!name_ok(name)) return *why = "fields: attribute name", false;
    w.attrs.emplace_back(std::move(name), std::move(v));
  }
  w.payload = r.str(MNEMO_MAX_PAYLOAD_BYTES);
  if (!r.ok) return false;
  if (w.set & ~uint32_t{MNEMO_FIELD_ALL}) return *why = "fields: set bits", false;
  if (w.key.find('\0') != std::string::npos) return *why = "fields: NUL in the key", false;
  for (const auto& p : w.ns)
    if (!name_ok(p)) return *why = "fields: namespace part", false;
  for (const auto& t : w.tags)
    if (!name_ok(t)) return *why = "fields: tag", false;
  *out = std::move(w);
  return true;
}

// ---- inputs drawn for the harnesses ------------------------------------------

namespace {

const std::vector<std::string>& key_words() {
  static const std::vector<std::string> v = {"k0", "k1", "k2", "k3", "k4", "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", "k 5"};
  return v;
}
const std::vector<std::string>& tag_words() {
  static const std::vector<std::string> v = {"red", "green", "blue", "\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "a"};
  return v;
}
const std::vector<std::string>& ns_words() {
  static const std::vector<std::string> v = {"users", "1", "2", "episodic", "\xc3\xbc"};
  return v;
}
const std::vector<std::string>& attr_names() {
  static const std::vector<std::string> v = {"n", "x", "s", "b", "m"};
  return v;
}

const std::string& pick(FuzzedDataProvider& fdp, const std::vector<std::string>& v) {
  return v[fdp.ConsumeIntegralInRange<size_t>(0, v.size() - 1)];
}

// A name the header refuses: empty, or one byte past MNEMO_MAX_NAME_BYTES.
std::string bad_name(FuzzedDataProvider& fdp) {
  return fdp.ConsumeBool() ? std::string() : std::string(MNEMO_MAX_NAME_BYTES + 1, 'n');
}

}  // namespace

fm::Value random_value(FuzzedDataProvider& fdp, bool hostile) {
  static const int64_t ints[] = {
      -3, -1, 0, 1, 2, 3, INT64_MIN, INT64_MAX, (int64_t{1} << 53) + 1, int64_t{1} << 53, -(int64_t{1} << 62)};
  static const double reals[] = {-1.5,
                                 -0.0,
                                 0.0,
                                 0.5,
                                 1.0,
                                 2.5,
                                 9007199254740992.0,
                                 9007199254740994.0,
                                 9223372036854775808.0,
                                 -9223372036854775808.0,
                                 1e300,
                                 -4.9e-324};
  static const char* const strs[] = {"a", "b", "", "\xc3\xa9", "zz", "B"};
  switch (fdp.ConsumeIntegralInRange<int>(0, hostile ? 4 : 3)) {
    case 0: return ints[fdp.ConsumeIntegralInRange<size_t>(0, sizeof ints / sizeof ints[0] - 1)];
    case 1: return reals[fdp.ConsumeIntegralInRange<size_t>(0, sizeof reals / sizeof reals[0] - 1)];
    case 2: return fdp.ConsumeBool();
    case 3: return std::string(strs[fdp.ConsumeIntegralInRange<size_t>(0, sizeof strs / sizeof strs[0] - 1)]);
    default: {
      static const double odd[] = {std::nan(""), HUGE_VAL, -HUGE_VAL};
      return odd[fdp.ConsumeIntegralInRange<size_t>(0, 2)];
    }
  }
}

fm::Write random_write(FuzzedDataProvider& fdp, bool hostile) {
  fm::Write w;
  w.set = fdp.ConsumeIntegralInRange<uint32_t>(0, MNEMO_FIELD_ALL);
  const bool bad = hostile && fdp.ConsumeIntegralInRange<int>(0, 9) == 0;
  const int bad_at = bad ? fdp.ConsumeIntegralInRange<int>(0, 4) : -1;
  if ((w.set & MNEMO_FIELD_KEY) && fdp.ConsumeIntegralInRange<int>(0, 4))
    w.key = bad_at == 0 ? std::string(MNEMO_MAX_KEY_BYTES + 1, 'k') : pick(fdp, key_words());
  if (w.set & MNEMO_FIELD_NAMESPACE) {
    const size_t depth = bad_at == 1 ? MNEMO_MAX_NAMESPACE_DEPTH + 1 : fdp.ConsumeIntegralInRange<size_t>(0, 3);
    for (size_t i = 0; i < depth; ++i) w.ns.push_back(pick(fdp, ns_words()));
    if (bad_at == 1 && fdp.ConsumeBool()) w.ns.assign(1, bad_name(fdp));
  }
  if (w.set & MNEMO_FIELD_TAGS) {
    const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 4);
    for (size_t i = 0; i < n; ++i) w.tags.push_back(pick(fdp, tag_words()));
    if (bad_at == 2) w.tags.push_back(bad_name(fdp));
    // The most tags a memory may hold, now and then.
    if (fdp.ConsumeIntegralInRange<int>(0, 49) == 0)
      for (uint32_t i = 0; i < MNEMO_MAX_TAGS + (bad_at == 2 ? 1u : 0u) - n; ++i)
        w.tags.push_back("t" + std::to_string(i));
  }
  if (w.set & MNEMO_FIELD_ATTRIBUTES) {
    const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 4);
    for (size_t i = 0; i < n; ++i) w.attrs.emplace_back(pick(fdp, attr_names()), random_value(fdp, bad_at == 3));
    if (bad_at == 3) w.attrs.emplace_back(bad_name(fdp), fm::Value(int64_t{1}));
  }
  if (w.set & MNEMO_FIELD_PAYLOAD) {
    w.payload = fdp.ConsumeBytesAsString(fdp.ConsumeIntegralInRange<size_t>(0, 24));
    if (fdp.ConsumeIntegralInRange<int>(0, 99) == 0) w.payload.assign(size_t{1} << 17, 'p');
  }
  if (bad_at == 4) w.set |= 32;  // a bit no field has
  return w;
}

fm::Node random_filter(FuzzedDataProvider& fdp, const std::vector<std::string>& keys, const std::vector<uint64_t>& ids,
                       bool hostile, int depth) {
  fm::Node n;
  const int pick_kind = fdp.ConsumeIntegralInRange<int>(0, depth >= 3 ? 7 : 10);
  switch (pick_kind) {
    case 0: {
      n.kind = fm::Node::ns;
      n.op = fdp.ConsumeBool() ? MNEMO_OP_NAMESPACE_EQ : MNEMO_OP_NAMESPACE_UNDER;
      const size_t d = fdp.ConsumeIntegralInRange<size_t>(0, 3);
      for (size_t i = 0; i < d; ++i) n.strs.push_back(pick(fdp, ns_words()));
      break;
    }
    case 1: {
      n.kind = fm::Node::tags;
      n.op = fdp.ConsumeBool() ? MNEMO_OP_ANY : MNEMO_OP_ALL;
      const size_t c = fdp.ConsumeIntegralInRange<size_t>(0, 3);
      for (size_t i = 0; i < c; ++i) n.strs.push_back(pick(fdp, tag_words()));
      break;
    }
    case 2:
    case 3: {
      n.kind = fm::Node::attr;
      n.name = pick(fdp, attr_names());
      n.op = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_OP_EQ, MNEMO_OP_EXISTS);
      const size_t c = n.op == MNEMO_OP_EXISTS    ? 0
                       : n.op == MNEMO_OP_BETWEEN ? 2
                       : n.op >= MNEMO_OP_IN      ? fdp.ConsumeIntegralInRange<size_t>(0, 3)
                                                  : 1;
      for (size_t i = 0; i < c; ++i) n.values.push_back(random_value(fdp, hostile));
      // Mostly operands the builder takes: no bool to order by, BETWEEN of
      // two numbers or two strings.
      if (!hostile || fdp.ConsumeIntegralInRange<int>(0, 3)) {
        for (auto& v : n.values)
          if ((n.op >= MNEMO_OP_LT && n.op <= MNEMO_OP_GE) || n.op == MNEMO_OP_BETWEEN)
            if (v.index() == 2) v = int64_t{1};
        if (n.op == MNEMO_OP_BETWEEN && (n.values[0].index() == 3) != (n.values[1].index() == 3))
          n.values[1] = n.values[0];
      }
      if (hostile && fdp.ConsumeIntegralInRange<int>(0, 19) == 0) n.name.clear();
      if (hostile && fdp.ConsumeIntegralInRange<int>(0, 19) == 0) n.op = fdp.ConsumeIntegral<int32_t>();
      break;
    }
    case 4:
      n.kind = fm::Node::keys;
      for (int i = fdp.ConsumeIntegralInRange<int>(0, 3); i > 0; --i)
        n.strs.push_back(!keys.empty() && fdp.ConsumeBool()
                             ? keys[fdp.ConsumeIntegralInRange<size_t>(0, keys.size() - 1)]
                             : pick(fdp, key_words()));
      break;
    case 5:
      n.kind = fm::Node::ids;
      for (int i = fdp.ConsumeIntegralInRange<int>(0, 3); i > 0; --i)
        n.id_list.push_back(!ids.empty() && fdp.ConsumeBool()
                                ? ids[fdp.ConsumeIntegralInRange<size_t>(0, ids.size() - 1)]
                                : fdp.ConsumeIntegral<uint64_t>());
      break;
    case 6:
    case 7: {
      n.kind = pick_kind == 6 ? fm::Node::time : fm::Node::importance;
      static const double b[] = {-HUGE_VAL, -1.0, 0.0, 1.0, 1.7e9, HUGE_VAL};
      n.lo = b[fdp.ConsumeIntegralInRange<size_t>(0, 5)];
      n.hi = b[fdp.ConsumeIntegralInRange<size_t>(0, 5)];
      if (hostile && fdp.ConsumeIntegralInRange<int>(0, 19) == 0) n.lo = std::nan("");
      break;
    }
    default: {
      n.kind = pick_kind == 8 ? fm::Node::all_of : pick_kind == 9 ? fm::Node::any_of : fm::Node::negate;
      const int c = n.kind == fm::Node::negate ? 1 : fdp.ConsumeIntegralInRange<int>(0, 3);
      for (int i = 0; i < c; ++i) n.kids.push_back(random_filter(fdp, keys, ids, hostile, depth + 1));
      break;
    }
  }
  return n;
}

}  // namespace fz
