// What the JSON readers (--fields, --where-json) say about JSON in their
// messages.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace cli {

// "a string", "an array", "null", ...: the kind of a value, for messages.
inline std::string json_kind(const nlohmann::json& j) {
  if (j.is_null()) return "null";
  const std::string t = j.type_name();
  return (t[0] == 'a' || t[0] == 'o' ? "an " : "a ") + t;
}

// The reason of a parse error without its prefix ("[json.exception...]
// parse error at line L, column C: "): the callers give the place.
inline std::string json_parse_why(const nlohmann::json::parse_error& e) {
  const std::string w = e.what();
  const size_t colon = w.find(": ");
  return colon == std::string::npos ? w : w.substr(colon + 2);
}

}  // namespace cli
