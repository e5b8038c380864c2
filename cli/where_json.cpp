// The dictionary form of a filter (--where-json), as the Python frameworks
// write it (mem0, LangChain, Chroma):
//   {"user_id": "u1"}                          equality (an implicit AND of the entries)
//   {"year": {"$gte": 2020, "$lt": 2030}}      $eq $ne $gt $gte $lt $lte $in $nin $between $exists
//   {"$and": [...]}, {"$or": [...]}, {"$not": {...}}
//   {"$tags": {"$any": [...]}} / {"$all": [...]} / "tag" / [...] (any)
//   {"$namespace": {"$under": "users/42"}} / {"$eq": ["users", "42"]} / "users/42" / "users/*"
//   {"$key": "k"} / {"$key": {"$in": [...]}}, {"$id": 5} / {"$id": {"$in": [...]}}
//   {"$time": {"$gte": t0, "$lt": t1}}, {"$importance": {"$gt": 0.5}}
#include <cmath>
#include <nlohmann/json.hpp>

#include "json_text.h"
#include "where_parse.h"

namespace cli {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw WhereError(0, "at " + (path.empty() ? std::string("the top") : path) + ": " + why);
}

WhereValue value_of(const json& j, const std::string& path) {
  WhereValue v;
  if (j.is_boolean()) {
    v.type = MNEMO_VALUE_BOOL;
    v.i = j.get<bool>() ? 1 : 0;
  } else if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) bad(path, std::to_string(u) + " is beyond the 64-bit integers");
    v.type = MNEMO_VALUE_INT;
    v.i = static_cast<int64_t>(u);
  } else if (j.is_number_integer()) {
    v.type = MNEMO_VALUE_INT;
    v.i = j.get<int64_t>();
  } else if (j.is_number_float()) {
    v.type = MNEMO_VALUE_DOUBLE;
    v.d = j.get<double>();
  } else if (j.is_string()) {
    v.type = MNEMO_VALUE_STRING;
    v.s = j.get<std::string>();
  } else {
    bad(path, json_kind(j) + " is not a value (a number, a string, true or false)");
  }
  return v;
}

std::vector<WhereValue> values_of(const json& j, const std::string& path) {
  if (!j.is_array()) bad(path, "expected a list of values");
  std::vector<WhereValue> out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(value_of(j[i], path + "[" + std::to_string(i) + "]"));
  return out;
}

std::string string_of(const json& j, const std::string& path) {
  if (!j.is_string()) bad(path, "expected a string");
  return j.get<std::string>();
}

