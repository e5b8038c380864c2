#include "store_fields_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fm {

namespace {

bool is_number(const Value& v) { return v.index() <= 1; }

// Exact comparison of an int64 with a double (-1, 0, 1): through the
// double's integer part, which is exact below 2^63, then its fraction.
int compare_int_double(int64_t i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  const auto t = static_cast<int64_t>(d);  // toward zero, exact
  if (i != t) return i < t ? -1 : 1;
  const double frac = d - static_cast<double>(t);
  return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

// -1, 0, 1 for two numbers or two strings; 2 when the kinds do not
// compare (a number and a string, a bool and anything else); for two bools
// 0 when equal, else 1.
int compare(const Value& a, const Value& b) {
  if (is_number(a) && is_number(b)) {
    if (a.index() == 0 && b.index() == 0) {
      const int64_t x = std::get<0>(a), y = std::get<0>(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.index() == 1 && b.index() == 1) {
      const double x = std::get<1>(a), y = std::get<1>(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.index() == 0) return compare_int_double(std::get<0>(a), std::get<1>(b));
    return -compare_int_double(std::get<0>(b), std::get<1>(a));
  }
  if (a.index() != b.index()) return 2;
  if (a.index() == 2) return std::get<2>(a) == std::get<2>(b) ? 0 : 1;
  const int c = std::get<3>(a).compare(std::get<3>(b));
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

bool name_ok(const std::string& s) {
  return !s.empty() && s.size() <= MNEMO_MAX_NAME_BYTES && s.find('\0') == std::string::npos;
}

std::string quoted(const std::string& s) {
  std::string o = "'";
  for (unsigned char c : s) {
    if (c >= 32 && c < 127) {
      o += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    }
  }
  return o + "'";
}

}  // namespace

bool same_value(const Value& a, const Value& b) {
  if (a.index() != b.index()) return false;
  if (a.index() == 1) {
    const double x = std::get<1>(a), y = std::get<1>(b);
    return std::memcmp(&x, &y, 8) == 0;
  }
  return a == b;
}

std::string describe(const Value& v) {
  switch (v.index()) {
    case 0: return "INT " + std::to_string(std::get<0>(v));
    case 1: {
      char b[40];
      std::snprintf(b, sizeof b, "DOUBLE %.17g", std::get<1>(v));
      return b;
    }
    case 2: return std::get<2>(v) ? "BOOL 1" : "BOOL 0";
    default: return "STRING " + quoted(std::get<3>(v));
  }
}

uint32_t Fields::held() const {
  return (key.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_KEY)) |
         (ns.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_NAMESPACE)) |
         (tags.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_TAGS)) |
         (attrs.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_ATTRIBUTES)) |
         (payload.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_PAYLOAD));
}

bool Fields::operator==(const Fields& o) const {
  if (key != o.key || ns != o.ns || tags != o.tags || payload != o.payload || attrs.size() != o.attrs.size())
    return false;
  for (auto a = attrs.begin(), b = o.attrs.begin(); a != attrs.end(); ++a, ++b)
    if (a->first != b->first || !same_value(a->second, b->second)) return false;
  return true;
}

std::string describe(const Fields& f) {
  std::string s = "{";
  if (!f.key.empty()) s += " key " + quoted(f.key);
  if (!f.ns.empty()) {
    s += " ns";
    for (const auto& p : f.ns) s += " " + quoted(p);
  }
  if (!f.tags.empty()) {
    s += " tags";
    for (const auto& t : f.tags) s += " " + quoted(t);
  }
  for (const auto& [name, v] : f.attrs) s += " " + quoted(name) + "=" + describe(v);
  if (!f.payload.empty()) s += " payload of " + std::to_string(f.payload.size()) + " bytes";
  return s + " }";
}

