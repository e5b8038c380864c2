// Per-row fields for `mnemo build --fields FILE.jsonl`: line i is a JSON
// object with row i's fields, each optional:
//   {"key": "doc-1", "namespace": ["users", "42"] (or "users/42"),
//    "tags": ["news", "en"], "attributes": {"year": 2020, "lang": "en",
//    "ok": true, "score": 0.5}, "payload": "text" (or any JSON, kept as its text)}
// An integer is an INT attribute, another number a DOUBLE. A field left out
// (or null) is not set.
#pragma once

#include <mnemo.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace cli {

// The rows' mnemo_memory_fields and everything they point to.
class FieldRows {
 public:
  uint64_t size() const { return rows_.size(); }
  const mnemo_memory_fields* data() const { return rows_.data(); }

 private:
  friend FieldRows read_fields_jsonl(const std::string& path);
  std::vector<mnemo_memory_fields> rows_;
  // Deques keep the addresses of what they hold as they grow.
  std::deque<std::string> strings_;
  std::deque<std::vector<const char*>> lists_;
  std::deque<std::vector<mnemo_attribute>> attributes_;
};

// Throws cli::Error naming FILE:LINE and the field at fault (a malformed
// line, a wrong type, a key given on two lines).
FieldRows read_fields_jsonl(const std::string& path);

}  // namespace cli
