// An independent reading of the bytes of memories' fields (described in
// core/meta/fields_codec.cpp), used by journal records and store files:
// writes them, and decides whether bytes are one memory's fields a reader
// accepts (lengths within what is left, the header's limits, names not
// empty, no NUL byte in a string, known value types, finite DOUBLEs, BOOLs
// of 0 or 1, no bits but MNEMO_FIELD_* in set).
#pragma once

#include <FuzzedDataProvider.h>

#include <cstdint>
#include <string>
#include <vector>

#include "store_fields_model.h"

namespace fz {

void encode_fields(const fm::Write& w, std::string& out);
// Reads one memory's fields at b[at, end), advancing `at`; false (with the
// reason) where a reader refuses them.
bool decode_fields(const std::string& b, uint64_t end, uint64_t& at, fm::Write* out, std::string* why);

// ---- inputs drawn for the harnesses ------------------------------------------

// A value of any kind from a small vocabulary (so filters meet it): exact
// edges of the int64 and double comparison, signed zeros, the empty and
// non-ASCII strings; with `hostile`, sometimes NaN or an infinity.
fm::Value random_value(FuzzedDataProvider& fdp, bool hostile);
// A write naming random fields, each filled only when named (as the C ABI
// reads it); with `hostile`, sometimes one the header refuses (an empty or
// over-long name or key, a non-finite DOUBLE, too many tags).
fm::Write random_write(FuzzedDataProvider& fdp, bool hostile);
// A filter tree over that vocabulary, `keys` and `ids` (what the store
// holds, so they match); with `hostile`, sometimes a node mnemo_filter_*
// refuses (fm::valid says which).
fm::Node random_filter(FuzzedDataProvider& fdp, const std::vector<std::string>& keys, const std::vector<uint64_t>& ids,
                       bool hostile, int depth = 0);

}  // namespace fz