void apply(Fields& f, const Write& w) {
  if (w.set & MNEMO_FIELD_KEY) f.key = w.key;
  if (w.set & MNEMO_FIELD_NAMESPACE) f.ns = w.ns;
  if (w.set & MNEMO_FIELD_TAGS) f.tags = std::set<std::string>(w.tags.begin(), w.tags.end());
  if (w.set & MNEMO_FIELD_ATTRIBUTES) {
    f.attrs.clear();
    for (const auto& [name, v] : w.attrs) f.attrs[name] = v;
  }
  if (w.set & MNEMO_FIELD_PAYLOAD) f.payload = w.payload;
}

bool acceptable(const Write& w) {
  if (w.set & ~uint32_t{MNEMO_FIELD_ALL}) return false;
  if ((w.set & MNEMO_FIELD_KEY) && (w.key.size() > MNEMO_MAX_KEY_BYTES || w.key.find('\0') != std::string::npos))
    return false;
  if (w.set & MNEMO_FIELD_NAMESPACE) {
    if (w.ns.size() > MNEMO_MAX_NAMESPACE_DEPTH) return false;
    for (const auto& p : w.ns)
      if (!name_ok(p)) return false;
  }
  if (w.set & MNEMO_FIELD_TAGS) {
    if (w.tags.size() > MNEMO_MAX_TAGS) return false;
    for (const auto& t : w.tags)
      if (!name_ok(t)) return false;
  }
  if (w.set & MNEMO_FIELD_ATTRIBUTES) {
    if (w.attrs.size() > MNEMO_MAX_ATTRIBUTES) return false;
    for (const auto& [name, v] : w.attrs) {
      if (!name_ok(name)) return false;
      if (v.index() == 1 && !std::isfinite(std::get<1>(v))) return false;
      if (v.index() == 3 &&
          (std::get<3>(v).size() > MNEMO_MAX_NAME_BYTES || std::get<3>(v).find('\0') != std::string::npos))
        return false;
    }
  }
  if ((w.set & MNEMO_FIELD_PAYLOAD) && w.payload.size() > MNEMO_MAX_PAYLOAD_BYTES) return false;
  return true;
}

mnemo_value c_value(const Value& v) {
  mnemo_value x;
  std::memset(&x, 0, sizeof x);
  switch (v.index()) {
    case 0: x.type = MNEMO_VALUE_INT, x.i = std::get<0>(v); break;
    case 1: x.type = MNEMO_VALUE_DOUBLE, x.d = std::get<1>(v); break;
    case 2: x.type = MNEMO_VALUE_BOOL, x.i = std::get<2>(v) ? 1 : 0; break;
    default: x.type = MNEMO_VALUE_STRING, x.s = std::get<3>(v).c_str(); break;
  }
  return x;
}

CWrites::CWrites(const std::vector<Write>& w) : w_(w) {
  for (const Write& x : w_) {
    Held& h = held_.emplace_back();
    for (const auto& p : x.ns) h.ns.push_back(p.c_str());
    for (const auto& t : x.tags) h.tags.push_back(t.c_str());
    for (const auto& [name, v] : x.attrs) {
      mnemo_attribute a;
      std::memset(&a, 0, sizeof a);
      a.name = name.c_str();
      a.value = c_value(v);
      h.attrs.push_back(a);
    }
    mnemo_memory_fields f = mnemo_memory_fields_default();
    f.set = x.set;
    f.key = x.key.empty() ? nullptr : x.key.c_str();
    f.namespace_parts = h.ns.data();
    f.namespace_depth = static_cast<uint32_t>(h.ns.size());
    f.tags = h.tags.data();
    f.tag_count = static_cast<uint32_t>(h.tags.size());
    f.attributes = h.attrs.data();
    f.attribute_count = static_cast<uint32_t>(h.attrs.size());
    f.payload = x.payload.empty() ? nullptr : x.payload.data();
    f.payload_bytes = x.payload.size();
    c_.push_back(f);
  }
}

