// Store files given to mnemo_store_open: raw bytes, or a valid image built
// from the input and then mutated (bytes flipped or set, cut, grown), with
// checksums repaired or not. An image the format accepts must open to
// exactly its contents; any other must give MNEMO_E_CORRUPT and no store.
// Images of every format version (1, 2, 3 with last-access times and
// importance, 4 with an index, 5 with memories' fields and an index or not)
// are built, their fields sometimes breaking the section's rules (an id not
// in the file, one given twice, a key given twice, set naming other fields
// than those held). Journal mode: a durable store written by a short
// sequence of writes (adds with and without metadata and fields, field
// updates, removes, set_bias, set_times, set_importance, touching searches),
// then its journal (and sometimes its snapshot) damaged, given to
// mnemo_store_open_durable; it must open to exactly what the intact records
// say (fuzz/journal_image.h), fields included, or give MNEMO_E_CORRUPT and no
// store.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>

#include "fields_image.h"
#include "fuzz_support.h"
#include "journal_image.h"
#include "reference.h"
#include "store_image.h"

namespace {

// The newest format version this library writes: read from a file it saves.
uint32_t library_version(mnemo_runtime* rt) {
  static const uint32_t v = [rt] {
    mnemo_store* s = nullptr;
    FZ_CHECK(mnemo_store_create(rt, 1, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, &s) == MNEMO_OK, "create");
    const std::string path = fz::scratch_dir() + "/version.mnemo";
    FZ_CHECK(mnemo_store_save(s, path.c_str()) == MNEMO_OK, "save of an empty store");
    mnemo_store_destroy(s);
    std::ifstream f(path, std::ios::binary);
    char head[12] = {};
    f.read(head, sizeof head);
    ::unlink(path.c_str());
    uint32_t version = 0;
    std::memcpy(&version, head + 8, 4);
    FZ_CHECK(version >= 1 && version <= 5,
             "store files of format version " + std::to_string(version) + ": teach fuzz/store_image.cpp that format");
    return version;
  }();
  return v;
}

// A finite last-access time: UNIX times, whole or not, zero, negative,
// subnormal and huge ones.
double pick_time(FuzzedDataProvider& fdp) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return 0.0;
    case 1: return 1.7e9 + static_cast<double>(fdp.ConsumeIntegralInRange<int>(-100000, 100000));
    case 2: return 1.7e9 + fdp.ConsumeFloatingPointInRange<double>(-1e6, 1e6);
    case 3: {
      static const double edge[] = {-1.0, 4.9e-324, -1e300, 1e300, 1.7976931348623157e308, 9.0e15};
      return edge[fdp.ConsumeIntegralInRange<size_t>(0, 5)];
    }
    default: return fdp.ConsumeFloatingPointInRange<double>(-4e9, 4e9);
  }
}

// Fields for some of the image's memories, now and then breaking the
// section's rules.
void random_fields(FuzzedDataProvider& fdp, fz::StoreImage& s) {
  const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, s.ids.size() + 1);
  for (size_t i = 0; i < n; ++i) {
    // 0 (also once the input has run out): as a store writes them; 35 to
    // 39 break a rule.
    const int how = fdp.ConsumeIntegralInRange<int>(0, 39);
    uint64_t id = i < s.ids.size() ? s.ids[i] : 0;
    if (how == 35 || i >= s.ids.size()) id = fdp.ConsumeIntegral<uint64_t>();  // not in the file
    if (how == 36 && !s.fields.empty()) id = s.fields[0].first;                // given twice
    fm::Write w = fz::random_write(fdp, how == 37);
    // As a store writes them: set names exactly what the memory holds.
    fm::Fields held;
    fm::apply(held, w);
    w.set = held.held();
    w.tags.assign(held.tags.begin(), held.tags.end());
    w.attrs.assign(held.attrs.begin(), held.attrs.end());
    if (!(w.set & MNEMO_FIELD_NAMESPACE)) w.ns.clear();
    if (!(w.set & MNEMO_FIELD_KEY)) w.key.clear();
    if (!(w.set & MNEMO_FIELD_PAYLOAD)) w.payload.clear();
    if (how == 38) w.set ^= 1u << fdp.ConsumeIntegralInRange<int>(0, 5);  // set names other fields
    if (how == 39 && !s.fields.empty()) w.key = s.fields[0].second.key, w.set |= MNEMO_FIELD_KEY;  // a key twice
    if (w.set == 0 && how != 38) continue;  // a memory without fields has no entry
    s.fields.emplace_back(id, std::move(w));
  }
}

// An index section: a few lists with finite centroids, memories in them or
// in the hot tier; options a build could make, now and then not.
void random_index(FuzzedDataProvider& fdp, fz::StoreImage& s) {
  s.has_index = true;
  s.index.nlist = fdp.ConsumeIntegralInRange<uint32_t>(0, 3);
  const bool bad = fdp.ConsumeIntegralInRange<int>(0, 19) == 19;
  s.index.options = fz::index_options(s.index.nlist, fdp.ConsumeIntegralInRange<uint32_t>(0, 4),
                                      fdp.ConsumeIntegralInRange<uint32_t>(0, 8), bad ? 2u : fdp.ConsumeBool(),
                                      fdp.ConsumeIntegral<uint64_t>(), bad ? 0.0 : 0.25, 4096, 8.0);
  for (uint64_t i = 0; i < uint64_t{s.index.nlist} * s.dim; ++i)
    s.index.centroids.push_back(static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8)) / 4.0f);
  for (size_t i = 0; i < s.ids.size(); ++i)
    s.index.lists.push_back(s.index.nlist > 0 && fdp.ConsumeBool()
                                ? fdp.ConsumeIntegralInRange<uint32_t>(0, s.index.nlist - 1)
                                : 0xffffffffu);
}

