// A model of memories' fields and filters by the header's rules, with the
// helpers that build the same memories and filters through the C ABI and
// check selections and filtered searches against it: the CPU and GPU
// suites' differential tests share them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "reference.h"
#include "support.h"
#include "topk_check.h"

namespace mt::fields {

using Val = std::variant<int64_t, double, bool, std::string>;

struct Mem {
  uint64_t id;
  std::vector<double> v;  // the stored vector
  std::string key;
  std::vector<std::string> ns;
  std::set<std::string> tags;
  std::map<std::string, Val> attrs;
  double time = 0;
  float importance = 0;
};

// The model's filter: the same tree the C filter is built from.
struct Node {
  enum Kind { ns_eq, ns_under, tags_any, tags_all, attr, keys, ids, time, imp, all, any, neg } kind;
  int32_t op = 0;
  std::string name;
  std::vector<std::string> strs;
  std::vector<Val> vals;
  std::vector<uint64_t> id_list;
  double lo = 0, hi = 0;
  std::vector<std::shared_ptr<Node>> kids;
};
using NodeP = std::shared_ptr<Node>;

// A node of `kind` over strings (tags, namespace parts, keys) and children.
inline NodeP node_of(Node::Kind kind, std::vector<std::string> strs = {}, std::vector<NodeP> kids = {}) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->strs = std::move(strs);
  n->kids = std::move(kids);
  return n;
}

inline bool is_num(const Val& v) { return v.index() <= 1; }
inline long double num(const Val& v) {
  return v.index() == 0 ? static_cast<long double>(std::get<0>(v)) : std::get<1>(v);
}

