// Memories' fields and filters through the C ABI, against a model of the
// header's rules: random memories with keys, namespaces, tags and typed
// attributes, random filter trees, and every selection and filtered search
// compared with the model's matches (searches with the float64 reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "fields_check.h"

namespace {

using namespace mt::fields;

TEST(Fields, SelectMatchesTheModelOnRandomFilters) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 700, 9, mt::rt());
  for (int t = 0; t < 400; ++t) {
    NodeP n = random_node(g, fx.mems, 0);
    FilterPtr f(*n);
    ASSERT_EQ(store_select(fx, f.f), model_select(fx, *n)) << "filter " << t;
  }
}

TEST(Fields, FilteredSearchesReturnTheBestMatchesAndNeverFewer) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 900, 19, mt::rt());
  for (int t = 0; t < 60; ++t) {
    NodeP n = random_node(g, fx.mems, 0);
    FilterPtr f(*n);
    mnemo_search_options o = mnemo_search_options_default();
    o.where = f.f;
    const uint64_t k = 1 + g() % 40;
    check_search(fx, {n.get(), n.get(), n.get()}, o, k, g);
  }
}

TEST(Fields, EachQueryItsOwnFilter) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 600, 12, mt::rt());
  for (int t = 0; t < 10; ++t) {
    const uint64_t nq = 1 + g() % 9;
    std::vector<NodeP> nodes;
    std::vector<std::unique_ptr<FilterPtr>> filters;
    std::vector<const mnemo_filter*> each;
    std::vector<const Node*> per_query;
    NodeP shared = random_node(g, fx.mems, 1);
    FilterPtr sf(*shared);
    for (uint64_t j = 0; j < nq; ++j) {
      if (g() % 4 == 0) {  // no filter of its own: the shared one alone
        each.push_back(nullptr);
        per_query.push_back(shared.get());
        continue;
      }
      nodes.push_back(random_node(g, fx.mems, 1));
      filters.push_back(std::make_unique<FilterPtr>(*nodes.back()));
      each.push_back(filters.back()->f);
      auto both = std::make_shared<Node>();
      both->kind = Node::all;
      both->kids = {shared, nodes.back()};
      nodes.push_back(both);
      per_query.push_back(both.get());
    }
    mnemo_search_options o = mnemo_search_options_default();
    o.where = sf.f;
    o.where_each = each.data();
    check_search(fx, per_query, o, 1 + g() % 20, g);
  }
}

TEST(Fields, IndexedFilteredSearchesStillReturnEveryMatchUpToK) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 2000, 8, mt::rt());
  mnemo_index_options io = mnemo_index_options_default();
  io.nlist = 40;
  io.background = 0;
  ASSERT_EQ(mnemo_store_build_index(fx.store.get(), &io), MNEMO_OK) << mnemo_last_error();
  for (int t = 0; t < 30; ++t) {
    NodeP n = random_node(g, fx.mems, 0);
    FilterPtr f(*n);
    mnemo_search_options o = mnemo_search_options_default();
    o.where = f.f;
    // One list, then any count below the lists (the probes a filter's
    // matches widen).
    o.nprobe = t % 2 == 0 ? 1 : 1 + static_cast<uint32_t>(g() % (io.nlist - 1));
    const uint64_t k = 5 + g() % 30;
    mt::Buf<float> q(fx.dim);
    for (uint64_t i = 0; i < fx.dim; ++i) q[i] = mt::rand_nonzero(g);
    mt::Buf<uint64_t> ids(k);
    mt::Buf<float> scores(k);
    ASSERT_EQ(mnemo_store_search(fx.store.get(), q.data(), 1, k, &o, ids.data(), scores.data()), MNEMO_OK);
    const auto want = model_select(fx, *n);
    const uint64_t n_want = std::min<uint64_t>(k, want.size());
    for (uint64_t i = 0; i < k; ++i) {
      if (i < n_want) {
        EXPECT_NE(ids[i], MNEMO_NO_ID) << "filter " << t << ": " << i << " of " << n_want;
        EXPECT_TRUE(std::binary_search(want.begin(), want.end(), ids[i]));
      } else {
        EXPECT_EQ(ids[i], MNEMO_NO_ID);
      }
    }
  }
}

