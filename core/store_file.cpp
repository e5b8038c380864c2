// The store file format (version 5), little-endian:
//   header  "MNEMOST1" u32 version u32 header_bytes u64 dim i32 dtype i32 metric
//           u64 count u64 seq u32 flags u32 zero u64 xxh3(header fields before it)
//   then sections, each: u32 tag u32 zero u64 bytes <payload> u64 xxh3(payload):
//           tag 1 ids [count] u64, tag 2 vectors [count x dim] dtype, tag 3 biases [count] f32,
//           tag 4 last-access times [count] f64, tag 5 importance [count] f32,
//           tag 7 fields: for each memory that has any, in file order, u64 id, u64 bytes and its fields in
//           core/meta/fields_codec.h's bytes, whose `set` names exactly the fields it holds;
//           then, when flags bit 0 is set (the store has an index), tag 6 index: u32 nlist u32 zero, the index
//           options (48 bytes), f32 centroids [nlist x dim], u32 list of each memory [count] in file order
//           (0xffffffff: the hot tier)
// seq is the last journaled write the file holds (0 without a journal), so a
// durable store replays only the journal records after it. Earlier versions
// are still read, their memories without fields: version 1 (no seq), 2 (no
// times or importance: zeros), 3 (sections 1-5) and 4 (sections 1-5 and the
// index section). The header says which sections follow, so a file cut right
// before one is refused rather than opened without it. Written to a
// temporary file, flushed, renamed over the target and the folder flushed, so
// a crash leaves the old file or the new one, never half. Loading and saving
// stream: the header and every section's declared size are checked against
// the file's size before anything is allocated, each array section is read
// straight into the buffer the store keeps (or written from the store's own
// arrays) in pieces of kIoChunkBytes, checksummed on the way; the fields
// section goes through a window of kIoChunkBytes (or one memory's fields,
// when larger) into the store's own write path, a batch at a time.
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "checked.h"
#include "cpu/simd_kernels.h"
#include "error.h"
#include "meta/fields_codec.h"
#include "store.h"
#include "store_io.h"

