#include "journal_image.h"

#include <xxhash.h>

#include <cstring>

namespace fz {

namespace {

constexpr char kMagic[8] = {'M', 'N', 'E', 'M', 'O', 'J', 'R', '1'};
constexpr uint64_t kFields = kJournalHeaderBytes - 8;  // header bytes before its checksum
constexpr uint32_t kRecordMagic = 0x4352'4a4d;         // "MJRC" read little-endian
constexpr uint64_t kHead = 40;                         // record head, its check included

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T at(const std::string& b, uint64_t pos) {
  T v;
  std::memcpy(&v, b.data() + pos, sizeof v);
  return v;
}

uint32_t head_check(const char* head) { return static_cast<uint32_t>(XXH3_64bits(head, kHead - 4)); }

uint64_t elem_bytes(int32_t dtype) { return dtype == 1 ? 4 : dtype == 2 || dtype == 3 ? 2 : 0; }

// The payload a record of this kind must carry, or false where no payload
// fits (unknown op, dtype or flags, a size beyond 64 bits); with *more set,
// memories' fields follow (an add_memories record with flag 4, a
// set_fields record) and the payload may also be longer.
bool payload_of(const JournalImage& shape, uint32_t op, uint64_t count, int32_t dtype_field, uint64_t* bytes,
                bool* more) {
  using u128 = unsigned __int128;
  if (dtype_field < 0) return false;
  const int32_t dtype = dtype_field & 0xff;
  const uint32_t flags = static_cast<uint32_t>(dtype_field) >> 8;
  *more = (op == 6 && (flags & 4)) || op == 9;
  if (dtype > 3) return false;
  if (flags != 0 && (op != 6 || flags > 7)) return false;
  u128 want = 0;
  switch (op) {
    case 1:
    case 6:
      if (dtype != 1 && dtype != shape.dtype) return false;
      if (elem_bytes(dtype) == 0) return false;
      // count x dim x element bytes must itself fit 64 bits.
      if (shape.dim != 0 && count > ~uint64_t{0} / shape.dim) return false;
      if (static_cast<u128>(count) * shape.dim * elem_bytes(dtype) > ~uint64_t{0}) return false;
      want = static_cast<u128>(count) * 8 + static_cast<u128>(count) * shape.dim * elem_bytes(dtype);
      if (flags & 1) want += static_cast<u128>(count) * 8;
      if (flags & 2) want += static_cast<u128>(count) * 4;
      break;
    case 2: want = static_cast<u128>(count) * 8; break;
    case 3:
    case 5: want = static_cast<u128>(count) * 12; break;
    case 4: want = static_cast<u128>(count) * 16; break;
    case 9: want = static_cast<u128>(count) * 8; break;
    default: return false;
  }
  if (static_cast<u128>(count) * 8 > ~uint64_t{0} || want > ~uint64_t{0}) return false;
  *bytes = static_cast<uint64_t>(want);
  return true;
}

}  // namespace

std::string write_journal(const JournalImage& j) {
  std::string b(kMagic, 8);
  put<uint32_t>(b, 1);
  put<uint32_t>(b, static_cast<uint32_t>(kFields));
  put<uint64_t>(b, j.dim);
  put<int32_t>(b, j.dtype);
  put<int32_t>(b, j.metric);
  put<uint64_t>(b, j.base_seq);
  put<uint64_t>(b, XXH3_64bits(b.data(), b.size()));
  for (const auto& r : j.records) {
    const size_t start = b.size();
    put<uint32_t>(b, kRecordMagic);
    put<uint32_t>(b, r.op);
    put<uint64_t>(b, r.seq);
    put<uint64_t>(b, r.count);
    put<uint64_t>(b, r.ids.size() * 8 + r.data.size());
    put<int32_t>(b, r.dtype);
    put<uint32_t>(b, head_check(b.data() + start));
    b.append(reinterpret_cast<const char*>(r.ids.data()), r.ids.size() * 8);
    b.append(r.data);
    put<uint64_t>(b, XXH3_64bits(b.data() + start, b.size() - start));
  }
  return b;
}

std::vector<std::pair<uint64_t, uint64_t>> journal_spans(const std::string& b) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  uint64_t pos = kJournalHeaderBytes;
  while (pos < b.size() && b.size() - pos >= kHead) {
    const uint64_t payload = at<uint64_t>(b, pos + 24);
    const uint64_t left = b.size() - pos - kHead;
    if (payload > left || left - payload < 8) break;
    spans.emplace_back(pos, pos + kHead + payload + 8);
    pos += kHead + payload + 8;
  }
  return spans;
}

