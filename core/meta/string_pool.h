// Strings interned once per store: tags, namespace parts, attribute names
// and string values become 32-bit numbers (from 1; 0 means none). Strings
// are never dropped while the store lives (a store's vocabulary is small
// next to its vectors); snapshots keep only those in use.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/error.h"

namespace mnemo {

class StringPool {
 public:
  uint32_t intern(std::string_view s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    if (strs_.size() >= UINT32_MAX - 1) fail(Code::out_of_memory, "the store holds 2^32 distinct strings");
    strs_.emplace_back(s);
    const auto id = static_cast<uint32_t>(strs_.size());
    ids_.emplace(std::string_view(strs_.back()), id);
    return id;
  }
  // 0 when the string was never interned.
  uint32_t find(std::string_view s) const {
    auto it = ids_.find(s);
    return it == ids_.end() ? 0 : it->second;
  }
  const std::string& str(uint32_t id) const { return strs_.at(id - 1); }
  size_t size() const { return strs_.size(); }

 private:
  std::deque<std::string> strs_;  // stable addresses for the views below
  std::unordered_map<std::string_view, uint32_t> ids_;
};

}  // namespace mnemo
