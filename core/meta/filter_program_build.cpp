#include "filter_program_build.h"

#include <algorithm>
#include <cstring>

namespace mnemo {

FieldColumns build_columns(const std::vector<std::unique_ptr<Record>>& recs, const uint64_t* slot_ids, uint64_t slots,
                           const SlotPostings& postings, ColumnDirectory& dir) {
  FieldColumns c;
  c.version = postings.version();
  c.slots = slots;
  c.tag_at.assign(slots + 1, 0);
  c.attr_at.assign(slots + 1, 0);
  c.ns.assign(slots, 0);
  auto live = [&](uint64_t s) -> const Record* {
    return s < recs.size() && recs[s] && slot_ids[s] != kNoId ? recs[s].get() : nullptr;
  };
  for (uint64_t s = 0; s < slots; ++s) {
    const Record* r = live(s);
    c.tag_at[s + 1] = c.tag_at[s] + (r ? r->tags.size() : 0);
    c.attr_at[s + 1] = c.attr_at[s] + (r ? r->attrs.size() : 0);
  }
  c.tags.resize(c.tag_at[slots]);
  c.attrs.resize(c.attr_at[slots]);
  for (uint64_t s = 0; s < slots; ++s) {
    const Record* r = live(s);
    if (!r) continue;
    c.ns[s] = r->ns;
    std::copy(r->tags.begin(), r->tags.end(), c.tags.begin() + c.tag_at[s]);
    ColumnAttr* a = c.attrs.data() + c.attr_at[s];
    for (const auto& [name, v] : r->attrs) {
      a->name = name;
      a->type = static_cast<uint32_t>(v.type);
      if (v.type == ValueType::f64)
        std::memcpy(&a->bits, &v.d, 8);
      else if (v.type == ValueType::str)
        a->bits = v.s;
      else
        a->bits = static_cast<uint64_t>(v.i);
      ++a;
    }
  }
  postings.flatten(dir.numbers, c.list_at, c.lists);
  dir.list_at = c.list_at;
  dir.version = c.version;
  return c;
}

namespace {

bool numeric(ValueType t) { return t == ValueType::i64 || t == ValueType::f64; }

struct Driver {
  bool all = false;
  std::vector<DriverPart> parts;
  uint64_t size = 0;
};

class Compiler {
 public:
  Compiler(const FilterScope& s, const ColumnDirectory& d, FilterPrograms& o) : s_(s), dir_(d), out_(o) {}

  // Emits node i of f after its children; returns the stack it needs
  // (kProgramStack + 1: too much).
  uint32_t emit(const Filter& f, uint32_t i) {
    const FilterNode& fn = f.nodes()[i];
    ProgNode n;
    switch (fn.kind) {
      case NodeKind::all_of:
      case NodeKind::any_of:
      case NodeKind::negate: {
        if (fn.children.size() > kProgramStack) return kProgramStack + 1;
        uint32_t peak = 1, j = 0;
        for (uint32_t c : fn.children) peak = std::max(peak, j++ + emit(f, c));
        if (fn.kind == NodeKind::negate) {
          // NOT of nothing is true (FilterTest's rule).
          if (fn.children.empty())
            n.op = ProgOp::push_true;
          else
            n.op = ProgOp::negate;
        } else {
          n.op = fn.kind == NodeKind::all_of ? ProgOp::all_of : ProgOp::any_of;
          n.n = static_cast<uint32_t>(fn.children.size());
        }
        out_.nodes.push_back(n);
        return peak;
      }
      case NodeKind::tags: {
        std::vector<uint32_t> ids;
        bool unknown = false;
        for (const auto& t : fn.strs) {
          const uint32_t id = s_.pool->find(t);
          if (id)
            ids.push_back(id);
          else
            unknown = true;
        }
        if (fn.op == FilterOp::all && unknown) {
          n.op = ProgOp::push_false;
        } else {
          std::sort(ids.begin(), ids.end());
          n.op = fn.op == FilterOp::any ? ProgOp::tag_any : ProgOp::tag_all;
          put32(n, ids);
          for (size_t j = 0; j < ids.size(); ++j) {
            const auto it = dir_.numbers.tag.find(ids[j]);
            out_.leaf_lists[n.a + j] = it == dir_.numbers.tag.end() ? kNoList : it->second;
          }
        }
        break;
      }
      case NodeKind::ns: {
        std::vector<uint32_t> ids;
        if (namespace_ids(fn, s_, ids)) {
          n.op = ProgOp::ns_in;
          put32(n, ids);
        }
        break;
      }
      case NodeKind::attribute: attribute(fn, n); break;
      case NodeKind::ids:
      case NodeKind::keys: {
        std::vector<uint64_t> ids = named_ids(fn, s_);
        n.op = ProgOp::ids_in;
        n.a = static_cast<uint32_t>(out_.u64.size());
        n.n = static_cast<uint32_t>(ids.size());
        out_.u64.insert(out_.u64.end(), ids.begin(), ids.end());
        break;
      }
      case NodeKind::time:
      case NodeKind::importance:
        n.op = fn.kind == NodeKind::time ? ProgOp::time_in : ProgOp::importance_in;
        n.lo = fn.lo;
        n.hi = fn.hi;
        break;
    }
    out_.nodes.push_back(n);
    return 1;
  }

