#include "where_parse.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common.h"

namespace cli {

WhereError::WhereError(size_t col, const std::string& w)
    : std::runtime_error(col ? "column " + std::to_string(col) + ": " + w : w), column(col), why(w) {}

std::string point_at(const std::string& text, size_t column) {
  if (column == 0 || text.find('\n') != std::string::npos) return "";
  // The caret goes under the character: count code points, not UTF-8 bytes.
  size_t width = 0;
  for (size_t i = 0; i + 1 < column && i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++width;
  return "  " + text + "\n  " + std::string(width, ' ') + "^";
}

namespace {

bool is_special(char c) {
  return std::strchr("()=!<>,\"'", c) != nullptr || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// A decimal number: [+-] digits [. digits] [e [+-] digits], or with the
// digits before or after the point alone. Nothing else (no hex, inf, nan),
// so words such as "inf" stay strings.
bool looks_numeric(const std::string& s, bool* integral) {
  size_t i = 0, n = s.size();
  if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0, frac = 0;
  while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  *integral = true;
  if (i < n && s[i] == '.') {
    *integral = false;
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac;
  }
  if (digits + frac == 0) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    *integral = false;
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    size_t e = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++e;
    if (e == 0) return false;
  }
  return i == n;
}

struct Token {
  enum Kind { kEnd, kWord, kString, kOp, kLParen, kRParen, kComma } kind = kEnd;
  std::string text;  // the word, the string's contents, or the operator
  size_t pos = 0;    // 0-based start
  size_t end = 0;    // one past the last byte
};

class Lexer {
 public:
  explicit Lexer(const std::string& s) : s_(s) {}

  Token next() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
    Token t;
    t.pos = i_;
    if (i_ >= s_.size()) {
      t.end = i_;
      return t;
    }
    const char c = s_[i_];
    if (c == '(' || c == ')' || c == ',') {
      t.kind = c == '(' ? Token::kLParen : c == ')' ? Token::kRParen : Token::kComma;
      t.text = std::string(1, c);
      t.end = ++i_;
      return t;
    }
    if (c == '=' || c == '!' || c == '<' || c == '>') {
      t.kind = Token::kOp;
      t.text = std::string(1, c);
      ++i_;
      if (i_ < s_.size() && s_[i_] == '=') t.text += s_[i_++];
      if (t.text == "!") throw WhereError(t.pos + 1, "'!' must be followed by '=' (for a negation write 'not')");
      t.end = i_;
      return t;
    }
    if (c == '"' || c == '\'') {
      t.kind = Token::kString;
      ++i_;
      while (true) {
        if (i_ >= s_.size()) throw WhereError(t.pos + 1, std::string("unterminated string: no closing ") + c);
        const char x = s_[i_++];
        if (x == c) break;
        if (x == '\\') {
          if (i_ >= s_.size()) throw WhereError(t.pos + 1, std::string("unterminated string: no closing ") + c);
          const char e = s_[i_++];
          switch (e) {
            case 'n': t.text += '\n'; break;
            case 't': t.text += '\t'; break;
            case '\\':
            case '"':
            case '\'': t.text += e; break;
            default:
              throw WhereError(i_ - 1, std::string("unknown escape '\\") + e + "' (use \\\\, \\\", \\', \\n, \\t)");
          }
          continue;
        }
        t.text += x;
      }
      t.end = i_;
      return t;
    }
    t.kind = Token::kWord;
    while (i_ < s_.size() && !is_special(s_[i_])) t.text += s_[i_++];
    t.end = i_;
    return t;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Token::kEnd: return "the end of the expression";
    case Token::kString: return "the string \"" + t.text + "\"";
    default: return "'" + t.text + "'";
  }
}

class Parser {
 public:
  explicit Parser(const std::string& s) : lex_(s) { advance(); }

  WhereNode parse() {
    if (tok_.kind == Token::kEnd) throw WhereError(1, "the expression is empty");
    WhereNode n = parse_or();
    if (tok_.kind == Token::kRParen) throw WhereError(col(tok_), "')' without a matching '('");
    if (tok_.kind != Token::kEnd)
      throw WhereError(col(tok_), "expected 'and', 'or' or the end, found " + describe(tok_));
    return n;
  }

 private:
  static size_t col(const Token& t) { return t.pos + 1; }
  void advance() { tok_ = lex_.next(); }
  bool at_keyword(const char* k) const { return tok_.kind == Token::kWord && lower(tok_.text) == k; }

  WhereNode parse_or() {
    WhereNode first = parse_and();
    if (!at_keyword("or")) return first;
    WhereNode n;
    n.kind = WhereNode::kOr;
    n.kids.push_back(std::move(first));
    while (at_keyword("or")) {
      advance();
      n.kids.push_back(parse_and());
    }
    return n;
  }

  WhereNode parse_and() {
    WhereNode first = parse_not();
    if (!at_keyword("and")) return first;
    WhereNode n;
    n.kind = WhereNode::kAnd;
    n.kids.push_back(std::move(first));
    while (at_keyword("and")) {
      advance();
      n.kids.push_back(parse_not());
    }
    return n;
  }

  WhereNode parse_not() {
    if (at_keyword("not")) {
      advance();
      WhereNode n;
      n.kind = WhereNode::kNot;
      n.kids.push_back(parse_not());
      return n;
    }
    if (tok_.kind == Token::kLParen) {
      const Token open = tok_;
      advance();
      if (tok_.kind == Token::kRParen) throw WhereError(col(tok_), "empty parentheses");
      WhereNode n = parse_or();
      if (tok_.kind != Token::kRParen)
        throw WhereError(col(tok_), "expected ')' to close the '(' of column " + std::to_string(col(open)) +
                                        ", found " + describe(tok_));
      advance();
      return n;
    }
    return parse_predicate();
  }

  static bool is_keyword(const std::string& w) {
    const std::string l = lower(w);
    return l == "and" || l == "or" || l == "not" || l == "in" || l == "between" || l == "exists";
  }

  WhereNode parse_predicate() {
    const Token name = tok_;
    if (name.kind == Token::kWord) {
      const size_t colon = name.text.find(':');
      if (colon != std::string::npos) {
        const std::string field = name.text.substr(0, colon);
        if (field == "tag" || field == "ns" || field == "key" || field == "id" || field == "time" ||
            field == "importance")
          return parse_field(field, colon);
      }
      if (is_keyword(name.text))
        throw WhereError(col(name),
                         "expected a predicate (NAME OP VALUE, tag:..., ns:..., key:..., id:..., time:..., "
                         "importance:...), found the keyword '" +
                             name.text + "'");
    } else if (name.kind != Token::kString) {
      throw WhereError(col(name),
                       "expected a predicate (NAME OP VALUE, tag:..., ns:..., key:..., id:..., time:..., "
                       "importance:...), found " +
                           describe(name));
    }
    if (name.text.empty()) throw WhereError(col(name), "an attribute name is empty");
    advance();
    WhereNode n;
    n.kind = WhereNode::kAttribute;
    n.name = name.text;
    const Token op = tok_;
    if (op.kind == Token::kOp) {
      advance();
      if (op.text == "=" || op.text == "==")
        n.op = MNEMO_OP_EQ;
      else if (op.text == "!=")
        n.op = MNEMO_OP_NE;
      else if (op.text == "<")
        n.op = MNEMO_OP_LT;
      else if (op.text == "<=")
        n.op = MNEMO_OP_LE;
      else if (op.text == ">")
        n.op = MNEMO_OP_GT;
      else
        n.op = MNEMO_OP_GE;
      const Token at = tok_;
      n.values.push_back(parse_value("after '" + op.text + "'"));
      if (n.op >= MNEMO_OP_LT && n.op <= MNEMO_OP_GE && n.values[0].type == MNEMO_VALUE_BOOL)
        throw WhereError(col(at), "'" + op.text + "' does not order booleans (they compare only with =, != and in)");
      return n;
    }
    if (at_keyword("exists")) {
      advance();
      n.op = MNEMO_OP_EXISTS;
      return n;
    }
    if (at_keyword("not")) {
      advance();
      if (!at_keyword("in")) throw WhereError(col(tok_), "expected 'in' after 'not', found " + describe(tok_));
      n.op = MNEMO_OP_NOT_IN;
      advance();
      n.values = parse_list();
      return n;
    }
    if (at_keyword("in")) {
      advance();
      n.op = MNEMO_OP_IN;
      n.values = parse_list();
      return n;
    }
    if (at_keyword("between")) {
      advance();
      n.op = MNEMO_OP_BETWEEN;
      const Token lo_at = tok_;
      n.values.push_back(parse_value("after 'between'"));
      if (!at_keyword("and"))
        throw WhereError(col(tok_), "expected 'and' between the two ends of 'between', found " + describe(tok_));
      advance();
      n.values.push_back(parse_value("after 'between ... and'"));
      const auto number = [](const WhereValue& v) { return v.type == MNEMO_VALUE_INT || v.type == MNEMO_VALUE_DOUBLE; };
      const bool ok = (number(n.values[0]) && number(n.values[1])) ||
                      (n.values[0].type == MNEMO_VALUE_STRING && n.values[1].type == MNEMO_VALUE_STRING);
      if (!ok) throw WhereError(col(lo_at), "'between' takes two numbers or two strings");
      return n;
    }
    throw WhereError(col(op), "expected an operator (= != < <= > >=, in, not in, between, exists) after '" + name.text +
                                  "', found " + describe(op));
  }

  std::vector<WhereValue> parse_list() {
    if (tok_.kind != Token::kLParen)
      throw WhereError(col(tok_), "expected '(' to start the list, found " + describe(tok_));
    advance();
    std::vector<WhereValue> v;
    if (tok_.kind == Token::kRParen) {
      advance();
      return v;
    }
    while (true) {
      v.push_back(parse_value("in the list"));
      if (tok_.kind == Token::kRParen) break;
      if (tok_.kind != Token::kComma)
        throw WhereError(col(tok_), "expected ',' or ')' in the list, found " + describe(tok_));
      advance();
    }
    advance();
    return v;
  }

  WhereValue parse_value(const std::string& where) {
    const Token t = tok_;
    WhereValue v;
    if (t.kind == Token::kString) {
      v.type = MNEMO_VALUE_STRING;
      v.s = t.text;
      advance();
      return v;
    }
    if (t.kind != Token::kWord || is_keyword(t.text))
      throw WhereError(col(t), "expected a value " + where + ", found " + describe(t));
    advance();
    const std::string l = lower(t.text);
    if (l == "true" || l == "false") {
      v.type = MNEMO_VALUE_BOOL;
      v.i = l == "true";
      return v;
    }
    bool integral = false;
    if (looks_numeric(t.text, &integral)) {
      errno = 0;
      if (integral) {
        const long long x = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) throw WhereError(col(t), t.text + " is beyond the 64-bit integers");
        v.type = MNEMO_VALUE_INT;
        v.i = x;
      } else {
        const double x = std::strtod(t.text.c_str(), nullptr);
        if (!std::isfinite(x)) throw WhereError(col(t), t.text + " is beyond the finite doubles");
        v.type = MNEMO_VALUE_DOUBLE;
        v.d = x;
      }
      return v;
    }
    v.type = MNEMO_VALUE_STRING;
    v.s = t.text;
    return v;
  }

  // The text after "field:": the rest of the word, or a string right
  // after the colon.
  std::string field_text(const Token& word, size_t colon, size_t* at) {
    *at = word.pos + colon + 2;
    std::string rest = word.text.substr(colon + 1);
    advance();
    if (rest.empty() && tok_.kind == Token::kString && tok_.pos == word.end) {
      rest = tok_.text;
      advance();
      if (rest.empty()) throw WhereError(*at, "an empty string after '" + word.text + "'");
      return rest;
    }
    if (rest.empty()) throw WhereError(*at, "expected a value after '" + word.text + "'");
    return rest;
  }

  WhereNode parse_field(const std::string& field, size_t colon) {
    const Token word = tok_;
    size_t at = 0;
    const std::string text = field_text(word, colon, &at);
    WhereNode n;
    if (field == "tag") {
      n.kind = WhereNode::kTags;
      n.op = MNEMO_OP_ANY;
      n.strs.push_back(text);
    } else if (field == "key") {
      n.kind = WhereNode::kKeys;
      n.strs.push_back(text);
    } else if (field == "ns") {
      n.kind = WhereNode::kNamespace;
      n.op = MNEMO_OP_NAMESPACE_EQ;
      std::string path = text;
      if (path == "*") {
        path.clear();
        n.op = MNEMO_OP_NAMESPACE_UNDER;
      } else if (path.size() >= 2 && path.compare(path.size() - 2, 2, "/*") == 0) {
        path.resize(path.size() - 2);
        n.op = MNEMO_OP_NAMESPACE_UNDER;
      }
      size_t start = 0;
      while (!path.empty()) {
        const size_t slash = path.find('/', start);
        const std::string part = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (part.empty()) throw WhereError(at + start, "an empty namespace part in '" + text + "'");
        n.strs.push_back(part);
        if (slash == std::string::npos) break;
        start = slash + 1;
      }
    } else if (field == "id") {
      n.kind = WhereNode::kIds;
      n.ids.push_back(parse_id(text, at));
      // More ids follow as ", N".
      while (tok_.kind == Token::kComma) {
        advance();
        const Token t = tok_;
        if (t.kind != Token::kWord) throw WhereError(col(t), "expected an id after ',', found " + describe(t));
        advance();
        n.ids.push_back(parse_id(t.text, col(t)));
      }
    } else {
      n.kind = field == "time" ? WhereNode::kTime : WhereNode::kImportance;
      const size_t dots = text.find("..");
      if (dots == std::string::npos)
        throw WhereError(at,
                         "expected LO..HI after '" + field + ":' (either end may be left out), found '" + text + "'");
      n.lo = parse_bound(text.substr(0, dots), at, -INFINITY);
      n.hi = parse_bound(text.substr(dots + 2), at + dots + 2, INFINITY);
    }
    return n;
  }

  static uint64_t parse_id(const std::string& s, size_t at) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || s[0] == '-' || s[0] == '+' || errno == ERANGE || v == MNEMO_NO_ID)
      throw WhereError(at, "'" + s + "' is not an id (a whole number below 2^64 - 1)");
    return v;
  }

  static double parse_bound(const std::string& s, size_t at, double open) {
    if (s.empty()) return open;
    bool integral = false;
    const double x = looks_numeric(s, &integral) ? std::strtod(s.c_str(), nullptr) : NAN;
    if (!std::isfinite(x)) throw WhereError(at, "'" + s + "' is not a finite number");
    return x;
  }

  Lexer lex_;
  Token tok_;
};