// Searches of the fixture's store, filtered by each of `nodes` (nullptr:
// unfiltered), one query each: ids and scores end to end.
std::pair<std::vector<uint64_t>, std::vector<float>> search_each(const Fixture& fx, const std::vector<NodeP>& nodes,
                                                                 const mt::Buf<float>& q, uint64_t k, uint32_t nprobe) {
  std::vector<uint64_t> all_ids;
  std::vector<float> all_scores;
  for (size_t t = 0; t < nodes.size(); ++t) {
    std::unique_ptr<FilterPtr> f = nodes[t] ? std::make_unique<FilterPtr>(*nodes[t]) : nullptr;
    mnemo_search_options o = mnemo_search_options_default();
    o.where = f ? f->f : nullptr;
    o.nprobe = nprobe;
    mt::Buf<uint64_t> ids(k);
    mt::Buf<float> scores(k);
    mt::Buf<float> one(fx.dim);  // aligned, as the ABI asks
    std::copy(q.data() + t * fx.dim, q.data() + (t + 1) * fx.dim, one.data());
    EXPECT_EQ(mnemo_store_search(fx.store.get(), one.data(), 1, k, &o, ids.data(), scores.data()), MNEMO_OK)
        << mnemo_last_error();
    all_ids.insert(all_ids.end(), ids.data(), ids.data() + k);
    all_scores.insert(all_scores.end(), scores.data(), scores.data() + k);
  }
  return {all_ids, all_scores};
}