  // A union of posting lists (or the program's own slots) holding every
  // slot node i matches.
  Driver driver(const Filter& f, uint32_t i) {
    const FilterNode& fn = f.nodes()[i];
    Driver d;
    switch (fn.kind) {
      case NodeKind::tags: {
        if (fn.op == FilterOp::all && fn.strs.empty()) return every();
        Driver least;
        bool first = true;
        for (const auto& t : fn.strs) {
          const uint32_t id = s_.pool->find(t);
          Driver one;
          if (id) add_list(one, dir_.numbers.tag, id);
          if (fn.op == FilterOp::any) {
            merge(d, one);
          } else if (first || one.size < least.size) {
            least = one;
            first = false;
          }
        }
        return fn.op == FilterOp::any ? d : least;
      }
      case NodeKind::ns: {
        std::vector<uint32_t> ids;
        if (namespace_ids(fn, s_, ids))
          for (uint32_t id : ids) add_list(d, dir_.numbers.ns, id);
        return d;
      }
      case NodeKind::attribute: {
        const uint32_t name = s_.pool->find(fn.name);
        if (!name) return d;
        if (fn.op == FilterOp::eq || fn.op == FilterOp::in) {
          for (const auto& v : fn.values) {
            if (v.type == ValueType::str) {
              if (const uint32_t t = s_.pool->find(v.s))
                add_list(d, dir_.numbers.text, SlotPostings::value_key(name, t));
            } else if (v.type == ValueType::boolean) {
              add_list(d, dir_.numbers.flag, SlotPostings::value_key(name, v.i ? 1 : 0));
            } else if (numeric(v.type)) {
              add_list(d, dir_.numbers.has, SlotPostings::has_key(name, SlotPostings::number));
            }
          }
          return d;
        }
        add_list(d, dir_.numbers.has, SlotPostings::has_key(name, SlotPostings::any));
        return d;
      }
      case NodeKind::ids:
      case NodeKind::keys: {
        std::vector<uint32_t> slots;
        for (uint64_t id : named_ids(fn, s_))
          if (const auto* e = s_.slot_of->find(id)) slots.push_back(static_cast<uint32_t>(e->second));
        std::sort(slots.begin(), slots.end());
        DriverPart p;
        p.kind = DriverPart::own;
        p.a = static_cast<uint32_t>(out_.u32.size());
        p.n = static_cast<uint32_t>(slots.size());
        p.size = slots.size();
        out_.u32.insert(out_.u32.end(), slots.begin(), slots.end());
        out_.leaf_lists.resize(out_.u32.size(), kNoList);
        if (p.n) d.parts.push_back(p), d.size = p.size;
        return d;
      }
      case NodeKind::all_of: {
        bool any = false;
        for (uint32_t c : fn.children) {
          Driver one = driver(f, c);
          if (!one.all && (!any || one.size < d.size)) d = std::move(one), any = true;
        }
        return any ? d : every();
      }
      case NodeKind::any_of:
        for (uint32_t c : fn.children) {
          Driver one = driver(f, c);
          if (one.all) return every();
          merge(d, one);
        }
        return d;
      default: return every();  // time, importance, NOT
    }
  }

  // The smaller of two drivers (the conjunction's).
  static Driver& least(Driver& a, Driver& b) {
    if (a.all) return b;
    if (b.all) return a;
    return b.size < a.size ? b : a;
  }

 private:
  // Union parts beyond this are read as every slot (each part's entries
  // are checked against the parts before it).
  static constexpr size_t kMaxParts = 32;

