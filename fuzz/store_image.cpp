#include "store_image.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "fields_image.h"
#include "reference.h"

namespace fz {

namespace {

constexpr char kMagic[8] = {'M', 'N', 'E', 'M', 'O', 'S', 'T', '1'};
// Header bytes before the header checksum, by version.
uint64_t header_bytes(uint32_t version) { return version >= 5 ? 56 : version >= 2 ? 48 : 40; }
uint32_t section_count(uint32_t version) { return version >= 3 ? 5 : 3; }
constexpr uint32_t kNewestVersion = 5;
constexpr uint64_t kNoId = ~uint64_t{0};
constexpr uint32_t kHotList = 0xffffffffu, kMaxLists = (1u << 23) - 1;
constexpr uint64_t kOptionBytes = 48;

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
bool get(const std::string& b, uint64_t& pos, T* v) {
  if (pos > b.size() || sizeof(T) > b.size() - pos) return false;
  std::memcpy(v, b.data() + pos, sizeof(T));
  pos += sizeof(T);
  return true;
}

template <class T>
T at(const std::string& b, uint64_t pos) {
  T v;
  std::memcpy(&v, b.data() + pos, sizeof v);
  return v;
}

void section(std::string& b, uint32_t tag, const void* data, uint64_t bytes) {
  put<uint32_t>(b, tag);
  put<uint32_t>(b, 0);
  put<uint64_t>(b, bytes);
  b.append(static_cast<const char*>(data), bytes);
  put<uint64_t>(b, XXH3_64bits(data, bytes));
}

bool options_ok(const std::string& o) {
  const uint32_t nlist = at<uint32_t>(o, 0), background = at<uint32_t>(o, 12);
  const double hot_fraction = at<double>(o, 24), skew = at<double>(o, 40);
  return background <= 1 && hot_fraction > 0 && skew > 0 && nlist <= kMaxLists;
}

}  // namespace

std::string index_options(uint32_t nlist, uint32_t iters, uint32_t per_list, uint32_t background, uint64_t seed,
                          double hot_fraction, uint64_t hot_min, double skew) {
  std::string o;
  put(o, nlist);
  put(o, iters);
  put(o, per_list);
  put(o, background);
  put(o, seed);
  put(o, hot_fraction);
  put(o, hot_min);
  put(o, skew);
  return o;
}

std::string write_image(const StoreImage& s) {
  std::string b(kMagic, 8);
  put<uint32_t>(b, s.version);
  put<uint32_t>(b, static_cast<uint32_t>(header_bytes(s.version)));
  put<uint64_t>(b, s.dim);
  put<int32_t>(b, s.dtype);
  put<int32_t>(b, s.metric);
  put<uint64_t>(b, s.ids.size());
  if (s.version >= 2) put<uint64_t>(b, s.seq);
  if (s.version >= 5) {
    put<uint32_t>(b, s.has_index ? 1u : 0u);
    put<uint32_t>(b, 0);
  }
  put<uint64_t>(b, XXH3_64bits(b.data(), b.size()));
  section(b, 1, s.ids.data(), s.ids.size() * 8);
  section(b, 2, s.vectors.data(), s.vectors.size());
  section(b, 3, s.biases.data(), s.biases.size() * 4);
  if (s.version >= 3) {
    // Zeros where the image leaves them out.
    std::vector<double> t = s.times;
    std::vector<float> imp = s.importance;
    t.resize(s.ids.size(), 0.0);
    imp.resize(s.ids.size(), 0.0f);
    section(b, 4, t.data(), t.size() * 8);
    section(b, 5, imp.data(), imp.size() * 4);
  }
  if (s.version >= 5) {
    std::string f;
    for (const auto& [id, w] : s.fields) {
      std::string e;
      encode_fields(w, e);
      put<uint64_t>(f, id);
      put<uint64_t>(f, e.size());
      f += e;
    }
    section(b, 7, f.data(), f.size());
  }
  if (s.version == 4 || (s.version >= 5 && s.has_index)) {
    std::string x;
    put<uint32_t>(x, s.index.nlist);
    put<uint32_t>(x, s.index.zero);
    std::string o = s.index.options;
    o.resize(kOptionBytes, '\0');
    x += o;
    x.append(reinterpret_cast<const char*>(s.index.centroids.data()), s.index.centroids.size() * 4);
    std::vector<uint32_t> lists = s.index.lists;
    lists.resize(s.ids.size(), kHotList);
    x.append(reinterpret_cast<const char*>(lists.data()), lists.size() * 4);
    section(b, 6, x.data(), x.size());
  }
  return b;
}

void fix_checksums(std::string& b) {
  uint32_t version = 0;
  uint64_t pos = 8;
  if (!get(b, pos, &version)) return;
  const uint64_t hb = header_bytes(version);
  if (b.size() < hb + 8) return;
  const uint64_t h = XXH3_64bits(b.data(), hb);
  std::memcpy(&b[hb], &h, 8);
  pos = hb + 8;
  // Every section whose declared length fits: the fixed ones, the fields
  // and the index.
  for (uint32_t i = 0; i < 7; ++i) {
    uint64_t bytes = 0;
    uint64_t p = pos + 8;
    if (!get(b, p, &bytes) || bytes > b.size() - p || 8 > b.size() - p - bytes) return;
    const uint64_t sum = XXH3_64bits(b.data() + p, bytes);
    std::memcpy(&b[p + bytes], &sum, 8);
    pos = p + bytes + 8;
  }
}

bool parse_image(const std::string& b, StoreImage* out, std::string* why, uint32_t max_version) {
  auto no = [why](const std::string& w) {
    *why = w;
    return false;
  };
  if (b.size() < 8 || std::memcmp(b.data(), kMagic, 8) != 0) return no("magic");
  uint64_t pos = 8;
  uint32_t version = 0, header = 0, flags = 0, zero_h = 0;
  uint64_t dim = 0, count = 0, seq = 0, sum = 0;
  int32_t dtype = 0, metric = 0;
  if (!get(b, pos, &version)) return no("short header");
  if (version < 1 || version > max_version || version > kNewestVersion) return no("version");
  if (!get(b, pos, &header) || !get(b, pos, &dim) || !get(b, pos, &dtype) || !get(b, pos, &metric) ||
      !get(b, pos, &count) || (version >= 2 && !get(b, pos, &seq)) ||
      (version >= 5 && (!get(b, pos, &flags) || !get(b, pos, &zero_h))) || !get(b, pos, &sum))
    return no("short header");
  if (header != header_bytes(version)) return no("header size");
  if (sum != XXH3_64bits(b.data(), header_bytes(version))) return no("header checksum");
  if (flags > 1 || zero_h != 0) return no("header flags");
  if (dim == 0 || dim > 65536) return no("dim");
  if (dtype < 1 || dtype > 3) return no("dtype");
  if (metric < 1 || metric > 3) return no("metric");
  const size_t es = ref::dtype_size(dtype);
  const uint32_t sections = section_count(version);
  std::string parts[5];
  // Every size as a long double first: a count that overflows 64 bits is
  // simply one that cannot fit the file.
  const long double want[5] = {
      static_cast<long double>(count) * 8, static_cast<long double>(count) * dim * static_cast<long double>(es),
      static_cast<long double>(count) * 4, static_cast<long double>(count) * 8, static_cast<long double>(count) * 4};
  for (uint32_t tag = 1; tag <= sections; ++tag) {
    uint32_t t = 0, zero = 0;
    uint64_t bytes = 0, s = 0;
    if (!get(b, pos, &t) || !get(b, pos, &zero) || !get(b, pos, &bytes)) return no("short section header");
    if (t != tag) return no("section tag");
    if (zero != 0) return no("section reserved field");
    if (static_cast<long double>(bytes) != want[tag - 1]) return no("section size");
    if (bytes > b.size() - pos) return no("short section");
    parts[tag - 1] = b.substr(pos, bytes);
    pos += bytes;
    if (!get(b, pos, &s)) return no("short section checksum");
    if (s != XXH3_64bits(parts[tag - 1].data(), bytes)) return no("section checksum");
  }
  // The fields section (version 5).
  std::string fields;
  if (version >= 5) {
    uint32_t t = 0, zero = 0;
    uint64_t bytes = 0, s = 0;
    if (!get(b, pos, &t) || !get(b, pos, &zero) || !get(b, pos, &bytes)) return no("short fields section header");
    if (t != 7) return no("fields section tag");
    if (zero != 0) return no("fields section reserved field");
    if (bytes > b.size() - pos || b.size() - pos - bytes < 8) return no("short fields section");
    fields = b.substr(pos, bytes);
    pos += bytes;
    get(b, pos, &s);
    if (s != XXH3_64bits(fields.data(), bytes)) return no("fields section checksum");
  }
  // The index section: version 4, or version 5 with flag 1.
  StoreImage r;
  r.has_index = version == 4 || (version >= 5 && (flags & 1));
  if (r.has_index) {
    uint32_t t = 0, zero = 0;
    uint64_t bytes = 0, s = 0;
    if (b.size() - pos < 16 + 8 + 8 + kOptionBytes) return no("short index section");
    get(b, pos, &t);
    get(b, pos, &zero);
    get(b, pos, &bytes);
    if (t != 6 || zero != 0) return no("index section tag");
    const uint32_t nlist = at<uint32_t>(b, pos);
    if (at<uint32_t>(b, pos + 4) != 0) return no("index section reserved field");
    if (nlist > kMaxLists) return no("index list count");
    const long double size = 8.0L + kOptionBytes + (static_cast<long double>(nlist) * dim + count) * 4;
    if (static_cast<long double>(bytes) != size || bytes != b.size() - pos - 8) return no("index section size");
    const std::string x = b.substr(pos, bytes);
    pos += bytes;
    get(b, pos, &s);
    if (s != XXH3_64bits(x.data(), bytes)) return no("index section checksum");
    r.index.nlist = nlist;
    r.index.options = x.substr(8, kOptionBytes);
    if (!options_ok(r.index.options)) return no("index options");
    r.index.centroids.resize(uint64_t{nlist} * dim);
    if (!r.index.centroids.empty())
      std::memcpy(r.index.centroids.data(), x.data() + 8 + kOptionBytes, r.index.centroids.size() * 4);
    for (float c : r.index.centroids)
      if (!std::isfinite(c)) return no("index centroid");
    r.index.lists.resize(count);
    if (count) std::memcpy(r.index.lists.data(), x.data() + 8 + kOptionBytes + r.index.centroids.size() * 4, count * 4);
    for (uint32_t l : r.index.lists)
      if (l != kHotList && l >= nlist) return no("index list");
  }
  if (pos != b.size()) return no("trailing bytes");
  r.version = version;
  r.seq = seq;
  r.dim = dim;
  r.dtype = dtype;
  r.metric = metric;
  r.ids.resize(count);
  r.biases.resize(count);
  r.times.assign(count, 0.0);
  r.importance.assign(count, 0.0f);
  if (count) {
    std::memcpy(r.ids.data(), parts[0].data(), count * 8);
    std::memcpy(r.biases.data(), parts[2].data(), count * 4);
    if (sections == 5) {
      std::memcpy(r.times.data(), parts[3].data(), count * 8);
      std::memcpy(r.importance.data(), parts[4].data(), count * 4);
    }
  }
  r.vectors.assign(parts[1].begin(), parts[1].end());
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < count; ++i) {
    if (r.ids[i] == kNoId || !seen.insert(r.ids[i]).second) return no("id");
    if (!std::isfinite(r.biases[i])) return no("bias");
    if (!std::isfinite(r.times[i])) return no("time");
    if (!std::isfinite(r.importance[i])) return no("importance");
  }
  for (uint64_t i = 0; i < count * dim; ++i)
    if (!std::isfinite(ref::load(r.vectors.data(), dtype, i))) return no("vector element");
  // Fields entries: each of a memory of the file, once, naming exactly the
  // fields it holds, keys unique.
  std::set<uint64_t> given;
  std::set<std::string> keys;
  for (uint64_t p = 0; p < fields.size();) {
    uint64_t id = 0, n = 0;
    if (fields.size() - p < 16) return no("short fields entry");
    std::memcpy(&id, fields.data() + p, 8);
    std::memcpy(&n, fields.data() + p + 8, 8);
    p += 16;
    if (n > fields.size() - p) return no("fields entry length");
    uint64_t q = p;
    fm::Write w;
    if (!decode_fields(fields, p + n, q, &w, why)) return false;
    if (q != p + n) return no("bytes after a fields entry");
    const uint32_t held = (w.key.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_KEY)) |
                          (w.ns.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_NAMESPACE)) |
                          (w.tags.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_TAGS)) |
                          (w.attrs.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_ATTRIBUTES)) |
                          (w.payload.empty() ? 0u : static_cast<uint32_t>(MNEMO_FIELD_PAYLOAD));
    if (w.set != held) return no("fields entry set");
    if (!seen.count(id)) return no("fields of an id not in the file");
    if (!given.insert(id).second) return no("fields given twice");
    if (!w.key.empty() && !keys.insert(w.key).second) return no("a key given twice");
    r.fields.emplace_back(id, std::move(w));
    p += n;
  }
  *out = std::move(r);
  return true;
}

}  // namespace fz