fz::StoreImage random_image(FuzzedDataProvider& fdp, uint32_t max_version) {
  fz::StoreImage s;
  s.version = fdp.ConsumeIntegralInRange<uint32_t>(1, max_version);
  if (s.version >= 2) s.seq = fdp.ConsumeIntegral<uint64_t>();
  s.dim = fdp.ConsumeIntegralInRange<uint64_t>(1, 9);
  s.dtype = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_DTYPE_F32, MNEMO_DTYPE_BF16);
  s.metric = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_METRIC_COSINE, MNEMO_METRIC_L2SQ);
  const size_t count = fdp.ConsumeIntegralInRange<size_t>(0, 6);
  const size_t es = fz::dtype_bytes(s.dtype);
  s.vectors.resize(count * s.dim * es);
  for (size_t i = 0; i < count; ++i) {
    // Distinct ids unless the input asks for a repeat.
    s.ids.push_back(fdp.ConsumeIntegralInRange<int>(0, 15) ? i * 7 + 3 : fdp.ConsumeIntegral<uint64_t>());
    s.biases.push_back(static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8)) / 4.0f);
    if (s.version >= 3) {
      s.times.push_back(pick_time(fdp));
      s.importance.push_back(fz::hurt_float(fdp));
    }
    for (uint64_t j = 0; j < s.dim; ++j) {
      float v = fz::hurt_float(fdp);
      // Keep the f16 image finite: a value beyond its range is a mutation's job.
      if (s.dtype == MNEMO_DTYPE_F16 && !(std::fabs(v) < 65504.0f)) v = std::copysign(65504.0f, v);
      if (s.dtype == MNEMO_DTYPE_BF16 && !(std::fabs(v) < 3.38e38f)) v = std::copysign(3.38e38f, v);
      fz::put_elem(s.vectors.data(), s.dtype, i * s.dim + j, v);
    }
  }
  if (s.version >= 5) random_fields(fdp, s);
  if (s.version == 4 || (s.version >= 5 && fdp.ConsumeBool())) random_index(fdp, s);
  return s;
}

