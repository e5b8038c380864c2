// Memories' fields in snapshots and journals: every field kind at the
// header's limits saved and opened again, files of older formats opening
// without fields, every damage to a fields section (and every entry no store
// could have written, under a valid checksum) refused as corrupt with nothing
// left behind, field writes replayed from the journal (with and without a
// checkpoint, a torn final record dropped, a damaged one refused), and the
// same through a sharded store.
#include <dirent.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../store_fields_model.h"
#include "../support.h"
#include "durable_support.h"

namespace {

constexpr uint64_t kDim = 4;
mnemo_store* const kSentinel = reinterpret_cast<mnemo_store*>(uintptr_t{0x5EED});

template <class T>
void put_at(std::string& b, uint64_t at, T v) {
  std::memcpy(&b[at], &v, sizeof v);
}

template <class T>
T get_at(const std::string& b, uint64_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// A memory's vector: small integers from its id, so every test knows it.
void row_of(uint64_t id, float* v) {
  for (uint64_t j = 0; j < kDim; ++j) v[j] = static_cast<float>((id + j) % 7) - 3.0f;
}

// mnemo_store_add_with_fields of w[i] to ids[i] (times = id, importance =
// id / 4, so filters on them have something to find).
mnemo_status add(mnemo_store* s, const std::vector<uint64_t>& ids, const std::vector<fm::Write>& w) {
  mt::Buf<uint64_t> id(ids.size());
  mt::Buf<float> v(ids.size() * kDim);
  mt::Buf<double> t(ids.size());
  mt::Buf<float> imp(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    id[i] = ids[i];
    row_of(ids[i], v.data() + i * kDim);
    t[i] = static_cast<double>(ids[i]);
    imp[i] = static_cast<float>(ids[i]) / 4.0f;
  }
  fm::CWrites c(w);
  return mnemo_store_add_with_fields(s, id.data(), v.data(), MNEMO_DTYPE_F32, ids.size(), t.data(), imp.data(),
                                     c.data());
}

mnemo_status update(mnemo_store* s, const std::vector<uint64_t>& ids, const std::vector<fm::Write>& w) {
  mt::Buf<uint64_t> id(ids.size());
  std::copy(ids.begin(), ids.end(), id.data());
  fm::CWrites c(w);
  return mnemo_store_update_fields(s, id.data(), c.data(), ids.size());
}

mnemo_status remove(mnemo_store* s, const std::vector<uint64_t>& ids) {
  mt::Buf<uint64_t> id(ids.size());
  std::copy(ids.begin(), ids.end(), id.data());
  return mnemo_store_remove(s, id.data(), ids.size(), nullptr);
}

// What the store and a model hold: the live ids and their fields.
struct Model {
  std::set<uint64_t> live;
  fm::FieldsModel fields;
  void add(const std::vector<uint64_t>& ids, const std::vector<fm::Write>& w) {
    live.insert(ids.begin(), ids.end());
    fields.write(ids, w);
  }
  void remove(const std::vector<uint64_t>& ids) {
    for (uint64_t id : ids) live.erase(id), fields.remove(id);
  }
};

// The store holds exactly the model: every live id with its fields (none
// where the model has none), every key found, and nothing else.
::testing::AssertionResult holds(const mnemo_store* s, const Model& m) {
  uint64_t n = 0;
  if (mnemo_store_count(s, &n) != MNEMO_OK) return ::testing::AssertionFailure() << mt::last_error();
  if (n != m.live.size()) return ::testing::AssertionFailure() << "count " << n << ", want " << m.live.size();
  std::vector<uint64_t> ids(m.live.begin(), m.live.end());
  ids.push_back(999999);  // absent
  mt::Buf<uint64_t> b(ids.size());
  std::copy(ids.begin(), ids.end(), b.data());
  mnemo_records* r = nullptr;
  if (mnemo_store_read(s, b.data(), ids.size(), &r) != MNEMO_OK)
    return ::testing::AssertionFailure() << "read: " << mt::last_error();
  for (size_t i = 0; i < ids.size(); ++i) {
    uint64_t id = 0;
    fm::Fields got;
    std::string why;
    const int found = fm::read_record(r, i, &id, &got, &why);
    const bool want_found = i + 1 < ids.size();
    if (found != (want_found ? 1 : 0) || (want_found && id != ids[i])) {
      mnemo_records_destroy(r);
      return ::testing::AssertionFailure() << "id " << ids[i] << ": found " << found << " " << why;
    }
    if (!want_found) continue;
    const fm::Fields* want = m.fields.get(ids[i]);
    const fm::Fields none;
    if (got != (want ? *want : none)) {
      mnemo_records_destroy(r);
      return ::testing::AssertionFailure()
             << "id " << ids[i] << " holds " << fm::describe(got) << ", want " << fm::describe(want ? *want : none);
    }
  }
  mnemo_records_destroy(r);
  std::vector<const char*> keys;
  for (const auto& [k, id] : m.fields.keys()) keys.push_back(k.c_str());
  keys.push_back("no such key");
  mt::Buf<uint64_t> out(keys.size());
  if (mnemo_store_ids_of_keys(s, keys.data(), keys.size(), out.data()) != MNEMO_OK)
    return ::testing::AssertionFailure() << "ids_of_keys: " << mt::last_error();
  size_t i = 0;
  for (const auto& [k, id] : m.fields.keys())
    if (out[i++] != id) return ::testing::AssertionFailure() << "key '" << k << "' finds " << out[i - 1];
  if (out[i] != MNEMO_NO_ID) return ::testing::AssertionFailure() << "an unknown key finds " << out[i];
  return ::testing::AssertionSuccess();
}

// The ids a filter selects, from the store and from the model.
std::vector<uint64_t> select(const mnemo_store* s, const fm::Node& n) {
  mnemo_filter* f = nullptr;
  EXPECT_OK(mnemo_filter_create(&f));
  uint32_t root = 0;
  EXPECT_OK(fm::build(f, n, &root));
  EXPECT_OK(mnemo_filter_set_root(f, root));
  mt::Buf<uint64_t> ids(4096);
  uint64_t written = 0, total = 0;
  EXPECT_OK(mnemo_store_select(s, f, 0, 4096, ids.data(), &written, &total));
  mnemo_filter_destroy(f);
  return std::vector<uint64_t>(ids.data(), ids.data() + written);
}
std::vector<uint64_t> select(const Model& m, const fm::Node& n) {
  std::vector<uint64_t> out;
  for (uint64_t id : m.live)
    if (fm::matches(n, fm::Memory{id, m.fields.get(id), static_cast<double>(id), static_cast<float>(id) / 4.0f}))
      out.push_back(id);
  return out;
}

// A few filters over what the tests write.
std::vector<fm::Node> probe_filters() {
  std::vector<fm::Node> v;
  fm::Node n;
  n.kind = fm::Node::ns, n.op = MNEMO_OP_NAMESPACE_UNDER, n.strs = {"users"};
  v.push_back(n);
  n = fm::Node{};
  n.kind = fm::Node::tags, n.op = MNEMO_OP_ANY, n.strs = {"red", "\xc3\xa9t\xc3\xa9"};
  v.push_back(n);
  n = fm::Node{};
  n.kind = fm::Node::attr, n.op = MNEMO_OP_GE, n.name = "n", n.values = {fm::Value(int64_t{2})};
  v.push_back(n);
  fm::Node x;
  x.kind = fm::Node::attr, x.op = MNEMO_OP_NE, x.name = "s", x.values = {fm::Value(std::string("b"))};
  n = fm::Node{};
  n.kind = fm::Node::negate, n.kids = {x};
  v.push_back(n);
  n = fm::Node{};
  n.kind = fm::Node::keys, n.strs = {"k1", "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", "k9"};
  v.push_back(n);
  return v;
}

// Small writes of every field kind (the corruption tests' files stay short).
fm::Write small_write(uint64_t id) {
  fm::Write w;
  w.set = MNEMO_FIELD_ALL;
  if (id % 3 != 0) w.key = "k" + std::to_string(id);
  if (id == 2) w.key = "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87";
  w.ns = id % 2 ? std::vector<std::string>{"users", std::to_string(id % 4)} : std::vector<std::string>{"agents"};
  w.tags = {id % 2 ? "red" : "blue", "\xc3\xa9t\xc3\xa9"};
  if (id % 4 == 0) w.tags.clear();
  w.attrs = {{"n", fm::Value(static_cast<int64_t>(id))},
             {"x", fm::Value(static_cast<double>(id) / 3.0)},
             {"b", fm::Value(id % 2 == 0)},
             {"s", fm::Value(std::string(id % 2 ? "a" : "b"))}};
  w.payload = "text of memory " + std::to_string(id);
  return w;
}

std::string files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string s;
  for (const auto& n : names) s += n + " ";
  return s;
}

// ---- the store file's sections -------------------------------------------------

struct Section {
  uint32_t tag;
  uint64_t head, payload, bytes;  // where it starts, where its payload starts, payload size
};

std::vector<Section> sections_of(const std::string& f, uint64_t header) {
  std::vector<Section> s;
  for (uint64_t pos = header; pos + 16 <= f.size();) {
    const Section sec{get_at<uint32_t>(f, pos), pos, pos + 16, get_at<uint64_t>(f, pos + 8)};
    if (sec.payload + sec.bytes + 8 > f.size()) break;
    s.push_back(sec);
    pos = sec.payload + sec.bytes + 8;
  }
  return s;
}

const Section& section(const std::vector<Section>& secs, uint32_t tag) {
  for (const Section& s : secs)
    if (s.tag == tag) return s;
  ADD_FAILURE() << "no section " << tag;
  return secs.front();
}

// The header's checksum and every section's made valid again after an edit.
void reseal(std::string& f) {
  const uint32_t version = get_at<uint32_t>(f, 8);
  const uint64_t hb = version >= 5 ? 56 : version >= 2 ? 48 : 40;
  put_at<uint64_t>(f, hb, XXH3_64bits(f.data(), hb));
  for (const Section& s : sections_of(f, hb + 8))
    put_at<uint64_t>(f, s.payload + s.bytes, XXH3_64bits(f.data() + s.payload, s.bytes));
}

// The file with the fields section's payload replaced by `payload`.
std::string with_fields(const std::string& f, const std::string& payload) {
  const auto secs = sections_of(f, 64);
  const Section& s = section(secs, 7);
  std::string out = f.substr(0, s.payload) + payload + f.substr(s.payload + s.bytes);
  put_at<uint64_t>(out, s.head + 8, payload.size());
  reseal(out);
  return out;
}

// The codec's bytes of one memory's fields (core/meta/fields_codec.cpp).
struct Enc {
  std::string b;
  template <class T>
  Enc& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Enc& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
};
std::string entry(uint64_t id, const std::string& fields) {
  Enc e;
  e.put<uint64_t>(id).put<uint64_t>(fields.size());
  return e.b + fields;
}
// A memory holding only a key (set = KEY) or only tags.
std::string key_only(const std::string& key) {
  Enc e;
  e.put<uint32_t>(MNEMO_FIELD_KEY).str(key).put<uint32_t>(0).put<uint32_t>(0).put<uint32_t>(0).str("");
  return e.b;
}
std::string tags_only(const std::vector<std::string>& tags, uint32_t count_field) {
  Enc e;
  e.put<uint32_t>(MNEMO_FIELD_TAGS).str("").put<uint32_t>(0).put<uint32_t>(count_field);
  for (const auto& t : tags) e.str(t);
  e.put<uint32_t>(0).str("");
  return e.b;
}
std::string attr_only(const std::string& name, uint32_t type, const std::string& value_bytes) {
  Enc e;
  e.put<uint32_t>(MNEMO_FIELD_ATTRIBUTES).str("").put<uint32_t>(0).put<uint32_t>(0).put<uint32_t>(1).str(name);
  e.put<uint32_t>(type);
  e.b += value_bytes;
  e.str("");
  return e.b;
}

}  // namespace

