// `mnemo search --out FILE.jsonl`: a line a result with the memory's fields
// read back from the store, in the form `build --fields` reads:
//   {"query": 0, "rank": 0, "id": 17, "score": 0.93, "key": "doc-1",
//    "namespace": ["users", "42"], "tags": ["news"], "attributes": {"year": 2020},
//    "payload": "text", "time": 1.7e9, "importance": 0.5}
// Fields a memory does not hold are left out; a payload that is not UTF-8
// has its bad bytes replaced (U+FFFD).
#pragma once

#include <mnemo.h>

#include <cstdint>
#include <string>

namespace cli {

// Writes the results (ids [rows x k], MNEMO_NO_ID padding skipped) to
// `path`; throws cli::Error on a read or write failure.
void write_results_jsonl(const std::string& path, const mnemo_store* store, const uint64_t* ids, const float* scores,
                         uint64_t rows, uint64_t k);

}  // namespace cli