void mutate(FuzzedDataProvider& fdp, std::string& b) {
  const int n = fdp.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < n && !b.empty(); ++i) {
    const size_t pos = fdp.ConsumeIntegralInRange<size_t>(0, b.size() - 1);
    switch (fdp.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: b[pos] = static_cast<char>(b[pos] ^ (1 << fdp.ConsumeIntegralInRange<int>(0, 7))); break;
      case 1: b[pos] = static_cast<char>(fdp.ConsumeIntegral<uint8_t>()); break;
      case 2: b.resize(pos); break;
      case 3: b.insert(pos, fdp.ConsumeBytesAsString(fdp.ConsumeIntegralInRange<size_t>(1, 16))); break;
      case 4: {  // an 8-byte field (a count, a size, an id) set to a chosen value
        const uint64_t v =
            fdp.ConsumeBool() ? fdp.ConsumeIntegral<uint64_t>() : fdp.ConsumeIntegralInRange<uint64_t>(0, 70000);
        const size_t at = std::min(pos, b.size() >= 8 ? b.size() - 8 : 0);
        if (b.size() >= 8) std::memcpy(&b[at], &v, 8);
        break;
      }
      default: b.erase(pos, fdp.ConsumeIntegralInRange<size_t>(1, 16)); break;
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// One memory, bit for bit: vector bytes, bias, last-access time,
// importance and fields.
struct Mem {
  std::string vec;
  uint32_t bias = 0;
  uint64_t time = 0;
  uint32_t importance = 0;
  fm::Fields fields;
  bool operator==(const Mem& o) const {
    return vec == o.vec && bias == o.bias && time == o.time && importance == o.importance && fields == o.fields;
  }
};
using Contents = std::map<uint64_t, Mem>;

template <class T, class U>
T bits_of(U v) {
  static_assert(sizeof(T) == sizeof(U), "same size");
  T b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// What a store holds, element by element (an older file's metadata: zeros).
Contents contents(const fz::StoreImage& s) {
  Contents m;
  const size_t row = s.dim * fz::dtype_bytes(s.dtype);
  for (size_t i = 0; i < s.ids.size(); ++i) {
    Mem& e = m[s.ids[i]];
    e.vec.assign(reinterpret_cast<const char*>(s.vectors.data()) + i * row, row);
    e.bias = bits_of<uint32_t>(s.biases[i]);
    e.time = i < s.times.size() ? bits_of<uint64_t>(s.times[i]) : 0;
    e.importance = i < s.importance.size() ? bits_of<uint32_t>(s.importance[i]) : 0;
  }
  for (const auto& [id, w] : s.fields) fm::apply(m.at(id).fields, w);
  return m;
}

// Whether writing w[i] to ids[i] is refused for its keys (fm::FieldsModel's
// rule over the keys `m` holds).
bool key_conflict(const Contents& m, const std::vector<uint64_t>& ids, const std::vector<fm::Write>& w) {
  fm::FieldsModel keys;
  for (const auto& [id, e] : m)
    if (!e.fields.key.empty()) keys.write({id}, {fm::Write{MNEMO_FIELD_KEY, e.fields.key, {}, {}, {}, {}}});
  return keys.key_conflict(ids, w);
}

// The memories' fields of a record: `count` entries filling data[at, end).
bool record_fields(const std::string& data, uint64_t at, uint64_t count, std::vector<fm::Write>& out) {
  std::string why;
  out.assign(count, fm::Write{});
  for (uint64_t i = 0; i < count; ++i)
    if (!fz::decode_fields(data, data.size(), at, &out[i], &why)) return false;
  return at == data.size();
}

// ---- journal mode ------------------------------------------------------------

struct Shape {
  uint64_t dim;
  int32_t dtype, metric;
};

// Applies one journaled write to `m` as the store defines it; false where the
// record cannot apply (a reserved id, a non-finite stored value, bias, time
// or importance, a value or fields set for an absent id, fields a reader
// refuses or whose keys conflict): such a record is damage.
bool apply_record(Contents& m, const fz::JournalRecordImage& r, const Shape& sh) {
  const int32_t in_dtype = r.dtype & 0xff;
  const uint32_t flags = static_cast<uint32_t>(r.dtype) >> 8;
  const size_t es = fz::dtype_bytes(sh.dtype), in_es = fz::dtype_bytes(in_dtype);
  // The i-th f64 or f32 value `at` bytes into the payload after the ids.
  auto f64 = [&r](uint64_t at, uint64_t i) {
    double v;
    std::memcpy(&v, r.data.data() + at + 8 * i, 8);
    return v;
  };
  auto f32 = [&r](uint64_t at, uint64_t i) {
    float v;
    std::memcpy(&v, r.data.data() + at + 4 * i, 4);
    return v;
  };
  switch (r.op) {
    case 1:
    case 6: {
      std::vector<std::string> rows(r.count);
      for (uint64_t i = 0; i < r.count; ++i) {
        if (r.ids[i] == MNEMO_NO_ID) return false;
        rows[i].resize(sh.dim * es);
        for (uint64_t j = 0; j < sh.dim; ++j) {
          const size_t e = i * sh.dim + j;
          if (in_dtype == sh.dtype) {
            std::memcpy(&rows[i][j * es], r.data.data() + e * es, es);
          } else {  // f32 into an f16/bf16 store: rounded to nearest even
            float f;
            std::memcpy(&f, r.data.data() + e * in_es, 4);
            fz::put_elem(&rows[i][0], sh.dtype, j, f);
          }
          if (!std::isfinite(fz::get_elem(rows[i].data(), sh.dtype, j))) return false;
        }
      }
      const uint64_t times_at = r.count * sh.dim * in_es;
      const uint64_t imp_at = times_at + ((flags & 1) ? r.count * 8 : 0);
      const uint64_t fields_at = imp_at + ((flags & 2) ? r.count * 4 : 0);
      for (uint64_t i = 0; i < r.count; ++i)
        if (((flags & 1) && !std::isfinite(f64(times_at, i))) || ((flags & 2) && !std::isfinite(f32(imp_at, i))))
          return false;
      std::vector<fm::Write> w;
      if (flags & 4) {
        if (!record_fields(r.data, fields_at, r.count, w) || key_conflict(m, r.ids, w)) return false;
      } else if (fields_at != r.data.size()) {
        return false;
      }
      // In call order: a repeated id keeps its last entry. A new memory
      // starts with zeros and no fields, an upsert keeps what the record
      // does not give.
      for (uint64_t i = 0; i < r.count; ++i) {
        Mem& e = m[r.ids[i]];
        e.vec = rows[i];
        if (flags & 1) e.time = bits_of<uint64_t>(f64(times_at, i));
        if (flags & 2) e.importance = bits_of<uint32_t>(f32(imp_at, i));
      }
      // A repeated id takes its last entry's fields alone.
      if (flags & 4)
        for (const auto& [id, x] : fm::last_writes(r.ids, w)) fm::apply(m[id].fields, *x);
      return true;
    }
    case 9: {
      std::vector<fm::Write> w;
      if (!record_fields(r.data, 0, r.count, w) || key_conflict(m, r.ids, w)) return false;
      for (uint64_t id : r.ids)
        if (!m.count(id)) return false;
      for (const auto& [id, x] : fm::last_writes(r.ids, w)) fm::apply(m[id].fields, *x);
      return true;
    }
    case 2:
      for (uint64_t id : r.ids) m.erase(id);
      return true;
    case 3:
    case 4:
    case 5: {
      for (uint64_t i = 0; i < r.count; ++i) {
        const double v = r.op == 4 ? f64(0, i) : f32(0, i);
        if (!m.count(r.ids[i]) || !std::isfinite(v)) return false;
      }
      for (uint64_t i = 0; i < r.count; ++i) {
        Mem& e = m[r.ids[i]];
        if (r.op == 3) e.bias = bits_of<uint32_t>(f32(0, i));
        if (r.op == 4) e.time = bits_of<uint64_t>(f64(0, i));
        if (r.op == 5) e.importance = bits_of<uint32_t>(f32(0, i));
      }
      return true;
    }
  }
  return false;
}

bool same_record(const fz::JournalRecordImage& a, const fz::JournalRecordImage& b) {
  return a.op == b.op && a.seq == b.seq && a.count == b.count && a.dtype == b.dtype && a.ids == b.ids &&
         a.data == b.data;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  FZ_CHECK(f.good(), "cannot write " + path);
}

// Durable stores flush their files: in memory (/dev/shm) that costs nothing,
// on a disk it would cost most of each execution. The scratch folder where
// there is no /dev/shm.
const std::string& durable_dir() {
  static const std::string dir = [] {
    const std::string d = "/dev/shm/mnemo-fuzz-" + std::to_string(::getpid());
    return ::access(d.c_str(), F_OK) == 0 || ::mkdir(d.c_str(), 0700) == 0 ? d : fz::scratch_dir();
  }();
  static const struct Remover {
    ~Remover() { ::rmdir(dir.c_str()); }
  } remover;
  (void)remover;
  return dir;
}

// The files of one durable store, removed on every exit.
struct DurableFiles {
  std::string snap = durable_dir() + "/durable.mnemo";
  std::string journal = snap + ".journal";
  std::string again = durable_dir() + "/durable-again.mnemo";
  void remove() const {
    const std::string pid = std::to_string(::getpid());
    for (const std::string& p : {snap, journal, again, snap + ".tmp." + pid, journal + ".tmp." + pid})
      ::unlink(p.c_str());
  }
  DurableFiles() { remove(); }
  ~DurableFiles() { remove(); }
};

mnemo_durable_options durable_options(const Shape* create) {
  mnemo_durable_options o = mnemo_durable_options_default();
  o.sync = MNEMO_SYNC_OS;  // no flush per write: the files are read back in-process
  if (create) {
    o.dim = create->dim;
    o.dtype = create->dtype;
    o.metric = create->metric;
  }
  return o;
}

// A finite value the store's dtype holds (a value beyond its range is a
// mutation's job).
float storable(FuzzedDataProvider& fdp, int32_t dtype) {
  float v = fz::hurt_float(fdp);
  if (dtype == MNEMO_DTYPE_F16 && !(std::fabs(v) < 65504.0f)) v = std::copysign(65504.0f, v);
  if (dtype == MNEMO_DTYPE_BF16 && !(std::fabs(v) < 3.38e38f)) v = std::copysign(3.38e38f, v);
  return v;
}

uint64_t pick_id(FuzzedDataProvider& fdp) {
  const uint64_t id = fdp.ConsumeIntegralInRange<int>(0, 15) ? fdp.ConsumeIntegralInRange<uint64_t>(1, 5)
                                                             : fdp.ConsumeIntegral<uint64_t>();
  return id == MNEMO_NO_ID ? 0 : id;
}

// What the writes left on disk and what each sequence number stands for.
struct Written {
  Shape shape{};
  std::vector<Contents> states;                 // states[seq]: the store after write `seq`
  std::vector<fz::JournalRecordImage> journal;  // records since the last checkpoint
  uint64_t base_seq = 0;
};

// A touching activation search: the memories it returns get `now` as their
// time, journaled as one set_times record of the distinct returned ids in
// ascending order. Returns false when it returned nothing (no record).
bool touch_search(FuzzedDataProvider& fdp, mnemo_store* s, const Shape& sh, Contents& next, fz::JournalRecordImage& r) {
  const uint64_t nq = fdp.ConsumeIntegralInRange<uint64_t>(1, 2), k = fdp.ConsumeIntegralInRange<uint64_t>(1, 4);
  fz::Buf q(nq * sh.dim * 4), out_ids(nq * k * 8), out_sc(nq * k * 4);
  for (uint64_t e = 0; e < nq * sh.dim; ++e)
    q.as<float>()[e] = static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8)) / 4.0f;
  mnemo_search_options o = mnemo_search_options_default();
  o.activation = 1;
  o.touch = 1;
  o.normalize = fdp.ConsumeBool() ? 1 : 0;
  o.apply_bias = fdp.ConsumeBool() ? 1 : 0;
  o.w_recency = static_cast<float>(fdp.ConsumeIntegralInRange<int>(-4, 4)) / 2.0f;
  o.w_importance = static_cast<float>(fdp.ConsumeIntegralInRange<int>(-4, 4)) / 2.0f;
  static const double half_lives[] = {1.0, 86400.0, 1e300, std::numeric_limits<double>::infinity()};
  o.half_life = half_lives[fdp.ConsumeIntegralInRange<size_t>(0, 3)];
  o.now = pick_time(fdp);
  const mnemo_status st = mnemo_store_search(s, q.as<float>(), nq, k, &o, out_ids.as<uint64_t>(), out_sc.as<float>());
  FZ_CHECK(st == MNEMO_OK, "touching search: " + fz::status_text(st));
  std::vector<uint64_t> got;
  for (uint64_t i = 0; i < nq * k; ++i)
    if (out_ids.as<uint64_t>()[i] != MNEMO_NO_ID) got.push_back(out_ids.as<uint64_t>()[i]);
  std::sort(got.begin(), got.end());
  got.erase(std::unique(got.begin(), got.end()), got.end());
  if (got.empty()) return false;
  r.op = 4;
  r.count = got.size();
  r.dtype = 0;
  r.ids = got;
  r.data.clear();
  for (size_t i = 0; i < got.size(); ++i) r.data.append(reinterpret_cast<const char*>(&o.now), 8);
  FZ_CHECK(apply_record(next, r, sh), "a touching search returned an id the model does not hold");
  return true;
}

void check_sequence(mnemo_store* s, const Written& w) {
  mnemo_store_statistics stats{};
  stats.struct_size = sizeof stats;
  FZ_CHECK(mnemo_store_stats(s, &stats) == MNEMO_OK, "stats");
  FZ_CHECK(stats.sequence == w.states.size() - 1, "the sequence number does not count the journaled writes");
}

// The state a write about to be journaled starts from, pushed once it is.
struct NextState {
  Written& w;
  void push(Contents c) const { w.states.push_back(std::move(c)); }
};
NextState next_state(Written& w) { return NextState{w}; }

// mnemo_store_add_with_fields (an add_memories record with flag 4, times
// and importance as given) or, with `update`, mnemo_store_update_fields (a
// set_fields record) of random writes; a call the model says is refused
// (a key held by another memory, an absent id, fields the header refuses)
// must be refused and journal nothing. Returns whether a record was
// journaled (then `r` is it and the new state is pushed).
bool fields_write(FuzzedDataProvider& fdp, mnemo_store* s, const Shape& sh, const Contents& now, bool update,
                  const NextState& next, fz::JournalRecordImage& r) {
  r.count = fdp.ConsumeIntegralInRange<uint64_t>(1, 3);
  std::vector<fm::Write> writes;
  bool acceptable = true;
  for (uint64_t i = 0; i < r.count; ++i) {
    r.ids.push_back(pick_id(fdp));
    writes.push_back(fz::random_write(fdp, true));
    acceptable = acceptable && fm::acceptable(writes.back());
  }
  fm::CWrites c(writes);
  fz::Buf ids(r.count * 8);
  std::memcpy(ids.data(), r.ids.data(), r.count * 8);
  Contents after = now;
  r.data.clear();
  mnemo_status st;
  bool ok = acceptable;
  if (update) {
    for (uint64_t id : r.ids) ok = ok && now.count(id);
    ok = ok && !key_conflict(now, r.ids, writes);
    st = mnemo_store_update_fields(s, ids.as<uint64_t>(), c.data(), r.count);
    r.op = 9;
    r.dtype = 0;
  } else {
    ok = ok && !key_conflict(now, r.ids, writes);
    fz::Buf data(r.count * sh.dim * 4), times(r.count * 8), importance(r.count * 4);
    for (uint64_t e = 0; e < r.count * sh.dim; ++e)
      fz::put_elem(data.data(), MNEMO_DTYPE_F32, e, storable(fdp, sh.dtype));
    const uint32_t flags = fdp.ConsumeIntegralInRange<uint32_t>(0, 3);
    for (uint64_t i = 0; i < r.count; ++i) {
      times.as<double>()[i] = pick_time(fdp);
      importance.as<float>()[i] = fz::hurt_float(fdp);
    }
    r.data.assign(reinterpret_cast<const char*>(data.data()), r.count * sh.dim * 4);
    if (flags & 1) r.data.append(reinterpret_cast<const char*>(times.data()), r.count * 8);
    if (flags & 2) r.data.append(reinterpret_cast<const char*>(importance.data()), r.count * 4);
    st = mnemo_store_add_with_fields(s, ids.as<uint64_t>(), data.data(), MNEMO_DTYPE_F32, r.count,
                                     (flags & 1) ? times.as<double>() : nullptr,
                                     (flags & 2) ? importance.as<float>() : nullptr, c.data());
    r.op = 6;
    r.dtype = MNEMO_DTYPE_F32 | static_cast<int32_t>((flags | 4) << 8);
  }
  // The record holds the fields as the call gave them.
  for (const fm::Write& x : writes) fz::encode_fields(x, r.data);
  if (!ok) {
    FZ_CHECK(st == MNEMO_E_INVALID_ARGUMENT || st == MNEMO_E_NOT_FOUND,
             std::string(update ? "update_fields" : "add_with_fields") + " the model refuses: " + fz::status_text(st));
    return false;
  }
  FZ_CHECK(st == MNEMO_OK, std::string(update ? "update_fields: " : "add_with_fields: ") + fz::status_text(st));
  FZ_CHECK(apply_record(after, r, sh), "the model refuses a fields write the store took");
  next.push(std::move(after));
  return true;
}

// Creates a durable store and applies an input-driven sequence of writes,
// checking each status and sequence number against the model.
Written write_store(FuzzedDataProvider& fdp, mnemo_runtime* rt, const DurableFiles& files) {
  Written w;
  w.shape.dim = fdp.ConsumeIntegralInRange<uint64_t>(1, 4);
  w.shape.dtype = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_DTYPE_F32, MNEMO_DTYPE_BF16);
  w.shape.metric = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_METRIC_COSINE, MNEMO_METRIC_L2SQ);
  const Shape& sh = w.shape;
  const mnemo_durable_options o = durable_options(&sh);
  mnemo_store* s = nullptr;
  mnemo_status st = mnemo_store_open_durable(rt, files.snap.c_str(), &o, &s);
  FZ_CHECK(st == MNEMO_OK, "create a durable store: " + fz::status_text(st));
  w.states.emplace_back();
  const int writes = fdp.ConsumeIntegralInRange<int>(0, 8);
  for (int k = 0; k < writes; ++k) {
    fz::JournalRecordImage r;
    r.seq = w.states.size();
    const int what = fdp.ConsumeIntegralInRange<int>(0, 19);
    if (what >= 16) {
      if (!fields_write(fdp, s, sh, w.states.back(), what >= 18, next_state(w), r)) continue;
      w.journal.push_back(std::move(r));
      check_sequence(s, w);
      continue;
    }
    if (what == 9) {
      st = mnemo_store_checkpoint(s);
      FZ_CHECK(st == MNEMO_OK, "checkpoint: " + fz::status_text(st));
      w.journal.clear();
      w.base_seq = w.states.size() - 1;
      continue;
    }
    Contents next = w.states.back();
    bool journaled = true;
    if (what >= 14) {
      if (!touch_search(fdp, s, sh, next, r)) continue;
      w.states.push_back(std::move(next));
      w.journal.push_back(std::move(r));
      continue;
    }
    r.op = what < 5 ? 1 : what < 7 ? 2 : what < 9 ? 3 : what < 12 ? 6 : what < 13 ? 4 : 5;
    r.count = fdp.ConsumeIntegralInRange<uint64_t>(1, 3);
    fz::Buf ids(r.count * 8), data(r.count * std::max<uint64_t>(sh.dim, 1) * 4), times(r.count * 8),
        importance(r.count * 4);
    for (uint64_t i = 0; i < r.count; ++i) ids.as<uint64_t>()[i] = pick_id(fdp);
    r.ids.assign(ids.as<uint64_t>(), ids.as<uint64_t>() + r.count);
    if (r.op == 1 || r.op == 6) {
      const int32_t vdt = fdp.ConsumeBool() ? MNEMO_DTYPE_F32 : sh.dtype;
      for (uint64_t e = 0; e < r.count * sh.dim; ++e) fz::put_elem(data.data(), vdt, e, storable(fdp, sh.dtype));
      r.data.assign(reinterpret_cast<const char*>(data.data()), r.count * sh.dim * fz::dtype_bytes(vdt));
      // add_memories with times, importance, both, or neither (then the
      // library writes a plain add record).
      const uint32_t flags = r.op == 6 ? fdp.ConsumeIntegralInRange<uint32_t>(0, 3) : 0;
      for (uint64_t i = 0; i < r.count; ++i) {
        if (flags & 1) times.as<double>()[i] = pick_time(fdp);
        if (flags & 2) importance.as<float>()[i] = fz::hurt_float(fdp);
      }
      if (flags & 1) r.data.append(reinterpret_cast<const char*>(times.data()), r.count * 8);
      if (flags & 2) r.data.append(reinterpret_cast<const char*>(importance.data()), r.count * 4);
      if (r.op == 6 && flags == 0) r.op = 1;
      r.dtype = vdt | static_cast<int32_t>(flags << 8);
      st = r.op == 1 && fdp.ConsumeBool() ? mnemo_store_add(s, ids.as<uint64_t>(), data.data(), vdt, r.count)
                                          : mnemo_store_add_memories(s, ids.as<uint64_t>(), data.data(), vdt, r.count,
                                                                     (flags & 1) ? times.as<double>() : nullptr,
                                                                     (flags & 2) ? importance.as<float>() : nullptr);
      FZ_CHECK(st == MNEMO_OK, "add: " + fz::status_text(st));
      FZ_CHECK(apply_record(next, r, sh), "the model refuses an add the store took");
    } else if (r.op == 2) {
      uint64_t removed = 0;
      st = mnemo_store_remove(s, ids.as<uint64_t>(), r.count, &removed);
      FZ_CHECK(st == MNEMO_OK, "remove: " + fz::status_text(st));
      const size_t before = next.size();
      apply_record(next, r, sh);
      journaled = next.size() != before;  // only removals that change something are journaled
    } else if (r.op == 4) {
      for (uint64_t i = 0; i < r.count; ++i) times.as<double>()[i] = pick_time(fdp);
      r.data.assign(reinterpret_cast<const char*>(times.data()), r.count * 8);
      st = mnemo_store_set_times(s, ids.as<uint64_t>(), times.as<double>(), r.count);
      journaled = apply_record(next, r, sh);
      FZ_CHECK(st == (journaled ? MNEMO_OK : MNEMO_E_NOT_FOUND), "set_times: " + fz::status_text(st));
    } else {
      for (uint64_t i = 0; i < r.count; ++i)
        data.as<float>()[i] =
            r.op == 3 ? static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8)) / 4.0f : fz::hurt_float(fdp);
      r.data.assign(reinterpret_cast<const char*>(data.data()), r.count * 4);
      st = r.op == 3 ? mnemo_store_set_bias(s, ids.as<uint64_t>(), data.as<float>(), r.count)
                     : mnemo_store_set_importance(s, ids.as<uint64_t>(), data.as<float>(), r.count);
      journaled = apply_record(next, r, sh);
      FZ_CHECK(st == (journaled ? MNEMO_OK : MNEMO_E_NOT_FOUND), "set_bias or set_importance: " + fz::status_text(st));
    }
    if (journaled) {
      w.states.push_back(std::move(next));
      w.journal.push_back(std::move(r));
    }
    check_sequence(s, w);
  }
  mnemo_store_destroy(s);
  return w;
}