int read_record(const mnemo_records* r, uint64_t i, uint64_t* id, Fields* out, std::string* why) {
  uint32_t found = 7;
  mnemo_memory_fields f = mnemo_memory_fields_default();
  double t = 0;
  float imp = 0;
  const mnemo_status st = mnemo_records_get(r, i, &found, id, &f, &t, &imp);
  if (st != MNEMO_OK) return *why = std::string("mnemo_records_get: ") + mnemo_last_error(), -1;
  if (found == 0) return 0;
  if (found != 1) return *why = "found is neither 0 nor 1", -1;
  Fields x;
  if (f.key) x.key = f.key;
  for (uint32_t p = 0; p < f.namespace_depth; ++p) x.ns.push_back(f.namespace_parts[p]);
  std::vector<std::string> tags;
  for (uint32_t g = 0; g < f.tag_count; ++g) tags.push_back(f.tags[g]);
  if (!std::is_sorted(tags.begin(), tags.end()) || std::adjacent_find(tags.begin(), tags.end()) != tags.end())
    return *why = "tags read back are not sorted and unique", -1;
  x.tags.insert(tags.begin(), tags.end());
  std::string last;
  for (uint32_t a = 0; a < f.attribute_count; ++a) {
    const mnemo_attribute& at = f.attributes[a];
    const std::string name = at.name;
    if (a > 0 && !(last < name)) return *why = "attributes read back are not sorted by name", -1;
    last = name;
    switch (at.value.type) {
      case MNEMO_VALUE_INT: x.attrs[name] = at.value.i; break;
      case MNEMO_VALUE_DOUBLE: x.attrs[name] = at.value.d; break;
      case MNEMO_VALUE_BOOL:
        if (at.value.i != 0 && at.value.i != 1) return *why = "a BOOL read back is not 0 or 1", -1;
        x.attrs[name] = at.value.i == 1;
        break;
      case MNEMO_VALUE_STRING: x.attrs[name] = std::string(at.value.s); break;
      default: return *why = "an attribute read back has an unknown type", -1;
    }
  }
  if (f.payload_bytes > 0) x.payload.assign(static_cast<const char*>(f.payload), f.payload_bytes);
  if (f.set != x.held()) return *why = "set names other fields than those read back", -1;
  *out = std::move(x);
  return 1;
}

std::map<uint64_t, const Write*> last_writes(const std::vector<uint64_t>& ids, const std::vector<Write>& w) {
  std::map<uint64_t, const Write*> last;
  for (size_t i = 0; i < w.size(); ++i) last[ids[i]] = &w[i];
  return last;
}

bool FieldsModel::key_conflict(const std::vector<uint64_t>& ids, const std::vector<Write>& w) const {
  std::map<std::string, uint64_t> claimed;
  for (const auto& [id, x] : last_writes(ids, w)) {
    if (!(x->set & MNEMO_FIELD_KEY) || x->key.empty()) continue;
    auto held = keys_.find(x->key);
    if (held != keys_.end() && held->second != id) return true;
    if (!claimed.emplace(x->key, id).second) return true;  // each id once here: another id claimed it
  }
  return false;
}

void FieldsModel::write(const std::vector<uint64_t>& ids, const std::vector<Write>& w) {
  for (const auto& [id, x] : last_writes(ids, w)) apply(f_[id], *x);
  // Keys are unique after a write the store took: read them off again.
  keys_.clear();
  for (auto it = f_.begin(); it != f_.end();) {
    if (it->second.empty()) {
      it = f_.erase(it);
      continue;
    }
    if (!it->second.key.empty()) keys_[it->second.key] = it->first;
    ++it;
  }
}

void FieldsModel::remove(uint64_t id) {
  auto it = f_.find(id);
  if (it == f_.end()) return;
  if (!it->second.key.empty()) keys_.erase(it->second.key);
  f_.erase(it);
}

const Fields* FieldsModel::get(uint64_t id) const {
  auto it = f_.find(id);
  return it == f_.end() ? nullptr : &it->second;
}

uint64_t FieldsModel::id_of_key(const std::string& key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? MNEMO_NO_ID : it->second;
}

// ---- filters ---------------------------------------------------------------

