// Random sequences of store calls with random, often invalid, arguments,
// checked against a plain model of the store: every status is a defined code
// from the set the arguments allow, a failed call changes nothing (outputs
// and store), and a successful call does exactly what the model does
// (searches return the model's top-k, slots follow the compaction rule).
// Memory metadata too: adds with times and importance, set_times,
// set_importance, get_meta, and activation searches (plain, normalised,
// touching) with hostile options (NaN or infinite weights, half-lives of 0,
// below 0 or infinite, an infinite now, flags of 2, normalize or touch
// without activation, the first ABI's struct_size of 40 and every size
// between it and the current one). Memories' fields too: adds with fields and
// field updates (hostile ones among them: names empty or past the limits,
// unknown value types, NaN, BOOLs of 2, NULL arrays, bad struct_size, keys
// another memory holds), reads, key look-ups, selections with random filter
// trees and filtered searches (where, where_each, with the other filters,
// bias, activation and an index), against a model of the header's rules
// (tests/store_fields_model.h) that remove and save/open carry along.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "fields_image.h"
#include "fuzz_support.h"
#include "reference.h"
#include "store_fields_model.h"
#include "topk_oracle.h"

namespace {

using fz::Buf;
using fz::PtrMode;

constexpr uint64_t kBigIds[] = {uint64_t{1} << 63, MNEMO_NO_ID - 1, 1234567890123ull};
constexpr uint64_t kSmallIds = 12;
constexpr uint64_t kHugeCount = uint64_t{1} << 62;  // every byte count of it overflows

uint64_t pick_id(FuzzedDataProvider& fdp) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 99);
  if (r < 86) return fdp.ConsumeIntegralInRange<uint64_t>(0, kSmallIds - 1);
  if (r < 95) return kBigIds[fdp.ConsumeIntegralInRange<size_t>(0, 2)];
  return MNEMO_NO_ID;
}

// Values for this harness: mostly exact grid values (ties are real ties),
// some ordinary floats, f16 boundary values, rarely huge ones and, when
// allowed, NaN or infinity.
float abi_value(FuzzedDataProvider& fdp, bool non_finite) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 99);
  if (r < 60) return static_cast<float>(fdp.ConsumeIntegralInRange<int>(-32, 32)) / 8.0f;
  if (r < 80) return fdp.ConsumeFloatingPointInRange<float>(-1.0f, 1.0f);
  if (r < 90) {
    static const float e[] = {65504.0f, 65519.0f, 65520.0f, 70000.0f, 6.0e-8f, 1.0004883f, 3.0e38f, 3.3961775e38f};
    const float v = e[fdp.ConsumeIntegralInRange<size_t>(0, 7)];
    return fdp.ConsumeBool() ? -v : v;
  }
  if (r < 95 && non_finite) return fz::maybe_non_finite(fdp, 1);
  return static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8));
}

constexpr double kNow = 1.7e9;  // a UNIX time in 2023
const double kInf = std::numeric_limits<double>::infinity(), kNaN = std::numeric_limits<double>::quiet_NaN();

// A last-access time: mostly near kNow on a grid (equal times are real
// ties), sometimes 0, far past or future, huge; NaN or infinite when allowed.
double pick_time(FuzzedDataProvider& fdp, bool non_finite) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 99);
  if (r < 60) return kNow + 900.0 * fdp.ConsumeIntegralInRange<int>(-200, 20);
  if (r < 75) return kNow + fdp.ConsumeFloatingPointInRange<double>(-1e7, 1e7);
  if (r < 90) {
    static const double e[] = {0.0, -1.0, 4.9e-324, 1e300, -1e300, 1.7976931348623157e308, 9.0e15, -kNow};
    return e[fdp.ConsumeIntegralInRange<size_t>(0, 7)];
  }
  if (r < 95 && non_finite) return fdp.ConsumeBool() ? kNaN : fdp.ConsumeBool() ? kInf : -kInf;
  return kNow;
}

// An importance: quarters mostly, sometimes large; NaN or infinite when allowed.
float pick_importance(FuzzedDataProvider& fdp, bool non_finite) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 99);
  if (r < 75) return static_cast<float>(fdp.ConsumeIntegralInRange<int>(-40, 40)) / 4.0f;
  if (r < 90) return fdp.ConsumeFloatingPointInRange<float>(-1e6f, 1e6f);
  if (r < 95) return fdp.ConsumeBool() ? 3.0e38f : -65504.0f;
  if (non_finite) return fz::maybe_non_finite(fdp, 1);
  return 0.0f;
}

// Search option values, sane or hostile.
uint32_t pick_flag(FuzzedDataProvider& fdp) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 19);
  return r < 9 ? 0 : r < 18 ? 1 : r < 19 ? 2 : fdp.ConsumeIntegral<uint32_t>();
}
float pick_weight(FuzzedDataProvider& fdp) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 99);
  if (r < 70) return static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8)) / 4.0f;
  if (r < 85) return fdp.ConsumeFloatingPointInRange<float>(-2.0f, 2.0f);
  if (r < 90) return fdp.ConsumeBool() ? 3.0e38f : -1e-30f;
  return fz::maybe_non_finite(fdp, 1);
}
double pick_half_life(FuzzedDataProvider& fdp) {
  static const double h[] = {86400.0, 3600.0, 1.0, 1e-300, 4.9e-324, 1e300, kInf, 0.0, -0.0, -1.0, -kInf, kNaN};
  return h[fdp.ConsumeIntegralInRange<size_t>(0, sizeof h / sizeof h[0] - 1)];
}
double pick_now(FuzzedDataProvider& fdp) {
  const int r = fdp.ConsumeIntegralInRange<int>(0, 19);
  if (r < 14) return pick_time(fdp, false);
  if (r < 17) return kNaN;  // the current time
  return fdp.ConsumeBool() ? kInf : -kInf;
}

double unix_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The set of statuses a call may return given its arguments.
struct Expect {
  uint32_t mask = 0;
  bool ok = true;  // OK allowed
  void err(mnemo_status s) {
    mask |= 1u << s;
    ok = false;
  }
  void maybe_err(mnemo_status s) { mask |= 1u << s; }  // OK stays allowed
  bool allows(mnemo_status s) const {
    if (!fz::defined_status(s)) return false;
    if (s == MNEMO_OK) return ok;
    return (mask >> s) & 1u;
  }
};

void check_status(const char* call, mnemo_status got, const Expect& e) {
  FZ_CHECK(fz::defined_status(got), std::string(call) + " returned an undefined status " + std::to_string(got));
  FZ_CHECK(e.allows(got), std::string(call) + " -> " + fz::status_text(got) + " (allowed mask " +
                              std::to_string(e.mask) + (e.ok ? " or OK)" : ")"));
  if (got != MNEMO_OK) FZ_CHECK(mnemo_last_error()[0] != '\0', std::string(call) + " failed without a message");
}

void pointer_errors(Expect& e, PtrMode m) {
  if (m == PtrMode::null) e.err(MNEMO_E_NULL_POINTER);
  if (m == PtrMode::misaligned) e.err(MNEMO_E_MISALIGNED);
}

double stored_value(float v, int32_t dtype) {
  switch (dtype) {
    case MNEMO_DTYPE_F16: return ref::f16_value(fz::to_f16(v));
    case MNEMO_DTYPE_BF16: return ref::bf16_value(fz::to_bf16(v));
    default: return v;
  }
}

class Model {
 public:
  Model(uint64_t dim, int32_t dtype, int32_t metric) : dim(dim), dtype(dtype), metric(metric) {}
  struct Entry {
    std::vector<double> val;
    float bias = 0.0f;
    double time = 0.0;  // last access
    float imp = 0.0f;   // importance
  };
  uint64_t dim;
  int32_t dtype, metric;
  std::map<uint64_t, Entry> e;
  fm::FieldsModel fields;       // memories' fields and keys
  std::vector<uint64_t> slots;  // MNEMO_NO_ID marks a removed slot
  uint64_t dead = 0;
  bool held_non_finite = false;  // NaN or infinity was ever stored (validation off)

  // times and imp, when given, set every listed memory's value; else a new
  // memory gets 0 and an upserted one keeps its own.
  void add(const std::vector<uint64_t>& ids, const std::vector<std::vector<double>>& rows,
           const std::vector<double>* times = nullptr, const std::vector<float>* imp = nullptr) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!e.count(ids[i])) slots.push_back(ids[i]);
      Entry& en = e[ids[i]];
      en.val = rows[i];
      for (double v : en.val) held_non_finite = held_non_finite || !std::isfinite(v);
      if (times) en.time = (*times)[i];
      if (imp) en.imp = (*imp)[i];
    }
  }
  uint64_t remove(const std::vector<uint64_t>& ids) {
    uint64_t n = 0;
    for (uint64_t id : ids) {
      if (!e.erase(id)) continue;
      fields.remove(id);
      for (auto& s : slots)
        if (s == id) s = MNEMO_NO_ID;
      ++dead;
      ++n;
    }
    // The header's rule: compact once removed slots exceed a quarter.
    if (n > 0 && dead * 4 > slots.size()) {
      std::vector<uint64_t> live;
      for (uint64_t s : slots)
        if (s != MNEMO_NO_ID) live.push_back(s);
      slots.swap(live);
      dead = 0;
    }
    return n;
  }
  uint64_t slot_of(uint64_t id) const {
    for (uint64_t s = 0; s < slots.size(); ++s)
      if (slots[s] == id) return s;
    return MNEMO_NO_ID;
  }
  bool finite() const {
    for (const auto& kv : e)
      for (double v : kv.second.val)
        if (!std::isfinite(v)) return false;
    return true;
  }
  // Values beyond this magnitude make f32 scores overflow: the top-k check
  // then keeps to the structural rules.
  bool tame() const {
    for (const auto& kv : e)
      for (double v : kv.second.val)
        if (!(std::fabs(v) <= 1e15)) return false;
    return true;
  }
};

struct Harness {
  FuzzedDataProvider& fdp;
  mnemo_runtime* rt;
  bool validate;
  mnemo_store* store = nullptr;
  Model m;
  unsigned files = 0;
  bool probing = false;  // the search being checked read an index's lists (0 < nprobe < lists: at the list count or
                         // more the scan is exact)

  Harness(FuzzedDataProvider& f, mnemo_runtime* r, bool v, uint64_t dim, int32_t dt, int32_t met)
      : fdp(f), rt(r), validate(v), m(dim, dt, met) {}
  ~Harness() { mnemo_store_destroy(store); }