std::vector<std::string> strings_of(const json& j, const std::string& path) {
  if (j.is_string()) return {j.get<std::string>()};
  if (!j.is_array()) bad(path, "expected a string or a list of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(string_of(j[i], path + "[" + std::to_string(i) + "]"));
  return out;
}

WhereNode group(WhereNode::Kind kind, std::vector<WhereNode> kids) {
  if (kind == WhereNode::kAnd && kids.size() == 1) return std::move(kids[0]);
  WhereNode n;
  n.kind = kind;
  n.kids = std::move(kids);
  return n;
}

WhereNode negate(WhereNode k) {
  WhereNode n;
  n.kind = WhereNode::kNot;
  n.kids.push_back(std::move(k));
  return n;
}

WhereNode object(const json& j, const std::string& path);

WhereNode attribute(const std::string& name, const json& j, const std::string& path) {
  WhereNode base;
  base.kind = WhereNode::kAttribute;
  base.name = name;
  if (name.empty()) bad(path, "an attribute name is empty");
  if (j.is_array()) bad(path, "a list is not a value: for one of several write {\"$in\": [...]}");
  if (!j.is_object()) {
    base.op = MNEMO_OP_EQ;
    base.values.push_back(value_of(j, path));
    return base;
  }
  if (j.empty()) bad(path, "an empty object: expected operators such as {\"$gte\": 2020}");
  std::vector<WhereNode> parts;
  for (const auto& [op, v] : j.items()) {
    const std::string at = path + "." + op;
    WhereNode n = base;
    if (op == "$eq" || op == "$ne" || op == "$gt" || op == "$gte" || op == "$lt" || op == "$lte") {
      n.op = op == "$eq"    ? MNEMO_OP_EQ
             : op == "$ne"  ? MNEMO_OP_NE
             : op == "$gt"  ? MNEMO_OP_GT
             : op == "$gte" ? MNEMO_OP_GE
             : op == "$lt"  ? MNEMO_OP_LT
                            : MNEMO_OP_LE;
      n.values.push_back(value_of(v, at));
      if (n.op != MNEMO_OP_EQ && n.op != MNEMO_OP_NE && n.values[0].type == MNEMO_VALUE_BOOL)
        bad(at, "booleans are not ordered (they compare only with $eq, $ne, $in and $nin)");
    } else if (op == "$in" || op == "$nin") {
      n.op = op == "$in" ? MNEMO_OP_IN : MNEMO_OP_NOT_IN;
      n.values = values_of(v, at);
    } else if (op == "$between") {
      n.op = MNEMO_OP_BETWEEN;
      n.values = values_of(v, at);
      if (n.values.size() != 2) bad(at, "expected [low, high]");
    } else if (op == "$exists") {
      if (!v.is_boolean()) bad(at, "expected true or false");
      n.op = MNEMO_OP_EXISTS;
      if (!v.get<bool>()) n = negate(std::move(n));
    } else {
      bad(at, "unknown operator \"" + op + "\" (use $eq $ne $gt $gte $lt $lte $in $nin $between $exists)");
    }
    parts.push_back(std::move(n));
  }
  return group(WhereNode::kAnd, std::move(parts));
}

// "a/b/c" (a trailing "/*" or "*" alone: under) or ["a", "b"].
WhereNode namespace_of(const json& j, const std::string& path, int32_t op) {
  WhereNode n;
  n.kind = WhereNode::kNamespace;
  n.op = op;
  if (j.is_array()) {
    n.strs = strings_of(j, path);
    return n;
  }
  std::string p = string_of(j, path);
  if (p == "*") {
    n.op = MNEMO_OP_NAMESPACE_UNDER;
    return n;
  }
  if (p.size() >= 2 && p.compare(p.size() - 2, 2, "/*") == 0) {
    n.op = MNEMO_OP_NAMESPACE_UNDER;
    p.resize(p.size() - 2);
  }
  size_t start = 0;
  while (true) {
    const size_t slash = p.find('/', start);
    n.strs.push_back(p.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (n.strs.back().empty()) bad(path, "an empty namespace part in \"" + j.get<std::string>() + "\"");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return n;
}

WhereNode tags_of(const json& j, const std::string& path) {
  WhereNode n;
  n.kind = WhereNode::kTags;
  n.op = MNEMO_OP_ANY;
  if (!j.is_object()) {
    n.strs = strings_of(j, path);
    return n;
  }
  std::vector<WhereNode> parts;
  for (const auto& [op, v] : j.items()) {
    if (op != "$any" && op != "$all") bad(path + "." + op, "unknown operator \"" + op + "\" (use $any or $all)");
    WhereNode t = n;
    t.op = op == "$any" ? MNEMO_OP_ANY : MNEMO_OP_ALL;
    t.strs = strings_of(v, path + "." + op);
    parts.push_back(std::move(t));
  }
  if (parts.empty()) bad(path, "an empty object: expected {\"$any\": [...]} or {\"$all\": [...]}");
  return group(WhereNode::kAnd, std::move(parts));
}

// {"$in": [...]}, {"$eq": x}, a list (any of them) or one.
template <class One>
void members(const json& j, const std::string& path, One one) {
  if (j.is_object()) {
    if (j.size() != 1 || (!j.contains("$in") && !j.contains("$eq")))
      bad(path, "expected {\"$in\": [...]}, {\"$eq\": ...}, a list or one value");
    const auto it = j.begin();
    members(it.value(), path + "." + it.key(), one);
    return;
  }
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) one(j[i], path + "[" + std::to_string(i) + "]");
    return;
  }
  one(j, path);
}

WhereNode range_of(const json& j, const std::string& path, WhereNode::Kind kind) {
  WhereNode n;
  n.kind = kind;
  n.lo = -INFINITY;
  n.hi = INFINITY;
  if (!j.is_object() || j.empty()) bad(path, "expected bounds such as {\"$gte\": 0, \"$lt\": 10}");
  for (const auto& [op, v] : j.items()) {
    const std::string at = path + "." + op;
    if (!v.is_number()) bad(at, "expected a number");
    const double x = v.get<double>();
    if (op == "$gte" || op == "$eq") n.lo = std::fmax(n.lo, x);
    if (op == "$lte" || op == "$eq") n.hi = std::fmin(n.hi, x);
    // Strict bounds as the next double inward: the same set of values.
    if (op == "$gt") n.lo = std::fmax(n.lo, std::nextafter(x, INFINITY));
    if (op == "$lt") n.hi = std::fmin(n.hi, std::nextafter(x, -INFINITY));
    if (op != "$gte" && op != "$gt" && op != "$lte" && op != "$lt" && op != "$eq")
      bad(at, "unknown operator \"" + op + "\" (use $gt $gte $lt $lte $eq)");
  }
  return n;
}

WhereNode object(const json& j, const std::string& path) {
  if (!j.is_object()) bad(path, "expected an object, found " + json_kind(j));
  std::vector<WhereNode> parts;
  for (const auto& [k, v] : j.items()) {
    const std::string at = path.empty() ? k : path + "." + k;
    if (k == "$and" || k == "$or") {
      if (!v.is_array()) bad(at, "expected a list of objects");
      std::vector<WhereNode> kids;
      for (size_t i = 0; i < v.size(); ++i) kids.push_back(object(v[i], at + "[" + std::to_string(i) + "]"));
      WhereNode g;
      g.kind = k == "$and" ? WhereNode::kAnd : WhereNode::kOr;
      g.kids = std::move(kids);
      parts.push_back(std::move(g));
    } else if (k == "$not") {
      parts.push_back(negate(object(v, at)));
    } else if (k == "$tags") {
      parts.push_back(tags_of(v, at));
    } else if (k == "$namespace") {
      if (v.is_object()) {
        if (v.size() != 1 || (!v.contains("$eq") && !v.contains("$under")))
          bad(at, "expected {\"$eq\": ...} or {\"$under\": ...}");
        const bool under = v.contains("$under");
        parts.push_back(namespace_of(v.begin().value(), at + (under ? ".$under" : ".$eq"),
                                     under ? MNEMO_OP_NAMESPACE_UNDER : MNEMO_OP_NAMESPACE_EQ));
      } else {
        parts.push_back(namespace_of(v, at, MNEMO_OP_NAMESPACE_EQ));
      }
    } else if (k == "$key" || k == "$keys") {
      WhereNode n;
      n.kind = WhereNode::kKeys;
      members(v, at, [&](const json& x, const std::string& p) { n.strs.push_back(string_of(x, p)); });
      parts.push_back(std::move(n));
    } else if (k == "$id" || k == "$ids") {
      WhereNode n;
      n.kind = WhereNode::kIds;
      members(v, at, [&](const json& x, const std::string& p) {
        if (!x.is_number_unsigned() && !(x.is_number_integer() && x.get<int64_t>() >= 0)) bad(p, "expected an id");
        const uint64_t id = x.get<uint64_t>();
        if (id == MNEMO_NO_ID) bad(p, "2^64 - 1 is not an id");
        n.ids.push_back(id);
      });
      parts.push_back(std::move(n));
    } else if (k == "$time" || k == "$importance") {
      parts.push_back(range_of(v, at, k == "$time" ? WhereNode::kTime : WhereNode::kImportance));
    } else if (!k.empty() && k[0] == '$') {
      bad(at, "unknown operator \"" + k + "\" (use $and $or $not $tags $namespace $key $id $time $importance)");
    } else {
      parts.push_back(attribute(k, v, at));
    }
  }
  // {} matches every memory: an AND of nothing.
  return group(WhereNode::kAnd, std::move(parts));
}

}  // namespace

WhereNode parse_where_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw WhereError(e.byte == 0 ? 1 : e.byte, "not JSON: " + json_parse_why(e));
  }
  return object(j, "");
}

}  // namespace cli