// -1/0/1, or nullopt when the two do not compare (different kinds).
inline std::optional<int> cmp(const Val& a, const Val& b) {
  if (is_num(a) && is_num(b)) return num(a) < num(b) ? -1 : num(a) > num(b) ? 1 : 0;
  if (a.index() != b.index()) return std::nullopt;
  if (a.index() == 2) return std::get<2>(a) == std::get<2>(b) ? 0 : 1;
  const auto& x = std::get<3>(a);
  const auto& y = std::get<3>(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

inline bool matches(const Node& n, const Mem& m) {
  switch (n.kind) {
    case Node::ns_eq: return !m.ns.empty() && m.ns == n.strs;
    case Node::ns_under:
      return !m.ns.empty() && m.ns.size() >= n.strs.size() && std::equal(n.strs.begin(), n.strs.end(), m.ns.begin());
    case Node::tags_any:
      return std::any_of(n.strs.begin(), n.strs.end(), [&](const std::string& t) { return m.tags.count(t) > 0; });
    case Node::tags_all:
      return std::all_of(n.strs.begin(), n.strs.end(), [&](const std::string& t) { return m.tags.count(t) > 0; });
    case Node::keys: return !m.key.empty() && std::count(n.strs.begin(), n.strs.end(), m.key) > 0;
    case Node::ids: return std::count(n.id_list.begin(), n.id_list.end(), m.id) > 0;
    case Node::time: return m.time >= n.lo && m.time <= n.hi;
    case Node::imp: return m.importance >= n.lo && m.importance <= n.hi;
    case Node::all: return std::all_of(n.kids.begin(), n.kids.end(), [&](const NodeP& c) { return matches(*c, m); });
    case Node::any: return std::any_of(n.kids.begin(), n.kids.end(), [&](const NodeP& c) { return matches(*c, m); });
    case Node::neg: return !matches(*n.kids[0], m);
    case Node::attr: {
      auto it = m.attrs.find(n.name);
      if (it == m.attrs.end()) return false;
      const Val& a = it->second;
      auto eq = [&](const Val& b) {
        auto c = cmp(a, b);
        return c && *c == 0;
      };
      auto ord = [&](const Val& b, auto pred) {
        if (a.index() == 2 || b.index() == 2) return false;
        auto c = cmp(a, b);
        return c.has_value() && pred(*c);
      };
      switch (n.op) {
        case MNEMO_OP_EXISTS: return true;
        case MNEMO_OP_EQ: return eq(n.vals[0]);
        case MNEMO_OP_NE: return !eq(n.vals[0]);
        case MNEMO_OP_IN: return std::any_of(n.vals.begin(), n.vals.end(), eq);
        case MNEMO_OP_NOT_IN: return std::none_of(n.vals.begin(), n.vals.end(), eq);
        case MNEMO_OP_LT: return ord(n.vals[0], [](int c) { return c < 0; });
        case MNEMO_OP_LE: return ord(n.vals[0], [](int c) { return c <= 0; });
        case MNEMO_OP_GT: return ord(n.vals[0], [](int c) { return c > 0; });
        case MNEMO_OP_GE: return ord(n.vals[0], [](int c) { return c >= 0; });
        case MNEMO_OP_BETWEEN:
          return ord(n.vals[0], [](int c) { return c >= 0; }) && ord(n.vals[1], [](int c) { return c <= 0; });
      }
      return false;
    }
  }
  return false;
}

inline mnemo_value c_value(const Val& v) {
  mnemo_value x{};
  switch (v.index()) {
    case 0: x.type = MNEMO_VALUE_INT, x.i = std::get<0>(v); break;
    case 1: x.type = MNEMO_VALUE_DOUBLE, x.d = std::get<1>(v); break;
    case 2: x.type = MNEMO_VALUE_BOOL, x.i = std::get<2>(v) ? 1 : 0; break;
    default: x.type = MNEMO_VALUE_STRING, x.s = std::get<3>(v).c_str(); break;
  }
  return x;
}

inline std::vector<const char*> c_strs(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  for (const auto& s : v) out.push_back(s.c_str());
  return out;
}

inline uint32_t build(mnemo_filter* f, const Node& n) {
  uint32_t id = 0;
  auto strs = c_strs(n.strs);
  switch (n.kind) {
    case Node::ns_eq:
    case Node::ns_under:
      EXPECT_EQ(mnemo_filter_namespace(f, n.kind == Node::ns_eq ? MNEMO_OP_NAMESPACE_EQ : MNEMO_OP_NAMESPACE_UNDER,
                                       strs.data(), static_cast<uint32_t>(strs.size()), &id),
                MNEMO_OK);
      break;
    case Node::tags_any:
    case Node::tags_all:
      EXPECT_EQ(mnemo_filter_tags(f, n.kind == Node::tags_any ? MNEMO_OP_ANY : MNEMO_OP_ALL, strs.data(),
                                  static_cast<uint32_t>(strs.size()), &id),
                MNEMO_OK);
      break;
    case Node::keys: EXPECT_EQ(mnemo_filter_keys(f, strs.data(), strs.size(), &id), MNEMO_OK); break;
    case Node::ids: {
      mt::Buf<uint64_t> ids(std::max<size_t>(n.id_list.size(), 1));
      std::copy(n.id_list.begin(), n.id_list.end(), ids.data());
      EXPECT_EQ(mnemo_filter_ids(f, ids.data(), n.id_list.size(), &id), MNEMO_OK);
      break;
    }
    case Node::time: EXPECT_EQ(mnemo_filter_time(f, n.lo, n.hi, &id), MNEMO_OK); break;
    case Node::imp: EXPECT_EQ(mnemo_filter_importance(f, n.lo, n.hi, &id), MNEMO_OK); break;
    case Node::attr: {
      std::vector<mnemo_value> vals;
      for (const auto& v : n.vals) vals.push_back(c_value(v));
      EXPECT_EQ(mnemo_filter_attribute(f, n.name.c_str(), n.op, vals.data(), static_cast<uint32_t>(vals.size()), &id),
                MNEMO_OK)
          << mnemo_last_error();
      break;
    }
    case Node::all:
    case Node::any:
    case Node::neg: {
      std::vector<uint32_t> kids;
      for (const auto& k : n.kids) kids.push_back(build(f, *k));
      if (n.kind == Node::neg)
        EXPECT_EQ(mnemo_filter_not(f, kids[0], &id), MNEMO_OK);
      else if (n.kind == Node::all)
        EXPECT_EQ(mnemo_filter_and(f, kids.data(), static_cast<uint32_t>(kids.size()), &id), MNEMO_OK);
      else
        EXPECT_EQ(mnemo_filter_or(f, kids.data(), static_cast<uint32_t>(kids.size()), &id), MNEMO_OK);
      break;
    }
  }
  return id;
}

struct FilterPtr {
  mnemo_filter* f = nullptr;
  explicit FilterPtr(const Node& n) {
    EXPECT_EQ(mnemo_filter_create(&f), MNEMO_OK);
    mnemo_filter_set_root(f, build(f, n));
  }
  ~FilterPtr() { mnemo_filter_destroy(f); }
};

inline const std::vector<std::string> kTags = {"red",  "green", "blue", "cyan", "news", "work",
                                               "home", "a",     "b",    "c",    "é"};
inline const std::vector<std::vector<std::string>> kSpaces = {
    {}, {"users"}, {"users", "1"}, {"users", "1", "episodic"}, {"users", "2"}, {"users", "2", "semantic"}, {"agents"}};

inline Val random_val(std::mt19937_64& g, const std::string& name) {
  if (name == "year") return static_cast<int64_t>(2000 + g() % 30);
  if (name == "score") return std::uniform_real_distribution<double>(-1, 1)(g);
  if (name == "lang") return std::string(g() % 2 ? "en" : g() % 2 ? "de" : "fr");
  if (name == "ok") return g() % 2 == 0;
  // "mixed": any kind, so comparisons across kinds are exercised.
  switch (g() % 4) {
    case 0: return static_cast<int64_t>(static_cast<int64_t>(g() % 7) - 3);
    case 1: return static_cast<double>(static_cast<int64_t>(g() % 13) - 6) / 2.0;
    case 2: return g() % 2 == 0;
    default: return std::string(1, static_cast<char>('a' + g() % 3));
  }
}

inline const std::vector<std::string> kNames = {"year", "score", "lang", "ok", "mixed"};

inline NodeP random_node(std::mt19937_64& g, const std::vector<Mem>& mems, int depth) {
  auto n = std::make_shared<Node>();
  const int pick = depth > 2 ? static_cast<int>(g() % 9) : static_cast<int>(g() % 12);
  switch (pick) {
    case 0:
    case 1:
      n->kind = g() % 2 ? Node::ns_eq : Node::ns_under;
      n->strs = kSpaces[g() % kSpaces.size()];
      if (g() % 5 == 0) n->strs.push_back("nowhere");
      break;
    case 2:
    case 3: {
      n->kind = g() % 2 ? Node::tags_any : Node::tags_all;
      const size_t c = g() % 4;
      for (size_t i = 0; i < c; ++i) n->strs.push_back(g() % 9 ? kTags[g() % kTags.size()] : "unknown-tag");
      break;
    }
    case 4:
    case 5:
    case 6: {
      n->kind = Node::attr;
      n->name = g() % 10 ? kNames[g() % kNames.size()] : "absent";
      static const int32_t ops[] = {MNEMO_OP_EQ, MNEMO_OP_NE, MNEMO_OP_LT,     MNEMO_OP_LE,      MNEMO_OP_GT,
                                    MNEMO_OP_GE, MNEMO_OP_IN, MNEMO_OP_NOT_IN, MNEMO_OP_BETWEEN, MNEMO_OP_EXISTS};
      n->op = ops[g() % 10];
      const std::string& src = n->name == "absent" ? "mixed" : n->name;
      size_t c = n->op == MNEMO_OP_EXISTS ? 0 : n->op == MNEMO_OP_BETWEEN ? 2 : n->op >= MNEMO_OP_IN ? g() % 4 : 1;
      for (size_t i = 0; i < c; ++i) n->vals.push_back(random_val(g, src));
      // Ordering operators take no bools; BETWEEN two numbers or two strings.
      for (auto& v : n->vals)
        if ((n->op >= MNEMO_OP_LT && n->op <= MNEMO_OP_GE) || n->op == MNEMO_OP_BETWEEN)
          if (v.index() == 2) v = static_cast<int64_t>(1);
      if (n->op == MNEMO_OP_BETWEEN && is_num(n->vals[0]) != is_num(n->vals[1])) n->vals[1] = n->vals[0];
      break;
    }
    case 7:
      n->kind = g() % 2 ? Node::keys : Node::ids;
      for (int i = 0; i < 5; ++i) {
        const Mem& m = mems[g() % mems.size()];
        if (n->kind == Node::keys && !m.key.empty()) n->strs.push_back(m.key);
        if (n->kind == Node::ids) n->id_list.push_back(g() % 7 ? m.id : 999999999);
      }
      break;
    case 8:
      n->kind = g() % 2 ? Node::time : Node::imp;
      n->lo = static_cast<double>(g() % 100) / 100.0;
      n->hi = n->lo + static_cast<double>(g() % 60) / 100.0;
      if (g() % 5 == 0) n->hi = INFINITY;
      break;
    default: {
      n->kind = pick == 9 ? Node::all : pick == 10 ? Node::any : Node::neg;
      const size_t c = n->kind == Node::neg ? 1 : g() % 4;
      for (size_t i = 0; i < c; ++i) n->kids.push_back(random_node(g, mems, depth + 1));
    }
  }
  return n;
}

struct Fixture {
  mt::StorePtr store;
  std::vector<Mem> mems;
  uint64_t dim;
};

// Writes memories with random vectors and fields under `ids` (an add, or
// an upsert replacing every field of an id the store holds) and makes the
// model follow. Keys are drawn from the id, so they stay unique.
inline void add_random(Fixture& fx, std::mt19937_64& g, const std::vector<uint64_t>& ids_in) {
  const uint64_t n = ids_in.size(), dim = fx.dim;
  mt::Buf<uint64_t> ids(n);
  mt::Buf<float> vecs(n * dim);
  mt::Buf<double> times(n);
  mt::Buf<float> imp(n);
  std::vector<Mem> mems(n);
  // Owned strings and the C views into them, per memory.
  std::vector<std::vector<const char*>> ns_c(n), tags_c(n);
  std::vector<std::vector<std::string>> tag_s(n), val_s(n);
  std::vector<std::vector<mnemo_attribute>> attrs_c(n);
  std::vector<mnemo_memory_fields> fields(n, mnemo_memory_fields_default());
  for (uint64_t i = 0; i < n; ++i) {
    Mem& m = mems[i];
    m.id = ids_in[i];
    ids[i] = m.id;
    for (uint64_t d = 0; d < dim; ++d) {
      vecs[i * dim + d] = mt::rand_nonzero(g);
      m.v.push_back(vecs[i * dim + d]);
    }
    m.time = times[i] = static_cast<double>(g() % 100) / 100.0;
    m.importance = imp[i] = static_cast<float>(g() % 100) / 100.0f;
    mnemo_memory_fields& f = fields[i];
    f.set = MNEMO_FIELD_ALL;
    if (g() % 4) m.key = "key-" + std::to_string(m.id);
    f.key = m.key.empty() ? nullptr : m.key.c_str();
    m.ns = kSpaces[g() % kSpaces.size()];
    ns_c[i] = c_strs(m.ns);
    f.namespace_parts = ns_c[i].data();
    f.namespace_depth = static_cast<uint32_t>(m.ns.size());
    const size_t nt = g() % 4;
    for (size_t t = 0; t < nt; ++t) tag_s[i].push_back(kTags[g() % kTags.size()]);
    m.tags.insert(tag_s[i].begin(), tag_s[i].end());
    tags_c[i] = c_strs(tag_s[i]);
    f.tags = tags_c[i].data();
    f.tag_count = static_cast<uint32_t>(tags_c[i].size());
    for (const auto& name : kNames)
      if (g() % 4) m.attrs[name] = random_val(g, name);
    val_s[i].reserve(m.attrs.size());
    for (const auto& [name, v] : m.attrs) {
      mnemo_attribute a{};
      a.name = name.c_str();
      a.value = c_value(v);
      attrs_c[i].push_back(a);
    }
    f.attributes = attrs_c[i].data();
    f.attribute_count = static_cast<uint32_t>(attrs_c[i].size());
    static const char kText[] = "the memory's text";
    f.payload = kText;
    f.payload_bytes = g() % 2 ? sizeof kText - 1 : 0;
  }
  EXPECT_EQ(mnemo_store_add_with_fields(fx.store.get(), ids.data(), vecs.data(), MNEMO_DTYPE_F32, n, times.data(),
                                        imp.data(), fields.data()),
            MNEMO_OK)
      << mnemo_last_error();
  std::map<uint64_t, size_t> at;
  for (size_t i = 0; i < fx.mems.size(); ++i) at[fx.mems[i].id] = i;
  for (Mem& m : mems) {
    auto it = at.find(m.id);
    if (it != at.end())
      fx.mems[it->second] = std::move(m);
    else
      fx.mems.push_back(std::move(m));
  }
}

// Adds n random memories with random fields to a new store on `rt`.
inline Fixture make_fixture(std::mt19937_64& g, uint64_t n, uint64_t dim, mnemo_runtime* rt) {
  Fixture fx;
  fx.dim = dim;
  fx.store = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, rt);
  std::vector<uint64_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = 1000 + i * 7 + g() % 5;
  add_random(fx, g, ids);
  return fx;
}

inline std::vector<uint64_t> model_select(const Fixture& fx, const Node& n) {
  std::vector<uint64_t> out;
  for (const Mem& m : fx.mems)
    if (matches(n, m)) out.push_back(m.id);
  std::sort(out.begin(), out.end());
  return out;
}

inline std::vector<uint64_t> store_select(const Fixture& fx, const mnemo_filter* f) {
  uint64_t written = 0, total = 0;
  mt::Buf<uint64_t> ids(fx.mems.size() + 1);
  EXPECT_EQ(mnemo_store_select(fx.store.get(), f, 0, fx.mems.size() + 1, ids.data(), &written, &total), MNEMO_OK)
      << mnemo_last_error();
  EXPECT_EQ(written, total);
  return std::vector<uint64_t>(ids.data(), ids.data() + written);
}

inline void check_search(const Fixture& fx, const std::vector<const Node*>& per_query, const mnemo_search_options& o,
                         uint64_t k, std::mt19937_64& g) {
  const uint64_t nq = per_query.size(), dim = fx.dim;
  mt::Buf<float> q(nq * dim);
  for (uint64_t i = 0; i < nq * dim; ++i) q[i] = mt::rand_nonzero(g);
  mt::Buf<uint64_t> ids(nq * k);
  mt::Buf<float> scores(nq * k);
  ASSERT_EQ(mnemo_store_search(fx.store.get(), q.data(), nq, k, &o, ids.data(), scores.data()), MNEMO_OK)
      << mnemo_last_error();
  for (uint64_t j = 0; j < nq; ++j) {
    std::vector<double> qd(q.data() + j * dim, q.data() + (j + 1) * dim);
    std::vector<ref::Candidate> cands;
    for (const Mem& m : fx.mems) {
      if (per_query[j] && !matches(*per_query[j], m)) continue;
      const double s = ref::score(MNEMO_METRIC_COSINE, qd.data(), m.v.data(), dim);
      cands.push_back({m.id, s, ref::score_tol(MNEMO_METRIC_COSINE, qd.data(), m.v.data(), dim, s)});
    }
    EXPECT_TRUE(mt::check_topk(MNEMO_METRIC_COSINE, cands, k, ids.data() + j * k, scores.data() + j * k))
        << "query " << j << " of " << nq << ", " << cands.size() << " candidates";
  }
}

// Numbers compare exactly across int64 and double, at the edges where a
// rounding comparison would err (2^53 + 1 against 2^53, int64's ends
// against +-2^63): each filtered search returns exactly the expected set.
inline void check_exact_numbers(mnemo_runtime* rt) {
  const uint64_t dim = 8, n = 9;
  mt::StorePtr store = mt::make_store(dim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, rt);
  const std::vector<Val> vals = {int64_t{9007199254740993},
                                 9007199254740992.0,
                                 INT64_MAX,
                                 9223372036854775808.0,
                                 INT64_MIN,
                                 -9223372036854775808.0,
                                 -0.5,
                                 int64_t{0},
                                 int64_t{-1}};
  auto g = mt::rng_for_test();
  mt::Buf<uint64_t> ids(n);
  mt::Buf<float> vecs(n * dim);
  std::vector<mnemo_attribute> attrs(n);
  std::vector<mnemo_memory_fields> fields(n, mnemo_memory_fields_default());
  for (uint64_t i = 0; i < n; ++i) {
    ids[i] = i + 1;
    for (uint64_t d = 0; d < dim; ++d) vecs[i * dim + d] = mt::rand_nonzero(g);
    attrs[i].name = "big";
    attrs[i].value = c_value(vals[i]);
    fields[i].set = MNEMO_FIELD_ATTRIBUTES;
    fields[i].attributes = &attrs[i];
    fields[i].attribute_count = 1;
  }
  ASSERT_EQ(mnemo_store_add_with_fields(store.get(), ids.data(), vecs.data(), MNEMO_DTYPE_F32, n, nullptr, nullptr,
                                        fields.data()),
            MNEMO_OK)
      << mnemo_last_error();
  // Memories without the attribute make every filter selective (no
  // post-filter of a broad one: the scan's own evaluation is tested).
  const uint64_t filler = 300;
  mt::Buf<uint64_t> more(filler);
  mt::Buf<float> mv(filler * dim);
  for (uint64_t i = 0; i < filler; ++i) {
    more[i] = 1000 + i;
    for (uint64_t d = 0; d < dim; ++d) mv[i * dim + d] = mt::rand_nonzero(g);
  }
  ASSERT_EQ(mnemo_store_add(store.get(), more.data(), mv.data(), MNEMO_DTYPE_F32, filler), MNEMO_OK);
  struct Case {
    int32_t op;
    std::vector<Val> operands;
    std::vector<uint64_t> want;
  };
  const std::vector<Case> cases = {
      {MNEMO_OP_EQ, {9007199254740992.0}, {2}},        {MNEMO_OP_EQ, {int64_t{9007199254740993}}, {1}},
      {MNEMO_OP_GT, {9007199254740992.0}, {1, 3, 4}},  {MNEMO_OP_LT, {INT64_MAX}, {1, 2, 5, 6, 7, 8, 9}},
      {MNEMO_OP_GE, {9223372036854775808.0}, {4}},     {MNEMO_OP_EQ, {INT64_MIN}, {5, 6}},
      {MNEMO_OP_BETWEEN, {-0.75, int64_t{0}}, {7, 8}}, {MNEMO_OP_LT, {-0.5}, {5, 6, 9}},
      {MNEMO_OP_BETWEEN, {int64_t{-1}, -0.5}, {7, 9}}, {MNEMO_OP_NE, {int64_t{0}}, {1, 2, 3, 4, 5, 6, 7, 9}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    Node node;
    node.kind = Node::attr;
    node.name = "big";
    node.op = cases[c].op;
    node.vals = cases[c].operands;
    FilterPtr f(node);
    mnemo_search_options o = mnemo_search_options_default();
    o.where = f.f;
    const uint64_t k = 12;
    mt::Buf<float> q(dim);
    for (uint64_t d = 0; d < dim; ++d) q[d] = mt::rand_nonzero(g);
    mt::Buf<uint64_t> out(k);
    mt::Buf<float> scores(k);
    ASSERT_EQ(mnemo_store_search(store.get(), q.data(), 1, k, &o, out.data(), scores.data()), MNEMO_OK)
        << mnemo_last_error();
    std::vector<uint64_t> got;
    for (uint64_t j = 0; j < k && out[j] != MNEMO_NO_ID; ++j) got.push_back(out[j]);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, cases[c].want) << "case " << c;
  }
}

}  // namespace mt::fields