// Damages a journal in the ways a disk or a bad copy does, and in the ways
// that test the record checks one by one.
void mutate_journal(FuzzedDataProvider& fdp, std::string& b) {
  const int rounds = fdp.ConsumeIntegralInRange<int>(1, 3);
  for (int round = 0; round < rounds; ++round) {
    const auto spans = fz::journal_spans(b);
    switch (fdp.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:  // cut anywhere, or inside the final record
        if (!spans.empty() && !fdp.ConsumeBool())
          b.resize(fdp.ConsumeIntegralInRange<uint64_t>(spans.back().first, spans.back().second - 1));
        else
          b.resize(fdp.ConsumeIntegralInRange<size_t>(0, b.size()));
        break;
      case 1: mutate(fdp, b); break;
      case 2:  // a record repeated, after itself or at the end
        if (!spans.empty()) {
          const auto [lo, hi] = spans[fdp.ConsumeIntegralInRange<size_t>(0, spans.size() - 1)];
          const std::string rec = b.substr(lo, hi - lo);
          b.insert(fdp.ConsumeBool() ? hi : b.size(), rec);
        }
        break;
      case 3:  // two records swapped, or one dropped
        if (!spans.empty()) {
          const size_t i = fdp.ConsumeIntegralInRange<size_t>(0, spans.size() - 1);
          const size_t j = fdp.ConsumeIntegralInRange<size_t>(0, spans.size() - 1);
          std::string out = b.substr(0, spans.front().first);
          for (size_t k = 0; k < spans.size(); ++k) {
            if (i == j && k == i) continue;
            const auto [lo, hi] = spans[k == i ? j : k == j ? i : k];
            out += b.substr(lo, hi - lo);
          }
          b = out + b.substr(spans.back().second);
        }
        break;
      case 4:  // garbage or zeros after the end
        b += fdp.ConsumeBool() ? fdp.ConsumeBytesAsString(fdp.ConsumeIntegralInRange<size_t>(1, 64))
                               : std::string(fdp.ConsumeIntegralInRange<size_t>(1, 64), '\0');
        break;
      default: {  // an 8-byte field set: the header's dim or base, a record's seq, count or length
        uint64_t at = 0;
        if (!spans.empty() && fdp.ConsumeIntegralInRange<int>(0, 3)) {
          at = spans[fdp.ConsumeIntegralInRange<size_t>(0, spans.size() - 1)].first +
               8 * fdp.ConsumeIntegralInRange<uint64_t>(1, 3);
        } else {
          at = fdp.ConsumeBool() ? 16 : 32;
        }
        if (at + 8 > b.size()) break;
        uint64_t v;
        std::memcpy(&v, &b[at], 8);
        switch (fdp.ConsumeIntegralInRange<int>(0, 2)) {
          case 0: v += static_cast<uint64_t>(fdp.ConsumeIntegralInRange<int64_t>(-2, 2)); break;
          case 1: v = fdp.ConsumeIntegralInRange<uint64_t>(0, 70000); break;
          default: v = fdp.ConsumeIntegral<uint64_t>(); break;
        }
        std::memcpy(&b[at], &v, 8);
        break;
      }
    }
  }
}

