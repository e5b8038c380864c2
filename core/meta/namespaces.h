// The namespaces of a store: each distinct path of interned parts gets a
// number (from 1), so a record holds one number and a prefix test walks the
// few distinct paths instead of the memories.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/error.h"

namespace mnemo {

class NamespaceTable {
 public:
  uint32_t intern(const std::vector<uint32_t>& parts) {
    auto it = ids_.find(parts);
    if (it != ids_.end()) return it->second;
    paths_.push_back(parts);
    const auto id = static_cast<uint32_t>(paths_.size());
    ids_.emplace(parts, id);
    return id;
  }
  uint32_t find(const std::vector<uint32_t>& parts) const {
    auto it = ids_.find(parts);
    return it == ids_.end() ? 0 : it->second;
  }
  const std::vector<uint32_t>& path(uint32_t id) const { return paths_.at(id - 1); }
  size_t size() const { return paths_.size(); }
  // Each id's place (by id - 1) in the order of the paths by their parts,
  // in which the paths under a prefix are one run (see under).
  std::vector<uint32_t> places() const {
    std::vector<uint32_t> out(paths_.size());
    uint32_t i = 0;
    for (const auto& e : ids_) out[e.second - 1] = i++;
    return out;
  }
  // Ids of the paths that start with `prefix` (the path itself included).
  std::vector<uint32_t> under(const std::vector<uint32_t>& prefix) const {
    std::vector<uint32_t> out;
    // Paths sort by their parts, so those under a prefix are one run.
    for (auto it = ids_.lower_bound(prefix); it != ids_.end(); ++it) {
      const auto& p = it->first;
      if (p.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), p.begin())) break;
      out.push_back(it->second);
    }
    return out;
  }

 private:
  std::vector<std::vector<uint32_t>> paths_;
  std::map<std::vector<uint32_t>, uint32_t> ids_;
};

}  // namespace mnemo
