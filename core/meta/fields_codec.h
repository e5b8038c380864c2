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
// Reads one memory's fields at data[at..size), advancing `at`.
FieldsIn decode_fields(const unsigned char* data, uint64_t size, uint64_t& at);
// Checks a write's fields against the header's limits and rules (throws
// invalid_argument naming `where`, or corrupt when `corrupt` is set).
void check_fields(const FieldsIn& f, const std::string& where, bool corrupt = false);

}  // namespace mnemo