std::string describe(const Node& n) {
  auto strs = [&] {
    std::string s;
    for (const auto& x : n.strs) s += " " + quoted(x);
    return s;
  };
  auto kids = [&] {
    std::string s;
    for (const auto& k : n.kids) s += " " + describe(k);
    return s;
  };
  switch (n.kind) {
    case Node::ns: return std::string(n.op == MNEMO_OP_NAMESPACE_EQ ? "(ns_eq" : "(ns_under") + strs() + ")";
    case Node::tags: return std::string(n.op == MNEMO_OP_ANY ? "(any" : "(all") + strs() + ")";
    case Node::keys: return "(keys" + strs() + ")";
    case Node::ids: {
      std::string s = "(ids";
      for (uint64_t id : n.id_list) s += " " + std::to_string(id);
      return s + ")";
    }
    case Node::time:
    case Node::importance: {
      char b[96];
      std::snprintf(b, sizeof b, "(%s %.17g %.17g)", n.kind == Node::time ? "time" : "importance", n.lo, n.hi);
      return b;
    }
    case Node::attr: {
      std::string s = "(attr " + quoted(n.name) + " op " + std::to_string(n.op);
      for (const auto& v : n.values) s += " " + describe(v);
      return s + ")";
    }
    case Node::all_of: return "(and" + kids() + ")";
    case Node::any_of: return "(or" + kids() + ")";
    case Node::negate: return "(not" + kids() + ")";
  }
  return "?";
}

bool matches(const Node& n, const Memory& m) {
  static const Fields kNone;
  const Fields& f = m.fields ? *m.fields : kNone;
  switch (n.kind) {
    case Node::ns:
      if (f.ns.empty() || f.ns.size() < n.strs.size()) return false;
      if (n.op == MNEMO_OP_NAMESPACE_EQ) return f.ns == n.strs;
      return std::equal(n.strs.begin(), n.strs.end(), f.ns.begin());
    case Node::tags:
      if (n.op == MNEMO_OP_ANY)
        return std::any_of(n.strs.begin(), n.strs.end(), [&](const std::string& t) { return f.tags.count(t) > 0; });
      return std::all_of(n.strs.begin(), n.strs.end(), [&](const std::string& t) { return f.tags.count(t) > 0; });
    case Node::keys: return !f.key.empty() && std::find(n.strs.begin(), n.strs.end(), f.key) != n.strs.end();
    case Node::ids: return std::find(n.id_list.begin(), n.id_list.end(), m.id) != n.id_list.end();
    case Node::time: return m.time >= n.lo && m.time <= n.hi;
    case Node::importance: return m.importance >= n.lo && m.importance <= n.hi;
    case Node::all_of: return std::all_of(n.kids.begin(), n.kids.end(), [&](const Node& k) { return matches(k, m); });
    case Node::any_of: return std::any_of(n.kids.begin(), n.kids.end(), [&](const Node& k) { return matches(k, m); });
    case Node::negate: return !matches(n.kids.at(0), m);
    case Node::attr: {
      auto it = f.attrs.find(n.name);
      if (it == f.attrs.end()) return false;
      const Value& a = it->second;
      auto eq = [&](const Value& b) { return compare(a, b) == 0; };
      // Ordering: numbers with numbers, strings with strings; never bools.
      auto order = [&](const Value& b, int lo, int hi) {
        if (a.index() == 2 || b.index() == 2) return false;
        const int c = compare(a, b);
        return c != 2 && c >= lo && c <= hi;
      };
      switch (n.op) {
        case MNEMO_OP_EXISTS: return true;
        case MNEMO_OP_EQ: return eq(n.values[0]);
        case MNEMO_OP_NE: return !eq(n.values[0]);
        case MNEMO_OP_IN: return std::any_of(n.values.begin(), n.values.end(), eq);
        case MNEMO_OP_NOT_IN: return std::none_of(n.values.begin(), n.values.end(), eq);
        case MNEMO_OP_LT: return order(n.values[0], -1, -1);
        case MNEMO_OP_LE: return order(n.values[0], -1, 0);
        case MNEMO_OP_GT: return order(n.values[0], 1, 1);
        case MNEMO_OP_GE: return order(n.values[0], 0, 1);
        case MNEMO_OP_BETWEEN: return order(n.values[0], 0, 1) && order(n.values[1], -1, 0);
      }
      return false;
    }
  }
  return false;
}