namespace mnemo {

namespace {

constexpr char kMagic[8] = {'M', 'N', 'E', 'M', 'O', 'S', 'T', '1'};
constexpr uint32_t kFormatVersion = 5;
// Header bytes before the header checksum, by version: 1, 2 to 4, 5.
constexpr uint32_t kHeaderBytesV1 = 8 + 4 + 4 + 8 + 4 + 4 + 8;
constexpr uint32_t kHeaderBytesV2 = kHeaderBytesV1 + 8;
constexpr uint32_t kHeaderBytes = kHeaderBytesV2 + 4 + 4;
constexpr uint64_t kSectionHead = 4 + 4 + 8, kSectionTail = 8;
enum : uint32_t {
  kTagIds = 1,
  kTagVectors = 2,
  kTagBiases = 3,
  kTagTimes = 4,
  kTagImportance = 5,
  kTagIndex = 6,
  kTagFields = 7
};
// Header flags (version 5): which optional sections follow the fields.
constexpr uint32_t kFlagIndex = 1;
// A fields entry's head: the memory's id and its fields' length.
constexpr uint64_t kEntryHead = 16;
// Entries handed to the store at once when loading (and at most about
// kIoChunkBytes of them).
constexpr uint64_t kFieldsBatch = 4096;

// One section: `entry` bytes per memory, held per slot at `slots` (save) or
// per memory at `dest` (load).
struct Section {
  uint32_t tag;
  const char* name;
  uint64_t entry;
  const unsigned char* slots;
  unsigned char* dest;
};

// Where the arrays of a load go.
struct LoadTargets {
  unsigned char *ids = nullptr, *vectors = nullptr, *biases = nullptr, *times = nullptr, *importance = nullptr;
};

// The sections of a file of `version` in file order; `v` for saving, the
// loaded arrays for loading.
std::vector<Section> sections(uint32_t version, uint64_t row_bytes, const StoreView* v, const LoadTargets& t) {
  auto at = [&](const void* p) { return static_cast<const unsigned char*>(p); };
  std::vector<Section> s = {{kTagIds, "ids", 8, v ? at(v->ids) : nullptr, t.ids},
                            {kTagVectors, "vectors", row_bytes, v ? at(v->vectors) : nullptr, t.vectors},
                            {kTagBiases, "biases", 4, v ? at(v->biases) : nullptr, t.biases}};
  if (version >= 3) {
    s.push_back({kTagTimes, "times", 8, v ? at(v->times) : nullptr, t.times});
    s.push_back({kTagImportance, "importance", 4, v ? at(v->importance) : nullptr, t.importance});
  }
  return s;
}

struct HashState {
  HashState() : s(XXH3_createState()) {
    if (s == nullptr) throw std::bad_alloc();
    XXH3_64bits_reset(s);
  }
  ~HashState() { XXH3_freeState(s); }
  HashState(const HashState&) = delete;
  HashState& operator=(const HashState&) = delete;
  XXH3_state_t* s;
};

// Reads one section's payload of `bytes` at `pos` into `dest`, hashing it in
// file order; with `elems`, also scans it for non-finite elements (returned).
// Large payloads are read by `threads` threads, one piece each in turn:
// the kernel's zeroing of fresh pages and its copy are most of an open, and
// they run in parallel; each piece is hashed (in file order) and scanned
// right after its read, while it is in that thread's cache. Of several
// failed reads, the first in the file is reported.
bool read_payload(const InputFile& f, uint64_t pos, unsigned char* dest, uint64_t bytes, const char* name,
                  XXH3_state_t* hash, const DType* elems, int threads) {
  constexpr uint64_t kTeamMin = uint64_t{64} << 20;  // a team costs more than a small read takes
  const int64_t pieces = static_cast<int64_t>((bytes + kIoChunkBytes - 1) / kIoChunkBytes);
  const uint64_t esz = elems ? dtype_size(*elems) : 1;  // kIoChunkBytes holds whole elements
  std::exception_ptr err;
  bool non_finite = false;
#pragma omp parallel for ordered schedule(static, 1) if (bytes >= kTeamMin) num_threads(threads)
  for (int64_t i = 0; i < pieces; ++i) {
    const uint64_t at = static_cast<uint64_t>(i) * kIoChunkBytes, n = std::min(kIoChunkBytes, bytes - at);
    std::exception_ptr e;
    bool bad = false;
    try {
      f.read_at(pos + at, dest + at, n, name);
      bad = elems && cpu::simd::first_non_finite(dest + at, *elems, n / esz) != n / esz;
    } catch (...) {
      e = std::current_exception();
    }
#pragma omp ordered
    {
      if (!err) {
        if (e)
          err = e;
        else
          XXH3_64bits_update(hash, dest + at, n);
      }
      non_finite = non_finite || bad;
    }
  }
  if (err) std::rethrow_exception(err);
  return non_finite;
}

// Buffered output to a descriptor or a string, hashing each section's bytes.
class Out {
 public:
  Out(int fd, std::string path, std::string* str) : fd_(fd), path_(std::move(path)), str_(str) {
    if (!str_) buf_.reserve(kIoChunkBytes);
  }
  template <class T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void bytes(const void* p, uint64_t n) {
    if (hashing_) XXH3_64bits_update(hash_.s, p, n);
    pos_ += n;
    if (str_) {
      str_->append(static_cast<const char*>(p), n);
      return;
    }
    if (buf_.size() + n > kIoChunkBytes) flush();
    if (n >= kIoChunkBytes) {
      write_all(fd_, p, n, path_);  // large runs go out without a copy
      flushed_ += n;
      return;
    }
    buf_.append(static_cast<const char*>(p), n);
  }
  // Bytes put so far (the file offset of the next one).
  uint64_t pos() const { return pos_; }
  // Overwrites `n` bytes put earlier at `at` (put by one call, so they lie
  // wholly in the buffer or wholly in the file).
  void patch(uint64_t at, const void* p, uint64_t n) {
    if (str_)
      std::memcpy(&(*str_)[str_->size() - (pos_ - at)], p, n);
    else if (at >= flushed_)
      std::memcpy(&buf_[at - flushed_], p, n);
    else
      write_all_at(fd_, p, n, at, path_);
  }
  void begin_hash() {
    XXH3_64bits_reset(hash_.s);
    hashing_ = true;
  }
  uint64_t end_hash() {
    hashing_ = false;
    return XXH3_64bits_digest(hash_.s);
  }
  void flush() {
    if (!buf_.empty()) write_all(fd_, buf_.data(), buf_.size(), path_);
    flushed_ += buf_.size();
    buf_.clear();
  }