  Driver every() const {
    Driver d;
    d.all = true;
    DriverPart p;
    p.kind = DriverPart::all;
    p.size = s_.slots;
    d.parts.push_back(p);
    d.size = s_.slots;
    return d;
  }
  void add_list(Driver& d, const std::unordered_map<uint64_t, uint32_t>& numbers, uint64_t key) const {
    auto it = numbers.find(key);
    if (it == numbers.end()) return;
    for (const DriverPart& p : d.parts)
      if (p.kind == DriverPart::posting && p.list == it->second) return;
    DriverPart p;
    p.kind = DriverPart::posting;
    p.list = it->second;
    p.size = dir_.list_at[it->second + 1] - dir_.list_at[it->second];
    d.parts.push_back(p);
    d.size += p.size;
  }
  void merge(Driver& d, const Driver& one) const {
    if (d.all) return;
    if (one.all || d.parts.size() + one.parts.size() > kMaxParts) {
      d = every();
      return;
    }
    for (const DriverPart& p : one.parts) {
      const bool dup = p.kind == DriverPart::posting && std::any_of(d.parts.begin(), d.parts.end(), [&](const auto& q) {
                         return q.kind == DriverPart::posting && q.list == p.list;
                       });
      if (!dup) d.parts.push_back(p), d.size += p.size;
    }
  }
  void put32(ProgNode& n, const std::vector<uint32_t>& v) {
    n.a = static_cast<uint32_t>(out_.u32.size());
    n.n = static_cast<uint32_t>(v.size());
    out_.u32.insert(out_.u32.end(), v.begin(), v.end());
    out_.leaf_lists.resize(out_.u32.size(), kNoList);
  }
  void attribute(const FilterNode& fn, ProgNode& n) {
    n.name = s_.pool->find(fn.name);
    if (!n.name) return;  // nothing holds it: false for every operator
    const bool ordering = fn.op == FilterOp::lt || fn.op == FilterOp::le || fn.op == FilterOp::gt ||
                          fn.op == FilterOp::ge || fn.op == FilterOp::between;
    auto has = [&](ValueType t) {
      return std::any_of(fn.values.begin(), fn.values.end(), [&](const ValueIn& v) { return v.type == t; });
    };
    if (ordering && has(ValueType::str)) {
      // Strings order by their text: the store's values of this attribute
      // that pass, decided here (every operand must be a string).
      std::vector<uint32_t> pass;
      const bool all_text =
          std::all_of(fn.values.begin(), fn.values.end(), [](const ValueIn& v) { return v.type == ValueType::str; });
      if (all_text)
        for (uint32_t t : s_.postings->text_values(n.name)) {
          const std::string& x = s_.pool->str(t);
          auto c = [&](size_t j) {
            const int r = x.compare(fn.values[j].s);
            return r < 0 ? -1 : r > 0 ? 1 : 0;
          };
          bool ok = false;
          switch (fn.op) {
            case FilterOp::lt: ok = c(0) < 0; break;
            case FilterOp::le: ok = c(0) <= 0; break;
            case FilterOp::gt: ok = c(0) > 0; break;
            case FilterOp::ge: ok = c(0) >= 0; break;
            default: ok = c(0) >= 0 && c(1) <= 0; break;
          }
          if (ok) pass.push_back(t);
        }
      std::sort(pass.begin(), pass.end());
      n.op = ProgOp::attr_text_in;
      put32(n, pass);
      return;
    }
    if (ordering && has(ValueType::boolean)) return;  // booleans do not order
    switch (fn.op) {
      case FilterOp::exists: n.op = ProgOp::attr_exists; return;
      case FilterOp::eq: n.op = ProgOp::attr_eq; break;
      case FilterOp::ne: n.op = ProgOp::attr_ne; break;
      case FilterOp::in: n.op = ProgOp::attr_in; break;
      case FilterOp::not_in: n.op = ProgOp::attr_not_in; break;
      default:
        n.op = ProgOp::attr_order;
        n.cmp = static_cast<uint8_t>(fn.op);
        break;
    }
    n.a = static_cast<uint32_t>(out_.values.size());
    n.n = static_cast<uint32_t>(fn.values.size());
    for (const ValueIn& v : fn.values) {
      ProgValue p;
      p.type = static_cast<uint32_t>(v.type);
      if (v.type == ValueType::f64)
        std::memcpy(&p.bits, &v.d, 8);
      else if (v.type == ValueType::str)
        p.text = s_.pool->find(v.s);
      else
        p.bits = static_cast<uint64_t>(v.i);
      out_.values.push_back(p);
    }
  }

  const FilterScope& s_;
  const ColumnDirectory& dir_;
  FilterPrograms& out_;
};

}  // namespace

bool append_program(const Filter* where, const Filter* each, const FilterScope& scope, const ColumnDirectory& dir,
                    FilterPrograms& out) {
  const size_t nodes0 = out.nodes.size(), u320 = out.u32.size(), u640 = out.u64.size(), values0 = out.values.size(),
               parts0 = out.parts.size();
  if (out.node_at.empty()) out.node_at.push_back(0), out.part_at.push_back(0);
  Compiler c(scope, dir, out);
  uint32_t peak = 1;
  Driver dw, de;
  dw.all = de.all = true;
  uint32_t terms = 0;
  if (where) peak = std::max(peak, c.emit(*where, where->root())), dw = c.driver(*where, where->root()), ++terms;
  if (each) peak = std::max(peak, terms + c.emit(*each, each->root())), de = c.driver(*each, each->root()), ++terms;
  if (terms == 0) {
    ProgNode t;
    t.op = ProgOp::push_true;
    out.nodes.push_back(t);
  } else if (terms == 2) {
    ProgNode a;
    a.op = ProgOp::all_of;
    a.n = 2;
    out.nodes.push_back(a);
  }
  if (peak > kProgramStack) {
    out.nodes.resize(nodes0);
    out.u32.resize(u320);
    out.leaf_lists.resize(u320);
    out.u64.resize(u640);
    out.values.resize(values0);
    out.parts.resize(parts0);
    return false;
  }
  Driver& d = Compiler::least(dw, de);
  if (d.all && d.parts.empty()) {
    DriverPart p;
    p.kind = DriverPart::all;
    p.size = scope.slots;
    d.parts.push_back(p);
  }
  out.parts.insert(out.parts.end(), d.parts.begin(), d.parts.end());
  out.node_at.push_back(static_cast<uint32_t>(out.nodes.size()));
  out.part_at.push_back(static_cast<uint32_t>(out.parts.size()));
  return true;
}

}  // namespace mnemo