// What opening must give: CORRUPT (with the reason), or OK with `want`.
struct Expect {
  bool ok = false;
  std::string why;
  Contents want;
  uint64_t seq = 0, journal_records = 0, journal_bytes = 0;
};

Expect expect_open(bool have_snap, const std::string& snap, bool have_journal, const std::string& journal,
                   uint32_t max_version) {
  Expect e;
  if (!have_snap) {
    e.why = "a journal without its snapshot";
    return e;
  }
  fz::StoreImage img;
  if (!fz::parse_image(snap, &img, &e.why, max_version)) {
    e.why = "snapshot: " + e.why;
    return e;
  }
  e.want = contents(img);
  e.seq = img.seq;
  e.journal_bytes = fz::kJournalHeaderBytes;
  if (!have_journal) {  // a fresh journal after the snapshot
    e.ok = true;
    return e;
  }
  const fz::JournalReading r = fz::read_journal(journal);
  if (!r.valid) {
    e.why = "journal: " + r.why;
    return e;
  }
  const fz::JournalImage& j = r.image;
  if (j.dim != img.dim || j.dtype != img.dtype || j.metric != img.metric) {
    e.why = "journal of another shape";
    return e;
  }
  const Shape sh{img.dim, img.dtype, img.metric};
  for (const auto& rec : j.records) {
    if (rec.seq <= img.seq) continue;  // the snapshot holds it
    if (!apply_record(e.want, rec, sh)) {
      e.why = "record " + std::to_string(rec.seq) + " does not apply";
      return e;
    }
  }
  if (j.base_seq > img.seq) {
    e.why = "journal follows writes the snapshot lacks";
    return e;
  }
  const uint64_t last = j.records.empty() ? j.base_seq : j.records.back().seq;
  e.ok = true;
  e.seq = std::max(last, img.seq);
  if (j.base_seq == img.seq) {  // replayed in place, a torn tail cut off
    e.journal_records = last - j.base_seq;
    e.journal_bytes = r.end;
  }  // else an older journal: restarted after the snapshot (checkpointed when it held more)
  return e;
}