 private:
  int fd_;
  std::string path_;
  std::string* str_;
  std::string buf_;
  HashState hash_;
  bool hashing_ = false;
  uint64_t pos_ = 0;      // bytes put
  uint64_t flushed_ = 0;  // of them, bytes written to fd_
};

// The fields section: an entry for each live slot of `v` that has fields,
// in slot (file) order. Its length is known once the entries are out, so it
// is written into the section head afterwards.
void write_fields(Out& out, const StoreView& v, const SnapshotFields& fields) {
  out.put<uint32_t>(kTagFields);
  out.put<uint32_t>(0);
  const uint64_t size_at = out.pos();
  out.put<uint64_t>(0);
  out.begin_hash();
  uint64_t bytes = 0;
  std::string e;
  for (uint64_t s = 0; s < v.slots && fields.encode; ++s) {
    if (v.ids[s] == kNoId) continue;
    e.clear();
    if (!fields.encode(s, e)) continue;
    out.put<uint64_t>(v.ids[s]);
    out.put<uint64_t>(e.size());
    out.bytes(e.data(), e.size());
    bytes += kEntryHead + e.size();
  }
  out.put<uint64_t>(out.end_hash());
  out.patch(size_at, &bytes, 8);
}

// Reads a section's payload front to back through a window, hashing every
// byte once as it comes in: the memory held is the window, kIoChunkBytes or
// the largest piece taken at once.
class SectionReader {
 public:
  SectionReader(const InputFile& f, uint64_t pos, uint64_t bytes, XXH3_state_t* hash)
      : f_(f), at_(pos), in_(pos), end_(pos + bytes), hash_(hash) {}
  uint64_t left() const { return end_ - at_; }
  // The next n bytes, contiguous, valid until the next call.
  const unsigned char* take(uint64_t n) {
    if (n > left()) fail(Code::corrupt, "an entry runs past the end of the section");
    if (n > in_ - at_) fill(n);
    const unsigned char* p = buf_.data() + (buf_.size() - (in_ - at_));
    at_ += n;
    return p;
  }
  // Hashes what was not read yet (to tell damage from a bad entry).
  void hash_rest() {
    at_ = in_;
    while (in_ < end_) fill(std::min<uint64_t>(end_ - in_, kIoChunkBytes)), at_ = in_;
  }

