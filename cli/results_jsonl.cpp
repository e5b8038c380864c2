#include "results_jsonl.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "common.h"

namespace cli {

namespace {

using json = nlohmann::json;

json value_json(const mnemo_value& v) {
  switch (v.type) {
    case MNEMO_VALUE_INT: return v.i;
    case MNEMO_VALUE_DOUBLE: return v.d;
    case MNEMO_VALUE_BOOL: return v.i != 0;
    default: return std::string(v.s ? v.s : "");
  }
}

// The fields a memory holds (f.set), as build --fields writes them.
void put_fields(json& j, const mnemo_memory_fields& f) {
  if ((f.set & MNEMO_FIELD_KEY) && f.key) j["key"] = f.key;
  if ((f.set & MNEMO_FIELD_NAMESPACE) && f.namespace_depth > 0) {
    json ns = json::array();
    for (uint32_t i = 0; i < f.namespace_depth; ++i) ns.push_back(f.namespace_parts[i]);
    j["namespace"] = std::move(ns);
  }
  if ((f.set & MNEMO_FIELD_TAGS) && f.tag_count > 0) {
    json tags = json::array();
    for (uint32_t i = 0; i < f.tag_count; ++i) tags.push_back(f.tags[i]);
    j["tags"] = std::move(tags);
  }
  if ((f.set & MNEMO_FIELD_ATTRIBUTES) && f.attribute_count > 0) {
    json attrs = json::object();
    for (uint32_t i = 0; i < f.attribute_count; ++i) attrs[f.attributes[i].name] = value_json(f.attributes[i].value);
    j["attributes"] = std::move(attrs);
  }
  if ((f.set & MNEMO_FIELD_PAYLOAD) && f.payload_bytes > 0)
    j["payload"] = std::string(static_cast<const char*>(f.payload), f.payload_bytes);
}

}  // namespace

void write_results_jsonl(const std::string& path, const mnemo_store* store, const uint64_t* ids, const float* scores,
                         uint64_t rows, uint64_t k) {
  // Every result's memory read in one call (a snapshot of their fields).
  std::vector<uint64_t> wanted;
  for (uint64_t i = 0; i < rows * k; ++i)
    if (ids[i] != MNEMO_NO_ID) wanted.push_back(ids[i]);
  mnemo_records* raw = nullptr;
  if (!wanted.empty())
    check(mnemo_store_read(store, wanted.data(), wanted.size(), &raw), "reading the results' fields");
  std::unique_ptr<mnemo_records, void (*)(mnemo_records*)> recs(raw, mnemo_records_destroy);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(path == "-" ? stdout : std::fopen(path.c_str(), "w"),
                                                    path == "-" ? [](std::FILE*) { return 0; } : std::fclose);
  if (!f) throw Error("cannot create '" + path + "'");
  uint64_t at = 0;
  for (uint64_t q = 0; q < rows; ++q)
    for (uint64_t r = 0; r < k; ++r) {
      const uint64_t id = ids[q * k + r];
      if (id == MNEMO_NO_ID) continue;  // fewer than k matched
      json j = {{"query", q}, {"rank", r}, {"id", id}, {"score", static_cast<double>(scores[q * k + r])}};
      uint32_t found = 0;
      uint64_t got = 0;
      mnemo_memory_fields fields = mnemo_memory_fields_default();
      double time = 0;
      float importance = 0;
      check(mnemo_records_get(recs.get(), at++, &found, &got, &fields, &time, &importance), "a result's fields");
      if (found) {
        put_fields(j, fields);
        j["time"] = time;
        j["importance"] = static_cast<double>(importance);
      }
      const std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
      if (std::fwrite(line.data(), 1, line.size(), f.get()) != line.size()) throw Error("cannot write '" + path + "'");
    }
  if (std::fflush(f.get()) != 0 || std::ferror(f.get())) throw Error("cannot write '" + path + "'");
}

}  // namespace cli