// Every memory's fields as mnemo_store_read gives them, and the keys
// through mnemo_store_ids_of_keys, are those of `want`.
void check_fields(mnemo_store* s, const Contents& want) {
  if (want.empty()) return;
  fz::Buf ids(want.size() * 8);
  std::vector<std::string> keys;
  std::vector<uint64_t> key_ids;
  size_t i = 0;
  for (const auto& [id, m] : want) {
    ids.as<uint64_t>()[i++] = id;
    if (!m.fields.key.empty()) keys.push_back(m.fields.key), key_ids.push_back(id);
  }
  mnemo_records* r = nullptr;
  mnemo_status st = mnemo_store_read(s, ids.as<uint64_t>(), want.size(), &r);
  FZ_CHECK(st == MNEMO_OK, "read: " + fz::status_text(st));
  i = 0;
  for (const auto& [id, m] : want) {
    uint64_t got_id = 0;
    fm::Fields got;
    std::string why;
    const int found = fm::read_record(r, i++, &got_id, &got, &why);
    FZ_CHECK(found == 1 && got_id == id, "read of id " + std::to_string(id) + ": " + why);
    FZ_CHECK(got == m.fields,
             "fields of id " + std::to_string(id) + ": " + fm::describe(got) + ", want " + fm::describe(m.fields));
  }
  mnemo_records_destroy(r);
  if (keys.empty()) return;
  std::vector<const char*> c;
  for (const auto& k : keys) c.push_back(k.c_str());
  fz::Buf out(keys.size() * 8);
  st = mnemo_store_ids_of_keys(s, c.data(), keys.size(), out.as<uint64_t>());
  FZ_CHECK(st == MNEMO_OK, "ids_of_keys: " + fz::status_text(st));
  for (size_t k = 0; k < keys.size(); ++k)
    FZ_CHECK(out.as<uint64_t>()[k] == key_ids[k],
             "the key of id " + std::to_string(key_ids[k]) + " finds id " + std::to_string(out.as<uint64_t>()[k]));
}