// A store laid out by namespace answers every search as before, bit for bit
// (a removed memory's slot dropped; flat, indexed and sharded), reads a
// namespace's matches as one run, and keeps doing so after more writes.
TEST(Fields, ClusteredStoresAnswerAsBefore) {
  auto g = mt::rng_for_test();
  mnemo_runtime_options so = mt::test_options();
  so.backend = MNEMO_BACKEND_CPU;
  so.cpu_shards = 3;
  mt::RuntimePtr sharded = mt::make_runtime(so);
  for (const int mode : {0, 1, 2}) {  // flat, indexed, sharded
    const bool indexed = mode == 1;
    Fixture fx = make_fixture(g, 1500, 10, mode == 2 ? sharded.get() : mt::rt());
    std::vector<uint64_t> gone;
    for (size_t i = 0; i < fx.mems.size(); i += 9) gone.push_back(fx.mems[i].id);
    uint64_t removed = 0;
    ASSERT_EQ(mnemo_store_remove(fx.store.get(), gone.data(), gone.size(), &removed), MNEMO_OK) << mnemo_last_error();
    ASSERT_EQ(removed, gone.size());
    fx.mems.erase(std::remove_if(fx.mems.begin(), fx.mems.end(),
                                 [&](const Mem& m) { return std::find(gone.begin(), gone.end(), m.id) != gone.end(); }),
                  fx.mems.end());
    uint32_t nprobe = 0;
    if (indexed) {
      mnemo_index_options io = mnemo_index_options_default();
      io.nlist = 16;
      io.background = 0;
      ASSERT_EQ(mnemo_store_build_index(fx.store.get(), &io), MNEMO_OK) << mnemo_last_error();
      nprobe = 3;
    }
    // Every namespace (equal and under), random trees, and no filter.
    std::vector<NodeP> nodes = {nullptr};
    for (const auto& ns : kSpaces) {
      nodes.push_back(node_of(Node::ns_eq, ns));
      nodes.push_back(node_of(Node::ns_under, ns));
    }
    for (int t = 0; t < 30; ++t) nodes.push_back(random_node(g, fx.mems, 0));
    mt::Buf<float> q(nodes.size() * fx.dim);
    for (uint64_t i = 0; i < nodes.size() * fx.dim; ++i) q[i] = mt::rand_nonzero(g);
    const uint64_t k = 1 + g() % 300;
    const auto before = search_each(fx, nodes, q, k, nprobe);
    ASSERT_EQ(mnemo_store_cluster(fx.store.get()), MNEMO_OK) << mnemo_last_error();
    mnemo_store_statistics st{};
    st.struct_size = sizeof st;
    ASSERT_EQ(mnemo_store_stats(fx.store.get(), &st), MNEMO_OK);
    EXPECT_EQ(st.tombstones, 0u);
    EXPECT_EQ(st.vectors, fx.mems.size());
    const uint64_t ranged0 = st.filtered_ranged;
    const auto after = search_each(fx, nodes, q, k, nprobe);
    EXPECT_EQ(after.first, before.first) << "mode " << mode;
    EXPECT_EQ(std::memcmp(after.second.data(), before.second.data(), before.second.size() * 4), 0);
    ASSERT_EQ(mnemo_store_stats(fx.store.get(), &st), MNEMO_OK);
    // A flat store reads each namespace's matches as one run.
    if (mode == 0) {
      EXPECT_GE(st.filtered_ranged - ranged0, 2 * kSpaces.size() - 2);
    }
    // The model agrees, and still after memories are added at the end.
    for (int t = 0; t < 10; ++t) {
      NodeP n = t % 2 ? node_of(Node::ns_under, kSpaces[g() % kSpaces.size()]) : random_node(g, fx.mems, 0);
      FilterPtr f(*n);
      mnemo_search_options o = mnemo_search_options_default();
      o.where = f.f;
      check_search(fx, {n.get(), n.get()}, o, 1 + g() % 50, g);
      if (t == 4) {
        std::vector<uint64_t> more(200);
        for (uint64_t i = 0; i < more.size(); ++i) more[i] = 900000 + i;
        add_random(fx, g, more);
      }
    }
    // After those adds a namespace is its run and the few memories after
    // it: still the ranged plan (the model agreed above).
    if (mode == 0) {
      ASSERT_EQ(mnemo_store_stats(fx.store.get(), &st), MNEMO_OK);
      const uint64_t ranged1 = st.filtered_ranged;
      std::vector<NodeP> spaces;
      for (size_t i = 1; i < kSpaces.size(); ++i) spaces.push_back(node_of(Node::ns_eq, kSpaces[i]));
      search_each(fx, spaces, q, 10, 0);
      ASSERT_EQ(mnemo_store_stats(fx.store.get(), &st), MNEMO_OK);
      EXPECT_EQ(st.filtered_ranged - ranged1, spaces.size());
    }
  }
}

