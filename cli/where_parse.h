// Filter expressions of `mnemo search`: the text form of --where, the
// dictionary form of --where-json, both parsed into one tree, and the tree
// turned into an mnemo_filter by the builder calls of mnemo.h.
//
// --where grammar (keywords in any case; a column names each error):
//   expr      := term { "or" term }
//   term      := factor { "and" factor }
//   factor    := "not" factor | "(" expr ")" | predicate
//   predicate := NAME OP VALUE                  OP: = == != < <= > >=
//              | NAME ["not"] "in" "(" VALUE { "," VALUE } ")"
//              | NAME "between" VALUE "and" VALUE
//              | NAME "exists"
//              | "tag:" WORD                     holds the tag
//              | "ns:" PATH                      namespace exactly PATH (a/b/c)
//              | "ns:" PATH "/*"  |  "ns:*"      PATH or below it; any namespace
//              | "key:" WORD                     holds the key
//              | "id:" N { "," N }               one of these ids
//              | "time:" [LO] ".." [HI]          last-access time in [LO, HI]
//              | "importance:" [LO] ".." [HI]    importance in [LO, HI]
//   VALUE     := "quoted" | 'quoted' | a bare word: an integer is INT, another
//                number DOUBLE, true/false BOOL, anything else STRING
//   WORD      := "quoted" or a bare word; NAME likewise
// A bare word runs to whitespace or one of ( ) , = ! < > " '.
#pragma once

#include <mnemo.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cli {

// A malformed expression: `column` is 1-based (bytes) into the text; the
// message reads "column N: why".
struct WhereError : std::runtime_error {
  WhereError(size_t column, const std::string& why);
  size_t column;
  std::string why;
};

struct WhereValue {
  int32_t type = MNEMO_VALUE_INT;  // enum mnemo_value_type
  int64_t i = 0;
  double d = 0;
  std::string s;
};

struct WhereNode {
  enum Kind { kAnd, kOr, kNot, kTags, kNamespace, kAttribute, kKeys, kIds, kTime, kImportance };
  Kind kind = kAnd;
  int32_t op = 0;                  // MNEMO_OP_* for tags, namespaces, attributes
  std::string name;                // attribute
  std::vector<std::string> strs;   // tags, namespace parts, keys
  std::vector<WhereValue> values;  // attribute operands
  std::vector<uint64_t> ids;       // ids
  double lo = 0, hi = 0;           // time, importance
  std::vector<WhereNode> kids;     // and, or, not
};

// The text form; throws WhereError.
WhereNode parse_where(const std::string& text);
// The dictionary form ({"year": {"$gte": 2020}, "$or": [...], ...}); throws
// WhereError (column of a JSON syntax error, or 0 with the path of the
// entry at fault).
WhereNode parse_where_json(const std::string& text);

// An owned mnemo_filter.
struct FilterHandle {
  mnemo_filter* f = nullptr;
  FilterHandle() = default;
  ~FilterHandle() { mnemo_filter_destroy(f); }
  FilterHandle(const FilterHandle&) = delete;
  FilterHandle& operator=(const FilterHandle&) = delete;
};

// Builds the filter (its root the tree's root); a refusal of the library
// throws cli::Error naming `what` and the library's message.
void build_filter(const WhereNode& tree, FilterHandle& out, const std::string& what);

// The text, then a caret under `column` (for error messages).
std::string point_at(const std::string& text, size_t column);

}  // namespace cli
