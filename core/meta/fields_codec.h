// The bytes of memories' fields in journal records and snapshots:
// little-endian, length-prefixed, one memory after another. Decoding
// checks every length against what is left and against the header's
// limits, so a damaged or hostile record is refused (corrupt), never read
// past its end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fields.h"

namespace mnemo {

void encode_fields(const FieldsIn& f, std::string& out);
// The most bytes encode_fields writes for fields within the header's
// limits: a reader refuses a longer record before it allocates for it.
constexpr uint64_t kMaxEncodedFieldsBytes =
    4 + (8 + kMaxKeyBytes) + 4 + kMaxNamespaceDepth * (8 + kMaxNameBytes) + 4 + kMaxTags * (8 + kMaxNameBytes) + 4 +
    kMaxAttributes * ((8 + kMaxNameBytes) + 4 + (8 + kMaxNameBytes)) + (8 + kMaxPayloadBytes);
// Reads one memory's fields at data[at..size), advancing `at`.
FieldsIn decode_fields(const unsigned char* data, uint64_t size, uint64_t& at);
// Checks a write's fields against the header's limits and rules (throws
// invalid_argument naming `where`, or corrupt when `corrupt` is set).
void check_fields(const FieldsIn& f, const std::string& where, bool corrupt = false);
// Whether `set` names exactly the fields that are not empty: how a
// memory's stored fields are written to a snapshot (a write may name a
// field to clear it; a stored memory only holds what it has).
bool fields_match_set(const FieldsIn& f);

}  // namespace mnemo
