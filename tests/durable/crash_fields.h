// The fields crash test's write sequence, shared by the child that runs it
// and the parent that checks what survived: op i depends only on (seed, i)
// (adds with fields, field updates, plain adds, removes, checkpoints), and a
// model says what the store holds after any prefix of it. Keys are made from
// their memory's id, so no write is refused for a key; an update naming an
// absent memory is refused (NOT_FOUND) and changes nothing.
#pragma once

#include <mnemo.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../store_fields_model.h"
#include "crash_ops.h"

namespace crash {

enum class FieldsKind { add, update, plain_add, remove, checkpoint };

struct FieldsOp {
  FieldsKind kind = FieldsKind::add;
  AVec<uint64_t> ids;
  AVec<float> values;             // add, plain_add: [ids x kDim]
  std::vector<fm::Write> writes;  // add, update: [ids]
};

inline FieldsOp fields_op_at(uint64_t seed, uint64_t i) {
  uint64_t r = mix(seed * 7919u + i + 0x51ed);
  auto next = [&](uint64_t n) {
    r = mix(r);
    return r % n;
  };
  FieldsOp op;
  const uint64_t pick = next(100);
  op.kind = pick < 40   ? FieldsKind::add
            : pick < 70 ? FieldsKind::update
            : pick < 80 ? FieldsKind::plain_add
            : pick < 97 ? FieldsKind::remove
                        : FieldsKind::checkpoint;
  if (op.kind == FieldsKind::checkpoint) return op;
  const uint64_t n = 1 + next(3);
  while (op.ids.size() < n) {  // distinct ids
    const uint64_t id = 1 + next(kUniverse);
    bool seen = false;
    for (uint64_t x : op.ids) seen |= x == id;
    if (!seen) op.ids.push_back(id);
  }
  if (op.kind == FieldsKind::add || op.kind == FieldsKind::plain_add)
    for (uint64_t j = 0; j < n * kDim; ++j) op.values.push_back(static_cast<float>(next(9)) - 4.0f);
  if (op.kind != FieldsKind::add && op.kind != FieldsKind::update) return op;
  static const char* const kParts[] = {"users", "42", "episodic", "\xc3\xbc", "semantic"};
  static const char* const kTags[] = {"red", "blue", "\xe6\x97\xa5", "news", "a"};
  for (uint64_t id : op.ids) {
    fm::Write w;
    w.set = static_cast<uint32_t>(1 + next(MNEMO_FIELD_ALL));
    if (w.set & MNEMO_FIELD_KEY) {
      const uint64_t k = next(4);
      // Keys of this memory only: never another memory's.
      w.key = k == 0   ? ""
              : k == 1 ? "k" + std::to_string(id)
                       : "\xd0\xba" + std::to_string(id) + "-" + std::to_string(k);
    }
    if (w.set & MNEMO_FIELD_NAMESPACE)
      for (uint64_t d = next(4); d > 0; --d) w.ns.push_back(kParts[next(5)]);
    if (w.set & MNEMO_FIELD_TAGS)
      for (uint64_t t = next(4); t > 0; --t) w.tags.push_back(kTags[next(5)]);
    if (w.set & MNEMO_FIELD_ATTRIBUTES)
      for (uint64_t a = next(4); a > 0; --a) {
        const std::string name(1, static_cast<char>('a' + next(3)));
        switch (next(4)) {
          case 0: w.attrs.emplace_back(name, fm::Value(static_cast<int64_t>(next(1000)) - 500)); break;
          case 1: w.attrs.emplace_back(name, fm::Value(static_cast<double>(next(64)) / 8.0)); break;
          case 2: w.attrs.emplace_back(name, fm::Value(next(2) == 0)); break;
          default: w.attrs.emplace_back(name, fm::Value("v" + std::to_string(next(10)))); break;
        }
      }
    if (w.set & MNEMO_FIELD_PAYLOAD) {
      // Now and then large, so a kill may land inside its record's write.
      const uint64_t bytes = next(10) == 0 ? 1 + next(256 << 10) : next(40);
      for (uint64_t b = 0; b < bytes; ++b) w.payload.push_back(static_cast<char>(mix(i * 131 + b) & 0xff));
    }
    op.writes.push_back(std::move(w));
  }
  return op;
}

inline mnemo_status run_fields_op(mnemo_store* s, const FieldsOp& op) {
  const uint64_t n = op.ids.size();
  fm::CWrites c(op.writes);
  switch (op.kind) {
    case FieldsKind::add:
      return mnemo_store_add_with_fields(s, op.ids.data(), op.values.data(), MNEMO_DTYPE_F32, n, nullptr, nullptr,
                                         c.data());
    case FieldsKind::update: {
      const mnemo_status st = mnemo_store_update_fields(s, op.ids.data(), c.data(), n);
      return st == MNEMO_E_NOT_FOUND ? MNEMO_OK : st;
    }
    case FieldsKind::plain_add: return mnemo_store_add(s, op.ids.data(), op.values.data(), MNEMO_DTYPE_F32, n);
    case FieldsKind::remove: return mnemo_store_remove(s, op.ids.data(), n, nullptr);
    case FieldsKind::checkpoint: return mnemo_store_checkpoint(s);
  }
  return MNEMO_E_INTERNAL;
}

// What the store holds: each memory's vector and fields.
struct FieldsState {
  std::map<uint64_t, std::vector<float>> vectors;
  fm::FieldsModel fields;
  bool operator==(const FieldsState& o) const {
    if (vectors != o.vectors || fields.all().size() != o.fields.all().size()) return false;
    for (const auto& [id, f] : fields.all()) {
      const fm::Fields* g = o.fields.get(id);
      if (!g || *g != f) return false;
    }
    return true;
  }
};

inline void apply(FieldsState& m, const FieldsOp& op) {
  const std::vector<uint64_t> ids(op.ids.begin(), op.ids.end());
  switch (op.kind) {
    case FieldsKind::add:
    case FieldsKind::plain_add:
      for (size_t i = 0; i < ids.size(); ++i)
        m.vectors[ids[i]].assign(op.values.begin() + i * kDim, op.values.begin() + (i + 1) * kDim);
      if (op.kind == FieldsKind::add) m.fields.write(ids, op.writes);
      break;
    case FieldsKind::update:
      for (uint64_t id : ids)
        if (!m.vectors.count(id)) return;
      m.fields.write(ids, op.writes);
      break;
    case FieldsKind::remove:
      for (uint64_t id : ids) m.vectors.erase(id), m.fields.remove(id);
      break;
    case FieldsKind::checkpoint: break;
  }
}

// Reads ids 1..kUniverse back: vectors by get, fields by one read.
inline bool read_back(const mnemo_store* s, FieldsState& out, std::string& why) {
  out = FieldsState{};
  AVec<float> v(kDim);
  AVec<uint64_t> ids;
  for (uint64_t id = 1; id <= kUniverse; ++id) {
    const mnemo_status st = mnemo_store_get(s, id, v.data());
    if (st == MNEMO_E_NOT_FOUND) continue;
    if (st != MNEMO_OK) return why = mnemo_last_error(), false;
    out.vectors[id].assign(v.begin(), v.end());
    ids.push_back(id);
  }
  if (ids.empty()) return true;
  mnemo_records* r = nullptr;
  if (mnemo_store_read(s, ids.data(), ids.size(), &r) != MNEMO_OK) return why = mnemo_last_error(), false;
  for (size_t i = 0; i < ids.size(); ++i) {
    uint64_t id = 0;
    fm::Fields f;
    if (fm::read_record(r, i, &id, &f, &why) != 1 || id != ids[i]) {
      mnemo_records_destroy(r);
      return why = "read of id " + std::to_string(ids[i]) + ": " + why, false;
    }
    if (!f.empty()) {
      fm::Write w;
      w.set = MNEMO_FIELD_ALL;
      w.key = f.key;
      w.ns = f.ns;
      w.tags.assign(f.tags.begin(), f.tags.end());
      w.attrs.assign(f.attrs.begin(), f.attrs.end());
      w.payload = f.payload;
      out.fields.write({id}, {w});
    }
  }
  mnemo_records_destroy(r);
  return true;
}

inline std::string describe(const FieldsState& m) {
  std::string s = std::to_string(m.vectors.size()) + " memories:";
  for (const auto& [id, v] : m.vectors) {
    s += " " + std::to_string(id);
    if (const fm::Fields* f = m.fields.get(id)) s += fm::describe(*f);
  }
  return s;
}

}  // namespace crash