TEST(Fields, ReadBackKeysUpdatesAndRemoval) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 50, 4, mt::rt());
  // Every memory reads back as written.
  std::vector<uint64_t> all;
  for (const Mem& m : fx.mems) all.push_back(m.id);
  mt::Buf<uint64_t> ids(all.size() + 1);
  std::copy(all.begin(), all.end(), ids.data());
  ids[all.size()] = 424242;  // not in the store
  mnemo_records* rec = nullptr;
  ASSERT_EQ(mnemo_store_read(fx.store.get(), ids.data(), all.size() + 1, &rec), MNEMO_OK);
  ASSERT_EQ(mnemo_records_count(rec), all.size() + 1);
  for (size_t i = 0; i <= all.size(); ++i) {
    uint32_t found = 9;
    uint64_t id = 0;
    mnemo_memory_fields f = mnemo_memory_fields_default();
    double time = -1;
    ASSERT_EQ(mnemo_records_get(rec, i, &found, &id, &f, &time, nullptr), MNEMO_OK);
    if (i == all.size()) {
      EXPECT_EQ(found, 0u);
      continue;
    }
    const Mem& m = fx.mems[i];
    EXPECT_EQ(found, 1u);
    EXPECT_EQ(id, m.id);
    EXPECT_EQ(time, m.time);
    EXPECT_EQ(f.key ? std::string(f.key) : std::string(), m.key);
    EXPECT_EQ(std::vector<std::string>(f.namespace_parts, f.namespace_parts + f.namespace_depth), m.ns);
    EXPECT_EQ(std::set<std::string>(f.tags, f.tags + f.tag_count), m.tags);
    EXPECT_EQ(f.attribute_count, m.attrs.size());
    for (uint32_t a = 0; a < f.attribute_count; ++a) {
      const Val& v = m.attrs.at(f.attributes[a].name);
      auto c = cmp(v, [&]() -> Val {
        const mnemo_value& x = f.attributes[a].value;
        switch (x.type) {
          case MNEMO_VALUE_INT: return static_cast<int64_t>(x.i);
          case MNEMO_VALUE_DOUBLE: return x.d;
          case MNEMO_VALUE_BOOL: return x.i != 0;
          default: return std::string(x.s);
        }
      }());
      EXPECT_TRUE(c && *c == 0 && v.index() == static_cast<size_t>(f.attributes[a].value.type - 1));
    }
  }
  mnemo_records_destroy(rec);

  // Keys: look-up, a conflict refused without change, a key moved.
  const Mem* a = nullptr;
  const Mem* b = nullptr;
  for (const Mem& m : fx.mems) {
    if (m.key.empty()) continue;
    (a ? b : a) = &m;
    if (b) break;
  }
  ASSERT_TRUE(a && b);
  const char* keys[] = {a->key.c_str(), "no-such-key"};
  mt::Buf<uint64_t> got(2);
  ASSERT_EQ(mnemo_store_ids_of_keys(fx.store.get(), keys, 2, got.data()), MNEMO_OK);
  EXPECT_EQ(got[0], a->id);
  EXPECT_EQ(got[1], MNEMO_NO_ID);
  mnemo_memory_fields f = mnemo_memory_fields_default();
  f.set = MNEMO_FIELD_KEY;
  f.key = a->key.c_str();
  mt::Buf<uint64_t> one(1);
  one[0] = b->id;
  EXPECT_EQ(mnemo_store_update_fields(fx.store.get(), one.data(), &f, 1), MNEMO_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mnemo_last_error()).find("held by memory"), std::string::npos) << mnemo_last_error();
  f.key = "fresh-key";
  ASSERT_EQ(mnemo_store_update_fields(fx.store.get(), one.data(), &f, 1), MNEMO_OK);
  const char* moved[] = {"fresh-key", b->key.c_str()};
  ASSERT_EQ(mnemo_store_ids_of_keys(fx.store.get(), moved, 2, got.data()), MNEMO_OK);
  EXPECT_EQ(got[0], b->id);
  EXPECT_EQ(got[1], MNEMO_NO_ID);
  // Removing a memory frees its key.
  one[0] = a->id;
  ASSERT_EQ(mnemo_store_remove(fx.store.get(), one.data(), 1, nullptr), MNEMO_OK);
  ASSERT_EQ(mnemo_store_ids_of_keys(fx.store.get(), keys, 1, got.data()), MNEMO_OK);
  EXPECT_EQ(got[0], MNEMO_NO_ID);
  // An unknown id: not found, nothing changes.
  one[0] = 77777777;
  EXPECT_EQ(mnemo_store_update_fields(fx.store.get(), one.data(), &f, 1), MNEMO_E_NOT_FOUND);
}

