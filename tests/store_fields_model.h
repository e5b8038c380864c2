// Memories' fields and filters as mnemo.h defines them, in plain C++ (no
// GoogleTest: the fuzz harnesses link this too): a memory's fields, writes
// and the key rule, their C forms, records read back, and a filter tree
// with its evaluation by the header's rules and the mnemo_filter it builds.
#pragma once

#include <mnemo.h>

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fm {

// An attribute's value or a filter operand: INT, DOUBLE, BOOL, STRING.
using Value = std::variant<int64_t, double, bool, std::string>;

// Bit-for-bit equality (a DOUBLE's sign of zero included).
bool same_value(const Value& a, const Value& b);
std::string describe(const Value& v);

// What a memory holds besides its vector (a field it lacks is empty).
struct Fields {
  std::string key;
  std::vector<std::string> ns;
  std::set<std::string> tags;  // byte order, as read back
  std::map<std::string, Value> attrs;
  std::string payload;
  // MNEMO_FIELD_* bits of the fields it holds.
  uint32_t held() const;
  bool empty() const { return held() == 0; }
  bool operator==(const Fields& o) const;
  bool operator!=(const Fields& o) const { return !(*this == o); }
};
std::string describe(const Fields& f);

// One memory's write: the fields named by `set` are replaced (an empty
// value clears one), the others kept.
struct Write {
  uint32_t set = 0;
  std::string key;
  std::vector<std::string> ns;
  std::vector<std::string> tags;
  std::vector<std::pair<std::string, Value>> attrs;  // a name given twice keeps its last value
  std::string payload;
};
void apply(Fields& f, const Write& w);
// Whether a write keeps to the header's limits and rules (no empty or
// over-long name, finite DOUBLEs, limits on counts and sizes).
bool acceptable(const Write& w);

// The C form of writes, mnemo_memory_fields [n], owning what it points to.
class CWrites {
 public:
  CWrites() = default;
  explicit CWrites(const std::vector<Write>& w);
  CWrites(const CWrites&) = delete;
  CWrites& operator=(const CWrites&) = delete;
  mnemo_memory_fields* data() { return c_.data(); }
  size_t size() const { return c_.size(); }

 private:
  struct Held {
    std::vector<const char*> ns, tags;
    std::vector<mnemo_attribute> attrs;
  };
  std::vector<Write> w_;  // the strings the C form points into
  std::deque<Held> held_;
  std::vector<mnemo_memory_fields> c_;
};
mnemo_value c_value(const Value& v);  // strings point into v

// Entry i of records: 1 found (*id and *f filled), 0 not found, -1 on a
// failed call or a malformed entry (*why says which).
int read_record(const mnemo_records* r, uint64_t i, uint64_t* id, Fields* f, std::string* why);

// The entries of a call writing w[i] to ids[i] that take effect: a
// repeated id takes its last entry alone (the earlier ones write nothing
// and claim no key, though they must still be valid).
std::map<uint64_t, const Write*> last_writes(const std::vector<uint64_t>& ids, const std::vector<Write>& w);

// Every memory's fields and the store's key rule.
class FieldsModel {
 public:
  // Whether a call writing w[i] to ids[i] is refused for its keys: a key
  // another memory holds before the call, or one given to two ids in it
  // (by the entries that take effect).
  bool key_conflict(const std::vector<uint64_t>& ids, const std::vector<Write>& w) const;
  // The entries that take effect (last_writes).
  void write(const std::vector<uint64_t>& ids, const std::vector<Write>& w);
  void remove(uint64_t id);
  // nullptr: the memory has no fields.
  const Fields* get(uint64_t id) const;
  uint64_t id_of_key(const std::string& key) const;  // MNEMO_NO_ID for none
  const std::map<uint64_t, Fields>& all() const { return f_; }
  const std::map<std::string, uint64_t>& keys() const { return keys_; }
  void clear() { f_.clear(), keys_.clear(); }

 private:
  std::map<uint64_t, Fields> f_;  // memories with any field
  std::map<std::string, uint64_t> keys_;
};

// ---- filters ---------------------------------------------------------------

struct Node {
  enum Kind { ns, tags, attr, keys, ids, time, importance, all_of, any_of, negate };
  Kind kind = all_of;
  int32_t op = 0;  // MNEMO_OP_* (ns, tags, attr)
  std::string name;
  std::vector<std::string> strs;  // namespace parts, tags, keys
  std::vector<Value> values;
  std::vector<uint64_t> id_list;
  double lo = 0, hi = 0;
  std::vector<Node> kids;
};
std::string describe(const Node& n);

// A memory as a filter sees it.
struct Memory {
  uint64_t id = 0;
  const Fields* fields = nullptr;  // null: none
  double time = 0;
  float importance = 0;
};

// The header's rules: a predicate on a field the memory lacks is false (NOT
// turns that true), NE and NOT_IN need the attribute, INT and DOUBLE compare
// exactly as numbers, strings bytewise, bools only by EQ/NE/IN/NOT_IN,
// values of other kinds never compare; ALL of no tags and AND of nothing
// match every memory, ANY of none and OR of nothing none.
bool matches(const Node& n, const Memory& m);
// Whether mnemo_filter_* accepts every node of n.
bool valid(const Node& n);
// Builds n into f, children first; *node gets its number. Returns the first
// failing status (the filter then holds the nodes built before it).
mnemo_status build(mnemo_filter* f, const Node& n, uint32_t* node);

}  // namespace fm