// The opened store holds exactly `e`: count, every vector, every bias, the
// fields, the journal counters.
void check_store(mnemo_store* s, const Expect& e, const DurableFiles& files, uint32_t max_version) {
  uint64_t count = 0, dim = 0;
  int32_t dtype = 0;
  FZ_CHECK(mnemo_store_count(s, &count) == MNEMO_OK && count == e.want.size(), "count differs from the model");
  FZ_CHECK(mnemo_store_shape(s, &dim, &dtype, nullptr) == MNEMO_OK, "shape");
  fz::Buf out(dim * 4);
  for (const auto& [id, row] : e.want) {
    const mnemo_status st = mnemo_store_get(s, id, out.as<float>());
    FZ_CHECK(st == MNEMO_OK, "get of id " + std::to_string(id) + ": " + fz::status_text(st));
    for (uint64_t j = 0; j < dim; ++j) {
      const float want = static_cast<float>(fz::get_elem(row.vec.data(), dtype, j));
      FZ_CHECK(std::memcmp(&want, out.as<float>() + j, 4) == 0, "vector of id " + std::to_string(id) + " differs");
    }
  }
  // The metadata by get_meta, and everything once more in a saved copy.
  if (!e.want.empty()) {
    fz::Buf ids(e.want.size() * 8), t(e.want.size() * 8), imp(e.want.size() * 4), b(e.want.size() * 4);
    size_t i = 0;
    for (const auto& kv : e.want) ids.as<uint64_t>()[i++] = kv.first;
    const mnemo_status st =
        mnemo_store_get_meta(s, ids.as<uint64_t>(), e.want.size(), t.as<double>(), imp.as<float>(), b.as<float>());
    FZ_CHECK(st == MNEMO_OK, "get_meta: " + fz::status_text(st));
    i = 0;
    for (const auto& [id, m] : e.want) {
      FZ_CHECK(bits_of<uint64_t>(t.as<double>()[i]) == m.time &&
                   bits_of<uint32_t>(imp.as<float>()[i]) == m.importance &&
                   bits_of<uint32_t>(b.as<float>()[i]) == m.bias,
               "metadata of id " + std::to_string(id) + " differs");
      ++i;
    }
  }
  check_fields(s, e.want);
  FZ_CHECK(mnemo_store_save(s, files.again.c_str()) == MNEMO_OK, "save of an opened durable store");
  fz::StoreImage got;
  std::string why;
  const bool ok = fz::parse_image(read_file(files.again), &got, &why, max_version);
  ::unlink(files.again.c_str());
  FZ_CHECK(ok, "an opened durable store saved an invalid file: " + why);
  FZ_CHECK(contents(got) == e.want, "the opened store differs from the intact records");
  mnemo_store_statistics stats{};
  stats.struct_size = sizeof stats;
  FZ_CHECK(mnemo_store_stats(s, &stats) == MNEMO_OK && stats.durable == 1, "stats");
  FZ_CHECK(stats.sequence == e.seq, "sequence " + std::to_string(stats.sequence) + ", want " + std::to_string(e.seq));
  FZ_CHECK(stats.journal_records == e.journal_records,
           "journal records " + std::to_string(stats.journal_records) + ", want " + std::to_string(e.journal_records));
  FZ_CHECK(stats.journal_bytes == e.journal_bytes,
           "journal bytes " + std::to_string(stats.journal_bytes) + ", want " + std::to_string(e.journal_bytes));
}