TEST(Fields, FieldsFollowUpsertsCompactionAndLayouts) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 400, 6, mt::rt());
  // Upserts without fields keep them; removals past a quarter compact.
  mt::Buf<uint64_t> ids(200);
  mt::Buf<float> vecs(200 * fx.dim);
  for (uint64_t i = 0; i < 200; ++i) {
    ids[i] = fx.mems[i * 2].id;
    for (uint64_t d = 0; d < fx.dim; ++d) {
      vecs[i * fx.dim + d] = mt::rand_nonzero(g);
      fx.mems[i * 2].v[d] = vecs[i * fx.dim + d];
    }
  }
  ASSERT_EQ(mnemo_store_add(fx.store.get(), ids.data(), vecs.data(), MNEMO_DTYPE_F32, 200), MNEMO_OK);
  mnemo_index_options io = mnemo_index_options_default();
  io.nlist = 8;
  io.background = 0;
  ASSERT_EQ(mnemo_store_build_index(fx.store.get(), &io), MNEMO_OK);
  for (uint64_t i = 0; i < 150; ++i) ids[i] = fx.mems[i * 2 + 1].id;
  ASSERT_EQ(mnemo_store_remove(fx.store.get(), ids.data(), 150, nullptr), MNEMO_OK);
  std::vector<Mem> kept;
  for (size_t i = 0; i < fx.mems.size(); ++i)
    if (!(i % 2 == 1 && i / 2 < 150)) kept.push_back(fx.mems[i]);
  fx.mems = kept;
  for (int t = 0; t < 100; ++t) {
    NodeP n = random_node(g, fx.mems, 0);
    FilterPtr f(*n);
    ASSERT_EQ(store_select(fx, f.f), model_select(fx, *n)) << "filter " << t;
  }
  NodeP n = random_node(g, fx.mems, 0);
  FilterPtr f(*n);
  mnemo_search_options o = mnemo_search_options_default();
  o.where = f.f;
  check_search(fx, {n.get()}, o, 25, g);
}