// Every field kind, each at the header's limits, saved and opened again
// (and saved once more: the same bytes); bad fields refused on the way in.
TEST(FieldsDurable, EveryFieldKindAtItsLimitsSurvivesSaveAndOpen) {
  dt::TempDir dir;
  mt::StorePtr s = mt::make_store(kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
  ASSERT_TRUE(s);
  Model m;
  // The largest of everything.
  fm::Write big;
  big.set = MNEMO_FIELD_ALL;
  while (big.key.size() + 8 <= MNEMO_MAX_KEY_BYTES) big.key += "\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87";  // ключ
  big.key.resize(MNEMO_MAX_KEY_BYTES, 'k');
  for (uint32_t i = 0; i < MNEMO_MAX_NAMESPACE_DEPTH; ++i) big.ns.push_back("\xc3\xbc" + std::to_string(i));
  big.ns[0] = std::string(MNEMO_MAX_NAME_BYTES, 'u');
  for (uint32_t i = 0; i < MNEMO_MAX_TAGS; ++i) big.tags.push_back("t\xe2\x82\xac" + std::to_string(i));
  const int64_t ints[] = {0, -1, INT64_MIN, INT64_MAX, (int64_t{1} << 53) + 1};
  const double reals[] = {-0.0, 0.0, 1e308, -4.9e-324, 9007199254740993.0, -2.5};
  for (uint32_t i = 0; i < MNEMO_MAX_ATTRIBUTES; ++i) {
    const std::string name = "a" + std::to_string(i);
    switch (i % 4) {
      case 0: big.attrs.emplace_back(name, fm::Value(ints[i / 4 % 5])); break;
      case 1: big.attrs.emplace_back(name, fm::Value(reals[i / 4 % 6])); break;
      case 2: big.attrs.emplace_back(name, fm::Value(i % 8 == 2)); break;
      default:
        big.attrs.emplace_back(name, fm::Value(i == 3   ? std::string()
                                               : i == 7 ? std::string(MNEMO_MAX_NAME_BYTES, 's')
                                                        : "\xe6\x97\xa5" + name));
    }
  }
  big.attrs.back().first = std::string(MNEMO_MAX_NAME_BYTES, 'n');
  big.payload.resize(MNEMO_MAX_PAYLOAD_BYTES);
  for (size_t i = 0; i < big.payload.size(); ++i) big.payload[i] = static_cast<char>((i * 131) >> 3);  // NULs too
  ASSERT_TRUE(fm::acceptable(big));
  ASSERT_OK(add(s.get(), {7}, {big}));
  m.add({7}, {big});
  // Small memories of every kind, one without fields, one with a payload only.
  std::vector<uint64_t> ids;
  std::vector<fm::Write> ws;
  for (uint64_t id = 1; id <= 6; ++id) ids.push_back(id), ws.push_back(small_write(id));
  fm::Write payload_only;
  payload_only.set = MNEMO_FIELD_PAYLOAD;
  payload_only.payload = std::string("\0{\"json\": true}\0", 17);
  ids.push_back(8), ws.push_back(payload_only);
  ids.push_back(9), ws.push_back(fm::Write{});
  ASSERT_OK(add(s.get(), ids, ws));
  m.add(ids, ws);
  ASSERT_TRUE(holds(s.get(), m));

  // Refused on the way in, changing nothing: empty names, a limit passed.
  std::vector<fm::Write> bad(7, small_write(10));
  bad[0].tags.push_back("");
  bad[1].ns.push_back("");
  bad[2].attrs.emplace_back("", fm::Value(int64_t{1}));
  bad[3].payload.assign(MNEMO_MAX_PAYLOAD_BYTES + 1, 'p');
  for (uint32_t i = 0; i <= MNEMO_MAX_TAGS; ++i) bad[4].tags.push_back("t" + std::to_string(i));
  bad[5].key.assign(MNEMO_MAX_KEY_BYTES + 1, 'k');
  for (uint32_t i = 0; i <= MNEMO_MAX_ATTRIBUTES; ++i)
    bad[6].attrs.emplace_back("a" + std::to_string(i), fm::Value(1.0));
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_TRUE(mt::failed_with(add(s.get(), {10}, {bad[i]}), MNEMO_E_INVALID_ARGUMENT)) << "bad write " << i;
    EXPECT_TRUE(mt::failed_with(update(s.get(), {1}, {bad[i]}), MNEMO_E_INVALID_ARGUMENT)) << "bad update " << i;
  }
  ASSERT_TRUE(holds(s.get(), m));

  const std::string path = dir.file("fields.mnemo"), again = dir.file("again.mnemo");
  ASSERT_OK(mnemo_store_save(s.get(), path.c_str()));
  mnemo_store* o = nullptr;
  ASSERT_OK(mnemo_store_open(mt::rt(), path.c_str(), &o));
  mt::StorePtr opened(o);
  EXPECT_TRUE(holds(opened.get(), m));
  for (const fm::Node& n : probe_filters()) {
    EXPECT_EQ(select(opened.get(), n), select(m, n)) << fm::describe(n);
    EXPECT_EQ(select(opened.get(), n), select(s.get(), n)) << fm::describe(n);
  }
  // Saved again: the same bytes (fields are written in byte order, not in
  // the order a store interned their strings).
  ASSERT_OK(mnemo_store_save(opened.get(), again.c_str()));
  EXPECT_TRUE(dt::slurp(path) == dt::slurp(again));
  // Writes go on after the open: keys stay unique, fields change.
  fm::Write steal;
  steal.set = MNEMO_FIELD_KEY;
  steal.key = big.key;
  EXPECT_TRUE(mt::failed_with(update(opened.get(), {1}, {steal}), MNEMO_E_INVALID_ARGUMENT));
  fm::Write clear;
  clear.set = MNEMO_FIELD_KEY | MNEMO_FIELD_TAGS;
  ASSERT_OK(update(opened.get(), {7}, {clear}));
  m.fields.write({7}, {clear});
  ASSERT_OK(update(opened.get(), {1}, {steal}));
  m.fields.write({1}, {steal});
  EXPECT_TRUE(holds(opened.get(), m));
}