uint32_t emit(mnemo_filter* f, const WhereNode& n, const std::string& what) {
  uint32_t node = 0;
  const auto fail = [&](mnemo_status st) {
    if (st != MNEMO_OK) throw Error(what + ": " + mnemo_status_name(st) + ": " + mnemo_last_error());
  };
  std::vector<const char*> strs;
  for (const auto& s : n.strs) strs.push_back(s.c_str());
  switch (n.kind) {
    case WhereNode::kAnd:
    case WhereNode::kOr: {
      std::vector<uint32_t> kids;
      for (const auto& k : n.kids) kids.push_back(emit(f, k, what));
      const auto count = static_cast<uint32_t>(kids.size());
      fail(n.kind == WhereNode::kAnd ? mnemo_filter_and(f, kids.data(), count, &node)
                                     : mnemo_filter_or(f, kids.data(), count, &node));
      break;
    }
    case WhereNode::kNot: fail(mnemo_filter_not(f, emit(f, n.kids.at(0), what), &node)); break;
    case WhereNode::kTags:
      fail(mnemo_filter_tags(f, n.op, strs.data(), static_cast<uint32_t>(strs.size()), &node));
      break;
    case WhereNode::kNamespace:
      fail(mnemo_filter_namespace(f, n.op, strs.data(), static_cast<uint32_t>(strs.size()), &node));
      break;
    case WhereNode::kKeys: fail(mnemo_filter_keys(f, strs.data(), strs.size(), &node)); break;
    case WhereNode::kIds: {
      AVec<uint64_t> ids(n.ids.begin(), n.ids.end());  // the library wants them aligned
      fail(mnemo_filter_ids(f, ids.data(), ids.size(), &node));
      break;
    }
    case WhereNode::kTime: fail(mnemo_filter_time(f, n.lo, n.hi, &node)); break;
    case WhereNode::kImportance: fail(mnemo_filter_importance(f, n.lo, n.hi, &node)); break;
    case WhereNode::kAttribute: {
      std::vector<mnemo_value> vals;
      for (const auto& v : n.values) {
        mnemo_value x;
        std::memset(&x, 0, sizeof x);
        x.type = v.type;
        x.i = v.i;
        x.d = v.d;
        x.s = v.type == MNEMO_VALUE_STRING ? v.s.c_str() : nullptr;
        vals.push_back(x);
      }
      fail(mnemo_filter_attribute(f, n.name.c_str(), n.op, vals.data(), static_cast<uint32_t>(vals.size()), &node));
      break;
    }
  }
  return node;
}

}  // namespace

WhereNode parse_where(const std::string& text) { return Parser(text).parse(); }

void build_filter(const WhereNode& tree, FilterHandle& out, const std::string& what) {
  FilterHandle h;
  check(mnemo_filter_create(&h.f), "creating a filter");
  const uint32_t root = emit(h.f, tree, what);
  check(mnemo_filter_set_root(h.f, root), "setting the filter's root");
  std::swap(out.f, h.f);
}

}  // namespace cli
