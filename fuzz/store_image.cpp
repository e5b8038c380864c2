#include "store_image.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <set>

#include "reference.h"

namespace fz {

namespace {

constexpr char kMagic[8] = {'M', 'N', 'E', 'M', 'O', 'S', 'T', '1'};
// Header bytes before the header checksum, by version.
uint64_t header_bytes(uint32_t version) { return version >= 2 ? 48 : 40; }
uint32_t section_count(uint32_t version) { return version >= 3 ? 5 : 3; }
constexpr uint32_t kNewestVersion = 3;
constexpr uint64_t kNoId = ~uint64_t{0};

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

void section(std::string& b, uint32_t tag, const void* data, uint64_t bytes) {
  put<uint32_t>(b, tag);
  put<uint32_t>(b, 0);
  put<uint64_t>(b, bytes);
  b.append(static_cast<const char*>(data), bytes);
  put<uint64_t>(b, XXH3_64bits(data, bytes));
}

}  // namespace

std::string write_image(const StoreImage& s) {
  std::string b(kMagic, 8);
  put<uint32_t>(b, s.version);
  put<uint32_t>(b, static_cast<uint32_t>(header_bytes(s.version)));
  put<uint64_t>(b, s.dim);
  put<int32_t>(b, s.dtype);
  put<int32_t>(b, s.metric);
  put<uint64_t>(b, s.ids.size());
  if (s.version >= 2) put<uint64_t>(b, s.seq);
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
  return b;
}

void fix_checksums(std::string& b) {
  uint32_t version = 0;
  uint64_t at = 8;
  if (!get(b, at, &version)) return;
  const uint64_t hb = header_bytes(version);
  if (b.size() < hb + 8) return;
  const uint64_t h = XXH3_64bits(b.data(), hb);
  std::memcpy(&b[hb], &h, 8);
  uint64_t pos = hb + 8;
  for (uint32_t i = 0; i < section_count(version); ++i) {
    uint64_t bytes = 0;
    uint64_t p = pos + 8;
    if (!get(b, p, &bytes) || bytes > b.size() - p || 8 > b.size() - p - bytes) return;
    const uint64_t sum = XXH3_64bits(b.data() + p, bytes);
    std::memcpy(&b[p + bytes], &sum, 8);
    pos = p + bytes + 8;
  }
}

bool parse_image(const std::string& b, StoreImage* out, std::string* why, uint32_t max_version) {
  auto no = [why](const char* w) {
    *why = w;
    return false;
  };
  if (b.size() < 8 || std::memcmp(b.data(), kMagic, 8) != 0) return no("magic");
  uint64_t pos = 8;
  uint32_t version = 0, header = 0;
  uint64_t dim = 0, count = 0, seq = 0, sum = 0;
  int32_t dtype = 0, metric = 0;
  if (!get(b, pos, &version)) return no("short header");
  if (version < 1 || version > max_version || version > kNewestVersion) return no("version");
  if (!get(b, pos, &header) || !get(b, pos, &dim) || !get(b, pos, &dtype) || !get(b, pos, &metric) ||
      !get(b, pos, &count) || (version >= 2 && !get(b, pos, &seq)) || !get(b, pos, &sum))
    return no("short header");
  if (header != header_bytes(version)) return no("header size");
  if (sum != XXH3_64bits(b.data(), header_bytes(version))) return no("header checksum");
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
  if (pos != b.size()) return no("trailing bytes");
  StoreImage r;
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
  *out = std::move(r);
  return true;
}

}  // namespace fz
