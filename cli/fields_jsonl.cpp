#include "fields_jsonl.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common.h"
#include "json_text.h"

namespace cli {

namespace {

using json = nlohmann::json;

struct LineError {
  std::string why;
};

[[noreturn]] void bad(const std::string& why) { throw LineError{why}; }

}  // namespace

FieldRows read_fields_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "'");
  FieldRows out;
  std::unordered_map<std::string, uint64_t> key_line;
  std::string line;
  uint64_t no = 0;
  // Strings go to the deque, whose elements never move; C strings of them
  // may hold no NUL byte (the C ABI's strings end at the first one).
  const auto keep = [&](const std::string& s, const std::string& what) -> const char* {
    if (s.find('\0') != std::string::npos) bad(what + " holds a NUL byte");
    out.strings_.push_back(s);
    return out.strings_.back().c_str();
  };
  const auto string_list = [&](const json& j, const std::string& what) -> std::vector<const char*> {
    if (!j.is_array()) bad("\"" + what + "\" must be a list of strings");
    std::vector<const char*> v;
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string at = "\"" + what + "\"[" + std::to_string(i) + "]";
      if (!j[i].is_string()) bad(at + " is " + json_kind(j[i]) + ", not a string");
      v.push_back(keep(j[i].get<std::string>(), at));
    }
    return v;
  };
  while (std::getline(in, line)) {
    ++no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    try {
      if (line.find_first_not_of(" \t") == std::string::npos) bad("an empty line (write {} for a row without fields)");
      json j;
      try {
        j = json::parse(line);
      } catch (const json::parse_error& e) {
        bad("column " + std::to_string(e.byte) + ": not JSON: " + json_parse_why(e));
      }
      if (!j.is_object()) bad(json_kind(j) + ", not an object of fields");
      mnemo_memory_fields f = mnemo_memory_fields_default();
      for (const auto& [name, v] : j.items()) {
        if (v.is_null()) continue;
        if (name == "key") {
          if (!v.is_string()) bad("\"key\" must be a string");
          const std::string k = v.get<std::string>();
          if (!k.empty()) {
            const auto [it, fresh] = key_line.emplace(k, no);
            if (!fresh) bad("the key \"" + k + "\" is also the key of line " + std::to_string(it->second));
          }
          f.set |= MNEMO_FIELD_KEY;
          f.key = keep(k, "\"key\"");
        } else if (name == "namespace") {
          std::vector<const char*> parts;
          if (v.is_string()) {
            // "users/42": the parts between slashes.
            const std::string p = v.get<std::string>();
            size_t start = 0;
            while (!p.empty()) {
              const size_t slash = p.find('/', start);
              parts.push_back(keep(p.substr(start, slash == std::string::npos ? std::string::npos : slash - start),
                                   "\"namespace\""));
              if (slash == std::string::npos) break;
              start = slash + 1;
            }
          } else {
            parts = string_list(v, "namespace");
          }
          out.lists_.push_back(std::move(parts));
          f.set |= MNEMO_FIELD_NAMESPACE;
          f.namespace_parts = out.lists_.back().data();
          f.namespace_depth = static_cast<uint32_t>(out.lists_.back().size());
        } else if (name == "tags") {
          out.lists_.push_back(string_list(v, "tags"));
          f.set |= MNEMO_FIELD_TAGS;
          f.tags = out.lists_.back().data();
          f.tag_count = static_cast<uint32_t>(out.lists_.back().size());
        } else if (name == "attributes") {
          if (!v.is_object()) bad("\"attributes\" must be an object of name: value");
          std::vector<mnemo_attribute> attrs;
          for (const auto& [an, av] : v.items()) {
            const std::string at = "\"attributes\".\"" + an + "\"";
            mnemo_attribute a;
            std::memset(&a, 0, sizeof a);
            a.name = keep(an, at);
            if (av.is_boolean()) {
              a.value.type = MNEMO_VALUE_BOOL;
              a.value.i = av.get<bool>() ? 1 : 0;
            } else if (av.is_number_unsigned()) {
              if (av.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad(at + " is beyond the 64-bit integers");
              a.value.type = MNEMO_VALUE_INT;
              a.value.i = av.get<int64_t>();
            } else if (av.is_number_integer()) {
              a.value.type = MNEMO_VALUE_INT;
              a.value.i = av.get<int64_t>();
            } else if (av.is_number_float()) {
              a.value.type = MNEMO_VALUE_DOUBLE;
              a.value.d = av.get<double>();
            } else if (av.is_string()) {
              a.value.type = MNEMO_VALUE_STRING;
              a.value.s = keep(av.get<std::string>(), at);
            } else {
              bad(at + " is " + json_kind(av) + ": a value is a number, a string, true or false");
            }
            attrs.push_back(a);
          }
          out.attributes_.push_back(std::move(attrs));
          f.set |= MNEMO_FIELD_ATTRIBUTES;
          f.attributes = out.attributes_.back().data();
          f.attribute_count = static_cast<uint32_t>(out.attributes_.back().size());
        } else if (name == "payload") {
          // Text as it is; any other JSON as its compact text.
          out.strings_.push_back(v.is_string() ? v.get<std::string>() : v.dump());
          f.set |= MNEMO_FIELD_PAYLOAD;
          f.payload = out.strings_.back().data();
          f.payload_bytes = out.strings_.back().size();
        } else {
          bad("unknown field \"" + name + "\" (the fields are key, namespace, tags, attributes, payload)");
        }
      }
      out.rows_.push_back(f);
    } catch (const LineError& e) {
      throw Error(path + ":" + std::to_string(no) + ": " + e.why);
    }
  }
  if (in.bad()) throw Error("cannot read '" + path + "'");
  return out;
}

}  // namespace cli