 private:
  // Keeps the unread bytes at the front of the buffer and reads after them
  // until at least n are there (the window stays whole: buf_ holds exactly
  // the bytes [in_ - buf_.size(), in_)).
  void fill(uint64_t n) {
    const uint64_t keep = in_ - at_;
    const uint64_t more = std::min<uint64_t>(std::max<uint64_t>(n, kIoChunkBytes) - keep, end_ - in_);
    if (keep > 0) std::memmove(buf_.data(), buf_.data() + (buf_.size() - keep), keep);
    buf_.resize(keep + more);
    f_.read_at(in_, buf_.data() + keep, more, "fields");
    XXH3_64bits_update(hash_, buf_.data() + keep, more);
    in_ += more;
  }
  const InputFile& f_;
  uint64_t at_, in_, end_;  // next byte taken, next byte read, end of the payload
  XXH3_state_t* hash_;
  std::vector<unsigned char> buf_;
};

// The fields section at `pos` (payload of `bytes`) into `store`, which holds
// the file's memories: checked entry by entry, handed over in batches. Its
// checksum is compared at the end; a bad entry in a section whose checksum
// fails is reported as the checksum mismatch (damage), else as itself.
void read_fields(const InputFile& f, uint64_t pos, uint64_t bytes, Store& store, const std::string& path) {
  HashState hash;
  SectionReader r(f, pos, bytes, hash.s);
  std::vector<uint64_t> ids;
  std::vector<FieldsIn> batch;
  uint64_t batch_bytes = 0;
  auto hand_over = [&] {
    store.load_fields(ids.data(), batch.data(), ids.size());
    ids.clear();
    batch.clear();
    batch_bytes = 0;
  };
  auto checksum_ok = [&] {
    uint64_t sum;
    f.read_at(pos + bytes, &sum, 8, "fields");
    return sum == XXH3_64bits_digest(hash.s);
  };
  try {
    while (r.left() > 0) {
      uint64_t id, n;
      const unsigned char* h = r.take(kEntryHead);
      std::memcpy(&id, h, 8);
      std::memcpy(&n, h + 8, 8);
      if (n > kMaxEncodedFieldsBytes) fail(Code::corrupt, "memory " + std::to_string(id) + "'s entry is too long");
      const unsigned char* p = r.take(n);
      uint64_t at = 0;
      FieldsIn fi = decode_fields(p, n, at);
      if (at != n) fail(Code::corrupt, "memory " + std::to_string(id) + "'s entry holds bytes after its fields");
      if (!fields_match_set(fi))
        fail(Code::corrupt, "memory " + std::to_string(id) + "'s entry names fields it does not hold, or none");
      ids.push_back(id);
      batch.push_back(std::move(fi));
      batch_bytes += n;
      if (ids.size() >= kFieldsBatch || batch_bytes >= kIoChunkBytes) hand_over();
    }
    hand_over();
  } catch (const Error& e) {
    if (e.code() != Code::corrupt) throw;
    r.hash_rest();
    if (!checksum_ok()) fail(Code::corrupt, path + ": checksum mismatch in the fields section");
    fail(Code::corrupt, path + ": the fields section: " + e.what());
  }
  if (!checksum_ok()) fail(Code::corrupt, path + ": checksum mismatch in the fields section");
}

// The index section: the layout's centroids and each written memory's list.
void write_index(Out& out, const StoreView& v, uint64_t live, const IndexLayout& L) {
  std::unordered_map<uint64_t, uint32_t> list_of;
  list_of.reserve(L.ids.size());
  for (uint64_t i = 0; i < L.ids.size(); ++i) list_of.emplace(L.ids[i], L.lists[i]);
  std::vector<uint32_t> lists;
  lists.reserve(live);
  for (uint64_t s = 0; s < v.slots; ++s) {
    if (v.ids[s] == kNoId) continue;
    auto it = list_of.find(v.ids[s]);
    lists.push_back(it == list_of.end() ? kHotList : it->second);
  }
  unsigned char opts[kIndexOptionBytes];
  encode_index_options(L.opts, opts);
  out.put<uint32_t>(kTagIndex);
  out.put<uint32_t>(0);
  out.put<uint64_t>(8 + kIndexOptionBytes + L.centroids.size() * 4 + lists.size() * 4);
  out.begin_hash();
  out.put<uint32_t>(L.nlist);
  out.put<uint32_t>(0);
  out.bytes(opts, kIndexOptionBytes);
  out.bytes(L.centroids.data(), L.centroids.size() * 4);
  out.bytes(lists.data(), lists.size() * 4);
  out.put<uint64_t>(out.end_hash());
}

void write_store(Out& out, const StoreView& v, uint64_t live, uint64_t seq, const IndexLayout* index,
                 const SnapshotFields& fields) {
  const uint64_t row_bytes = v.dim * dtype_size(v.dtype);
  std::string h;
  auto put = [&](auto x) { h.append(reinterpret_cast<const char*>(&x), sizeof x); };
  h.append(kMagic, 8);
  put(kFormatVersion);
  put(kHeaderBytes);
  put(static_cast<uint64_t>(v.dim));
  put(static_cast<int32_t>(v.dtype));
  put(static_cast<int32_t>(v.metric));
  put(live);
  put(seq);
  put(index ? kFlagIndex : uint32_t{0});
  put(uint32_t{0});
  put(static_cast<uint64_t>(XXH3_64bits(h.data(), h.size())));
  out.bytes(h.data(), h.size());
  for (const Section& s : sections(3, row_bytes, &v, LoadTargets{})) {
    out.put<uint32_t>(s.tag);
    out.put<uint32_t>(0);
    out.put<uint64_t>(checked_mul(live, s.entry, s.name));
    out.begin_hash();
    // Runs of live slots go out as one piece; removed slots are skipped.
    uint64_t slot = 0, written = 0;
    while (slot < v.slots) {
      while (slot < v.slots && v.ids[slot] == kNoId) ++slot;
      uint64_t end = slot;
      while (end < v.slots && v.ids[end] != kNoId) ++end;
      if (end > slot) out.bytes(s.slots + slot * s.entry, (end - slot) * s.entry);
      written += end - slot;
      slot = end;
    }
    if (written != live) fail(Code::internal, "store snapshot: live count disagrees with the slots");
    out.put<uint64_t>(out.end_hash());
  }
  write_fields(out, v, fields);
  if (index) write_index(out, v, live, *index);
  out.flush();
}

}  // namespace

void write_store_file(int fd, const std::string& path, const StoreView& v, uint64_t live, uint64_t seq,
                      const IndexLayout* index, const SnapshotFields& fields) {
  Out out(fd, path, nullptr);
  write_store(out, v, live, seq, index, fields);
}

void Store::write_snapshot_locked(const std::string& path, uint64_t seq) const {
  // A sharded store's rows live in its shards: written from their contents.
  if (!shards_.empty()) return replace_file(path, encode_store(contents_locked()));
  replace_file(path, [&](int fd, const std::string& tmp) {
    const IndexLayout L = layout_locked();
    SnapshotFields fields;
    fields.encode = [this](uint64_t slot, std::string& out) { return encode_slot_fields_locked(slot, out); };
    write_store_file(fd, tmp, view(), slot_of_.size(), seq, indexed_ ? &L : nullptr, fields);
  });
}

std::string encode_store(const StoreContents& c) {
  StoreView v;
  v.vectors = c.vectors.data();
  v.dtype = c.dtype;
  v.metric = c.metric;
  v.dim = c.dim;
  v.slots = c.ids.size();
  v.ids = c.ids.data();
  v.biases = c.biases.data();
  v.times = c.times.data();
  v.importance = c.importance.data();
  SnapshotFields fields;
  fields.encode = [&c](uint64_t i, std::string& out) {
    if (i >= c.fields.size() || c.fields[i].empty()) return false;
    out += c.fields[i];
    return true;
  };
  std::string b;
  Out out(-1, "", &b);
  write_store(out, v, c.ids.size(), c.seq, c.indexed ? &c.layout : nullptr, fields);
  return b;
}

void save_store(const Store& store, const std::string& path) { store.save(path); }

std::unique_ptr<Store> load_store(const Runtime& rt, const std::string& path, uint64_t* seq_out) {
  const InputFile f(path);  // refuses what is not a regular file

  // The header, read whole (both versions fit) and checked before anything
  // else is allocated or read.
  unsigned char h[kHeaderBytes + 8] = {0};
  const uint64_t have = std::min<uint64_t>(f.size(), sizeof h);
  f.read_at(0, h, have, "header");
  if (have < 8 || std::memcmp(h, kMagic, 8) != 0) fail(Code::corrupt, path + ": not a mnemo store file");
  auto field = [&](uint64_t off, auto v) {
    if (off + sizeof v > have) fail(Code::corrupt, path + ": truncated in header");
    std::memcpy(&v, h + off, sizeof v);
    return v;
  };
  const uint32_t version = field(8, uint32_t{});
  if (version < 1 || version > kFormatVersion)
    fail(Code::corrupt, path + ": unknown format version " + std::to_string(version));
  const uint32_t header_bytes = version == 1 ? kHeaderBytesV1 : version < 5 ? kHeaderBytesV2 : kHeaderBytes;
  if (field(12, uint32_t{}) != header_bytes) fail(Code::corrupt, path + ": bad header size");
  const uint64_t dim = field(16, uint64_t{});
  const int32_t dtype = field(24, int32_t{});
  const int32_t metric = field(28, int32_t{});
  const uint64_t count = field(32, uint64_t{});
  const uint64_t seq = version == 1 ? 0 : field(40, uint64_t{});
  if (field(header_bytes, uint64_t{}) != XXH3_64bits(h, header_bytes))
    fail(Code::corrupt, path + ": header checksum mismatch");
  // Which sections follow the first five: version 4 always has an index,
  // version 5 says so in its flags and always has the fields.
  const uint32_t flags = version >= 5 ? field(kHeaderBytesV2, uint32_t{}) : version == 4 ? kFlagIndex : 0;
  if (version >= 5 && ((flags & ~kFlagIndex) != 0 || field(kHeaderBytesV2 + 4, uint32_t{}) != 0))
    fail(Code::corrupt, path + ": unknown header flags");
  const bool has_fields = version >= 5, has_index = (flags & kFlagIndex) != 0;
  if (dim == 0 || dim > 65536) fail(Code::corrupt, path + ": bad dimension");
  if (dtype < 1 || dtype > 3) fail(Code::corrupt, path + ": bad storage dtype");
  if (metric < 1 || metric > 3) fail(Code::corrupt, path + ": bad metric");
  const DType dt = static_cast<DType>(dtype);
  const uint64_t row_bytes = dim * dtype_size(dt);

  // The size the header implies, against the size the file has.
  std::vector<Section> secs = sections(version, row_bytes, nullptr, LoadTargets{});
  uint64_t total = header_bytes + 8;
  try {
    for (const Section& s : secs)
      total = checked_add(total, checked_add(checked_mul(count, s.entry, s.name), kSectionHead + kSectionTail, "file"),
                          "file");
  } catch (const Error&) {
    fail(Code::corrupt, path + ": impossible vector count");
  }
  if (total > f.size())
    fail(Code::corrupt, path + ": truncated: the header claims " + std::to_string(count) + " memories (" +
                            std::to_string(total) + " bytes), the file holds " + std::to_string(f.size()) + " bytes");
  // The fields section's declared size against what the file holds.
  uint64_t fields_pos = 0, fields_bytes = 0;
  if (has_fields) {
    if (f.size() - total < kSectionHead + kSectionTail)
      fail(Code::corrupt, path + ": truncated: the fields section is missing");
    unsigned char sh[kSectionHead];
    f.read_at(total, sh, sizeof sh, "fields");
    uint32_t tag, zero;
    std::memcpy(&tag, sh, 4);
    std::memcpy(&zero, sh + 4, 4);
    std::memcpy(&fields_bytes, sh + 8, 8);
    if (tag != kTagFields) fail(Code::corrupt, path + ": expected the fields section");
    if (zero != 0) fail(Code::corrupt, path + ": reserved field of the fields section is not zero");
    if (fields_bytes > f.size() - total - kSectionHead - kSectionTail)
      fail(Code::corrupt, path + ": truncated: the fields section runs past the end of the file");
    fields_pos = total + kSectionHead;
    total = fields_pos + fields_bytes + kSectionTail;
  }
  // An index section, when the header says so, fills the rest exactly.
  const uint64_t index_pos = total;
  uint64_t index_bytes = 0;
  if (has_index) {
    if (total > f.size() || f.size() - total < kSectionHead + kSectionTail + 8 + kIndexOptionBytes)
      fail(Code::corrupt, path + ": truncated: the index section is missing");
    unsigned char sh[kSectionHead + 8];
    f.read_at(total, sh, sizeof sh, "index");
    uint32_t tag, zero, nlist, zero2;
    uint64_t size;
    std::memcpy(&tag, sh, 4);
    std::memcpy(&zero, sh + 4, 4);
    std::memcpy(&size, sh + 8, 8);
    std::memcpy(&nlist, sh + 16, 4);
    std::memcpy(&zero2, sh + 20, 4);
    if (tag != kTagIndex || zero != 0) fail(Code::corrupt, path + ": expected the index section");
    if (zero2 != 0) fail(Code::corrupt, path + ": reserved field of the index section is not zero");
    if (nlist > kMaxLists || size != 8 + kIndexOptionBytes + (uint64_t{nlist} * dim + count) * 4 ||
        size != f.size() - total - kSectionHead - kSectionTail)
      fail(Code::corrupt, path + ": the index section has the wrong size");
    index_bytes = size;
    total = f.size();
  }
  if (total < f.size()) fail(Code::corrupt, path + ": trailing bytes after the last section");

  // Sizes are now bounded by the file's: allocate the store's own arrays and
  // read each section straight into them.
  std::vector<uint64_t> ids(count);
  std::vector<float> biases(count), importance(count);
  std::vector<double> times(count);
  AlignedBuffer vectors;
  vectors.resize(count * row_bytes);
  auto bytes_of = [](auto& vec) { return reinterpret_cast<unsigned char*>(vec.data()); };
  secs = sections(version, row_bytes, nullptr,
                  LoadTargets{bytes_of(ids), vectors.data(), bytes_of(biases), bytes_of(times), bytes_of(importance)});
  HashState hash;
  bool non_finite = false;  // reported after the checksums: a damaged file is corrupt first
  uint64_t pos = header_bytes + 8;
  for (const Section& s : secs) {
    const uint64_t bytes = count * s.entry;
    unsigned char sh[kSectionHead];
    f.read_at(pos, sh, kSectionHead, s.name);
    uint32_t tag, zero;
    uint64_t size;
    std::memcpy(&tag, sh, 4);
    std::memcpy(&zero, sh + 4, 4);
    std::memcpy(&size, sh + 8, 8);
    if (tag != s.tag) fail(Code::corrupt, path + ": expected the " + s.name + " section");
    if (zero != 0) fail(Code::corrupt, path + ": reserved field of the " + s.name + " section is not zero");
    if (size != bytes) fail(Code::corrupt, path + ": " + s.name + " section has the wrong size");
    pos += kSectionHead;
    XXH3_64bits_reset(hash.s);
    if (read_payload(f, pos, s.dest, bytes, s.name, hash.s, s.dest == vectors.data() ? &dt : nullptr, rt.threads()))
      non_finite = true;
    pos += bytes;
    uint64_t sum;
    f.read_at(pos, &sum, 8, s.name);
    if (sum != XXH3_64bits_digest(hash.s))
      fail(Code::corrupt, path + ": checksum mismatch in the " + s.name + " section");
    pos += kSectionTail;
  }

  for (uint64_t i = 0; i < count; ++i) {
    if (!std::isfinite(biases[i])) fail(Code::corrupt, path + ": non-finite bias at position " + std::to_string(i));
    if (!std::isfinite(times[i])) fail(Code::corrupt, path + ": non-finite time at position " + std::to_string(i));
    if (!std::isfinite(importance[i]))
      fail(Code::corrupt, path + ": non-finite importance at position " + std::to_string(i));
  }
  if (non_finite) fail(Code::corrupt, path + ": non-finite vector element");
  IndexLayout layout;
  if (index_bytes > 0) {
    std::vector<unsigned char> b(index_bytes);
    HashState ih;
    read_payload(f, index_pos + kSectionHead, b.data(), index_bytes, "index", ih.s, nullptr, 1);
    uint64_t sum;
    f.read_at(index_pos + kSectionHead + index_bytes, &sum, 8, "index");
    if (sum != XXH3_64bits_digest(ih.s)) fail(Code::corrupt, path + ": checksum mismatch in the index section");
    std::memcpy(&layout.nlist, b.data(), 4);
    try {
      layout.opts = decode_index_options(b.data() + 8);
    } catch (const Error&) {
      fail(Code::corrupt, path + ": the index section holds options no build could have made");
    }
    layout.centroids.resize(uint64_t{layout.nlist} * dim);
    if (!layout.centroids.empty())
      std::memcpy(layout.centroids.data(), b.data() + 8 + kIndexOptionBytes, layout.centroids.size() * 4);
    for (float c : layout.centroids)
      if (!std::isfinite(c)) fail(Code::corrupt, path + ": non-finite centroid in the index section");
    const unsigned char* lp = b.data() + 8 + kIndexOptionBytes + layout.centroids.size() * 4;
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t l;
      std::memcpy(&l, lp + i * 4, 4);
      if (l == kHotList) continue;
      if (l >= layout.nlist) fail(Code::corrupt, path + ": the index section names a list past its list count");
      layout.ids.push_back(ids[i]);
      layout.lists.push_back(l);
    }
  }
  auto store = std::make_unique<Store>(rt, dim, dt, static_cast<Metric>(metric));
  const uint64_t bad =
      store->adopt(std::move(ids), std::move(vectors), std::move(biases), std::move(times), std::move(importance));
  if (bad != UINT64_MAX) fail(Code::corrupt, path + ": invalid or repeated id at position " + std::to_string(bad));
  // Fields before the layout, which moves them with their memories.
  if (has_fields) read_fields(f, fields_pos, fields_bytes, *store, path);
  if (index_bytes > 0) store->adopt_layout(layout);
  if (seq_out) *seq_out = seq;
  return store;
}