void fix_journal_checksums(std::string& b) {
  if (b.size() < kJournalHeaderBytes) return;
  const uint64_t h = XXH3_64bits(b.data(), kFields);
  std::memcpy(&b[kFields], &h, 8);
  for (const auto& [begin, end] : journal_spans(b)) {
    const uint32_t c = head_check(b.data() + begin);
    std::memcpy(&b[begin + kHead - 4], &c, 4);
    const uint64_t sum = XXH3_64bits(b.data() + begin, end - 8 - begin);
    std::memcpy(&b[end - 8], &sum, 8);
  }
}

JournalReading read_journal(const std::string& b) {
  JournalReading r;
  auto no = [&r](const std::string& why) {
    r.valid = false;
    r.why = why;
    return r;
  };
  if (b.size() < kJournalHeaderBytes) return no("short header");
  if (std::memcmp(b.data(), kMagic, 8) != 0) return no("magic");
  if (at<uint32_t>(b, 8) != 1) return no("version");
  if (at<uint32_t>(b, 12) != kFields) return no("header size");
  if (at<uint64_t>(b, kFields) != XXH3_64bits(b.data(), kFields)) return no("header checksum");
  JournalImage& j = r.image;
  j.dim = at<uint64_t>(b, 16);
  j.dtype = at<int32_t>(b, 24);
  j.metric = at<int32_t>(b, 28);
  j.base_seq = at<uint64_t>(b, 32);
  uint64_t pos = kJournalHeaderBytes, last = j.base_seq;
  while (pos < b.size()) {
    const uint64_t left = b.size() - pos;
    if (left < kHead) break;  // torn inside a record head
    const char* h = b.data() + pos;
    if (at<uint32_t>(b, pos) != kRecordMagic || at<uint32_t>(b, pos + 36) != head_check(h)) {
      // Zeros to the end are space a crash left unwritten; anything else is damage.
      if (b.find_first_not_of('\0', pos) == std::string::npos) break;
      return no("record head at " + std::to_string(pos));
    }
    JournalRecordImage rec;
    rec.op = at<uint32_t>(b, pos + 4);
    rec.seq = at<uint64_t>(b, pos + 8);
    rec.count = at<uint64_t>(b, pos + 16);
    const uint64_t payload = at<uint64_t>(b, pos + 24);
    rec.dtype = at<int32_t>(b, pos + 32);
    if (payload > left - kHead || left - kHead - payload < 8) break;  // runs past the end: torn
    const uint64_t end = pos + kHead + payload + 8;
    if (at<uint64_t>(b, end - 8) != XXH3_64bits(h, kHead + payload)) {
      if (end == b.size()) break;  // the final record, torn
      return no("record checksum at " + std::to_string(pos));
    }
    uint64_t want = 0;
    bool more = false;
    if (rec.count == 0 || !payload_of(j, rec.op, rec.count, rec.dtype, &want, &more) ||
        !(want == payload || (more && payload > want)))
      return no("record op, dtype or size at " + std::to_string(pos));
    if (rec.seq != last + 1) return no("sequence at " + std::to_string(pos));
    rec.ids.resize(rec.count);
    std::memcpy(rec.ids.data(), h + kHead, rec.count * 8);
    rec.data.assign(h + kHead + rec.count * 8, payload - rec.count * 8);
    last = rec.seq;
    j.records.push_back(std::move(rec));
    pos = end;
  }
  r.valid = true;
  r.end = pos;
  r.torn = pos < b.size();
  return r;
}

}  // namespace fz