bool valid(const Node& n) {
  switch (n.kind) {
    case Node::ns:
      return (n.op == MNEMO_OP_NAMESPACE_EQ || n.op == MNEMO_OP_NAMESPACE_UNDER) &&
             n.strs.size() <= MNEMO_MAX_NAMESPACE_DEPTH;
    case Node::tags: return n.op == MNEMO_OP_ANY || n.op == MNEMO_OP_ALL;
    case Node::keys:
    case Node::ids: return true;
    case Node::time:
    case Node::importance: return !std::isnan(n.lo) && !std::isnan(n.hi);
    case Node::all_of:
    case Node::any_of: return std::all_of(n.kids.begin(), n.kids.end(), [](const Node& k) { return valid(k); });
    case Node::negate: return n.kids.size() == 1 && valid(n.kids[0]);
    case Node::attr: {
      if (n.name.empty()) return false;
      for (const auto& v : n.values) {
        if (v.index() == 1 && !std::isfinite(std::get<1>(v))) return false;
        if (v.index() == 3 && std::get<3>(v).size() > MNEMO_MAX_NAME_BYTES) return false;
      }
      const size_t c = n.values.size();
      switch (n.op) {
        case MNEMO_OP_EQ:
        case MNEMO_OP_NE: return c == 1;
        case MNEMO_OP_LT:
        case MNEMO_OP_LE:
        case MNEMO_OP_GT:
        case MNEMO_OP_GE: return c == 1 && n.values[0].index() != 2;
        case MNEMO_OP_IN:
        case MNEMO_OP_NOT_IN: return true;
        case MNEMO_OP_BETWEEN:
          return c == 2 && ((is_number(n.values[0]) && is_number(n.values[1])) ||
                            (n.values[0].index() == 3 && n.values[1].index() == 3));
        case MNEMO_OP_EXISTS: return c == 0;
        default: return false;
      }
    }
  }
  return false;
}

mnemo_status build(mnemo_filter* f, const Node& n, uint32_t* node) {
  std::vector<const char*> strs;
  for (const auto& s : n.strs) strs.push_back(s.c_str());
  switch (n.kind) {
    case Node::ns: return mnemo_filter_namespace(f, n.op, strs.data(), static_cast<uint32_t>(strs.size()), node);
    case Node::tags: return mnemo_filter_tags(f, n.op, strs.data(), static_cast<uint32_t>(strs.size()), node);
    case Node::keys: return mnemo_filter_keys(f, strs.data(), strs.size(), node);
    case Node::ids: {
      // The ids in 16-byte aligned memory.
      std::vector<uint64_t> ids(n.id_list.size() + 2);
      uint64_t* p = ids.data();
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0) ++p;
      std::copy(n.id_list.begin(), n.id_list.end(), p);
      return mnemo_filter_ids(f, p, n.id_list.size(), node);
    }
    case Node::time: return mnemo_filter_time(f, n.lo, n.hi, node);
    case Node::importance: return mnemo_filter_importance(f, n.lo, n.hi, node);
    case Node::attr: {
      std::vector<mnemo_value> vals;
      for (const auto& v : n.values) vals.push_back(c_value(v));
      return mnemo_filter_attribute(f, n.name.c_str(), n.op, vals.data(), static_cast<uint32_t>(vals.size()), node);
    }
    case Node::all_of:
    case Node::any_of:
    case Node::negate: {
      std::vector<uint32_t> kids;
      for (const auto& k : n.kids) {
        uint32_t c = 0;
        const mnemo_status st = build(f, k, &c);
        if (st != MNEMO_OK) return st;
        kids.push_back(c);
      }
      if (n.kind == Node::negate) return mnemo_filter_not(f, kids.at(0), node);
      const auto count = static_cast<uint32_t>(kids.size());
      return n.kind == Node::all_of ? mnemo_filter_and(f, kids.data(), count, node)
                                    : mnemo_filter_or(f, kids.data(), count, node);
    }
  }
  return MNEMO_E_INTERNAL;
}

}  // namespace fm