// Files of every earlier format open, their memories without fields, their
// index (version 4) kept; saved again they are version 5.
TEST(FieldsDurable, OlderFormatsOpenWithoutFields) {
  dt::TempDir dir;
  const std::string src = dir.file("src.mnemo");
  Model m;
  {
    mt::StorePtr s = mt::make_store(kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
    std::vector<uint64_t> ids;
    std::vector<fm::Write> none;
    for (uint64_t id = 1; id <= 40; ++id) ids.push_back(id), none.push_back(fm::Write{});
    ASSERT_OK(add(s.get(), ids, none));
    m.add(ids, none);
    mnemo_index_options io = mnemo_index_options_default();
    io.nlist = 3;
    io.background = 0;
    ASSERT_OK(mnemo_store_build_index(s.get(), &io));
    ASSERT_OK(mnemo_store_save(s.get(), src.c_str()));
  }
  const std::string v5 = dt::slurp(src);
  ASSERT_EQ(get_at<uint32_t>(v5, 8), 5u);
  ASSERT_EQ(get_at<uint32_t>(v5, 48), 1u) << "flags: an index follows";
  const auto secs = sections_of(v5, 64);
  ASSERT_EQ(secs.size(), 7u);
  ASSERT_EQ(secs[5].tag, 7u);
  ASSERT_EQ(secs[5].bytes, 0u);
  ASSERT_EQ(secs[6].tag, 6u);
  // Version 4: the 48-byte header, sections 1-5, the index; version 3
  // without the index.
  for (const uint32_t version : {4u, 3u}) {
    SCOPED_TRACE("version " + std::to_string(version));
    std::string f = v5.substr(0, 48);
    put_at<uint32_t>(f, 8, version);
    put_at<uint32_t>(f, 12, 48);
    f.append(8, '\0');
    f += v5.substr(secs[0].head, secs[4].payload + secs[4].bytes + 8 - secs[0].head);
    if (version == 4) f += v5.substr(secs[6].head);
    reseal(f);
    const std::string path = dir.file("v" + std::to_string(version) + ".mnemo");
    dt::spit(path, f);
    mnemo_store* o = nullptr;
    ASSERT_OK(mnemo_store_open(mt::rt(), path.c_str(), &o));
    mt::StorePtr opened(o);
    EXPECT_TRUE(holds(opened.get(), m));
    mnemo_index_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ASSERT_OK(mnemo_store_index_info(opened.get(), &info));
    EXPECT_EQ(info.nlist, version == 4 ? 3u : 0u);
    // Fields written now are kept from here on.
    ASSERT_OK(update(opened.get(), {5}, {small_write(5)}));
    Model m2 = m;
    m2.fields.write({5}, {small_write(5)});
    const std::string again = dir.file("again.mnemo");
    ASSERT_OK(mnemo_store_save(opened.get(), again.c_str()));
    const std::string saved = dt::slurp(again);
    EXPECT_EQ(get_at<uint32_t>(saved, 8), 5u);
    EXPECT_EQ(get_at<uint32_t>(saved, 48), version == 4 ? 1u : 0u);
    ASSERT_OK(mnemo_store_open(mt::rt(), again.c_str(), &o));
    mt::StorePtr reopened(o);
    EXPECT_TRUE(holds(reopened.get(), m2));
  }
  // A version 5 header flag this format does not know, or a reserved
  // field not zero, is refused; so is an index flag without the index.
  for (const auto& [at, value] : std::vector<std::pair<uint64_t, uint32_t>>{{48, 2}, {48, 3}, {52, 1}}) {
    std::string f = v5;
    put_at<uint32_t>(f, at, value);
    reseal(f);
    const std::string path = dir.file("flags.mnemo");
    dt::spit(path, f);
    mnemo_store* o = kSentinel;
    EXPECT_TRUE(mt::failed_with(mnemo_store_open(mt::rt(), path.c_str(), &o), MNEMO_E_CORRUPT));
    EXPECT_EQ(o, kSentinel);
    EXPECT_NE(mt::last_error().find("flags"), std::string::npos) << mt::last_error();
  }
  {
    std::string f = v5.substr(0, secs[6].head);
    reseal(f);
    const std::string path = dir.file("noindex.mnemo");
    dt::spit(path, f);
    mnemo_store* o = kSentinel;
    EXPECT_TRUE(mt::failed_with(mnemo_store_open(mt::rt(), path.c_str(), &o), MNEMO_E_CORRUPT));
    EXPECT_NE(mt::last_error().find("index section is missing"), std::string::npos) << mt::last_error();
  }
}

// Every bit flip and every truncation of a file with fields, and every
// entry no store could have written (under valid checksums), is refused as
// corrupt: no store, nothing written beside the file, the file unchanged.
TEST(FieldsDurable, EveryDamageToTheFieldsSectionIsRefused) {
  dt::TempDir dir;
  const std::string src = dir.file("src.mnemo");
  {
    mt::StorePtr s = mt::make_store(kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT);
    std::vector<uint64_t> ids;
    std::vector<fm::Write> ws;
    for (uint64_t id = 1; id <= 5; ++id) ids.push_back(id), ws.push_back(small_write(id));
    ws[4] = fm::Write{};  // memory 5 has no fields
    ASSERT_OK(add(s.get(), ids, ws));
    ASSERT_OK(mnemo_store_save(s.get(), src.c_str()));
  }
  const std::string good = dt::slurp(src);
  const auto secs = sections_of(good, 64);
  ASSERT_EQ(secs.size(), 6u);
  const Section& fs = section(secs, 7);
  ASSERT_GT(fs.bytes, 200u);
  const std::string path = dir.file("bad.mnemo");
  dt::spit(path, good);
  const std::string listing = files_in(dir.path());
  uint64_t trials = 0, refused = 0;
  auto refuse = [&](const std::string& bytes, const std::string& what, const std::string& says) {
    dt::spit(path, bytes);
    mnemo_store* out = kSentinel;
    const mnemo_status st = mnemo_store_open(mt::rt(), path.c_str(), &out);
    ++trials;
    if (st == MNEMO_OK) {
      mnemo_store_destroy(out);
      ADD_FAILURE() << what << ": opened";
      return;
    }
    const bool ok = mt::failed_with(st, MNEMO_E_CORRUPT) && out == kSentinel &&
                    mt::last_error().find(says) != std::string::npos && dt::slurp(path) == bytes &&
                    files_in(dir.path()) == listing && mt::last_error().find(path) != std::string::npos;
    if (!ok) ADD_FAILURE() << what << ": " << mt::status_str(st) << " " << mt::last_error();
    refused += ok;
  };
  // Single bits of the section head, payload and checksum.
  for (uint64_t bit = fs.head * 8; bit < (fs.payload + fs.bytes + 8) * 8; ++bit) {
    std::string b = good;
    b[bit / 8] = static_cast<char>(b[bit / 8] ^ (1 << (bit % 8)));
    const uint64_t at = bit / 8;
    const std::string says = at < fs.head + 4   ? "expected the fields section"
                             : at < fs.head + 8 ? "reserved field of the fields section"
                             : at < fs.payload  ? ""  // the length: truncated or checksum
                                                : "checksum mismatch in the fields section";
    refuse(b, "bit " + std::to_string(bit), says);
  }
  // Every cut inside the section, and one right before it.
  for (uint64_t len = fs.head; len < good.size(); ++len)
    refuse(good.substr(0, len), "cut at " + std::to_string(len), "");
  std::printf("fields section: %llu damaged copies refused as corrupt\n", static_cast<unsigned long long>(refused));
  EXPECT_EQ(refused, trials);

  // Entries no store writes, resealed: what a buggy or hostile writer makes.
  const std::string payload = good.substr(fs.payload, fs.bytes);
  const uint64_t first_bytes = get_at<uint64_t>(payload, 8);
  const std::string first = payload.substr(0, 16 + first_bytes), rest = payload.substr(16 + first_bytes);
  const std::string fields1 = first.substr(16);
  struct Case {
    std::string payload, what, says;
  };
  std::string dup_key_entry = entry(5, key_only("k1"));
  const std::vector<Case> cases = {
      {entry(77, fields1) + rest, "an id not in the file", "which the file does not hold"},
      {first + first + rest, "a memory given twice", "given fields twice"},
      {payload + dup_key_entry, "a key another memory holds", "is also memory"},
      {payload + entry(5, key_only("")), "set naming a field not held", "names fields it does not hold"},
      {payload + entry(5, tags_only({}, 0)), "set naming tags with none", "names fields it does not hold"},
      {payload + entry(5, tags_only({"a", ""}, 2)), "an empty tag", "a tag is empty"},
      {payload + entry(5, tags_only({std::string("a\0b", 3)}, 1)), "a tag holding NUL", "NUL"},
      {payload + entry(5, tags_only({"a"}, MNEMO_MAX_TAGS + 1)), "more tags than the limit", "too many tags"},
      {payload + entry(5, tags_only({std::string(MNEMO_MAX_NAME_BYTES + 1, 't')}, 1)), "a tag past the limit",
       "past the limits"},
      {payload + entry(5, key_only(std::string("k\0", 2))), "a key holding NUL", "NUL"},
      {payload + entry(5, attr_only("v", 5, std::string(8, '\0'))), "an unknown value type", "unknown value type"},
      {payload + entry(5, attr_only("v", 2, std::string("\0\0\0\0\0\0\xf8\x7f", 8))), "a NaN DOUBLE", "NaN"},
      {payload + entry(5, attr_only("v", 3, std::string("\2\0\0\0\0\0\0\0", 8))), "a BOOL of 2", "not 0 or 1"},
      {payload + entry(5, attr_only("", 1, std::string(8, '\0'))), "an empty attribute name", "is empty"},
      {payload + entry(5, key_only("k5") + "x"), "bytes after an entry's fields", "bytes after its fields"},
      {payload + entry(5, key_only("k5")).substr(0, 20), "a cut entry", "runs past the end"},
      {payload + std::string(7, '\0'), "a cut entry head", "runs past the end"},
      {payload + entry(5, "").substr(0, 8) + Enc{}.put<uint64_t>(uint64_t{1} << 40).b, "an entry past any length",
       "too long"},
      {payload + entry(5, key_only("k5")).substr(0, 8) + Enc{}.put<uint64_t>(1000).b + key_only("k5"),
       "an entry longer than the section", "runs past the end"},
      {payload + entry(5, key_only("k5")).substr(0, 8) + Enc{}.put<uint64_t>(8).b + key_only("k5").substr(0, 8),
       "fields cut inside an entry", "ends before its contents"},
  };
  for (const Case& c : cases) refuse(with_fields(good, c.payload), c.what, c.says);
  // The section's declared length past the file (no allocation for it).
  for (const uint64_t len : {fs.bytes + 1, uint64_t{1} << 62, ~uint64_t{0}}) {
    std::string b = good;
    put_at<uint64_t>(b, fs.head + 8, len);
    refuse(b, "fields length " + std::to_string(len), "runs past the end of the file");
  }
  // The same section resealed whole opens (the edits above are what fail).
  {
    dt::spit(path, with_fields(good, payload));
    mnemo_store* out = nullptr;
    ASSERT_OK(mnemo_store_open(mt::rt(), path.c_str(), &out));
    mnemo_store_destroy(out);
  }
  // Durable: a damaged snapshot is refused and its journal left as it was.
  {
    const std::string dpath = dir.file("durable.mnemo");
    std::string b = good;
    b[fs.payload + 3] = static_cast<char>(b[fs.payload + 3] ^ 0x10);
    dt::spit(dpath, b);
    mnemo_store* out = kSentinel;
    EXPECT_TRUE(mt::failed_with(mnemo_store_open_durable(mt::rt(), dpath.c_str(), nullptr, &out), MNEMO_E_CORRUPT));
    EXPECT_EQ(out, kSentinel);
    EXPECT_EQ(dt::slurp(dpath), b);
    EXPECT_EQ(access((dpath + ".journal").c_str(), F_OK), -1) << "a refused open made a journal";
  }
}

// Field writes in a durable store: replayed from the journal after a close
// without a checkpoint, kept by a checkpoint, and both mixed; removals and
// key moves included.
TEST(FieldsDurable, JournalReplayGivesBackEveryFieldWrite) {
  dt::TempDir dir;
  const std::string path = dir.file("store.mnemo");
  mnemo_durable_options o = mnemo_durable_options_default();
  o.dim = kDim;
  o.metric = MNEMO_METRIC_DOT;
  auto open = [&](const mnemo_durable_options* opts) {
    mnemo_store* s = nullptr;
    EXPECT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), opts, &s));
    return mt::StorePtr(s);
  };
  auto rng = mt::rng_for_test();
  Model m;
  mt::StorePtr s = open(&o);
  ASSERT_TRUE(s);
  for (int round = 0; round < 6; ++round) {
    for (int step = 0; step < 12; ++step) {
      const uint64_t n = 1 + mt::rand_below(rng, 3);
      std::vector<uint64_t> ids;
      std::vector<fm::Write> ws;
      for (uint64_t i = 0; i < n; ++i) {
        ids.push_back(1 + mt::rand_below(rng, 12));
        fm::Write w = small_write(ids.back());
        w.set = static_cast<uint32_t>(mt::rand_below(rng, MNEMO_FIELD_ALL + 1));
        if (mt::rand_below(rng, 3) == 0) w.key = "k" + std::to_string(mt::rand_below(rng, 12));  // maybe taken
        ws.push_back(w);
      }
      const uint64_t what = mt::rand_below(rng, 4);
      bool present = true;
      for (uint64_t id : ids) present = present && m.live.count(id);
      const bool conflict = m.fields.key_conflict(ids, ws);
      if (what == 0) {
        const mnemo_status st = add(s.get(), ids, ws);
        ASSERT_EQ(st, conflict ? MNEMO_E_INVALID_ARGUMENT : MNEMO_OK) << mt::last_error();
        if (!conflict) m.add(ids, ws);
      } else if (what == 1) {
        const mnemo_status st = update(s.get(), ids, ws);
        ASSERT_EQ(st, !present   ? MNEMO_E_NOT_FOUND
                      : conflict ? MNEMO_E_INVALID_ARGUMENT
                                 : MNEMO_OK)
            << mt::last_error();
        if (st == MNEMO_OK) m.fields.write(ids, ws);
      } else if (what == 2) {
        ASSERT_OK(remove(s.get(), ids));
        m.remove(ids);
      } else {
        // A plain add of existing and new memories keeps (or starts
        // without) their fields.
        std::vector<fm::Write> none(ids.size());
        ASSERT_OK(add(s.get(), ids, none));
        m.add(ids, none);
      }
    }
    ASSERT_TRUE(holds(s.get(), m)) << "round " << round;
    // Close without a checkpoint (the journal holds the writes), or with one.
    if (round % 2 == 1) ASSERT_OK(mnemo_store_checkpoint(s.get()));
    s.reset();
    s = open(nullptr);
    ASSERT_TRUE(s);
    ASSERT_TRUE(holds(s.get(), m)) << "reopened after round " << round;
    for (const fm::Node& n : probe_filters()) EXPECT_EQ(select(s.get(), n), select(m, n)) << fm::describe(n);
  }
  mnemo_store_statistics st{};
  st.struct_size = sizeof st;
  ASSERT_OK(mnemo_store_stats(s.get(), &st));
  EXPECT_GT(st.sequence, 30u);
}