// ---- a memory's stored fields as snapshot bytes, and back ----------------

bool Store::encode_slot_fields_locked(uint64_t slot, std::string& out) const {
  const Record* r = slot < recs_.size() ? recs_[slot].get() : nullptr;
  if (!r) return false;
  FieldsIn f;
  record_strings(*r, *tables_, f);
  encode_fields(f, out);
  return true;
}

void Store::load_fields(const uint64_t* ids, const FieldsIn* fields, uint64_t count) {
  auto lock = write_lock();
  const auto& keys = tables_->key_ids;
  std::unordered_set<uint64_t> seen;
  std::unordered_map<std::string, uint64_t> claimed;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t id = ids[i];
    const std::string which = "memory " + std::to_string(id);
    if (shards_.empty() ? !slot_of_.count(id) : owner_of(id) == shards_.size())
      fail(Code::corrupt, "fields of " + which + ", which the file does not hold");
    if (record_of(id) || !seen.insert(id).second) fail(Code::corrupt, which + " is given fields twice");
    const std::string& key = fields[i].key;
    if (!(fields[i].set & kFieldKey) || key.empty()) continue;
    uint64_t other = kNoId;
    if (auto it = keys.find(key); it != keys.end()) other = it->second;
    if (auto it = claimed.find(key); it != claimed.end()) other = it->second;
    if (other != kNoId)
      fail(Code::corrupt, which + "'s key '" + key + "' is also memory " + std::to_string(other) + "'s");
    claimed.emplace(key, id);
  }
  if (count == 0) return;
  auto w = resolve_fields(ids, fields, count);
  set_fields_locked(ids, w, false, fields);
}

}  // namespace mnemo