TEST(Fields, BadFieldsAndFiltersAreRefusedWithoutChange) {
  auto s = mt::make_store(4, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  mt::Buf<uint64_t> ids(2);
  mt::Buf<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = 0.5f + i;
  ids[0] = 1, ids[1] = 2;
  mnemo_memory_fields f[2] = {mnemo_memory_fields_default(), mnemo_memory_fields_default()};
  f[0].set = f[1].set = MNEMO_FIELD_KEY;
  f[0].key = f[1].key = "same";
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_INVALID_ARGUMENT);
  uint64_t n = 9;
  ASSERT_EQ(mnemo_store_count(s.get(), &n), MNEMO_OK);
  EXPECT_EQ(n, 0u);
  const char* empty_tag[] = {""};
  f[1].key = "other";
  f[0].set = MNEMO_FIELD_TAGS;
  f[0].tags = empty_tag;
  f[0].tag_count = 1;
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_INVALID_ARGUMENT);
  f[0].tag_count = MNEMO_MAX_TAGS + 1;
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_INVALID_ARGUMENT);
  mnemo_attribute nan_attr{};
  nan_attr.name = "x";
  nan_attr.value.type = MNEMO_VALUE_DOUBLE;
  nan_attr.value.d = NAN;
  f[0].set = MNEMO_FIELD_ATTRIBUTES;
  f[0].attributes = &nan_attr;
  f[0].attribute_count = 1;
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mnemo_last_error()).find("fields[0].attributes[0].value is a DOUBLE that is NaN"),
            std::string::npos)
      << mnemo_last_error();
  // Each refusal names the field: a NULL name, a string value too long,
  // a NULL tag among several.
  mnemo_attribute two[2] = {};
  two[0].name = "ok";
  two[0].value.type = MNEMO_VALUE_INT;
  two[1].name = nullptr;
  two[1].value.type = MNEMO_VALUE_INT;
  f[0].set = f[1].set = MNEMO_FIELD_ATTRIBUTES;
  f[0].attributes = f[1].attributes = two;
  f[0].attribute_count = f[1].attribute_count = 2;
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_NULL_POINTER);
  EXPECT_NE(std::string(mnemo_last_error()).find("fields[0].attributes[1].name is NULL"), std::string::npos)
      << mnemo_last_error();
  const std::string longer(MNEMO_MAX_NAME_BYTES + 1, 'a');
  two[1].name = "long";
  two[1].value.type = MNEMO_VALUE_STRING;
  two[1].value.s = longer.c_str();
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mnemo_last_error()).find("fields[0].attributes[1].value.s is longer than"), std::string::npos)
      << mnemo_last_error();
  const char* tags_with_null[] = {"a", nullptr};
  f[0].set = 0;
  f[1].set = MNEMO_FIELD_TAGS;
  f[1].tags = tags_with_null;
  f[1].tag_count = 2;
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_NULL_POINTER);
  EXPECT_NE(std::string(mnemo_last_error()).find("fields[1].tags[1] is NULL"), std::string::npos) << mnemo_last_error();
  f[0].set = MNEMO_FIELD_ATTRIBUTES;
  f[0].attributes = &nan_attr;
  f[0].attribute_count = 1;
  f[0].struct_size = 8;
  EXPECT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2, nullptr, nullptr, f),
            MNEMO_E_INVALID_ARGUMENT);
  ASSERT_EQ(mnemo_store_count(s.get(), &n), MNEMO_OK);
  EXPECT_EQ(n, 0u);

  mnemo_filter* flt = nullptr;
  ASSERT_EQ(mnemo_filter_create(&flt), MNEMO_OK);
  uint32_t node = 0;
  mnemo_value one{};
  one.type = MNEMO_VALUE_INT;
  EXPECT_EQ(mnemo_filter_attribute(flt, "x", MNEMO_OP_BETWEEN, &one, 1, &node), MNEMO_E_INVALID_ARGUMENT);
  EXPECT_EQ(mnemo_filter_attribute(flt, "x", 99, &one, 1, &node), MNEMO_E_INVALID_ARGUMENT);
  EXPECT_EQ(mnemo_filter_tags(flt, MNEMO_OP_EQ, nullptr, 0, &node), MNEMO_E_INVALID_ARGUMENT);
  EXPECT_EQ(mnemo_filter_time(flt, NAN, 1, &node), MNEMO_E_INVALID_ARGUMENT);
  const uint32_t missing = 5;
  EXPECT_EQ(mnemo_filter_and(flt, &missing, 1, &node), MNEMO_E_INVALID_ARGUMENT);
  EXPECT_EQ(mnemo_filter_set_root(flt, 0), MNEMO_E_INVALID_ARGUMENT);
  // An empty filter is refused by a search before anything is written.
  ASSERT_EQ(mnemo_store_add(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 2), MNEMO_OK);
  mnemo_search_options o = mnemo_search_options_default();
  o.where = flt;
  mt::Buf<uint64_t> out(2);
  mt::Buf<float> sc(2);
  const auto before = out.snapshot();
  EXPECT_EQ(mnemo_store_search(s.get(), v.data(), 1, 2, &o, out.data(), sc.data()), MNEMO_E_INVALID_ARGUMENT);
  EXPECT_TRUE(out.same_as(before));
  mnemo_filter_destroy(flt);
}

}  // namespace

