// The C forms of memories' fields and filter values, checked and copied
// into the core's types (api_fields.cpp).
#pragma once

#include <vector>

#include "core/meta/fields.h"
#include "mnemo.h"

namespace mnemo::cabi {

// fields [count]: every pointer, count and limit checked (invalid_argument
// or null_pointer naming fields[i] and the field).
std::vector<FieldsIn> fields_in(const mnemo_memory_fields* fields, uint64_t count);
// One value (an attribute's or a filter operand), checked.
ValueIn value_in(const mnemo_value& v, const std::string& where);

}  // namespace mnemo::cabi