  // A store handle argument: usually the store, sometimes NULL.
  mnemo_store* store_arg(Expect& e) {
    if (fdp.ConsumeIntegralInRange<int>(0, 49) == 0) {
      e = Expect{};
      e.err(MNEMO_E_NULL_POINTER);
      return nullptr;
    }
    return store;
  }
  bool sole_null(const Expect& e) const { return e.mask == (1u << MNEMO_E_NULL_POINTER) && !e.ok; }

  // ---- observable state against the model --------------------------------
  void verify_state(const char* after) {
    const std::string ctx = std::string(" after ") + after;
    uint64_t n = 0, slots = 0;
    FZ_CHECK(mnemo_store_count(store, &n) == MNEMO_OK, "count" + ctx);
    FZ_CHECK(n == m.e.size(), "count " + std::to_string(n) + " vs model " + std::to_string(m.e.size()) + ctx);
    FZ_CHECK(mnemo_store_slot_count(store, &slots) == MNEMO_OK, "slot_count" + ctx);
    FZ_CHECK(slots == m.slots.size(),
             "slot_count " + std::to_string(slots) + " vs model " + std::to_string(m.slots.size()) + ctx);
    Buf out(m.dim * 4);
    std::vector<uint64_t> probe;
    for (uint64_t i = 0; i < kSmallIds; ++i) probe.push_back(i);
    for (uint64_t b : kBigIds) probe.push_back(b);
    for (uint64_t id : probe) {
      const mnemo_status st = mnemo_store_get(store, id, out.as<float>());
      auto it = m.e.find(id);
      if (it == m.e.end()) {
        FZ_CHECK(st == MNEMO_E_NOT_FOUND, "get of an absent id: " + fz::status_text(st) + ctx);
        continue;
      }
      FZ_CHECK(st == MNEMO_OK, "get of id " + std::to_string(id) + ": " + fz::status_text(st) + ctx);
      for (uint64_t j = 0; j < m.dim; ++j) {
        const float want = static_cast<float>(it->second.val[j]), got = out.as<float>()[j];
        FZ_CHECK(std::memcmp(&want, &got, 4) == 0 || (std::isnan(want) && std::isnan(got)),
                 "get of id " + std::to_string(id) + " element " + std::to_string(j) + ": " + std::to_string(got) +
                     " vs model " + std::to_string(want) + ctx);
      }
      uint64_t slot = 0;
      FZ_CHECK(mnemo_store_slot_of(store, id, &slot) == MNEMO_OK, "slot_of" + ctx);
      FZ_CHECK(slot == m.slot_of(id), "slot_of id " + std::to_string(id) + " = " + std::to_string(slot) + ", model " +
                                          std::to_string(m.slot_of(id)) + ctx);
    }
    // Metadata of every memory, bit for bit.
    if (!m.e.empty()) {
      const size_t n = m.e.size();
      Buf ids(n * 8), t(n * 8), imp(n * 4), b(n * 4);
      size_t i = 0;
      for (const auto& kv : m.e) ids.as<uint64_t>()[i++] = kv.first;
      const mnemo_status st =
          mnemo_store_get_meta(store, ids.as<uint64_t>(), n, t.as<double>(), imp.as<float>(), b.as<float>());
      FZ_CHECK(st == MNEMO_OK, "get_meta: " + fz::status_text(st) + ctx);
      i = 0;
      for (const auto& [id, en] : m.e) {
        FZ_CHECK(std::memcmp(&t.as<double>()[i], &en.time, 8) == 0 &&
                     std::memcmp(&imp.as<float>()[i], &en.imp, 4) == 0 &&
                     std::memcmp(&b.as<float>()[i], &en.bias, 4) == 0,
                 "metadata of id " + std::to_string(id) + ": time " + std::to_string(t.as<double>()[i]) + " vs " +
                     std::to_string(en.time) + ", importance " + std::to_string(imp.as<float>()[i]) + " vs " +
                     std::to_string(en.imp) + ctx);
        ++i;
      }
    }
    verify_fields(ctx);
    // Biases show only in a biased search.
    if (!m.e.empty() && m.finite()) {
      std::vector<float> q(m.dim);
      for (auto& v : q) v = static_cast<float>(fdp.ConsumeIntegralInRange<int>(-16, 16)) / 8.0f;
      mnemo_search_options o = mnemo_search_options_default();
      o.apply_bias = 1;
      search_and_check(q, 1, m.e.size() + 1, &o, nullptr, ctx.c_str());
    }
  }

  // Runs a valid search and checks every row against the model.
  void search_and_check(const std::vector<float>& qv, uint64_t nq, uint64_t k, const mnemo_search_options* o,
                        const std::set<uint64_t>* allow, const char* ctx) {
    Buf q(qv.size() * 4), ids(nq * k * 8), scores(nq * k * 4);
    std::memcpy(q.data(), qv.data(), qv.size() * 4);
    const mnemo_status st = mnemo_store_search(store, q.as<float>(), nq, k, o, ids.as<uint64_t>(), scores.as<float>());
    FZ_CHECK(st == MNEMO_OK, std::string("search ") + ctx + ": " + fz::status_text(st));
    check_rows(qv, nq, k, o ? o->apply_bias != 0 : false, allow, ids.as<uint64_t>(), scores.as<float>(), ctx);
  }

  void check_rows(const std::vector<float>& qv, uint64_t nq, uint64_t k, bool bias, const std::set<uint64_t>* allow,
                  const uint64_t* ids, const float* scores, const char* ctx) {
    bool q_tame = true;
    for (float v : qv) q_tame = q_tame && std::fabs(v) <= 1e15f;
    const bool exact = q_tame && m.tame();
    const bool hi = ref::higher_is_better(m.metric);
    for (uint64_t i = 0; i < nq; ++i) {
      std::vector<double> q(qv.begin() + i * m.dim, qv.begin() + (i + 1) * m.dim);
      std::vector<ref::Candidate> c;
      uint64_t must = 0;  // candidates that can never score NaN
      for (const auto& kv : m.e) {
        if (allow && !allow->count(kv.first)) continue;
        const double raw = ref::score(m.metric, q.data(), kv.second.val.data(), m.dim);
        double tol = ref::score_tol(m.metric, q.data(), kv.second.val.data(), m.dim, raw);
        double s = raw;
        if (bias) {
          const double b = kv.second.bias;
          s = hi ? raw + b : raw - b;
          tol += std::ldexp(std::fabs(raw) + std::fabs(b), -22);
        }
        c.push_back({kv.first, s, tol});
        // Inside the contract's range (norms zero or in [2^-50, 2^50]) a
        // score is never NaN; beyond it f32 accumulation may overflow to
        // NaN, and a search drops NaN scores.
        auto in_range = [](const std::vector<double>& v) {
          double ss = 0;
          for (double e : v) ss += e * e;
          const double n = std::sqrt(ss);
          return n == 0 || (n >= std::ldexp(1.0, -50) && n <= std::ldexp(1.0, 50));
        };
        must += in_range(kv.second.val) && in_range(q) ? 1 : 0;
      }
      const uint64_t* row_ids = ids + i * k;
      const float* row_sc = scores + i * k;
      if (exact && m.finite()) {
        const std::string why = fz::check_topk(m.metric, c, k, row_ids, row_sc);
        FZ_CHECK(why.empty(), std::string("search ") + ctx + ", query " + std::to_string(i) + ": " + why);
        continue;
      }
      // Structural rules only: distinct allowed ids, no NaN score, padding last.
      std::set<uint64_t> seen;
      uint64_t j = 0;
      for (; j < k && row_ids[j] != MNEMO_NO_ID; ++j) {
        FZ_CHECK(m.e.count(row_ids[j]) && (!allow || allow->count(row_ids[j])),
                 std::string("search ") + ctx + " returned id " + std::to_string(row_ids[j]));
        FZ_CHECK(seen.insert(row_ids[j]).second, std::string("search ") + ctx + ": id returned twice");
        FZ_CHECK(!std::isnan(row_sc[j]), std::string("search ") + ctx + ": NaN score returned");
      }
      // A non-finite vector that reached an index's centroids (validation
      // off) makes a probed search return nothing at all (reported; not
      // the harness's to model): the count is then not checked.
      if (!(probing && m.held_non_finite && !validate))
        FZ_CHECK(j >= std::min<uint64_t>(k, must), std::string("search ") + ctx + ": " + std::to_string(j) +
                                                       " results, at least " + std::to_string(std::min(k, must)) +
                                                       " expected");
      for (; j < k; ++j)
        FZ_CHECK(row_ids[j] == MNEMO_NO_ID && std::isnan(row_sc[j]), std::string("search ") + ctx + ": bad padding");
    }
  }