namespace {

TEST(Fields, ShardedStoresKeepFieldsAndFilterEveryShard) {
  mnemo_runtime_options opts = mt::test_options();
  opts.backend = MNEMO_BACKEND_CPU;
  opts.cpu_shards = 3;
  mt::RuntimePtr rt = mt::make_runtime(opts);
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 500, 7, rt.get());
  for (int t = 0; t < 150; ++t) {
    NodeP n = random_node(g, fx.mems, 0);
    FilterPtr f(*n);
    ASSERT_EQ(store_select(fx, f.f), model_select(fx, *n)) << "filter " << t;
  }
  for (int t = 0; t < 10; ++t) {
    NodeP n = random_node(g, fx.mems, 0);
    FilterPtr f(*n);
    mnemo_search_options o = mnemo_search_options_default();
    o.where = f.f;
    check_search(fx, {n.get(), n.get()}, o, 1 + g() % 30, g);
  }
  // Keys are unique across shards; removal frees them in any shard.
  std::vector<const char*> keys;
  std::vector<uint64_t> want;
  for (const Mem& m : fx.mems)
    if (!m.key.empty()) keys.push_back(m.key.c_str()), want.push_back(m.id);
  mt::Buf<uint64_t> got(keys.size());
  ASSERT_EQ(mnemo_store_ids_of_keys(fx.store.get(), keys.data(), keys.size(), got.data()), MNEMO_OK);
  EXPECT_EQ(std::vector<uint64_t>(got.data(), got.data() + keys.size()), want);
  mnemo_namespaces* ns = nullptr;
  ASSERT_EQ(mnemo_store_namespaces(fx.store.get(), &ns), MNEMO_OK);
  std::map<std::vector<std::string>, uint64_t> counts;
  for (const Mem& m : fx.mems)
    if (!m.ns.empty()) ++counts[m.ns];
  ASSERT_EQ(mnemo_namespaces_count(ns), counts.size());
  for (uint64_t i = 0; i < mnemo_namespaces_count(ns); ++i) {
    const char* const* parts = nullptr;
    uint32_t depth = 0;
    uint64_t memories = 0;
    ASSERT_EQ(mnemo_namespaces_get(ns, i, &parts, &depth, &memories), MNEMO_OK);
    EXPECT_EQ(counts[std::vector<std::string>(parts, parts + depth)], memories);
  }
  mnemo_namespaces_destroy(ns);
}

}  // namespace

namespace {

// A row's score does not depend on the plan that read it: the filtered
// results' scores are those of the unfiltered search, bit for bit, whether
// the filter allows many rows of a block (read with it) or few (read alone).
TEST(Fields, FilteredScoresEqualUnfilteredScoresBitForBit) {
  auto g = mt::rng_for_test();
  for (int32_t dtype : {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16}) {
    const uint64_t n = 3000, dim = 33;
    auto s = mt::make_store(dim, dtype, MNEMO_METRIC_COSINE);
    mt::Buf<uint64_t> ids(n);
    mt::Buf<float> v(n * dim);
    std::vector<std::vector<const char*>> tags(n);
    std::vector<mnemo_memory_fields> f(n, mnemo_memory_fields_default());
    static const char* kRare = "rare";
    static const char* kMost = "most";
    for (uint64_t i = 0; i < n; ++i) {
      ids[i] = i * 3 + 1;
      for (uint64_t d = 0; d < dim; ++d) v[i * dim + d] = mt::rand_nonzero(g);
      if (g() % 50 == 0) tags[i].push_back(kRare);
      if (g() % 10 != 0) tags[i].push_back(kMost);
      f[i].set = MNEMO_FIELD_TAGS;
      f[i].tags = tags[i].data();
      f[i].tag_count = static_cast<uint32_t>(tags[i].size());
    }
    ASSERT_EQ(
        mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, n, nullptr, nullptr, f.data()),
        MNEMO_OK);
    mt::Buf<float> q(dim);
    for (uint64_t d = 0; d < dim; ++d) q[d] = mt::rand_nonzero(g);
    mt::Buf<uint64_t> all_ids(n);
    mt::Buf<float> all_scores(n);
    ASSERT_EQ(mnemo_store_search(s.get(), q.data(), 1, n, nullptr, all_ids.data(), all_scores.data()), MNEMO_OK);
    std::map<uint64_t, float> score_of;
    for (uint64_t i = 0; i < n; ++i) score_of[all_ids[i]] = all_scores[i];
    for (const char* tag : {kRare, kMost}) {
      mnemo_filter* flt = nullptr;
      ASSERT_EQ(mnemo_filter_create(&flt), MNEMO_OK);
      ASSERT_EQ(mnemo_filter_tags(flt, MNEMO_OP_ANY, &tag, 1, nullptr), MNEMO_OK);
      mnemo_search_options o = mnemo_search_options_default();
      o.where = flt;
      const uint64_t k = 40;
      mt::Buf<uint64_t> out(k);
      mt::Buf<float> sc(k);
      ASSERT_EQ(mnemo_store_search(s.get(), q.data(), 1, k, &o, out.data(), sc.data()), MNEMO_OK);
      for (uint64_t i = 0; i < k && out[i] != MNEMO_NO_ID; ++i)
        EXPECT_EQ(std::memcmp(&sc[i], &score_of.at(out[i]), 4), 0) << tag << " rank " << i;
      mnemo_filter_destroy(flt);
    }
  }
}

}  // namespace