int journal_case(FuzzedDataProvider& fdp, mnemo_runtime* rt, uint32_t max_version) {
  const DurableFiles files;
  const Written w = write_store(fdp, rt, files);
  const std::string snap0 = read_file(files.snap), journal0 = read_file(files.journal);

  // The untouched files are what the writes say.
  const fz::JournalReading r0 = fz::read_journal(journal0);
  FZ_CHECK(r0.valid && !r0.torn, "the library wrote a journal the format refuses: " + r0.why);
  FZ_CHECK(r0.image.base_seq == w.base_seq && r0.image.records.size() == w.journal.size(),
           "the journal does not hold the writes since the last checkpoint");
  for (size_t i = 0; i < w.journal.size(); ++i)
    FZ_CHECK(same_record(r0.image.records[i], w.journal[i]), "journal record " + std::to_string(i) + " differs");

  std::string snap = snap0, journal = journal0;
  bool have_snap = true, have_journal = true;
  const int snap_how = fdp.ConsumeIntegralInRange<int>(0, 15);
  if (snap_how == 15) {
    have_snap = false;
  } else if (snap_how >= 12) {
    mutate(fdp, snap);
    if (fdp.ConsumeBool()) fz::fix_checksums(snap);
  }
  // 0 (also where the input has run out): damaged; 14: untouched; 15: gone.
  const int journal_how = fdp.ConsumeIntegralInRange<int>(0, 15);
  if (journal_how == 15 && have_snap) {  // with neither file there is no store at all
    have_journal = false;
  } else if (journal_how < 14) {
    mutate_journal(fdp, journal);
    if (fdp.ConsumeBool()) fz::fix_journal_checksums(journal);
  }
  ::unlink(files.snap.c_str());
  ::unlink(files.journal.c_str());
  if (have_snap) write_file(files.snap, snap);
  if (have_journal) write_file(files.journal, journal);

  const Expect e = expect_open(have_snap, snap, have_journal, journal, max_version);
  if (e.ok && have_snap && snap == snap0 && have_journal && journal0.compare(0, journal.size(), journal) == 0) {
    // Untouched, or only cut short: the state after the writes the intact
    // records hold, all of them when untouched.
    FZ_CHECK(e.seq < w.states.size() && e.want == w.states[e.seq], "the reading of a cut journal is no prefix");
    if (journal == journal0) FZ_CHECK(e.seq == w.states.size() - 1, "an untouched journal loses writes");
    const auto spans = fz::journal_spans(journal0);
    if (!spans.empty() && journal.size() >= spans.back().first && journal.size() < spans.back().second)
      FZ_CHECK(e.seq == w.states.size() - 2, "a journal cut in its final record keeps the wrong writes");
  }

  const mnemo_durable_options o = durable_options(nullptr);
  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(0x30);
  mnemo_store* s = sentinel;
  mnemo_status st = mnemo_store_open_durable(rt, files.snap.c_str(), fdp.ConsumeBool() ? &o : nullptr, &s);
  FZ_CHECK(fz::defined_status(st), "undefined status " + std::to_string(st));
  if (!e.ok) {
    FZ_CHECK(st == MNEMO_E_CORRUPT, "damaged durable files (" + e.why + ") opened with " + fz::status_text(st));
    FZ_CHECK(s == sentinel, "a failed open wrote *out");
    const char* msg = mnemo_last_error();
    FZ_CHECK(std::strstr(msg, files.snap.c_str()) != nullptr, "the message names neither file: " + std::string(msg));
    return 0;
  }
  FZ_CHECK(st == MNEMO_OK, "durable files a reader accepts were refused: " + fz::status_text(st));
  check_store(s, e, files, max_version);
  // A write after the open follows the last intact record (a torn tail was
  // cut, an older journal restarted), and the files then open to the store
  // with that write.
  fz::JournalRecordImage add;
  add.op = 1;
  add.seq = e.seq + 1;
  add.count = 1;
  add.dtype = MNEMO_DTYPE_F32;
  add.ids = {fdp.ConsumeIntegralInRange<uint64_t>(1, 6)};
  uint64_t dim = 0;
  int32_t dtype = 0, metric = 0;
  FZ_CHECK(mnemo_store_shape(s, &dim, &dtype, &metric) == MNEMO_OK, "shape");
  fz::Buf ids(8), vec(dim * 4);
  ids.as<uint64_t>()[0] = add.ids[0];
  for (uint64_t j = 0; j < dim; ++j) vec.as<float>()[j] = static_cast<float>(j + 1) / 4.0f;
  add.data.assign(reinterpret_cast<const char*>(vec.data()), dim * 4);
  st = mnemo_store_add(s, ids.as<uint64_t>(), vec.data(), MNEMO_DTYPE_F32, 1);
  FZ_CHECK(st == MNEMO_OK, "add after the open: " + fz::status_text(st));
  mnemo_store_destroy(s);
  Expect after = e;
  FZ_CHECK(apply_record(after.want, add, Shape{dim, dtype, metric}), "the model refuses a plain add");
  after.seq = add.seq;
  after.journal_records += 1;
  after.journal_bytes += 40 + 8 + dim * 4 + 8;  // record head, id, vector, checksum
  s = sentinel;
  st = mnemo_store_open_durable(rt, files.snap.c_str(), &o, &s);
  FZ_CHECK(st == MNEMO_OK, "reopen: " + fz::status_text(st));
  check_store(s, after, files, max_version);
  mnemo_store_destroy(s);
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  mnemo_runtime* rt = fz::cpu_runtime(true);
  const uint32_t max_version = library_version(rt);
  std::string bytes;
  // Modes 0-3: a snapshot file; 4-7: a durable store's journal.
  const int mode = fdp.ConsumeIntegralInRange<int>(0, 7);
  if (mode >= 4) return journal_case(fdp, rt, max_version);
  if (mode == 0) {
    bytes = fdp.ConsumeRemainingBytesAsString();
  } else {
    bytes = fz::write_image(random_image(fdp, max_version));
    mutate(fdp, bytes);
    if (mode >= 2) fz::fix_checksums(bytes);
  }
  fz::StoreImage want;
  std::string why;
  const bool valid = fz::parse_image(bytes, &want, &why, max_version);

  const std::string path = fz::scratch_dir() + "/load.mnemo";
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    FZ_CHECK(f.good(), "cannot write " + path);
  }
  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(0x30);
  mnemo_store* s = sentinel;
  const mnemo_status st = mnemo_store_open(rt, path.c_str(), &s);
  ::unlink(path.c_str());
  FZ_CHECK(fz::defined_status(st), "undefined status " + std::to_string(st));
  if (!valid) {
    FZ_CHECK(st == MNEMO_E_CORRUPT, "an invalid file (" + why + ") opened with " + fz::status_text(st));
    FZ_CHECK(s == sentinel, "a failed open wrote *out");
    FZ_CHECK(std::strstr(mnemo_last_error(), path.c_str()) != nullptr, "the message does not name the file");
    return 0;
  }
  FZ_CHECK(st == MNEMO_OK, "a valid file was refused: " + fz::status_text(st));
  // Everything the file holds, and nothing else: save the store again and
  // compare what that file holds.
  uint64_t dim = 0, count = 0;
  int32_t dtype = 0, metric = 0;
  FZ_CHECK(mnemo_store_shape(s, &dim, &dtype, &metric) == MNEMO_OK, "shape");
  FZ_CHECK(dim == want.dim && dtype == want.dtype && metric == want.metric, "shape differs from the file");
  FZ_CHECK(mnemo_store_count(s, &count) == MNEMO_OK && count == want.ids.size(), "count differs from the file");
  const std::string again = fz::scratch_dir() + "/again.mnemo";
  FZ_CHECK(mnemo_store_save(s, again.c_str()) == MNEMO_OK, "save of a loaded store: " + fz::status_text(st));
  fz::StoreImage got;
  const bool ok = fz::parse_image(read_file(again), &got, &why, max_version);
  ::unlink(again.c_str());
  FZ_CHECK(ok, "a loaded store saved an invalid file: " + why);
  FZ_CHECK(contents(got) == contents(want), "the loaded store differs from the file");
  FZ_CHECK(got.has_index == want.has_index, "a loaded store's index came and went");
  check_fields(s, contents(want));
  if (count > 0) {
    // It answers a search over all of its vectors.
    fz::Buf q(dim * 4), ids(count * 8), sc(count * 4);
    for (uint64_t j = 0; j < dim; ++j) q.as<float>()[j] = 1.0f;
    const mnemo_status ss = mnemo_store_search(s, q.as<float>(), 1, count, nullptr, ids.as<uint64_t>(), sc.as<float>());
    FZ_CHECK(ss == MNEMO_OK, "search of a loaded store: " + fz::status_text(ss));
  }
  mnemo_store_destroy(s);
  return 0;
}