  // ---- calls ---------------------------------------------------------------
  // mnemo_store_add, or with `meta` mnemo_store_add_memories with times
  // and importance each given (finite or not), absent (NULL) or misaligned.
  void do_add(bool meta) {
    Expect e;
    mnemo_store* s = store_arg(e);
    const int32_t vdt = fz::pick_dtype(fdp, {MNEMO_DTYPE_F32, m.dtype}, 5);
    const bool dtype_ok = vdt == MNEMO_DTYPE_F32 || vdt == m.dtype;
    const bool huge = fdp.ConsumeIntegralInRange<int>(0, 29) == 0;
    const uint64_t count = huge ? kHugeCount : fdp.ConsumeIntegralInRange<uint64_t>(0, 6);
    const uint64_t rows = huge ? 1 : count;
    const PtrMode pi = fz::pick_mode(fdp, 6), pv = fz::pick_mode(fdp, 6);
    const size_t es = dtype_ok ? fz::dtype_bytes(vdt) : 4;
    Buf ids(rows * 8), vec(rows * m.dim * es), times(rows * 8), imps(rows * 4);
    const PtrMode pt = meta ? fz::pick_mode(fdp, 40) : PtrMode::null,
                  pm = meta ? fz::pick_mode(fdp, 40) : PtrMode::null;
    std::vector<double> t_list;
    std::vector<float> imp_list;
    bool meta_nonfin = false;
    for (uint64_t r = 0; r < rows; ++r) {
      const double t = pick_time(fdp, true);
      const float imp = pick_importance(fdp, true);
      std::memcpy(times.data() + (pt == PtrMode::misaligned ? 8 : 0) + 8 * r, &t, 8);
      std::memcpy(imps.data() + (pm == PtrMode::misaligned ? 4 : 0) + 4 * r, &imp, 4);
      t_list.push_back(t);
      imp_list.push_back(imp);
      meta_nonfin =
          meta_nonfin || (pt == PtrMode::good && !std::isfinite(t)) || (pm == PtrMode::good && !std::isfinite(imp));
    }
    std::vector<uint64_t> id_list;
    std::vector<std::vector<double>> row_vals;
    bool non_finite = false, no_id = false;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t id = pick_id(fdp);
      no_id = no_id || id == MNEMO_NO_ID;
      std::memcpy(ids.data() + 8 * r, &id, 8);
      id_list.push_back(id);
      std::vector<double> v(m.dim);
      for (uint64_t j = 0; j < m.dim; ++j) {
        const float x = abi_value(fdp, true);
        if (dtype_ok) fz::put_elem(vec.data(), vdt, r * m.dim + j, x);
        const double in = dtype_ok ? fz::get_elem(vec.data(), vdt, r * m.dim + j) : x;
        v[j] = stored_value(static_cast<float>(in), m.dtype);
        // Infinite after rounding into the store counts as non-finite input.
        non_finite = non_finite || !std::isfinite(v[j]);
      }
      row_vals.push_back(std::move(v));
    }
    if (s != nullptr) {
      if (!dtype_ok) e.err(MNEMO_E_DTYPE);
      pointer_errors(e, pi);
      pointer_errors(e, pv);
      if (huge) e.err(MNEMO_E_OVERFLOW);
      if (!huge && count > 0 && no_id) e.err(MNEMO_E_OUT_OF_RANGE);
      if (!huge && count > 0 && non_finite && validate) e.err(MNEMO_E_NON_FINITE);
      // Metadata is checked whatever the validation setting.
      if (!huge && count > 0 && meta_nonfin) e.err(MNEMO_E_NON_FINITE);
      if (pt == PtrMode::misaligned) e.err(MNEMO_E_MISALIGNED);
      if (pm == PtrMode::misaligned) e.err(MNEMO_E_MISALIGNED);
      if (count == 0 && e.mask != 0 && !(e.mask & (1u << MNEMO_E_DTYPE))) e.ok = true;  // nothing to do
    }
    const mnemo_status st =
        meta ? mnemo_store_add_memories(s, fz::view<uint64_t>(ids, pi), fz::view<unsigned char>(vec, pv), vdt, count,
                                        fz::view<double>(times, pt), fz::view<float>(imps, pm))
             : mnemo_store_add(s, fz::view<uint64_t>(ids, pi), fz::view<unsigned char>(vec, pv), vdt, count);
    check_status(meta ? "mnemo_store_add_memories" : "mnemo_store_add", st, e);
    if (st == MNEMO_OK && count > 0)
      m.add(id_list, row_vals, pt == PtrMode::good ? &t_list : nullptr, pm == PtrMode::good ? &imp_list : nullptr);
    if (st == MNEMO_OK && count > 0 && indexed) resync_slots("an add to an indexed store");
    if (st != MNEMO_OK || meta) verify_state(st == MNEMO_OK ? "add_memories" : "a failed add");
  }

  // mnemo_store_set_times or mnemo_store_set_importance.
  void do_set_meta(bool times) {
    Expect e;
    mnemo_store* s = store_arg(e);
    const bool huge = fdp.ConsumeIntegralInRange<int>(0, 29) == 0;
    const uint64_t count = huge ? kHugeCount : fdp.ConsumeIntegralInRange<uint64_t>(0, 5);
    const uint64_t rows = huge ? 1 : count;
    const PtrMode pi = fz::pick_mode(fdp, 6), pv = fz::pick_mode(fdp, 6);
    Buf ids(rows * 8), vals(rows * 8);
    std::vector<uint64_t> list;
    std::vector<double> tv;
    std::vector<float> iv;
    bool absent = false, nonfin = false;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t id = fdp.ConsumeIntegralInRange<int>(0, 9) ? pick_id(fdp) : m.e.empty() ? 0 : m.e.begin()->first;
      std::memcpy(ids.data() + 8 * r, &id, 8);
      list.push_back(id);
      absent = absent || !m.e.count(id);
      if (times) {
        const double t = pick_time(fdp, true);
        std::memcpy(vals.data() + 8 * r, &t, 8);
        tv.push_back(t);
        nonfin = nonfin || !std::isfinite(t);
      } else {
        const float v = pick_importance(fdp, true);
        std::memcpy(vals.data() + 4 * r, &v, 4);
        iv.push_back(v);
        nonfin = nonfin || !std::isfinite(v);
      }
    }
    if (s != nullptr) {
      pointer_errors(e, pi);
      pointer_errors(e, pv);
      if (huge) e.err(MNEMO_E_OVERFLOW);
      if (!huge && count > 0 && absent) e.err(MNEMO_E_NOT_FOUND);
      if (!huge && count > 0 && nonfin) e.err(MNEMO_E_NON_FINITE);
      if (count == 0 && e.mask != 0) e.ok = true;
    }
    const mnemo_status st =
        times ? mnemo_store_set_times(s, fz::view<uint64_t>(ids, pi), fz::view<double>(vals, pv), count)
              : mnemo_store_set_importance(s, fz::view<uint64_t>(ids, pi), fz::view<float>(vals, pv), count);
    check_status(times ? "mnemo_store_set_times" : "mnemo_store_set_importance", st, e);
    if (st == MNEMO_OK)
      for (size_t i = 0; i < list.size() && count > 0; ++i) {
        if (times) m.e.at(list[i]).time = tv[i];
        if (!times) m.e.at(list[i]).imp = iv[i];
      }
    verify_state(st == MNEMO_OK ? "set_times or set_importance" : "a failed set_times or set_importance");
  }

  // mnemo_store_get_meta with each output wanted, not wanted (NULL) or misaligned.
  void do_get_meta() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const bool huge = fdp.ConsumeIntegralInRange<int>(0, 29) == 0;
    const uint64_t count = huge ? kHugeCount : fdp.ConsumeIntegralInRange<uint64_t>(0, 5);
    const uint64_t rows = huge ? 1 : count;
    const PtrMode pi = fz::pick_mode(fdp, 6), pt = fz::pick_mode(fdp, 25), pm = fz::pick_mode(fdp, 25),
                  pb = fz::pick_mode(fdp, 25);
    Buf ids(rows * 8), t(rows * 8), imp(rows * 4), b(rows * 4);
    std::vector<uint64_t> list;
    bool absent = false;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t id = fdp.ConsumeIntegralInRange<int>(0, 5) && !m.e.empty()
                              ? std::next(m.e.begin(), fdp.ConsumeIntegralInRange<size_t>(0, m.e.size() - 1))->first
                              : pick_id(fdp);
      std::memcpy(ids.data() + 8 * r, &id, 8);
      list.push_back(id);
      absent = absent || !m.e.count(id);
    }
    if (s != nullptr) {
      if (count > 0) pointer_errors(e, pi);
      if (huge && pi == PtrMode::good) e.err(MNEMO_E_OVERFLOW);
      for (PtrMode p : {pt, pm, pb})
        if (p == PtrMode::misaligned) e.err(MNEMO_E_MISALIGNED);
      if (!huge && count > 0 && absent) e.err(MNEMO_E_NOT_FOUND);
    }
    const auto t0 = t.snapshot(), i0 = imp.snapshot(), b0 = b.snapshot();
    const mnemo_status st = mnemo_store_get_meta(s, fz::view<uint64_t>(ids, pi), count, fz::view<double>(t, pt),
                                                 fz::view<float>(imp, pm), fz::view<float>(b, pb));
    check_status("mnemo_store_get_meta", st, e);
    if (st != MNEMO_OK || count == 0) {
      FZ_CHECK(t.same_as(t0) && imp.same_as(i0) && b.same_as(b0), "get_meta wrote its outputs without results");
      return;
    }
    for (uint64_t i = 0; i < count; ++i) {
      const Model::Entry& en = m.e.at(list[i]);
      if (pt == PtrMode::good) FZ_CHECK(std::memcmp(&t.as<double>()[i], &en.time, 8) == 0, "get_meta time");
      if (pm == PtrMode::good) FZ_CHECK(std::memcmp(&imp.as<float>()[i], &en.imp, 4) == 0, "get_meta importance");
      if (pb == PtrMode::good) FZ_CHECK(std::memcmp(&b.as<float>()[i], &en.bias, 4) == 0, "get_meta bias");
    }
    if (pt == PtrMode::null) FZ_CHECK(t.same_as(t0), "get_meta wrote times it was not asked for");
  }

  void do_remove() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const bool huge = fdp.ConsumeIntegralInRange<int>(0, 29) == 0;
    const uint64_t count = huge ? kHugeCount : fdp.ConsumeIntegralInRange<uint64_t>(0, 5);
    const uint64_t rows = huge ? 1 : count;
    const PtrMode pi = fz::pick_mode(fdp, 6);
    Buf ids(rows * 8);
    std::vector<uint64_t> list;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t id = pick_id(fdp);
      std::memcpy(ids.data() + 8 * r, &id, 8);
      list.push_back(id);
    }
    const bool want_removed = fdp.ConsumeIntegralInRange<int>(0, 9) != 0;
    uint64_t removed = 0xDEADBEEF;
    if (s != nullptr) {
      if (count > 0) pointer_errors(e, pi);
      if (huge && pi == PtrMode::good) e.err(MNEMO_E_OVERFLOW);
    }
    const mnemo_status st =
        mnemo_store_remove(s, fz::view<uint64_t>(ids, pi), count, want_removed ? &removed : nullptr);
    check_status("mnemo_store_remove", st, e);
    if (st == MNEMO_OK) {
      const uint64_t n = m.remove(list);
      if (want_removed) FZ_CHECK(removed == n, "removed " + std::to_string(removed) + ", model " + std::to_string(n));
      if (indexed) resync_slots("a remove from an indexed store");
      verify_state("a remove");
    } else {
      FZ_CHECK(removed == 0xDEADBEEF, "a failed remove wrote *removed");
      verify_state("a failed remove");
    }
  }

  void do_set_bias() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const bool huge = fdp.ConsumeIntegralInRange<int>(0, 29) == 0;
    const uint64_t count = huge ? kHugeCount : fdp.ConsumeIntegralInRange<uint64_t>(0, 5);
    const uint64_t rows = huge ? 1 : count;
    const PtrMode pi = fz::pick_mode(fdp, 6), pb = fz::pick_mode(fdp, 6);
    Buf ids(rows * 8), biases(rows * 4);
    std::vector<uint64_t> list;
    std::vector<float> vals;
    bool absent = false, nonfin = false;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t id = fdp.ConsumeIntegralInRange<int>(0, 9) ? pick_id(fdp) : m.e.empty() ? 0 : m.e.begin()->first;
      const float b = fdp.ConsumeIntegralInRange<int>(0, 19)
                          ? static_cast<float>(fdp.ConsumeIntegralInRange<int>(-16, 16)) / 4.0f
                          : fz::maybe_non_finite(fdp, 2);
      std::memcpy(ids.data() + 8 * r, &id, 8);
      std::memcpy(biases.data() + 4 * r, &b, 4);
      list.push_back(id);
      vals.push_back(b);
      absent = absent || !m.e.count(id);
      nonfin = nonfin || !std::isfinite(b);
    }
    if (s != nullptr) {
      pointer_errors(e, pi);
      pointer_errors(e, pb);
      if (huge) e.err(MNEMO_E_OVERFLOW);
      if (!huge && count > 0 && absent) e.err(MNEMO_E_NOT_FOUND);
      if (!huge && count > 0 && nonfin) e.err(MNEMO_E_NON_FINITE);
      if (count == 0 && e.mask != 0) e.ok = true;
    }
    const mnemo_status st = mnemo_store_set_bias(s, fz::view<uint64_t>(ids, pi), fz::view<float>(biases, pb), count);
    check_status("mnemo_store_set_bias", st, e);
    if (st == MNEMO_OK)
      for (size_t i = 0; i < list.size() && count > 0; ++i) m.e.at(list[i]).bias = vals[i];
    verify_state(st == MNEMO_OK ? "set_bias" : "a failed set_bias");
  }

  void do_search() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const uint64_t nq = fdp.ConsumeIntegralInRange<uint64_t>(0, 3);
    const int kr = fdp.ConsumeIntegralInRange<int>(0, 39);
    const uint64_t k = kr == 0 ? 0 : kr == 1 ? kHugeCount : fdp.ConsumeIntegralInRange<uint64_t>(1, m.e.size() + 3);
    const uint64_t cells = (k == kHugeCount ? 1 : k) * nq;
    const PtrMode pq = fz::pick_mode(fdp, 5), pids = fz::pick_mode(fdp, 5), psc = fz::pick_mode(fdp, 5);
    const bool alias = fdp.ConsumeIntegralInRange<int>(0, 29) == 0;  // scores inside the ids buffer
    std::vector<float> qv(nq * m.dim);
    bool q_nonfin = false;
    for (auto& v : qv) {
      v = abi_value(fdp, true);
      q_nonfin = q_nonfin || !std::isfinite(v);
    }
    // Options.
    const int orr = fdp.ConsumeIntegralInRange<int>(0, 9);
    mnemo_search_options o = mnemo_search_options_default();
    const mnemo_search_options* op = orr == 0 ? nullptr : &o;
    mnemo_search_options eff = mnemo_search_options_default();
    std::set<uint64_t> allow_set;
    bool use_allow = false;
    Buf filt_ids, bitmap;
    if (op) {
      const int fk = fdp.ConsumeIntegralInRange<int>(0, 20);
      o.filter_kind = fk < 8    ? MNEMO_FILTER_NONE
                      : fk < 14 ? MNEMO_FILTER_IDS
                      : fk < 20 ? MNEMO_FILTER_SLOT_BITMAP
                                : fdp.ConsumeIntegral<int32_t>();
      const int ab = fdp.ConsumeIntegralInRange<int>(0, 20);
      o.apply_bias = ab < 10 ? 0 : ab < 20 ? 1 : fdp.ConsumeIntegral<uint32_t>();
      // Activation, usually off; then sometimes normalize or touch alone.
      const int act = fdp.ConsumeIntegralInRange<int>(0, 9);
      if (act >= 4) {
        o.activation = act < 9 ? 1 : pick_flag(fdp);
        o.normalize = pick_flag(fdp);
        o.touch = fdp.ConsumeIntegralInRange<int>(0, 3) == 0 ? pick_flag(fdp) : 0;
        o.w_relevance = fdp.ConsumeIntegralInRange<int>(0, 3) ? 1.0f : pick_weight(fdp);
        o.w_recency = pick_weight(fdp);
        o.w_importance = pick_weight(fdp);
        o.half_life = fdp.ConsumeIntegralInRange<int>(0, 3) ? 86400.0 * fdp.ConsumeIntegralInRange<int>(1, 30) / 8.0
                                                            : pick_half_life(fdp);
        o.now = pick_now(fdp);
      } else if (act == 3) {
        o.normalize = pick_flag(fdp);
        o.touch = pick_flag(fdp);
      }
      // An indexed store: every list probed (the index path, which must
      // return the exact scan's results), or more than there are lists.
      if (indexed && fdp.ConsumeBool()) o.nprobe = index_lists() + (fdp.ConsumeBool() ? 0u : 3u);
      // The first ABI's size (activation fields then ignored), a size
      // between (the fields it covers), or too small.
      const int ss = fdp.ConsumeIntegralInRange<int>(0, 29);
      if (ss == 0) o.struct_size = fdp.ConsumeIntegralInRange<uint32_t>(0, sizeof o - 1);
      if (ss == 1) o.struct_size = 40;
      if (o.filter_kind == MNEMO_FILTER_IDS) {
        const bool fhuge = fdp.ConsumeIntegralInRange<int>(0, 29) == 0;
        o.filter_count = fhuge ? kHugeCount : fdp.ConsumeIntegralInRange<uint64_t>(0, 6);
        const PtrMode pf = fz::pick_mode(fdp, 5);
        filt_ids = Buf((fhuge ? 1 : o.filter_count) * 8);
        for (uint64_t i = 0; i < (fhuge ? 1 : o.filter_count); ++i) {
          const uint64_t id = pick_id(fdp);
          std::memcpy(filt_ids.data() + 8 * i, &id, 8);
          allow_set.insert(id);
        }
        o.filter_ids = fz::view<uint64_t>(filt_ids, pf);
        use_allow = true;
        if (o.filter_count > 0) pointer_errors(e, pf);
        if (fhuge && pf == PtrMode::good) e.err(MNEMO_E_OVERFLOW);
      } else if (o.filter_kind == MNEMO_FILTER_SLOT_BITMAP) {
        const bool wrong = fdp.ConsumeIntegralInRange<int>(0, 9) == 0;
        o.filter_count = wrong ? fdp.ConsumeIntegralInRange<uint64_t>(0, 200) : m.slots.size();
        const uint64_t words = (o.filter_count + 63) / 64;
        const PtrMode pf = fz::pick_mode(fdp, 5);
        bitmap = Buf(words * 8);
        for (uint64_t w = 0; w < words; ++w) {
          const uint64_t bits = fdp.ConsumeIntegral<uint64_t>();
          std::memcpy(bitmap.data() + 8 * w, &bits, 8);
        }
        if (o.filter_count == m.slots.size())
          for (uint64_t sl = 0; sl < m.slots.size(); ++sl)
            if (((bitmap.as<uint64_t>()[sl >> 6] >> (sl & 63)) & 1u) && m.slots[sl] != MNEMO_NO_ID)
              allow_set.insert(m.slots[sl]);
        o.filter_bitmap = fz::view<uint64_t>(bitmap, pf);
        use_allow = true;
        if (o.filter_count > 0) pointer_errors(e, pf);
        if (o.filter_count != m.slots.size()) e.err(MNEMO_E_SHAPE);
      } else if (o.filter_kind != MNEMO_FILTER_NONE) {
        e.err(MNEMO_E_INVALID_ARGUMENT);
      }
      // What the call reads: the fields struct_size covers over the defaults.
      eff = mnemo_search_options_default();
      if (o.struct_size >= 40) std::memcpy(&eff, &o, std::min<size_t>(o.struct_size, sizeof o));
      const bool on = eff.activation == 1;
      // A size between two headers' sizes (40, 80, 96, 104, then the whole
      // struct) would cut a field in two: refused.
      const uint32_t sz = o.struct_size;
      const bool between = sz < sizeof o && sz != 40 && sz != 80 && sz != 96 && sz != 104;
      if (o.struct_size < 40 || between || eff.apply_bias > 1 || eff.activation > 1 || eff.normalize > 1 ||
          eff.touch > 1 || (!on && (eff.normalize != 0 || eff.touch != 0)) ||
          (on && (!std::isfinite(eff.w_relevance) || !std::isfinite(eff.w_recency) ||
                  !std::isfinite(eff.w_importance) || !(eff.half_life > 0.0) || std::isinf(eff.now))))
        e.err(MNEMO_E_INVALID_ARGUMENT);
    }
    Buf q(qv.size() * 4), ids(cells * 8), scores(cells * 4);
    if (!qv.empty()) std::memcpy(q.data(), qv.data(), qv.size() * 4);
    float* sc_ptr = alias ? reinterpret_cast<float*>(ids.data()) : fz::view<float>(scores, psc);
    if (alias && psc != PtrMode::good) sc_ptr = fz::view<float>(ids, psc);
    if (s == nullptr) {
      e = Expect{};
      e.err(MNEMO_E_NULL_POINTER);
    } else {
      pointer_errors(e, pq);
      pointer_errors(e, pids);
      pointer_errors(e, psc);
      if (k == 0) e.err(MNEMO_E_INVALID_ARGUMENT);
      if (k == kHugeCount && nq > 0) e.err(MNEMO_E_OVERFLOW);
      if (nq > 0 && k > 0 && alias && pids != PtrMode::null && psc != PtrMode::null) e.err(MNEMO_E_INVALID_ARGUMENT);
      if (nq > 0 && q_nonfin && validate) e.err(MNEMO_E_NON_FINITE);
      // The bitmap's length is checked against the store during the search:
      // an empty query batch never gets there.
      if (nq == 0 && (e.mask & (1u << MNEMO_E_SHAPE))) e.ok = e.ok || e.mask == (1u << MNEMO_E_SHAPE);
    }
    const std::vector<unsigned char> ids0 = ids.snapshot(), sc0 = scores.snapshot();
    const double before = unix_now();
    const mnemo_status st =
        mnemo_store_search(s, fz::view<float>(q, pq), nq, k, op, fz::view<uint64_t>(ids, pids), sc_ptr);
    const double after = unix_now();
    check_status("mnemo_store_search", st, e);
    if (st != MNEMO_OK) {
      FZ_CHECK(ids.same_as(ids0) && scores.same_as(sc0), "a failed search wrote its outputs");
      if (eff.touch == 1) verify_state("a failed touching search");
      return;
    }
    if (nq == 0 || alias) return;
    const std::set<uint64_t>* allow = use_allow ? &allow_set : nullptr;
    probing = indexed && eff.nprobe > 0 && eff.nprobe < index_lists();
    if (eff.activation == 1)
      check_act_rows(qv, nq, k, eff, allow, ids.as<uint64_t>(), scores.as<float>());
    else
      check_rows(qv, nq, k, eff.apply_bias == 1, allow, ids.as<uint64_t>(), scores.as<float>(), "");
    probing = false;
    if (eff.touch != 1) return;
    // Every returned memory's time is now `now` (one value per call: the
    // current time when now is NaN).
    double now = eff.now;
    for (uint64_t i = 0; i < nq * k; ++i) {
      const uint64_t id = ids.as<uint64_t>()[i];
      if (id == MNEMO_NO_ID) continue;
      if (std::isnan(now)) {
        const Buf one = [&] {
          Buf b(8);
          std::memcpy(b.data(), &id, 8);
          return b;
        }();
        Buf t(8);
        FZ_CHECK(mnemo_store_get_meta(store, reinterpret_cast<const uint64_t*>(one.data()), 1, t.as<double>(), nullptr,
                                      nullptr) == MNEMO_OK,
                 "get_meta after a touch");
        now = t.as<double>()[0];
        FZ_CHECK(now >= before - 1.0 && now <= after + 1.0, "a touch with now NaN set the time " + std::to_string(now) +
                                                                ", the call ran from " + std::to_string(before) +
                                                                " to " + std::to_string(after));
      }
      m.e.at(id).time = now;
    }
    verify_state("a touching search");
  }

  // Activation rows against the float64 reference (plain or min-max
  // normalised) where every term is tame; else the structural rules.
  void check_act_rows(const std::vector<float>& qv, uint64_t nq, uint64_t k, const mnemo_search_options& o,
                      const std::set<uint64_t>* allow, const uint64_t* ids, const float* scores) {
    bool exact = m.tame() && m.finite();
    for (float v : qv) exact = exact && std::fabs(v) <= 1e15f;
    for (const auto& kv : m.e) exact = exact && std::fabs(kv.second.imp) <= 1e6f;
    for (float w : {o.w_relevance, o.w_recency, o.w_importance}) exact = exact && std::fabs(w) <= 1e3f;
    // An unknown now (NaN: the clock at the call) matters only with a recency weight.
    if (std::isnan(o.now) && o.w_recency != 0.0f) exact = false;
    const double now = std::isnan(o.now) ? kNow : o.now;
    const bool hi = ref::higher_is_better(m.metric);
    for (uint64_t i = 0; i < nq; ++i) {
      const uint64_t* row_ids = ids + i * k;
      const float* row_sc = scores + i * k;
      if (!exact) {
        // Distinct allowed ids, no NaN score, padding last.
        std::set<uint64_t> seen;
        uint64_t j = 0;
        for (; j < k && row_ids[j] != MNEMO_NO_ID; ++j) {
          FZ_CHECK(m.e.count(row_ids[j]) && (!allow || allow->count(row_ids[j])),
                   "activation search returned id " + std::to_string(row_ids[j]));
          FZ_CHECK(seen.insert(row_ids[j]).second, "activation search: id returned twice");
          FZ_CHECK(!std::isnan(row_sc[j]), "activation search: NaN score returned");
        }
        for (; j < k; ++j)
          FZ_CHECK(row_ids[j] == MNEMO_NO_ID && std::isnan(row_sc[j]), "activation search: bad padding");
        continue;
      }
      const std::vector<double> q(qv.begin() + i * m.dim, qv.begin() + (i + 1) * m.dim);
      std::vector<fz::ActTerm> terms;
      for (const auto& [id, en] : m.e) {
        if (allow && !allow->count(id)) continue;
        const double raw = ref::score(m.metric, q.data(), en.val.data(), m.dim);
        terms.push_back({id, hi ? raw : -raw, ref::score_tol(m.metric, q.data(), en.val.data(), m.dim, raw), en.time,
                         en.imp, o.apply_bias == 1 ? en.bias : 0.0});
      }
      fz::ActParams p;
      p.w_rel = o.w_relevance, p.w_rec = o.w_recency, p.w_imp = o.w_importance;
      p.half_life = o.half_life, p.now = now, p.normalize = o.normalize == 1;
      const std::vector<ref::Candidate> c = fz::activation_candidates(terms, p, hi);
      const std::string why = fz::check_topk(m.metric, c, k, row_ids, row_sc);
      FZ_CHECK(why.empty(), "activation search" + std::string(o.normalize == 1 ? " (normalised)" : "") + ", query " +
                                std::to_string(i) + ": " + why);
    }
  }

  void do_get() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const uint64_t id = pick_id(fdp);
    const PtrMode po = fz::pick_mode(fdp, 10);
    Buf out(m.dim * 4);
    const auto before = out.snapshot();
    if (s) {
      pointer_errors(e, po);
      if (!m.e.count(id)) e.err(MNEMO_E_NOT_FOUND);
    }
    const mnemo_status st = mnemo_store_get(s, id, fz::view<float>(out, po));
    check_status("mnemo_store_get", st, e);
    if (st != MNEMO_OK) FZ_CHECK(out.same_as(before), "a failed get wrote its output");
  }

  void do_small_queries() {
    // count, slot_count, slot_of, shape with NULL outputs and absent ids.
    uint64_t v = 7;
    FZ_CHECK(mnemo_store_count(store, nullptr) == MNEMO_E_NULL_POINTER, "count(NULL)");
    FZ_CHECK(mnemo_store_slot_count(nullptr, &v) == MNEMO_E_NULL_POINTER && v == 7, "slot_count(NULL store)");
    const uint64_t id = pick_id(fdp);
    const mnemo_status st = mnemo_store_slot_of(store, id, &v);
    if (m.e.count(id))
      FZ_CHECK(st == MNEMO_OK && v == m.slot_of(id), "slot_of: " + fz::status_text(st));
    else
      FZ_CHECK(st == MNEMO_E_NOT_FOUND && v == 7, "slot_of of an absent id: " + fz::status_text(st));
    uint64_t dim = 0;
    int32_t dt = 0, met = 0;
    FZ_CHECK(mnemo_store_shape(store, &dim, &dt, &met) == MNEMO_OK && dim == m.dim && dt == m.dtype && met == m.metric,
             "shape");
    FZ_CHECK(mnemo_store_shape(store, nullptr, nullptr, nullptr) == MNEMO_OK, "shape with NULL outputs");
  }

  void do_save_load() {
    const std::string path = fz::scratch_dir() + "/abi-" + std::to_string(files++) + ".mnemo";
    const int how = fdp.ConsumeIntegralInRange<int>(0, 9);
    if (how == 0) {
      FZ_CHECK(mnemo_store_save(store, nullptr) == MNEMO_E_NULL_POINTER, "save(NULL path)");
      FZ_CHECK(mnemo_store_save(nullptr, path.c_str()) == MNEMO_E_NULL_POINTER, "save(NULL store)");
      const std::string bad = fz::scratch_dir() + "/no-such-folder/x.mnemo";
      FZ_CHECK(mnemo_store_save(store, bad.c_str()) == MNEMO_E_IO, "save into a missing folder");
      mnemo_store* out = reinterpret_cast<mnemo_store*>(0x10);
      FZ_CHECK(mnemo_store_open(rt, bad.c_str(), &out) == MNEMO_E_IO && out == reinterpret_cast<mnemo_store*>(0x10),
               "open of a missing file");
      FZ_CHECK(mnemo_store_open(rt, nullptr, &out) == MNEMO_E_NULL_POINTER, "open(NULL path)");
      FZ_CHECK(mnemo_store_open(nullptr, path.c_str(), &out) == MNEMO_E_NULL_POINTER, "open(NULL rt)");
      FZ_CHECK(mnemo_store_open(rt, path.c_str(), nullptr) == MNEMO_E_NULL_POINTER, "open(NULL out)");
      return;
    }
    mnemo_status st = mnemo_store_save(store, path.c_str());
    FZ_CHECK(st == MNEMO_OK, "save: " + fz::status_text(st));
    mnemo_store* loaded = nullptr;
    st = mnemo_store_open(rt, path.c_str(), &loaded);
    ::unlink(path.c_str());
    // With validation off the store may hold NaN or infinity, which a store
    // file refuses: the save succeeds, the open says CORRUPT. An index built
    // over such a vector keeps a non-finite centroid after the vector is
    // gone, which its snapshot refuses too (reported; not the harness's).
    if (!validate && (!m.finite() || (m.held_non_finite && indexed))) {
      FZ_CHECK(st == MNEMO_OK || st == MNEMO_E_CORRUPT, "open of a non-finite store: " + fz::status_text(st));
      mnemo_store_destroy(loaded);
      return;
    }
    FZ_CHECK(st == MNEMO_OK, "open of a just-saved store: " + fz::status_text(st));
    // The loaded store replaces the current one. Slots after a load are the
    // store's own business: take its numbering if it is a bijection.
    mnemo_store_destroy(store);
    store = loaded;
    uint64_t slots = 0;
    FZ_CHECK(mnemo_store_slot_count(store, &slots) == MNEMO_OK && slots == m.e.size(), "slot count after load");
    std::vector<uint64_t> order(slots, MNEMO_NO_ID);
    for (const auto& kv : m.e) {
      uint64_t sl = 0;
      FZ_CHECK(mnemo_store_slot_of(store, kv.first, &sl) == MNEMO_OK && sl < slots && order[sl] == MNEMO_NO_ID,
               "slots after load are not a bijection");
      order[sl] = kv.first;
    }
    m.slots = order;
    m.dead = 0;
    verify_state("save and open");
  }

  // ---- the inverted-file index -------------------------------------------
  bool indexed = false;
  uint32_t index_lists() {
    mnemo_index_info i;
    std::memset(&i, 0, sizeof i);
    i.struct_size = sizeof i;
    FZ_CHECK(mnemo_store_index_info(store, &i) == MNEMO_OK, "index_info");
    return i.nlist;
  }
  // A layout moves memories between slots (a build, an upserted indexed
  // memory, a rebuild): the model takes the store's numbering, checked to
  // be a bijection of the live ids onto slots.
  void resync_slots(const char* what) {
    FZ_CHECK(mnemo_store_wait_index(store) == MNEMO_OK, std::string("wait_index after ") + what);
    uint64_t slots = 0;
    FZ_CHECK(mnemo_store_slot_count(store, &slots) == MNEMO_OK && slots >= m.e.size(),
             std::string("slot count after ") + what);
    std::vector<uint64_t> order(slots, MNEMO_NO_ID);
    for (const auto& kv : m.e) {
      uint64_t sl = 0;
      FZ_CHECK(mnemo_store_slot_of(store, kv.first, &sl) == MNEMO_OK && sl < slots && order[sl] == MNEMO_NO_ID,
               std::string("slots are not a bijection after ") + what);
      order[sl] = kv.first;
    }
    m.slots = order;
    m.dead = slots - m.e.size();
  }
  void do_build_index() {
    mnemo_index_options o = mnemo_index_options_default();
    Expect e;
    o.nlist = fdp.ConsumeIntegralInRange<int>(0, 9) == 0 ? fdp.ConsumeIntegral<uint32_t>()
                                                         : fdp.ConsumeIntegralInRange<uint32_t>(0, 12);
    o.train_iters = fdp.ConsumeIntegralInRange<uint32_t>(0, 4);
    o.train_per_list = fdp.ConsumeIntegralInRange<uint32_t>(0, 8);
    o.seed = fdp.ConsumeIntegral<uint64_t>();
    o.rebuild_hot_min = fdp.ConsumeIntegralInRange<uint64_t>(0, 16);
    o.rebuild_hot_fraction = fdp.ConsumeIntegralInRange<int>(0, 9) == 0 ? pick_weight(fdp) : 0.25;
    o.rebuild_skew = fdp.ConsumeIntegralInRange<int>(0, 9) == 0 ? pick_weight(fdp) : 4.0;
    o.background = fdp.ConsumeIntegralInRange<uint32_t>(0, fdp.ConsumeIntegralInRange<int>(0, 9) == 0 ? 5 : 1);
    const int ss = fdp.ConsumeIntegralInRange<int>(0, 19);
    if (ss == 0) o.struct_size = fdp.ConsumeIntegralInRange<uint32_t>(0, sizeof o - 1);
    const bool null_opts = fdp.ConsumeIntegralInRange<int>(0, 9) == 0;
    if (!null_opts) {
      if (o.struct_size < sizeof o || o.nlist >= (1u << 23) || !(o.rebuild_hot_fraction > 0) || !(o.rebuild_skew > 0) ||
          o.background > 1)
        e.err(MNEMO_E_INVALID_ARGUMENT);
    }
    const mnemo_status st = mnemo_store_build_index(store, null_opts ? nullptr : &o);
    check_status("mnemo_store_build_index", st, e);
    if (st != MNEMO_OK) return verify_state("a refused index build");
    indexed = true;
    resync_slots("an index build");
    verify_state("an index build");
  }

  // ---- memories' fields ---------------------------------------------------
  fm::Memory memory(uint64_t id) const {
    const Model::Entry& en = m.e.at(id);
    return fm::Memory{id, m.fields.get(id), en.time, en.imp};
  }
  std::vector<std::string> model_keys() const {
    std::vector<std::string> k;
    for (const auto& [key, id] : m.fields.keys()) k.push_back(key);
    return k;
  }
  std::vector<uint64_t> model_ids() const {
    std::vector<uint64_t> ids;
    for (const auto& kv : m.e) ids.push_back(kv.first);
    return ids;
  }

  // Every memory's fields by mnemo_store_read (with absent ids), and every
  // key by mnemo_store_ids_of_keys, against the model.
  void verify_fields(const std::string& ctx) {
    std::vector<uint64_t> ids = model_ids();
    ids.push_back(kSmallIds + 100);  // never added
    Buf b(ids.size() * 8);
    std::memcpy(b.data(), ids.data(), ids.size() * 8);
    mnemo_records* r = nullptr;
    mnemo_status st = mnemo_store_read(store, b.as<uint64_t>(), ids.size(), &r);
    FZ_CHECK(st == MNEMO_OK, "read: " + fz::status_text(st) + ctx);
    FZ_CHECK(mnemo_records_count(r) == ids.size(), "records_count" + ctx);
    for (size_t i = 0; i < ids.size(); ++i) {
      uint64_t id = 0;
      fm::Fields got;
      std::string why;
      const int found = fm::read_record(r, i, &id, &got, &why);
      if (!m.e.count(ids[i])) {
        FZ_CHECK(found == 0, "read of an absent id: " + why + ctx);
        continue;
      }
      FZ_CHECK(found == 1 && id == ids[i], "read of id " + std::to_string(ids[i]) + ": " + why + ctx);
      const fm::Fields* want = m.fields.get(ids[i]);
      const fm::Fields none;
      FZ_CHECK(got == (want ? *want : none), "fields of id " + std::to_string(ids[i]) + ": " + fm::describe(got) +
                                                 ", model " + fm::describe(want ? *want : none) + ctx);
      double t = -1;
      float imp = -1;
      uint32_t found2 = 0;
      FZ_CHECK(mnemo_records_get(r, i, &found2, nullptr, nullptr, &t, &imp) == MNEMO_OK, "records_get" + ctx);
      const Model::Entry& en = m.e.at(ids[i]);
      FZ_CHECK(std::memcmp(&t, &en.time, 8) == 0 && std::memcmp(&imp, &en.imp, 4) == 0,
               "time or importance read back" + ctx);
    }
    uint32_t found = 5;
    FZ_CHECK(mnemo_records_get(r, ids.size(), &found, nullptr, nullptr, nullptr, nullptr) == MNEMO_E_OUT_OF_RANGE &&
                 found == 5,
             "records_get past the end" + ctx);
    mnemo_records_destroy(r);
    const std::vector<std::string> keys = model_keys();
    if (keys.empty()) return;
    std::vector<const char*> c;
    for (const auto& k : keys) c.push_back(k.c_str());
    Buf out(keys.size() * 8);
    st = mnemo_store_ids_of_keys(store, c.data(), keys.size(), out.as<uint64_t>());
    FZ_CHECK(st == MNEMO_OK, "ids_of_keys: " + fz::status_text(st) + ctx);
    for (size_t i = 0; i < keys.size(); ++i)
      FZ_CHECK(out.as<uint64_t>()[i] == m.fields.id_of_key(keys[i]),
               "the key '" + keys[i] + "' finds id " + std::to_string(out.as<uint64_t>()[i]) + ctx);
  }

  // The C form of random writes, sometimes broken in a way the model does
  // not see (then *c_error holds the status it must give).
  struct CBreak {
    std::vector<mnemo_attribute> attrs;
    std::vector<const char*> parts;
  };
  void break_c(FuzzedDataProvider& f, fm::CWrites& c, std::vector<CBreak>& keep, Expect& e) {
    if (c.size() == 0 || f.ConsumeIntegralInRange<int>(0, 14) != 14) return;
    mnemo_memory_fields& x = c.data()[f.ConsumeIntegralInRange<size_t>(0, c.size() - 1)];
    CBreak& k = keep.emplace_back();
    switch (f.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:
        x.struct_size = static_cast<uint32_t>(sizeof x) - 8;
        e.err(MNEMO_E_INVALID_ARGUMENT);
        break;
      case 1:
        x.reserved0 = 1;
        e.err(MNEMO_E_INVALID_ARGUMENT);
        break;
      case 2:
        if ((x.set & MNEMO_FIELD_TAGS) && x.tag_count > 0) x.tags = nullptr, e.err(MNEMO_E_NULL_POINTER);
        break;
      case 3:
      case 4:
      case 5:
        if ((x.set & MNEMO_FIELD_ATTRIBUTES) && x.attribute_count > 0) {
          k.attrs.assign(x.attributes, x.attributes + x.attribute_count);
          mnemo_value& v = k.attrs[0].value;
          if (f.ConsumeBool()) {
            v.reserved = 1;
          } else if (f.ConsumeBool()) {
            v.type = f.ConsumeBool() ? 0 : 5;
          } else {
            v.type = MNEMO_VALUE_BOOL;
            v.i = 2;
          }
          x.attributes = k.attrs.data();
          e.err(MNEMO_E_INVALID_ARGUMENT);
        }
        break;
      case 6:
        if ((x.set & MNEMO_FIELD_PAYLOAD) && x.payload_bytes > 0) x.payload = nullptr, e.err(MNEMO_E_NULL_POINTER);
        break;
      default:
        if ((x.set & MNEMO_FIELD_NAMESPACE) && x.namespace_depth > 0) {
          k.parts.assign(x.namespace_parts, x.namespace_parts + x.namespace_depth);
          k.parts.back() = nullptr;
          x.namespace_parts = k.parts.data();
          e.err(MNEMO_E_NULL_POINTER);
        }
        break;
    }
  }

  // mnemo_store_add_with_fields: mnemo_store_add_memories with each
  // memory's fields (or none: fields NULL).
  void do_add_fields() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const uint64_t count = fdp.ConsumeIntegralInRange<uint64_t>(0, 4);
    const PtrMode pi = fz::pick_mode(fdp, 3);
    Buf ids(count * 8), vec(count * m.dim * 4), times(count * 8);
    std::vector<uint64_t> id_list;
    std::vector<std::vector<double>> rows;
    std::vector<double> t_list;
    bool no_id = false, non_finite = false;
    for (uint64_t r = 0; r < count; ++r) {
      const uint64_t id = fdp.ConsumeIntegralInRange<int>(0, 19)
                              ? fdp.ConsumeIntegralInRange<uint64_t>(0, kSmallIds - 1)
                              : pick_id(fdp);
      no_id = no_id || id == MNEMO_NO_ID;
      std::memcpy(ids.data() + 8 * r, &id, 8);
      id_list.push_back(id);
      std::vector<double> v(m.dim);
      for (uint64_t j = 0; j < m.dim; ++j) {
        const float x = abi_value(fdp, false);
        vec.as<float>()[r * m.dim + j] = x;
        v[j] = stored_value(x, m.dtype);
        non_finite = non_finite || !std::isfinite(v[j]);
      }
      rows.push_back(std::move(v));
      const double t = pick_time(fdp, false);
      std::memcpy(times.data() + 8 * r, &t, 8);
      t_list.push_back(t);
    }
    const bool with_times = fdp.ConsumeBool(), with_fields = fdp.ConsumeIntegralInRange<int>(0, 9) != 0;
    std::vector<fm::Write> writes;
    bool acceptable = true;
    for (uint64_t r = 0; r < count; ++r) {
      writes.push_back(fz::random_write(fdp, true));
      acceptable = acceptable && fm::acceptable(writes.back());
    }
    fm::CWrites c(writes);
    std::vector<CBreak> keep;
    if (s != nullptr) pointer_errors(e, pi);
    if (s != nullptr && count == 0) e.ok = true;  // nothing to do
    if (s != nullptr && count > 0) {
      if (with_fields) break_c(fdp, c, keep, e);
      if (no_id) e.err(MNEMO_E_OUT_OF_RANGE);
      if (non_finite && validate) e.err(MNEMO_E_NON_FINITE);
      if (with_fields && !acceptable) e.err(MNEMO_E_INVALID_ARGUMENT);
      if (with_fields && m.fields.key_conflict(id_list, writes)) e.err(MNEMO_E_INVALID_ARGUMENT);
    }
    const mnemo_status st = mnemo_store_add_with_fields(s, fz::view<uint64_t>(ids, pi), vec.data(), MNEMO_DTYPE_F32,
                                                        count, with_times ? times.as<double>() : nullptr, nullptr,
                                                        with_fields ? c.data() : nullptr);
    check_status("mnemo_store_add_with_fields", st, e);
    if (st == MNEMO_OK && count > 0) {
      m.add(id_list, rows, with_times ? &t_list : nullptr, nullptr);
      if (with_fields) m.fields.write(id_list, writes);
      if (indexed) resync_slots("an add with fields to an indexed store");
    }
    verify_state(st == MNEMO_OK ? "add_with_fields" : "a failed add_with_fields");
  }

  // mnemo_store_update_fields of present and absent memories.
  void do_update_fields() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const uint64_t count = fdp.ConsumeIntegralInRange<uint64_t>(0, 4);
    const PtrMode pi = fz::pick_mode(fdp, 3);
    const bool null_fields = fdp.ConsumeIntegralInRange<int>(0, 29) == 29;
    Buf ids(count * 8);
    std::vector<uint64_t> id_list;
    std::vector<fm::Write> writes;
    bool absent = false, acceptable = true;
    for (uint64_t r = 0; r < count; ++r) {
      const uint64_t id = fdp.ConsumeIntegralInRange<int>(0, 9) && !m.e.empty()
                              ? std::next(m.e.begin(), fdp.ConsumeIntegralInRange<size_t>(0, m.e.size() - 1))->first
                              : pick_id(fdp);
      std::memcpy(ids.data() + 8 * r, &id, 8);
      id_list.push_back(id);
      absent = absent || !m.e.count(id);
      writes.push_back(fz::random_write(fdp, true));
      acceptable = acceptable && fm::acceptable(writes.back());
    }
    fm::CWrites c(writes);
    std::vector<CBreak> keep;
    if (s != nullptr && count > 0) {
      if (!null_fields) break_c(fdp, c, keep, e);
      pointer_errors(e, pi);
      if (null_fields) e.err(MNEMO_E_NULL_POINTER);
      if (!null_fields && !acceptable) e.err(MNEMO_E_INVALID_ARGUMENT);
      if (absent) e.err(MNEMO_E_NOT_FOUND);
      if (m.fields.key_conflict(id_list, writes)) e.err(MNEMO_E_INVALID_ARGUMENT);
    }
    const mnemo_status st =
        mnemo_store_update_fields(s, fz::view<uint64_t>(ids, pi), null_fields ? nullptr : c.data(), count);
    check_status("mnemo_store_update_fields", st, e);
    if (st == MNEMO_OK && count > 0) m.fields.write(id_list, writes);
    verify_state(st == MNEMO_OK ? "update_fields" : "a failed update_fields");
  }

  // mnemo_store_read with bad arguments; a good read is checked by
  // verify_fields.
  void do_read() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const uint64_t count = fdp.ConsumeIntegralInRange<uint64_t>(0, 4);
    const PtrMode pi = fz::pick_mode(fdp, 10);
    const bool null_out = fdp.ConsumeIntegralInRange<int>(0, 9) == 9;
    Buf ids(count * 8);
    for (uint64_t r = 0; r < count; ++r) {
      const uint64_t id = pick_id(fdp);
      std::memcpy(ids.data() + 8 * r, &id, 8);
    }
    if (s != nullptr) {
      if (null_out) e.err(MNEMO_E_NULL_POINTER);
      if (count > 0) pointer_errors(e, pi);
    }
    mnemo_records* const sentinel = reinterpret_cast<mnemo_records*>(0x40);
    mnemo_records* r = sentinel;
    const mnemo_status st = mnemo_store_read(s, fz::view<uint64_t>(ids, pi), count, null_out ? nullptr : &r);
    check_status("mnemo_store_read", st, e);
    if (st != MNEMO_OK) {
      FZ_CHECK(r == sentinel, "a failed read wrote *out");
      return;
    }
    FZ_CHECK(mnemo_records_count(r) == count, "records_count");
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t id = 0;
      fm::Fields got;
      std::string why;
      const uint64_t want = reinterpret_cast<const uint64_t*>(ids.data())[i];
      const int found = fm::read_record(r, i, &id, &got, &why);
      FZ_CHECK(found == (m.e.count(want) ? 1 : 0), "read: found " + std::to_string(found) + " " + why);
      if (found == 1) {
        const fm::Fields* f = m.fields.get(want);
        FZ_CHECK(id == want && got == (f ? *f : fm::Fields{}), "read of id " + std::to_string(want));
      }
    }
    // A fields struct from an older header is refused.
    if (count > 0) {
      uint32_t found = 0;
      mnemo_memory_fields f = mnemo_memory_fields_default();
      f.struct_size = 8;
      FZ_CHECK(mnemo_records_get(r, 0, &found, nullptr, &f, nullptr, nullptr) == MNEMO_E_INVALID_ARGUMENT,
               "records_get with a short struct");
    }
    mnemo_records_destroy(r);
  }

  // mnemo_store_ids_of_keys of held keys, unknown ones and bad arguments.
  void do_ids_of_keys() {
    Expect e;
    mnemo_store* s = store_arg(e);
    const uint64_t count = fdp.ConsumeIntegralInRange<uint64_t>(0, 5);
    const PtrMode pi = fz::pick_mode(fdp, 10);
    const bool null_keys = fdp.ConsumeIntegralInRange<int>(0, 19) == 19,
               null_key = fdp.ConsumeIntegralInRange<int>(0, 19) == 19;
    const std::vector<std::string> held = model_keys();
    std::vector<std::string> keys;
    for (uint64_t i = 0; i < count; ++i) {
      const int r = fdp.ConsumeIntegralInRange<int>(0, 3);
      keys.push_back(r < 2 && !held.empty() ? held[fdp.ConsumeIntegralInRange<size_t>(0, held.size() - 1)]
                     : r == 2               ? fz::random_write(fdp, false).key
                                            : std::string(MNEMO_MAX_KEY_BYTES + 5, 'k'));
    }
    std::vector<const char*> c;
    for (const auto& k : keys) c.push_back(k.c_str());
    if (null_key && count > 0) c.back() = nullptr;
    Buf out(count * 8);
    if (s != nullptr && count > 0) {
      pointer_errors(e, pi);
      if (null_keys || null_key) e.err(MNEMO_E_NULL_POINTER);
    }
    const auto before = out.snapshot();
    const mnemo_status st =
        mnemo_store_ids_of_keys(s, null_keys ? nullptr : c.data(), count, fz::view<uint64_t>(out, pi));
    check_status("mnemo_store_ids_of_keys", st, e);
    if (st != MNEMO_OK) {
      FZ_CHECK(out.same_as(before), "a failed ids_of_keys wrote its output");
      return;
    }
    for (uint64_t i = 0; i < count; ++i)
      FZ_CHECK(out.as<uint64_t>()[i] == m.fields.id_of_key(keys[i]), "ids_of_keys of '" + keys[i] + "'");
  }

  // A filter built from a random tree: null when a node is refused (as the
  // model says it must be) or, now and then, an empty one.
  struct FilterHandle {
    mnemo_filter* f = nullptr;
    ~FilterHandle() { mnemo_filter_destroy(f); }
  };
  bool make_filter(FilterHandle& h, fm::Node& n, bool hostile) {
    n = fz::random_filter(fdp, model_keys(), model_ids(), hostile);
    FZ_CHECK(mnemo_filter_create(&h.f) == MNEMO_OK, "filter_create");
    uint32_t root = 0;
    const mnemo_status st = fm::build(h.f, n, &root);
    if (fm::valid(n)) {
      FZ_CHECK(st == MNEMO_OK,
               "a filter the header allows was refused: " + fz::status_text(st) + " " + fm::describe(n));
    } else {
      FZ_CHECK(st == MNEMO_E_INVALID_ARGUMENT,
               "a filter node the header refuses was built (" + fz::status_text(st) + "): " + fm::describe(n));
      return false;
    }
    // The root is the last node built: set it anyway (or not).
    if (fdp.ConsumeBool()) FZ_CHECK(mnemo_filter_set_root(h.f, root) == MNEMO_OK, "set_root");
    FZ_CHECK(mnemo_filter_set_root(h.f, root + 1) == MNEMO_E_INVALID_ARGUMENT, "set_root past the nodes");
    return true;
  }
  std::set<uint64_t> matching(const fm::Node& n) const {
    std::set<uint64_t> out;
    for (const auto& kv : m.e)
      if (fm::matches(n, memory(kv.first))) out.insert(kv.first);
    return out;
  }

  // mnemo_store_select with a random filter (or none, or an empty one),
  // offset and capacity.
  void do_select() {
    FilterHandle h;
    fm::Node n;
    const int how = fdp.ConsumeIntegralInRange<int>(0, 9);
    std::set<uint64_t> want;
    bool empty_filter = false;
    if (how == 9) {
      for (const auto& kv : m.e) want.insert(kv.first);
    } else if (how == 8) {
      FZ_CHECK(mnemo_filter_create(&h.f) == MNEMO_OK, "filter_create");
      empty_filter = true;
    } else {
      if (!make_filter(h, n, true)) return;
      want = matching(n);
    }
    const uint64_t offset = fdp.ConsumeIntegralInRange<uint64_t>(0, 3),
                   cap = fdp.ConsumeIntegralInRange<uint64_t>(0, 16);
    Buf ids(cap * 8);
    uint64_t written = 99, total = 99;
    const mnemo_status st = mnemo_store_select(store, h.f, offset, cap, ids.as<uint64_t>(), &written, &total);
    if (empty_filter) {
      FZ_CHECK(st == MNEMO_E_INVALID_ARGUMENT && written == 99, "select with an empty filter: " + fz::status_text(st));
      return;
    }
    FZ_CHECK(st == MNEMO_OK, "select: " + fz::status_text(st) + " " + fm::describe(n));
    const std::vector<uint64_t> all(want.begin(), want.end());
    FZ_CHECK(total == all.size(),
             "select total " + std::to_string(total) + ", model " + std::to_string(all.size()) + " " + fm::describe(n));
    const uint64_t from = std::min<uint64_t>(offset, all.size()), n_out = std::min<uint64_t>(cap, all.size() - from);
    FZ_CHECK(written == n_out && std::equal(all.begin() + from, all.begin() + from + n_out, ids.as<uint64_t>()),
             "select ids differ from the model: " + fm::describe(n));
  }

  // A search scoped by `where` (every query) and/or where_each (query by
  // query, entries NULL now and then), with the ids filter, bias,
  // activation or an index's probes on top: each query's results are the
  // model's top-k among the memories it may return.
  void do_where_search() {
    if (!m.finite()) return;
    const uint64_t nq = fdp.ConsumeIntegralInRange<uint64_t>(1, 3);
    const uint64_t k = fdp.ConsumeIntegralInRange<uint64_t>(1, m.e.size() + 2);
    std::vector<float> qv(nq * m.dim);
    for (auto& v : qv) v = abi_value(fdp, false);
    mnemo_search_options o = mnemo_search_options_default();
    FilterHandle where;
    fm::Node where_n;
    const bool use_where = fdp.ConsumeBool();
    if (use_where && !make_filter(where, where_n, false)) return;
    if (use_where) o.where = where.f;
    std::vector<FilterHandle> each(nq);
    std::vector<fm::Node> each_n(nq);
    std::vector<const mnemo_filter*> each_p(nq, nullptr);
    const bool use_each = !use_where || fdp.ConsumeBool();
    for (uint64_t i = 0; i < nq && use_each; ++i) {
      if (fdp.ConsumeIntegralInRange<int>(0, 4) == 4) continue;  // no filter for this query
      if (i > 0 && fdp.ConsumeBool() && each_p[i - 1]) {
        each_p[i] = each_p[i - 1], each_n[i] = each_n[i - 1];  // the same filter as the query before
        continue;
      }
      if (!make_filter(each[i], each_n[i], false)) return;
      each_p[i] = each[i].f;
    }
    if (use_each) o.where_each = each_p.data();
    std::set<uint64_t> legacy;
    bool use_legacy = false;
    Buf filt(8 * 4);
    if (fdp.ConsumeIntegralInRange<int>(0, 3) == 3) {
      use_legacy = true;
      o.filter_kind = MNEMO_FILTER_IDS;
      o.filter_count = fdp.ConsumeIntegralInRange<uint64_t>(0, 4);
      for (uint64_t i = 0; i < o.filter_count; ++i) {
        const uint64_t id = pick_id(fdp);
        std::memcpy(filt.data() + 8 * i, &id, 8);
        legacy.insert(id);
      }
      o.filter_ids = filt.as<uint64_t>();
    }
    o.apply_bias = fdp.ConsumeBool() ? 1 : 0;
    const bool act = fdp.ConsumeIntegralInRange<int>(0, 3) == 3;
    if (act) {
      o.activation = 1;
      o.normalize = fdp.ConsumeBool() ? 1 : 0;
      o.w_relevance = 1.0f;
      o.w_recency = static_cast<float>(fdp.ConsumeIntegralInRange<int>(0, 4)) / 4.0f;
      o.w_importance = static_cast<float>(fdp.ConsumeIntegralInRange<int>(0, 4)) / 4.0f;
      o.now = kNow;
    }
    // An index: every list probed (the exact scan's results), or some of
    // them (then min(k, matches) results of the allowed memories).
    bool partial = false;
    if (indexed && fdp.ConsumeBool()) {
      const uint32_t lists = index_lists();
      o.nprobe = fdp.ConsumeBool() ? lists : fdp.ConsumeIntegralInRange<uint32_t>(1, lists + 1);
      partial = o.nprobe < lists;
    }
    Buf q(qv.size() * 4), ids(nq * k * 8), scores(nq * k * 4);
    std::memcpy(q.data(), qv.data(), qv.size() * 4);
    const mnemo_status st = mnemo_store_search(store, q.as<float>(), nq, k, &o, ids.as<uint64_t>(), scores.as<float>());
    FZ_CHECK(st == MNEMO_OK, "filtered search: " + fz::status_text(st));
    for (uint64_t i = 0; i < nq; ++i) {
      std::set<uint64_t> allow;
      for (const auto& kv : m.e) {
        const fm::Memory mem = memory(kv.first);
        if (use_where && !fm::matches(where_n, mem)) continue;
        if (each_p[i] && !fm::matches(each_n[i], mem)) continue;
        if (use_legacy && !legacy.count(kv.first)) continue;
        allow.insert(kv.first);
      }
      const std::vector<float> qi(qv.begin() + i * m.dim, qv.begin() + (i + 1) * m.dim);
      const std::string ctx = "(filtered, query " + std::to_string(i) + ")";
      if (partial) {
        const uint64_t* row = ids.as<uint64_t>() + i * k;
        std::set<uint64_t> seen;
        uint64_t j = 0;
        for (; j < k && row[j] != MNEMO_NO_ID; ++j)
          FZ_CHECK(allow.count(row[j]) && seen.insert(row[j]).second,
                   "a filtered probe returned id " + std::to_string(row[j]) + " " + ctx);
        // Values beyond 1e15 may overflow a score to NaN, which is dropped.
        bool tame = m.tame();
        for (float v : qi) tame = tame && std::fabs(v) <= 1e15f;
        if (tame && !(m.held_non_finite && !validate))
          FZ_CHECK(j == std::min<uint64_t>(k, allow.size()),
                   "a filtered probe returned " + std::to_string(j) +
                       " of min(k, matches) = " + std::to_string(std::min<uint64_t>(k, allow.size())) + " " + ctx);
        continue;
      }
      probing = o.nprobe > 0;
      if (act)
        check_act_rows(qi, 1, k, o, &allow, ids.as<uint64_t>() + i * k, scores.as<float>() + i * k);
      else
        check_rows(qi, 1, k, o.apply_bias == 1, &allow, ids.as<uint64_t>() + i * k, scores.as<float>() + i * k,
                   ctx.c_str());
      probing = false;
    }
  }

  void run() {
    for (int step = 0; step < 48 && fdp.remaining_bytes() > 0; ++step) {
      switch (fdp.ConsumeIntegralInRange<int>(0, 23)) {
        case 0:
        case 1:
        case 2: do_add(false); break;
        case 3:
        case 4: do_remove(); break;
        case 5: do_set_bias(); break;
        case 6:
        case 7:
        case 8: do_search(); break;
        case 9: do_get(); break;
        case 10: do_small_queries(); break;
        case 11: do_save_load(); break;
        case 12:
          // Laid out by namespace: every answer and the state stay the model's.
          if (fdp.ConsumeBool()) {
            FZ_CHECK(mnemo_store_cluster(store) == MNEMO_OK, "cluster");
            resync_slots("a clustering");
            FZ_CHECK(m.dead == 0, "a clustering left removed slots");
            verify_state("a clustering");
          } else {
            verify_state("a step");
          }
          break;
        case 13: do_add(true); break;
        case 14: do_set_meta(fdp.ConsumeBool()); break;
        case 15: do_get_meta(); break;
        case 17:
          if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0 && indexed) {
            FZ_CHECK(mnemo_store_drop_index(store) == MNEMO_OK, "drop_index");
            indexed = false;
            verify_state("an index drop");
          } else {
            do_build_index();
          }
          break;
        case 18: do_add_fields(); break;
        case 19: do_update_fields(); break;
        case 20: do_read(); break;
        case 21: do_ids_of_keys(); break;
        case 22: do_select(); break;
        case 23: do_where_search(); break;
        default: verify_state("a step"); break;
      }
    }
    verify_state("the last step");
  }
};