namespace {

constexpr uint64_t kJournalHead = 48, kRecordHead = 40;

std::vector<std::pair<uint64_t, uint64_t>> record_spans(const std::string& j) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (uint64_t pos = kJournalHead; pos + kRecordHead <= j.size();) {
    const uint64_t end = pos + kRecordHead + get_at<uint64_t>(j, pos + 24) + 8;
    if (end > j.size()) break;
    spans.emplace_back(pos, end);
    pos = end;
  }
  return spans;
}

// A record's payload replaced (its length, head check and checksum made
// valid): what a buggy or hostile writer would leave.
std::string with_payload(const std::string& j, std::pair<uint64_t, uint64_t> span, const std::string& payload) {
  const auto [begin, end] = span;
  std::string r = j.substr(begin, kRecordHead) + payload;
  put_at<uint64_t>(r, 24, payload.size());
  put_at<uint32_t>(r, 36, static_cast<uint32_t>(XXH3_64bits(r.data(), 36)));
  Enc sum;
  sum.put<uint64_t>(XXH3_64bits(r.data(), r.size()));
  return j.substr(0, begin) + r + sum.b + j.substr(end);
}

}  // namespace

// Journal records of field writes whose fields bytes no write could have
// made, or that break the key rule or name an absent memory, are refused as
// corrupt wherever they lie; a torn final record is dropped with everything
// before it kept.
TEST(FieldsDurable, DamagedFieldRecordsAreRefusedAndATornOneDropped) {
  dt::TempDir dir;
  const std::string src = dir.file("src.mnemo");
  Model after_add, after_all;
  {
    mnemo_durable_options o = mnemo_durable_options_default();
    o.dim = kDim;
    o.metric = MNEMO_METRIC_DOT;
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), src.c_str(), &o, &s));
    mt::StorePtr owned(s);
    const std::vector<uint64_t> ids{1, 2, 3};
    const std::vector<fm::Write> ws{small_write(1), small_write(2), small_write(3)};
    ASSERT_OK(add(s, ids, ws));  // record 0: add_memories with fields
    after_add.add(ids, ws);
    fm::Write w;
    w.set = MNEMO_FIELD_TAGS | MNEMO_FIELD_PAYLOAD;
    w.tags = {"green"};
    ASSERT_OK(update(s, {3}, {w}));  // record 1: set_fields
    after_all = after_add;
    after_all.fields.write({3}, {w});
  }
  const std::string snap = dt::slurp(src), journal = dt::slurp(src + ".journal");
  const auto spans = record_spans(journal);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(get_at<uint32_t>(journal, spans[0].first + 4), 6u);
  EXPECT_EQ(get_at<int32_t>(journal, spans[0].first + 32) >> 8, 1 | 2 | 4) << "times, importance and fields";
  EXPECT_EQ(get_at<uint32_t>(journal, spans[1].first + 4), 9u);
  const std::string path = dir.file("bad.mnemo");
  auto try_open = [&](const std::string& j, mnemo_store** out) {
    dt::spit(path, snap);
    dt::spit(path + ".journal", j);
    *out = kSentinel;
    return mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, out);
  };
  {
    mnemo_store* out = nullptr;
    ASSERT_OK(try_open(journal, &out));
    mt::StorePtr owned(out);
    EXPECT_TRUE(holds(out, after_all));
  }
  // The set_fields record's payload: the id, then memory 3's fields.
  const uint64_t p1 = spans[1].first + kRecordHead;
  const std::string ids1 = journal.substr(p1, 8);
  const std::string fields1 = journal.substr(p1 + 8, spans[1].second - 8 - p1 - 8);
  struct Case {
    std::string payload, what, says;
  };
  Enc set64;
  set64.put<uint32_t>(64);
  const std::vector<Case> cases = {
      {ids1 + set64.b + fields1.substr(4), "set bits past MNEMO_FIELD_ALL", "MNEMO_FIELD"},
      {ids1 + fields1 + "x", "bytes after the fields", "bytes after its fields"},
      {ids1 + fields1.substr(0, fields1.size() - 3), "fields cut short", "ends before its contents"},
      {ids1 + tags_only({"a"}, 5000), "more tags than the limit", "too many tags"},
      {ids1 + tags_only({""}, 1), "an empty tag", "is empty"},
      {ids1 + attr_only("v", 9, std::string(8, '\0')), "an unknown value type", "unknown value type"},
      {ids1 + attr_only("v", 2, std::string("\0\0\0\0\0\0\xf0\x7f", 8)), "an infinite DOUBLE", "NaN or infinite"},
      {Enc{}.put<uint64_t>(9).b + key_only("k9"), "fields of an absent memory", "does not hold"},
      {Enc{}.put<uint64_t>(3).b + key_only("k1"), "a key memory 1 holds", "is held by memory"},
  };
  for (const Case& c : cases) {
    // As the final record and in the middle (before a copy of record 1
    // renumbered as the next write).
    for (const bool last : {true, false}) {
      std::string j = with_payload(journal, spans[1], c.payload);
      if (!last) {
        std::string again = journal.substr(spans[1].first, spans[1].second - spans[1].first);
        put_at<uint64_t>(again, 8, get_at<uint64_t>(again, 8) + 1);
        j += with_payload(again, {0, again.size()}, again.substr(kRecordHead, again.size() - kRecordHead - 8));
        ASSERT_EQ(record_spans(j).size(), 3u);
      }
      mnemo_store* out = nullptr;
      const mnemo_status st = try_open(j, &out);
      if (st == MNEMO_OK) mnemo_store_destroy(out);
      EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT)) << c.what;
      EXPECT_EQ(out, kSentinel) << c.what;
      EXPECT_NE(mt::last_error().find(c.says), std::string::npos) << c.what << ": " << mt::last_error();
    }
  }
  // The add record's fields damaged the same way.
  {
    const uint64_t p0 = spans[0].first + kRecordHead;
    std::string payload = journal.substr(p0, spans[0].second - 8 - p0);
    payload += "zz";
    mnemo_store* out = nullptr;
    const mnemo_status st = try_open(with_payload(journal, spans[0], payload), &out);
    if (st == MNEMO_OK) mnemo_store_destroy(out);
    EXPECT_TRUE(mt::failed_with(st, MNEMO_E_CORRUPT));
    EXPECT_NE(mt::last_error().find("bytes after its fields"), std::string::npos) << mt::last_error();
  }
  // Torn: the final record cut anywhere, or one of its bytes flipped
  // (its checksum fails): dropped, the add kept; the next write follows it.
  uint64_t torn = 0;
  for (uint64_t cut = spans[1].first; cut < journal.size(); cut += 3) {
    mnemo_store* out = nullptr;
    ASSERT_OK(try_open(journal.substr(0, cut), &out));
    mt::StorePtr owned(out);
    ASSERT_TRUE(holds(out, after_add)) << "cut at " << cut;
    ++torn;
  }
  for (uint64_t at = spans[1].first + kRecordHead; at < journal.size(); at += 5) {
    std::string j = journal;
    j[at] = static_cast<char>(j[at] ^ 0x20);
    mnemo_store* out = nullptr;
    ASSERT_OK(try_open(j, &out));
    mt::StorePtr owned(out);
    ASSERT_TRUE(holds(out, after_add)) << "byte " << at;
    ++torn;
  }
  {
    mnemo_store* out = nullptr;
    ASSERT_OK(try_open(journal.substr(0, journal.size() - 1), &out));
    mt::StorePtr owned(out);
    fm::Write w;
    w.set = MNEMO_FIELD_KEY;
    w.key = "after";
    ASSERT_OK(update(out, {2}, {w}));
    Model m = after_add;
    m.fields.write({2}, {w});
    owned.reset();
    mnemo_store* again = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &again));
    mt::StorePtr owned2(again);
    EXPECT_TRUE(holds(again, m));
  }
  std::printf("journal: %llu torn final field records dropped\n", static_cast<unsigned long long>(torn));
}

