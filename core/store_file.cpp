// The store file format (version 2), little-endian:
//   header  "MNEMOST1" u32 version u32 header_bytes u64 dim i32 dtype i32 metric
//           u64 count u64 seq u64 xxh3(header fields before it)
//   then three sections, each: u32 tag u32 zero u64 bytes <payload> u64 xxh3(payload)
//           tag 1 ids [count] u64, tag 2 vectors [count x dim] dtype, tag 3 biases [count] f32
// seq is the last journaled write the file holds (0 without a journal), so a
// durable store replays only the journal records after it. Version 1 files
// (no seq) are still read. Written to a temporary file, flushed, renamed over
// the target and the folder flushed, so a crash leaves the old file or the
// new one, never half.
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <unordered_set>

#include "checked.h"
#include "error.h"
#include "store.h"
#include "store_io.h"
#include "validate.h"

namespace mnemo {

namespace {

constexpr char kMagic[8] = {'M', 'N', 'E', 'M', 'O', 'S', 'T', '1'};
constexpr uint32_t kFormatVersion = 2;
// Header bytes before the header checksum, by version.
constexpr uint32_t kHeaderBytesV1 = 8 + 4 + 4 + 8 + 4 + 4 + 8;
constexpr uint32_t kHeaderBytes = kHeaderBytesV1 + 8;
enum : uint32_t { kTagIds = 1, kTagVectors = 2, kTagBiases = 3 };

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_section(std::string& b, uint32_t tag, const void* data, uint64_t bytes) {
  put<uint32_t>(b, tag);
  put<uint32_t>(b, 0);
  put<uint64_t>(b, bytes);
  b.append(static_cast<const char*>(data), bytes);
  put<uint64_t>(b, XXH3_64bits(data, bytes));
}

// Reads fields from the file image, refusing to run past its end.
class Reader {
 public:
  Reader(const std::string& buf, const std::string& path) : b_(buf), path_(path) {}
  const char* take(uint64_t n, const char* what) {
    if (n > b_.size() - pos_) fail(Code::corrupt, path_ + ": truncated in " + what);
    const char* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <class T>
  T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
  bool at_end() const { return pos_ == b_.size(); }

 private:
  const std::string& b_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

const char* section(Reader& r, uint32_t tag, uint64_t expect_bytes, const char* name, const std::string& path) {
  if (r.get<uint32_t>(name) != tag) fail(Code::corrupt, path + ": expected the " + name + " section");
  if (r.get<uint32_t>(name) != 0)
    fail(Code::corrupt, path + ": reserved field of the " + name + " section is not zero");
  if (r.get<uint64_t>(name) != expect_bytes) fail(Code::corrupt, path + ": " + name + " section has the wrong size");
  const char* data = r.take(expect_bytes, name);
  if (r.get<uint64_t>(name) != XXH3_64bits(data, expect_bytes))
    fail(Code::corrupt, path + ": checksum mismatch in the " + name + " section");
  return data;
}

}  // namespace

std::string encode_store(const StoreContents& c) {
  const uint64_t count = c.ids.size();
  std::string b;
  b.append(kMagic, 8);
  put<uint32_t>(b, kFormatVersion);
  put<uint32_t>(b, kHeaderBytes);
  put<uint64_t>(b, c.dim);
  put<int32_t>(b, static_cast<int32_t>(c.dtype));
  put<int32_t>(b, static_cast<int32_t>(c.metric));
  put<uint64_t>(b, count);
  put<uint64_t>(b, c.seq);
  put<uint64_t>(b, XXH3_64bits(b.data(), b.size()));
  put_section(b, kTagIds, c.ids.data(), count * 8);
  put_section(b, kTagVectors, c.vectors.data(), c.vectors.size());
  put_section(b, kTagBiases, c.biases.data(), count * 4);
  return b;
}

void save_store(const Store& store, const std::string& path) { replace_file(path, encode_store(store.snapshot())); }

std::unique_ptr<Store> load_store(const Runtime& rt, const std::string& path, uint64_t* seq_out) {
  const std::string buf = read_file(path);

  Reader r(buf, path);
  if (std::memcmp(r.take(8, "header"), kMagic, 8) != 0) fail(Code::corrupt, path + ": not a mnemo store file");
  const uint32_t version = r.get<uint32_t>("header");
  if (version != 1 && version != kFormatVersion)
    fail(Code::corrupt, path + ": unknown format version " + std::to_string(version));
  const uint32_t header_bytes = version == 1 ? kHeaderBytesV1 : kHeaderBytes;
  if (r.get<uint32_t>("header") != header_bytes) fail(Code::corrupt, path + ": bad header size");
  const uint64_t dim = r.get<uint64_t>("header");
  const int32_t dtype = r.get<int32_t>("header");
  const int32_t metric = r.get<int32_t>("header");
  const uint64_t count = r.get<uint64_t>("header");
  const uint64_t seq = version == 1 ? 0 : r.get<uint64_t>("header");
  if (r.get<uint64_t>("header") != XXH3_64bits(buf.data(), header_bytes))
    fail(Code::corrupt, path + ": header checksum mismatch");
  if (dim == 0 || dim > 65536) fail(Code::corrupt, path + ": bad dimension");
  if (dtype < 1 || dtype > 3) fail(Code::corrupt, path + ": bad storage dtype");
  if (metric < 1 || metric > 3) fail(Code::corrupt, path + ": bad metric");
  const DType dt = static_cast<DType>(dtype);
  uint64_t vec_bytes, id_bytes;
  try {
    vec_bytes = checked_mul(count, dim, dtype_size(dt), "vectors");
    id_bytes = checked_mul(count, 8, "ids");
  } catch (const Error&) {
    fail(Code::corrupt, path + ": impossible vector count");
  }
  if (id_bytes > buf.size() || vec_bytes > buf.size()) fail(Code::corrupt, path + ": truncated (count exceeds file)");

  const char* ids = section(r, kTagIds, id_bytes, "ids", path);
  const char* vecs = section(r, kTagVectors, vec_bytes, "vectors", path);
  const char* biases = section(r, kTagBiases, count * 4, "biases", path);
  if (!r.at_end()) fail(Code::corrupt, path + ": trailing bytes after the last section");

  // An empty store has empty vectors, whose data() may be null: no memcpy.
  std::vector<uint64_t> id_list(count);
  std::vector<float> bias_list(count);
  if (count > 0) {
    std::memcpy(id_list.data(), ids, id_bytes);
    std::memcpy(bias_list.data(), biases, count * 4);
  }
  std::unordered_set<uint64_t> seen;
  seen.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (id_list[i] == kNoId || !seen.insert(id_list[i]).second)
      fail(Code::corrupt, path + ": invalid or repeated id at position " + std::to_string(i));
    if (!std::isfinite(bias_list[i])) fail(Code::corrupt, path + ": non-finite bias at position " + std::to_string(i));
  }
  if (find_non_finite(vecs, dt, count * dim) != kNotFound) fail(Code::corrupt, path + ": non-finite vector element");
  auto store = std::make_unique<Store>(rt, dim, dt, static_cast<Metric>(metric));
  if (count > 0) {
    // The vector payload may sit at any offset: copy it to aligned memory.
    AlignedBuffer aligned;
    aligned.resize(vec_bytes);
    std::memcpy(aligned.data(), vecs, vec_bytes);
    store->add(id_list.data(), aligned.data(), dt, count);
    store->set_bias(id_list.data(), bias_list.data(), count);
  }
  if (seq_out) *seq_out = seq;
  return store;
}

}  // namespace mnemo
