// Journal file (version 1), little-endian:
//   header  "MNEMOJR1" u32 version u32 header_bytes u64 dim i32 dtype i32 metric
//           u64 base_seq u64 xxh3(header fields before it)
//   records u32 magic u32 op u64 seq u64 count u64 payload_bytes i32 dtype
//           u32 head_check (low half of xxh3 of the 36 bytes before it)
//           <payload> u64 xxh3(record head and payload)
//   payload add: ids [count] u64, vectors [count x dim] dtype
//           remove: ids [count] u64; set_bias: ids [count] u64, biases [count] f32
//           set_times: ids, times [count] f64; set_importance: ids, importance [count] f32
//           add_memories: ids, vectors, then times [count] f64 if flag 1,
//           importance [count] f32 if flag 2; its dtype field holds the
//           vectors' dtype | flags << 8
// The head check makes a record's length trustworthy before it is used, so a
// damaged record is told apart from a torn one: only the final record may be
// incomplete or fail its checksum (a crash during its append), and it is cut
// off. Damage anywhere else is refused.
#include "store_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "aligned_buffer.h"
#include "checked.h"
#include "error.h"
#include "ivf/ivf_index.h"
#include "store_io.h"

namespace mnemo {

namespace {

constexpr char kMagic[8] = {'M', 'N', 'E', 'M', 'O', 'J', 'R', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kHeaderFields = 8 + 4 + 4 + 8 + 4 + 4 + 8;
constexpr uint64_t kHeaderBytes = kHeaderFields + 8;
constexpr uint32_t kRecordMagic = 0x4352'4a4d;  // "MJRC"
constexpr uint64_t kRecordHead = 40;

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

uint32_t head_check(const char* head) { return static_cast<uint32_t>(XXH3_64bits(head, kRecordHead - 4)); }

std::string header_bytes(const JournalShape& s, uint64_t base_seq) {
  std::string b;
  b.append(kMagic, 8);
  put<uint32_t>(b, kVersion);
  put<uint32_t>(b, kHeaderFields);
  put<uint64_t>(b, s.dim);
  put<int32_t>(b, static_cast<int32_t>(s.dtype));
  put<int32_t>(b, static_cast<int32_t>(s.metric));
  put<uint64_t>(b, base_seq);
  put<uint64_t>(b, XXH3_64bits(b.data(), b.size()));
  return b;
}

// Payload size a record of this op and count must have; with `more` set,
// fields follow (fields_codec.h) and the payload is at least that size.
bool payload_size(const JournalShape& s, JournalOp op, uint64_t count, DType dt, uint32_t flags, uint64_t& bytes,
                  bool& more) {
  more = (op == JournalOp::add_memories && (flags & kJournalFields)) || op == JournalOp::set_fields;
  try {
    const uint64_t ids = checked_mul(count, 8, "ids");
    if (op == JournalOp::index_layout) {
      // ids, their lists, the options block, the centroids (flags = nlist).
      if (dt != DType::f32) return false;
      bytes =
          checked_add(checked_add(ids, checked_mul(count, 4, "lists"), "record"),
                      checked_add(kIndexOptionBytes, checked_mul(flags, s.dim, 4, "centroids"), "record"), "record");
      return true;
    }
    if (op == JournalOp::index_drop) {
      bytes = 0;
      return count == 0 && flags == 0;
    }
    if (count == 0) return false;
    if (flags != 0 && (op != JournalOp::add_memories || flags > 7)) return false;
    switch (op) {
      case JournalOp::add:
      case JournalOp::add_memories:
        if (dt != DType::f32 && dt != s.dtype) return false;
        bytes = checked_add(ids, checked_mul(count, s.dim, dtype_size(dt), "vectors"), "record");
        if (flags & kJournalTimes) bytes = checked_add(bytes, checked_mul(count, 8, "times"), "record");
        if (flags & kJournalImportance) bytes = checked_add(bytes, checked_mul(count, 4, "importance"), "record");
        return true;
      case JournalOp::remove: bytes = ids; return true;
      case JournalOp::set_bias:
      case JournalOp::set_importance: bytes = checked_add(ids, checked_mul(count, 4, "values"), "record"); return true;
      case JournalOp::set_times: bytes = checked_add(ids, checked_mul(count, 8, "times"), "record"); return true;
      case JournalOp::set_fields: bytes = ids; return true;
      case JournalOp::index_layout:
      case JournalOp::index_drop: return false;  // handled above
    }
  } catch (const Error&) {
  }
  return false;
}

}  // namespace

Journal::Journal(std::string path, const JournalShape& shape, bool sync_each)
    : path_(std::move(path)), shape_(shape), sync_each_(sync_each) {}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

void Journal::open_for_append() {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(Code::io, sys_error("cannot open", path_));
  // One writer per journal: a second process appending would interleave records.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string msg =
        errno == EWOULDBLOCK ? "journal '" + path_ + "' is open in another process" : sys_error("cannot lock", path_);
    ::close(fd);
    fail(Code::io, msg);
  }
  if (::lseek(fd, static_cast<off_t>(end_), SEEK_SET) < 0) {
    const std::string msg = sys_error("cannot seek in", path_);
    ::close(fd);
    fail(Code::io, msg);
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::unique_ptr<Journal> Journal::create(const std::string& path, const JournalShape& shape, uint64_t base_seq,
                                         bool sync_each) {
  std::unique_ptr<Journal> j(new Journal(path, shape, sync_each));
  replace_file(path, header_bytes(shape, base_seq));
  j->base_seq_ = j->last_seq_ = base_seq;
  j->end_ = kHeaderBytes;
  j->open_for_append();
  return j;
}

std::unique_ptr<Journal> Journal::open(const std::string& path, const JournalShape& shape, bool sync_each,
                                       const std::function<void(const JournalRecord&)>& apply) {
  // Read record by record: memory holds one record (in aligned buffers the
  // store applies without a copy) and one piece of kIoChunkBytes, whatever
  // the journal's length.
  const InputFile f(path);  // refuses what is not a regular file
  const uint64_t size = f.size();
  auto bad = [&](const std::string& why) { fail(Code::corrupt, path + ": " + why); };
  char hb[kHeaderBytes];
  if (size < kHeaderBytes) bad(size >= 8 ? "truncated journal header" : "not a mnemo journal");
  f.read_at(0, hb, kHeaderBytes, "journal header");
  if (std::memcmp(hb, kMagic, 8) != 0) bad("not a mnemo journal");
  if (get<uint32_t>(hb + 8) != kVersion) bad("unknown journal version " + std::to_string(get<uint32_t>(hb + 8)));
  if (get<uint32_t>(hb + 12) != kHeaderFields) bad("bad journal header size");
  if (get<uint64_t>(hb + kHeaderFields) != XXH3_64bits(hb, kHeaderFields)) bad("journal header checksum mismatch");
  if (get<uint64_t>(hb + 16) != shape.dim || get<int32_t>(hb + 24) != static_cast<int32_t>(shape.dtype) ||
      get<int32_t>(hb + 28) != static_cast<int32_t>(shape.metric))
    bad("journal belongs to a store of another dimension, dtype or metric");

  std::unique_ptr<Journal> j(new Journal(path, shape, sync_each));
  j->base_seq_ = j->last_seq_ = get<uint64_t>(hb + 32);
  XXH3_state_t* st = XXH3_createState();
  if (st == nullptr) throw std::bad_alloc();
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> hold(st, XXH3_freeState);
  std::vector<char> piece;
  // Streams [from, from + n) through `each`, a piece at a time.
  auto stream = [&](uint64_t from, uint64_t n, const auto& each) {
    piece.resize(std::min<uint64_t>(std::max<uint64_t>(n, 1), kIoChunkBytes));
    for (uint64_t done = 0; done < n;) {
      const uint64_t k = std::min<uint64_t>(n - done, piece.size());
      f.read_at(from + done, piece.data(), k, "journal");
      each(piece.data(), k);
      done += k;
    }
  };
  auto zero_from = [&](uint64_t from) {
    bool zero = true;
    stream(from, size - from, [&](const char* p, uint64_t k) {
      for (uint64_t i = 0; i < k && zero; ++i) zero = p[i] == 0;
    });
    return zero;
  };
  uint64_t pos = kHeaderBytes;
  std::vector<uint64_t> ids;
  AlignedBuffer data;
  while (pos < size) {
    const uint64_t left = size - pos;
    const std::string where = "journal record at byte " + std::to_string(pos);
    if (left < kRecordHead) break;  // torn inside the record head
    char h[kRecordHead];
    f.read_at(pos, h, kRecordHead, "journal record");
    if (get<uint32_t>(h) != kRecordMagic || get<uint32_t>(h + 36) != head_check(h)) {
      if (zero_from(pos)) break;  // space the crash left unwritten
      bad(where + " is damaged (bad record head)");
    }
    const auto op = static_cast<JournalOp>(get<uint32_t>(h + 4));
    const uint64_t seq = get<uint64_t>(h + 8), count = get<uint64_t>(h + 16), payload = get<uint64_t>(h + 24);
    const int32_t dtype_field = get<int32_t>(h + 32);
    const int32_t dtype = dtype_field & 0xff;
    const uint32_t flags = static_cast<uint32_t>(dtype_field) >> 8;
    if (payload > left - kRecordHead || left - kRecordHead - payload < 8) break;  // torn: runs past the end
    const uint64_t end = pos + kRecordHead + payload + 8;
    uint64_t expect = 0;
    bool more = false;
    const bool sane = dtype_field >= 0 && dtype <= 3 &&
                      payload_size(shape, op, count, static_cast<DType>(dtype), flags, expect, more) &&
                      (expect == payload || (more && payload > expect));
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, h, kRecordHead);
    if (sane) {
      // Straight into the buffers the record is applied from.
      ids.resize(count);
      f.read_at(pos + kRecordHead, ids.data(), count * 8, "journal record");
      data.resize(payload - count * 8);
      f.read_at(pos + kRecordHead + count * 8, data.data(), data.size(), "journal record");
      XXH3_64bits_update(st, ids.data(), count * 8);
      XXH3_64bits_update(st, data.data(), data.size());
    } else {
      // Only hashed, to tell a torn final record from damage.
      stream(pos + kRecordHead, payload, [&](const char* p, uint64_t k) { XXH3_64bits_update(st, p, k); });
    }
    uint64_t sum;
    f.read_at(end - 8, &sum, 8, "journal record");
    if (sum != XXH3_64bits_digest(st)) {
      if (end == size) break;  // the final record, torn
      bad(where + " fails its checksum");
    }
    if (!sane) bad(where + " has an inconsistent op, dtype or size");
    if (seq != j->last_seq_ + 1)
      bad(where + " breaks the sequence (" + std::to_string(seq) + " after " + std::to_string(j->last_seq_) + ")");
    JournalRecord r{op, seq, count, static_cast<DType>(dtype), flags, ids.data(), data.data(), data.size()};
    apply(r);
    j->last_seq_ = seq;
    pos = end;
  }
  j->end_ = pos;
  j->open_for_append();
  if (pos < size) {
    // Cut the torn tail so the next record follows the last good one.
    if (::ftruncate(j->fd_, static_cast<off_t>(pos)) != 0 || ::fdatasync(j->fd_) != 0)
      fail(Code::io, sys_error("cannot cut the torn tail of", path));
  }
  return j;
}

void Journal::append(JournalOp op, uint64_t count, DType dtype, const uint64_t* ids, const void* data,
                     uint64_t data_bytes) {
  append(op, count, dtype, 0, ids, {{data, data_bytes}});
}

void Journal::append(JournalOp op, uint64_t count, DType dtype, uint32_t flags, const uint64_t* ids,
                     std::initializer_list<JournalPiece> pieces) {
  uint64_t data_bytes = 0;
  for (const JournalPiece& p : pieces) data_bytes = checked_add(data_bytes, p.bytes, "journal record");
  if (broken_) fail(Code::io, "journal '" + path_ + "' could not be repaired after a failed write; reopen the store");
  const uint64_t payload = checked_mul(count, 8, "ids") + data_bytes;
  std::string r;
  r.reserve(checked_bytes(payload + kRecordHead + 8, "journal record"));
  put<uint32_t>(r, kRecordMagic);
  put<uint32_t>(r, static_cast<uint32_t>(op));
  put<uint64_t>(r, last_seq_ + 1);
  put<uint64_t>(r, count);
  put<uint64_t>(r, payload);
  const bool has_dtype = op == JournalOp::add || op == JournalOp::add_memories || op == JournalOp::index_layout;
  put<int32_t>(r, has_dtype ? static_cast<int32_t>(static_cast<uint32_t>(dtype) | flags << 8) : 0);
  put<uint32_t>(r, head_check(r.data()));
  r.append(reinterpret_cast<const char*>(ids), count * 8);
  for (const JournalPiece& p : pieces) r.append(static_cast<const char*>(p.data), p.bytes);
  put<uint64_t>(r, XXH3_64bits(r.data(), r.size()));
  try {
    write_all(fd_, r.data(), r.size(), path_);
    if (sync_each_ && ::fdatasync(fd_) != 0) fail(Code::io, sys_error("cannot flush", path_));
  } catch (...) {
    // Take the partial record back so later records stay readable.
    if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0 || ::lseek(fd_, static_cast<off_t>(end_), SEEK_SET) < 0)
      broken_ = true;
    throw;
  }
  end_ += r.size();
  ++last_seq_;
}

void Journal::reset(uint64_t base_seq) {
  replace_file(path_, header_bytes(shape_, base_seq));
  base_seq_ = last_seq_ = base_seq;
  end_ = kHeaderBytes;
  broken_ = false;
  open_for_append();
}

}  // namespace mnemo