// A store sharded over CPU shards (the runtime option cpu_shards) keeps its
// fields through save and open (into a sharded store and a plain one, and
// back), through journal replay and checkpoints (whose snapshots it writes
// from its shards' contents).
TEST(FieldsDurable, ShardedStoresKeepFieldsInSnapshotsAndJournals) {
  dt::TempDir dir;
  mnemo_runtime_options ro = mt::test_options();
  ro.backend = MNEMO_BACKEND_CPU;
  ro.cpu_shards = 3;
  mt::RuntimePtr sharded = mt::make_runtime(ro);
  ASSERT_TRUE(sharded);
  ro.cpu_shards = 0;
  mt::RuntimePtr plain = mt::make_runtime(ro);
  ASSERT_TRUE(plain);
  Model m;
  std::vector<uint64_t> ids;
  std::vector<fm::Write> ws;
  for (uint64_t id = 1; id <= 30; ++id) ids.push_back(id), ws.push_back(id % 5 ? small_write(id) : fm::Write{});
  const std::string path = dir.file("sharded.mnemo"), again = dir.file("again.mnemo");
  {
    mt::StorePtr s = mt::make_store(kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, sharded.get());
    ASSERT_OK(add(s.get(), ids, ws));
    m.add(ids, ws);
    ASSERT_OK(remove(s.get(), {4, 9}));
    m.remove({4, 9});
    ASSERT_TRUE(holds(s.get(), m));
    ASSERT_OK(mnemo_store_save(s.get(), path.c_str()));
  }
  for (mnemo_runtime* rt : {sharded.get(), plain.get()}) {
    mnemo_store* o = nullptr;
    ASSERT_OK(mnemo_store_open(rt, path.c_str(), &o));
    mt::StorePtr opened(o);
    EXPECT_TRUE(holds(opened.get(), m)) << (rt == plain.get() ? "plain" : "sharded");
    for (const fm::Node& n : probe_filters()) EXPECT_EQ(select(opened.get(), n), select(m, n)) << fm::describe(n);
    ASSERT_OK(mnemo_store_save(opened.get(), again.c_str()));
    mnemo_store* o2 = nullptr;
    ASSERT_OK(mnemo_store_open(sharded.get(), again.c_str(), &o2));
    mt::StorePtr back(o2);
    EXPECT_TRUE(holds(back.get(), m));
  }
  // Durable and sharded: writes replayed, then a checkpoint, then more.
  const std::string dpath = dir.file("durable.mnemo");
  mnemo_durable_options o = mnemo_durable_options_default();
  o.dim = kDim;
  o.metric = MNEMO_METRIC_DOT;
  Model d;
  for (int round = 0; round < 3; ++round) {
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(sharded.get(), dpath.c_str(), round == 0 ? &o : nullptr, &s));
    mt::StorePtr owned(s);
    ASSERT_TRUE(holds(s, d)) << "round " << round;
    const std::vector<uint64_t> part(ids.begin() + round * 10, ids.begin() + round * 10 + 10);
    const std::vector<fm::Write> wpart(ws.begin() + round * 10, ws.begin() + round * 10 + 10);
    ASSERT_OK(add(s, part, wpart));
    d.add(part, wpart);
    fm::Write w;
    w.set = MNEMO_FIELD_NAMESPACE | MNEMO_FIELD_ATTRIBUTES;
    w.ns = {"users", "moved"};
    w.attrs = {{"n", fm::Value(int64_t{100 + round})}};
    ASSERT_OK(update(s, {part[1]}, {w}));
    d.fields.write({part[1]}, {w});
    ASSERT_OK(remove(s, {part[2]}));
    d.remove({part[2]});
    if (round == 1) ASSERT_OK(mnemo_store_checkpoint(s));
    ASSERT_TRUE(holds(s, d));
  }
  mnemo_store* s = nullptr;
  ASSERT_OK(mnemo_store_open_durable(plain.get(), dpath.c_str(), nullptr, &s));
  mt::StorePtr owned(s);
  EXPECT_TRUE(holds(s, d));
  for (const fm::Node& n : probe_filters()) EXPECT_EQ(select(s, n), select(d, n)) << fm::describe(n);
}