namespace {

// A repeated id in one write takes its last entry alone: fields named only
// by an earlier entry are not written, and its key is not claimed.
TEST(Fields, ARepeatedIdTakesItsLastEntryAlone) {
  auto s = mt::make_store(2, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  mt::Buf<uint64_t> ids(3);
  mt::Buf<float> v(6);
  for (int i = 0; i < 6; ++i) v[i] = 0.25f + i;
  ids[0] = 5, ids[1] = 5, ids[2] = 6;
  const char* first[] = {"first"};
  mnemo_memory_fields f[3] = {mnemo_memory_fields_default(), mnemo_memory_fields_default(),
                              mnemo_memory_fields_default()};
  f[0].set = MNEMO_FIELD_KEY | MNEMO_FIELD_TAGS;
  f[0].key = "k1";
  f[0].tags = first;
  f[0].tag_count = 1;
  f[1].set = MNEMO_FIELD_KEY;
  f[1].key = "k2";
  f[2].set = MNEMO_FIELD_KEY;
  f[2].key = "k1";  // free again: id 5 ends up holding k2
  ASSERT_EQ(mnemo_store_add_with_fields(s.get(), ids.data(), v.data(), MNEMO_DTYPE_F32, 3, nullptr, nullptr, f),
            MNEMO_OK)
      << mnemo_last_error();
  mnemo_records* rec = nullptr;
  ASSERT_EQ(mnemo_store_read(s.get(), ids.data(), 3, &rec), MNEMO_OK);
  uint32_t found = 0;
  mnemo_memory_fields out = mnemo_memory_fields_default();
  ASSERT_EQ(mnemo_records_get(rec, 0, &found, nullptr, &out, nullptr, nullptr), MNEMO_OK);
  EXPECT_STREQ(out.key, "k2");
  EXPECT_EQ(out.tag_count, 0u);
  ASSERT_EQ(mnemo_records_get(rec, 2, &found, nullptr, &out, nullptr, nullptr), MNEMO_OK);
  EXPECT_STREQ(out.key, "k1");
  mnemo_records_destroy(rec);
}

TEST(Fields, NumbersCompareExactlyAcrossKinds) { check_exact_numbers(mt::rt()); }

// A batch of queries whose selective filters overlap (the CPU walks the
// store once for all of them, chunk by chunk): the same answers as the
// model, k from 1 to past the matches.
TEST(Fields, BatchesOfOverlappingSelectiveFilters) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 6000, 10, mt::rt());
  std::vector<NodeP> nodes;
  for (const auto& ns : kSpaces)
    if (ns.size() >= 2) nodes.push_back(node_of(Node::ns_eq, ns));
  for (const char* t : {"red", "news", "work"})
    nodes.push_back(node_of(Node::all, {}, {node_of(Node::tags_any, {t}), node_of(Node::ns_under, {"users"})}));
  std::vector<std::unique_ptr<FilterPtr>> filters;
  for (const auto& n : nodes) filters.push_back(std::make_unique<FilterPtr>(*n));
  for (uint64_t k : {1, 10, 50, 2000}) {
    const uint64_t nq = 24;
    std::vector<const mnemo_filter*> each;
    std::vector<const Node*> per_query;
    for (uint64_t j = 0; j < nq; ++j) {
      const size_t f = g() % nodes.size();
      each.push_back(filters[f]->f);
      per_query.push_back(nodes[f].get());
    }
    mnemo_search_options o = mnemo_search_options_default();
    o.where_each = each.data();
    check_search(fx, per_query, o, k, g);
  }
}

}  // namespace
