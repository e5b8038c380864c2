// A plain model of a memory store (ids -> rounded vectors and biases) and
// thin wrappers that pass std::vector arguments through aligned buffers.
#pragma once

#include <map>
#include <set>
#include <vector>

#include "reference.h"
#include "store_fields_model.h"
#include "support.h"

namespace mt {

class StoreModel {
 public:
  StoreModel(size_t dim, int32_t dtype, int32_t metric) : dim_(dim), dtype_(dtype), metric_(metric) {}

  // What the store holds after a successful mnemo_store_add(ids, m): upsert
  // keeps the bias, a repeated id takes its last row, F32 rows are rounded to
  // the store's dtype.
  void add(const std::vector<uint64_t>& ids, const Matrix& m);
  // Returns how many of the ids were present; their fields go with them.
  size_t remove(const std::vector<uint64_t>& ids);
  // Memories' fields, keys and filters by the header's rules
  // (store_fields_model.h); a write the store took is given to it as is.
  fm::FieldsModel fields;
  // A memory as a filter sees it (time and importance are the caller's).
  fm::Memory memory(uint64_t id, double time = 0, float importance = 0) const {
    return fm::Memory{id, fields.get(id), time, importance};
  }
  void set_bias(uint64_t id, float bias) { e_.at(id).bias = bias; }
  bool has(uint64_t id) const { return e_.count(id) != 0; }
  const std::vector<double>& vec(uint64_t id) const { return e_.at(id).val; }
  float bias(uint64_t id) const { return e_.at(id).bias; }
  size_t size() const { return e_.size(); }
  std::vector<uint64_t> ids() const;
  int32_t metric() const { return metric_; }
  int32_t dtype() const { return dtype_; }
  size_t dim() const { return dim_; }

  // Reference candidates of one query; allow = nullptr admits every id.
  std::vector<ref::Candidate> candidates(const double* q, bool apply_bias,
                                         const std::set<uint64_t>* allow = nullptr) const;

 private:
  struct Entry {
    std::vector<double> val;
    float bias = 0.0f;
  };
  size_t dim_;
  int32_t dtype_;
  int32_t metric_;
  std::map<uint64_t, Entry> e_;
};

mnemo_status store_add(mnemo_store* s, const std::vector<uint64_t>& ids, const Matrix& m);
mnemo_status store_remove(mnemo_store* s, const std::vector<uint64_t>& ids, uint64_t* removed);
mnemo_status store_set_bias(mnemo_store* s, const std::vector<uint64_t>& ids, const std::vector<float>& biases);

// Search results; buffers start as 0xAB bytes so unwritten slots show.
struct Results {
  size_t nq = 0, k = 0;
  Buf<uint64_t> ids;
  Buf<float> scores;
  const uint64_t* row_ids(size_t i) const { return ids.data() + i * k; }
  const float* row_scores(size_t i) const { return scores.data() + i * k; }
};
mnemo_status store_search(const mnemo_store* s, const Matrix& q, size_t k, const mnemo_search_options* opts,
                          Results* r);
// Every row of r against the model's reference top-k.
void expect_results(const StoreModel& model, const Matrix& q, const Results& r, bool apply_bias,
                    const std::set<uint64_t>* allow = nullptr);
// Bit-for-bit equality of two result sets.
bool same_results(const Results& a, const Results& b);

// Everything observable of a store: counts, and for each probed id its
// status, slot and vector bits, plus biased search results of probe queries.
struct StoreState {
  uint64_t count = 0, slot_count = 0;
  std::vector<mnemo_status> get_status;
  std::vector<uint64_t> slots;
  std::vector<float> vectors;
  std::vector<uint64_t> result_ids;
  std::vector<float> result_scores;
  bool operator==(const StoreState& o) const;
};
StoreState capture(const mnemo_store* s, const std::vector<uint64_t>& probe_ids, const Matrix& probe_queries);

}  // namespace mt