// An indexed store's fields survive its snapshot and journal: the layout
// (applied after the fields are loaded) moves them with their memories.
TEST(FieldsDurable, IndexedStoresKeepFieldsWithTheirMemories) {
  dt::TempDir dir;
  const std::string path = dir.file("indexed.mnemo");
  mnemo_durable_options o = mnemo_durable_options_default();
  o.dim = kDim;
  o.metric = MNEMO_METRIC_DOT;
  Model m;
  std::vector<uint64_t> ids;
  std::vector<fm::Write> ws;
  for (uint64_t id = 1; id <= 60; ++id) ids.push_back(id), ws.push_back(id % 4 ? small_write(id) : fm::Write{});
  {
    mnemo_store* s = nullptr;
    ASSERT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), &o, &s));
    mt::StorePtr owned(s);
    ASSERT_OK(add(s, ids, ws));
    m.add(ids, ws);
    mnemo_index_options io = mnemo_index_options_default();
    io.nlist = 4;
    io.background = 0;
    ASSERT_OK(mnemo_store_build_index(s, &io));
    ASSERT_OK(mnemo_store_checkpoint(s));
    ASSERT_OK(update(s, {3}, {small_write(4)}));  // journaled after the layout
    m.fields.write({3}, {small_write(4)});
  }
  mnemo_store* s = nullptr;
  ASSERT_OK(mnemo_store_open_durable(mt::rt(), path.c_str(), nullptr, &s));
  mt::StorePtr owned(s);
  EXPECT_TRUE(holds(s, m));
  for (const fm::Node& n : probe_filters()) EXPECT_EQ(select(s, n), select(m, n)) << fm::describe(n);
}