// Bad arguments to mnemo_store_create: the status the header names, no handle.
void bad_creates(FuzzedDataProvider& fdp, mnemo_runtime* rt) {
  const int n = fdp.ConsumeIntegralInRange<int>(0, 2);
  for (int i = 0; i < n; ++i) {
    const uint64_t dim =
        fdp.ConsumeBool() ? fdp.ConsumeIntegral<uint64_t>() : fdp.ConsumeIntegralInRange<uint64_t>(0, 70000);
    const int32_t dt = fz::pick_dtype(fdp, {MNEMO_DTYPE_F32, MNEMO_DTYPE_F16, MNEMO_DTYPE_BF16}, 40);
    const int32_t met = fz::pick_metric(fdp, 40);
    const bool null_rt = fdp.ConsumeIntegralInRange<int>(0, 9) == 0,
               null_out = fdp.ConsumeIntegralInRange<int>(0, 9) == 0;
    Expect e;
    if (null_rt || null_out) {
      e.err(MNEMO_E_NULL_POINTER);
    } else {
      if (dt < MNEMO_DTYPE_F32 || dt > MNEMO_DTYPE_BF16) e.err(MNEMO_E_DTYPE);
      if (met < MNEMO_METRIC_COSINE || met > MNEMO_METRIC_L2SQ) e.err(MNEMO_E_INVALID_ARGUMENT);
      if (dim == 0 || dim > 65536) e.err(MNEMO_E_INVALID_ARGUMENT);
    }
    mnemo_store* out = reinterpret_cast<mnemo_store*>(0x20);
    const mnemo_status st = mnemo_store_create(null_rt ? nullptr : rt, dim, dt, met, null_out ? nullptr : &out);
    check_status("mnemo_store_create", st, e);
    if (st == MNEMO_OK)
      mnemo_store_destroy(out);
    else
      FZ_CHECK(out == reinterpret_cast<mnemo_store*>(0x20), "a failed create wrote *out");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  const bool validate = fdp.ConsumeIntegralInRange<int>(0, 9) != 0;
  mnemo_runtime* rt = fz::cpu_runtime(validate);
  bad_creates(fdp, rt);
  const uint64_t dim = fdp.ConsumeIntegralInRange<int>(0, 7) ? fdp.ConsumeIntegralInRange<uint64_t>(1, 9)
                                                             : fdp.ConsumeIntegralInRange<uint64_t>(10, 70);
  const int32_t dtype = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_DTYPE_F32, MNEMO_DTYPE_BF16);
  const int32_t metric = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_METRIC_COSINE, MNEMO_METRIC_L2SQ);
  Harness h(fdp, rt, validate, dim, dtype, metric);
  const mnemo_status st = mnemo_store_create(rt, dim, dtype, metric, &h.store);
  FZ_CHECK(st == MNEMO_OK, "store_create: " + fz::status_text(st));
  h.run();
  return 0;
}
