// The CLI's filter expressions and per-row fields: --where text and the
// --where-json dictionary form select what they say on a small store of
// hand-written fields; malformed expressions fail at the right column with
// a message saying why; --fields files read back through the C ABI, and
// malformed ones name the line; and the tool end to end (mnemo build
// --fields, mnemo search --where / --where-json) returns exactly what the
// same search through the C ABI, with the filter built call by call, does.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "fields_jsonl.h"
#include "where_parse.h"

namespace {

std::string scratch(const std::string& name) {
  static const std::string dir = [] {
    char t[] = "/tmp/mnemo_cli_where_XXXXXX";
    const char* p = mkdtemp(t);
    return std::string(p ? p : "/tmp");
  }();
  return dir + "/" + name;
}

void put(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void ok(mnemo_status st) { ASSERT_EQ(st, MNEMO_OK) << mnemo_status_name(st) << ": " << mnemo_last_error(); }

// The eight memories of the store the expression tests run on; row i has
// id i, time 10 i and importance i / 10.
const char* kFields =
    R"({"key": "a", "namespace": ["users", "1"], "tags": ["news", "en"], "attributes": {"year": 2019, "lang": "en"}})"
    "\n"
    R"({"key": "b", "namespace": "users/1/episodic", "tags": ["news"], "attributes": {"year": 2021.0, "lang": "de"}})"
    "\n"
    R"({"namespace": ["users", "2"], "tags": ["sports"], "attributes": {"year": "2022", "ok": true}})"
    "\n"
    R"({"namespace": ["users"], "attributes": {"year": 2023, "ok": false, "score": 0.5}})"
    "\n"
    R"({"tags": ["en"], "attributes": {"lang": "en", "note": "a b"}})"
    "\n"
    R"({})"
    "\n"
    R"({"key": "c d", "payload": {"doc": 1}, "namespace": null})"
    "\n"
    R"({"key": "e", "payload": "text", "attributes": {"big": 9007199254740993}})"
    "\n";

class Where : public ::testing::Test {
 protected:
  void SetUp() override {
    mnemo_runtime_options o = mnemo_runtime_options_default();
    o.backend = MNEMO_BACKEND_CPU;
    ok(mnemo_runtime_create(&o, &rt_));
    ok(mnemo_store_create(rt_, 2, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, &s_));
    const std::string path = scratch("eight.jsonl");
    put(path, kFields);
    const cli::FieldRows f = cli::read_fields_jsonl(path);
    ASSERT_EQ(f.size(), 8u);
    cli::AVec<uint64_t> ids(8);
    cli::AVec<float> v(16);
    cli::AVec<double> times(8);
    cli::AVec<float> imp(8);
    for (int i = 0; i < 8; ++i) {
      ids[i] = i;
      v[2 * i] = 1.0f + static_cast<float>(i);
      v[2 * i + 1] = 1.0f;
      times[i] = 10.0 * i;
      imp[i] = static_cast<float>(0.1 * i);
    }
    ok(mnemo_store_add_with_fields(s_, ids.data(), v.data(), MNEMO_DTYPE_F32, 8, times.data(), imp.data(), f.data()));
  }
  void TearDown() override {
    mnemo_store_destroy(s_);
    mnemo_runtime_destroy(rt_);
  }

  std::vector<uint64_t> select(const cli::WhereNode& tree) {
    cli::FilterHandle h;
    cli::build_filter(tree, h, "test");
    cli::AVec<uint64_t> ids(8);
    uint64_t written = 0, total = 0;
    EXPECT_EQ(mnemo_store_select(s_, h.f, 0, 8, ids.data(), &written, &total), MNEMO_OK) << mnemo_last_error();
    EXPECT_EQ(written, total);
    return std::vector<uint64_t>(ids.begin(), ids.begin() + written);
  }

  mnemo_runtime* rt_ = nullptr;
  mnemo_store* s_ = nullptr;
};

using Ids = std::vector<uint64_t>;

TEST_F(Where, TextSelectsWhatItSays) {
  const std::vector<std::pair<std::string, Ids>> cases = {
      {"year>=2020", {1, 3}},
      {"year >= 2020 and (lang=en or tag:news)", {1}},
      {"year = 2019.0", {0}},
      {"year = \"2022\"", {2}},
      {"year = 2022", {}},
      {"year != 2019", {1, 2, 3}},
      {"year between 2019 and 2021", {0, 1}},
      {"year >= '2'", {2}},
      {"lang in (en, fr)", {0, 4}},
      {"lang not in (en)", {1}},
      {"lang in ()", {}},
      {"lang = en and not (year < 2020)", {4}},
      {"ok = true", {2}},
      {"ok != true", {3}},
      {"ok = 1", {}},
      {"ok exists", {2, 3}},
      {"not ok exists", {0, 1, 4, 5, 6, 7}},
      {"note = 'a b'", {4}},
      {"score > 0.25", {3}},
      {"big = 9007199254740993", {7}},
      {"big = 9007199254740992.0", {}},
      {"big > 9.007199254740992e15", {7}},
      {"tag:news or tag:sports", {0, 1, 2}},
      {"ns:users/1", {0}},
      {"ns:users/1/*", {0, 1}},
      {"ns:users/*", {0, 1, 2, 3}},
      {"ns:*", {0, 1, 2, 3}},
      {"ns:users/3", {}},
      {"not key:a", {1, 2, 3, 4, 5, 6, 7}},
      {"key:\"c d\" or key:'e'", {6, 7}},
      {"id:1,3, 5", {1, 3, 5}},
      {"time:20..40", {2, 3, 4}},
      {"time:..15", {0, 1}},
      {"importance:0.5..", {5, 6, 7}},
      {"NOT (tag:news) AND ns:users/*", {2, 3}},
      {"(((tag:en)))", {0, 4}},
      {"tag:en and tag:news or ok = false", {0, 3}},
      {"not not tag:en", {0, 4}},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(select(cli::parse_where(text)), want) << text;
}

TEST_F(Where, JsonSelectsWhatItSays) {
  const std::vector<std::pair<std::string, Ids>> cases = {
      {R"({})", {0, 1, 2, 3, 4, 5, 6, 7}},
      {R"({"year": {"$gte": 2020}})", {1, 3}},
      {R"({"year": {"$gte": 2020}, "$or": [{"lang": "en"}, {"$tags": {"$any": ["news"]}}]})", {1}},
      {R"({"year": {"$gt": 2019, "$lt": 2023}})", {1}},
      {R"({"lang": "en"})", {0, 4}},
      {R"({"lang": {"$nin": ["de"]}})", {0, 4}},
      {R"({"year": {"$between": [2019, 2021]}})", {0, 1}},
      {R"({"ok": true})", {2}},
      {R"({"ok": {"$exists": false}})", {0, 1, 4, 5, 6, 7}},
      {R"({"big": 9007199254740993})", {7}},
      {R"({"$namespace": {"$under": "users/1"}})", {0, 1}},
      {R"({"$namespace": ["users", "1"]})", {0}},
      {R"({"$namespace": "users/*"})", {0, 1, 2, 3}},
      {R"({"$namespace": {"$under": []}})", {0, 1, 2, 3}},
      {R"({"$tags": {"$all": ["news", "en"]}})", {0}},
      {R"({"$tags": ["sports", "en"]})", {0, 2, 4}},
      {R"({"$not": {"$key": "a"}})", {1, 2, 3, 4, 5, 6, 7}},
      {R"({"$key": {"$in": ["a", "e"]}})", {0, 7}},
      {R"({"$id": [1, 3, 5]})", {1, 3, 5}},
      {R"({"$time": {"$gt": 20, "$lte": 40}})", {3, 4}},
      {R"({"$importance": {"$gte": 0.5}})", {5, 6, 7}},
      {R"({"$and": [{"$tags": "en"}, {"lang": "en"}], "$or": []})", {}},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(select(cli::parse_where_json(text)), want) << text;
}

TEST(WhereErrors, TextNamesTheColumn) {
  const std::vector<std::tuple<std::string, size_t, std::string>> cases = {
      {"", 1, "empty"},
      {"year >=", 8, "expected a value after '>='"},
      {"year >= 2020 and", 17, "expected a predicate"},
      {"(year > 1", 10, "expected ')' to close the '(' of column 1"},
      {"year > 1)", 9, "')' without a matching '('"},
      {"year 2020", 6, "expected an operator"},
      {"lang = en fr", 11, "expected 'and', 'or' or the end, found 'fr'"},
      {"ok < true", 6, "does not order booleans"},
      {"x between 1 and 'a'", 11, "two numbers or two strings"},
      {"x between 1 2", 13, "expected 'and' between the two ends"},
      {"name = \"abc", 8, "unterminated string"},
      {"name = 'a\\qb'", 10, "unknown escape"},
      {"tag:", 5, "expected a value after 'tag:'"},
      {"ns:a//b", 6, "an empty namespace part"},
      {"id:5,x", 6, "'x' is not an id"},
      {"id:-5", 4, "not an id"},
      {"time:5", 6, "expected LO..HI"},
      {"time:a..5", 6, "'a' is not a finite number"},
      {"importance:0..1e999", 15, "not a finite number"},
      {"x in (1 2)", 9, "expected ',' or ')'"},
      {"x in 1", 6, "expected '(' to start the list"},
      {"x = 99999999999999999999", 5, "beyond the 64-bit integers"},
      {"x = 1e999", 5, "beyond the finite doubles"},
      {"a ! b", 3, "'!' must be followed by '='"},
      {"and = 1", 1, "found the keyword 'and'"},
      {"x = or", 5, "expected a value after '='"},
      {"x not 5", 7, "expected 'in' after 'not'"},
      {"()", 2, "empty parentheses"},
      {"year >= 2020 and (lang=en or", 29, "expected a predicate"},
      {"\"\" = 1", 1, "an attribute name is empty"},
  };
  for (const auto& [text, column, why] : cases) {
    try {
      cli::parse_where(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const cli::WhereError& e) {
      EXPECT_EQ(e.column, column) << text << ": " << e.what();
      EXPECT_NE(e.why.find(why), std::string::npos) << text << ": '" << e.what() << "' lacks '" << why << "'";
      EXPECT_EQ(std::string(e.what()).rfind("column " + std::to_string(column) + ": ", 0), 0u) << e.what();
    }
  }
  // The caret sits under the character at fault, UTF-8 counted as characters.
  EXPECT_EQ(cli::point_at("year >= x", 6), "  year >= x\n       ^");
  EXPECT_EQ(cli::point_at("\xc3\xa9t\xc3\xa9 > x", 9), "  \xc3\xa9t\xc3\xa9 > x\n        ^");
}

TEST(WhereErrors, JsonNamesTheEntry) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"year": {"$gtx": 1}})", "at year.$gtx: unknown operator \"$gtx\""},
      {R"({"year": [1, 2]})", "{\"$in\": [...]}"},
      {R"({"ok": {"$lt": true}})", "booleans are not ordered"},
      {R"({"x": null})", "null is not a value"},
      {R"({"x": {}})", "an empty object"},
      {R"({"x": {"$in": 3}})", "expected a list of values"},
      {R"({"x": {"$between": [1]}})", "expected [low, high]"},
      {R"({"x": {"$exists": 1}})", "expected true or false"},
      {R"([1])", "expected an object, found an array"},
      {R"({"$foo": 1})", "unknown operator \"$foo\""},
      {R"({"$or": {"a": 1}})", "at $or: expected a list of objects"},
      {R"({"$or": [{"a": 1}, 5]})", "at $or[1]: expected an object, found a number"},
      {R"({"$tags": {"$some": ["a"]}})", "use $any or $all"},
      {R"({"$namespace": "a//b"})", "an empty namespace part"},
      {R"({"$namespace": {"$below": "a"}})", "expected {\"$eq\": ...} or {\"$under\": ...}"},
      {R"({"$id": [-1]})", "expected an id"},
      {R"({"$time": {"$gte": "x"}})", "at $time.$gte: expected a number"},
      {R"({"n": 18446744073709551615})", "beyond the 64-bit integers"},
  };
  for (const auto& [text, why] : cases) {
    try {
      cli::parse_where_json(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const cli::WhereError& e) {
      EXPECT_EQ(e.column, 0u) << text;
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos)
          << text << ": '" << e.what() << "' lacks '" << why << "'";
    }
  }
  try {
    cli::parse_where_json(R"({"year": )");
    ADD_FAILURE() << "accepted a cut JSON text";
  } catch (const cli::WhereError& e) {
    EXPECT_EQ(e.column, 10u) << e.what();
    EXPECT_NE(e.why.find("not JSON"), std::string::npos) << e.what();
  }
}

TEST_F(Where, FieldsReadBack) {
  const uint64_t ids[2] __attribute__((aligned(16))) = {1, 6};
  mnemo_records* r = nullptr;
  ok(mnemo_store_read(s_, ids, 2, &r));
  uint32_t found = 0;
  uint64_t id = 0;
  mnemo_memory_fields f = mnemo_memory_fields_default();
  ok(mnemo_records_get(r, 0, &found, &id, &f, nullptr, nullptr));
  ASSERT_EQ(found, 1u);
  // "users/1/episodic" is split at the slashes; 2021.0 stays a DOUBLE.
  ASSERT_EQ(f.namespace_depth, 3u);
  EXPECT_STREQ(f.namespace_parts[2], "episodic");
  EXPECT_STREQ(f.key, "b");
  ASSERT_EQ(f.attribute_count, 2u);
  EXPECT_STREQ(f.attributes[1].name, "year");
  EXPECT_EQ(f.attributes[1].value.type, MNEMO_VALUE_DOUBLE);
  ok(mnemo_records_get(r, 1, &found, &id, &f, nullptr, nullptr));
  // A JSON payload is kept as its text; a null field is not set.
  EXPECT_EQ(std::string(static_cast<const char*>(f.payload), f.payload_bytes), R"({"doc":1})");
  EXPECT_EQ(f.set & MNEMO_FIELD_NAMESPACE, 0u);
  mnemo_records_destroy(r);
}

TEST(FieldsFile, MalformedLinesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"key\": 5}\n", ":1: \"key\" must be a string"},
      {"{}\n\n{}\n", ":2: an empty line"},
      {"{}\n{\"tags\": [1]}\n", ":2: \"tags\"[0] is a number, not a string"},
      {"{\"tags\": \"a\"}\n", "\"tags\" must be a list of strings"},
      {"{\"attributes\": {\"x\": [1]}}\n", "\"attributes\".\"x\" is an array"},
      {"{\"attributes\": [1]}\n", "\"attributes\" must be an object"},
      {"{\"attributes\": {\"n\": 18446744073709551615}}\n", "beyond the 64-bit integers"},
      {"{\"colour\": 1}\n", "unknown field \"colour\""},
      {"{\"key\": \"k\"}\n{}\n{\"key\": \"k\"}\n", ":3: the key \"k\" is also the key of line 1"},
      {"not json\n", ":1: column 2: not JSON"},
      {"[1]\n", ":1: an array, not an object of fields"},
      {"{\"tags\": [\"a\\u0000b\"]}\n", "holds a NUL byte"},
  };
  for (const auto& [text, why] : cases) {
    const std::string path = scratch("bad.jsonl");
    put(path, text);
    try {
      cli::read_fields_jsonl(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const cli::Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind(path + ":", 0), 0u) << m;
      EXPECT_NE(m.find(why), std::string::npos) << "'" << m << "' lacks '" << why << "'";
    }
  }
  EXPECT_THROW(cli::read_fields_jsonl(scratch("no-such-file.jsonl")), cli::Error);
  // Windows line ends and an empty key (no key) are fine.
  const std::string path = scratch("crlf.jsonl");
  put(path, "{\"key\": \"\"}\r\n{\"key\": \"\"}\r\n");
  EXPECT_EQ(cli::read_fields_jsonl(path).size(), 2u);
}

// --- The tool end to end against the C ABI --------------------------------

#ifdef MNEMO_CLI_PATH

// Runs the tool through the shell; returns its exit status.
int run(const std::string& args, const std::string& out, const std::string& err) {
  const std::string cmd = std::string(MNEMO_CLI_PATH) + " " + args + " > '" + out + "' 2> '" + err + "'";
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void put_fvecs(const std::string& path, const std::vector<float>& v, int32_t dim) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  for (size_t i = 0; i < v.size(); i += dim) {
    f.write(reinterpret_cast<const char*>(&dim), 4);
    f.write(reinterpret_cast<const char*>(v.data() + i), 4 * dim);
  }
}

// The TSV `mnemo search` writes, from results of the C ABI.
std::string tsv(const cli::AVec<uint64_t>& ids, const cli::AVec<float>& scores, uint64_t nq, uint64_t k) {
  std::string s = "query\trank\tid\tscore\n";
  char line[128];
  for (uint64_t q = 0; q < nq; ++q)
    for (uint64_t r = 0; r < k; ++r) {
      if (ids[q * k + r] == MNEMO_NO_ID) continue;
      std::snprintf(line, sizeof line, "%llu\t%llu\t%llu\t%.7g\n", static_cast<unsigned long long>(q),
                    static_cast<unsigned long long>(r), static_cast<unsigned long long>(ids[q * k + r]),
                    scores[q * k + r]);
      s += line;
    }
  return s;
}

uint32_t attr(mnemo_filter* f, const char* name, int32_t op, std::vector<mnemo_value> v) {
  uint32_t node = 0;
  EXPECT_EQ(mnemo_filter_attribute(f, name, op, v.data(), static_cast<uint32_t>(v.size()), &node), MNEMO_OK)
      << mnemo_last_error();
  return node;
}

mnemo_value num(int64_t i) {
  mnemo_value v;
  std::memset(&v, 0, sizeof v);
  v.type = MNEMO_VALUE_INT, v.i = i;
  return v;
}

mnemo_value dbl(double d) {
  mnemo_value v = num(0);
  v.type = MNEMO_VALUE_DOUBLE, v.d = d;
  return v;
}

mnemo_value str(const char* s) {
  mnemo_value v = num(0);
  v.type = MNEMO_VALUE_STRING, v.s = s;
  return v;
}

mnemo_value flag(bool b) {
  mnemo_value v = num(b);
  v.type = MNEMO_VALUE_BOOL;
  return v;
}

TEST(CliEndToEnd, SearchWhereEqualsTheCApi) {
  const int32_t dim = 8;
  const uint64_t n = 300, nq = 5, k = 10;
  std::mt19937 rng(7);
  std::normal_distribution<float> g;
  std::vector<float> base(n * dim), queries(nq * dim);
  for (auto& x : base) x = g(rng);
  for (auto& x : queries) x = g(rng);
  const std::string b = scratch("e2e-base.fvecs"), q = scratch("e2e-q.fvecs"), fields = scratch("e2e.jsonl"),
                    store = scratch("e2e.mnemo"), out = scratch("e2e-out.tsv"), err = scratch("e2e-err.txt");
  put_fvecs(b, base, dim);
  put_fvecs(q, queries, dim);
  const char* langs[] = {"en", "de", "fr"};
  std::string lines;
  for (uint64_t i = 0; i < n; ++i)
    lines += "{\"key\": \"k" + std::to_string(i) + "\", \"namespace\": [\"users\", \"" + std::to_string(i % 4) +
             "\"], \"tags\": [\"" + (i % 2 ? "odd" : "even") + "\", \"t" + std::to_string(i % 5) +
             "\"], \"attributes\": {\"year\": " + std::to_string(2000 + i % 30) + ", \"lang\": \"" + langs[i % 3] +
             "\", \"score\": " + std::to_string((i % 7) * 0.5) + ", \"ok\": " + (i % 2 ? "false" : "true") + "}}\n";
  put(fields, lines);
  ASSERT_EQ(run("build --input '" + b + "' --fields '" + fields + "' --out '" + store + "' --metric cosine", out, err),
            0)
      << slurp(err);

  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime* rt = nullptr;
  ok(mnemo_runtime_create(&o, &rt));
  mnemo_store* s = nullptr;
  ok(mnemo_store_open(rt, store.c_str(), &s));
  cli::AVec<float> qa(queries.begin(), queries.end());

  // Each case: the tool's options, and the same filter built call by call.
  struct Case {
    std::string args;
    std::function<void(mnemo_filter*)> build;
  };
  const std::vector<Case> cases = {
      {"--where 'year>=2020 and (lang=en or tag:t1) and ns:users/1/* and not key:k13'",
       [](mnemo_filter* f) {
         uint32_t kids[4], alt[2], node = 0;
         kids[0] = attr(f, "year", MNEMO_OP_GE, {num(2020)});
         alt[0] = attr(f, "lang", MNEMO_OP_EQ, {str("en")});
         const char* t1[] = {"t1"};
         ok(mnemo_filter_tags(f, MNEMO_OP_ANY, t1, 1, &alt[1]));
         ok(mnemo_filter_or(f, alt, 2, &kids[1]));
         const char* ns[] = {"users", "1"};
         ok(mnemo_filter_namespace(f, MNEMO_OP_NAMESPACE_UNDER, ns, 2, &kids[2]));
         const char* key[] = {"k13"};
         ok(mnemo_filter_keys(f, key, 1, &node));
         ok(mnemo_filter_not(f, node, &kids[3]));
         ok(mnemo_filter_and(f, kids, 4, &node));
       }},
      {"--where 'score between 1 and 2.5 or ok = true'",
       [](mnemo_filter* f) {
         uint32_t kids[2], node = 0;
         kids[0] = attr(f, "score", MNEMO_OP_BETWEEN, {num(1), dbl(2.5)});
         kids[1] = attr(f, "ok", MNEMO_OP_EQ, {flag(true)});
         ok(mnemo_filter_or(f, kids, 2, &node));
       }},
      {R"(--where-json '{"lang": {"$in": ["de", "fr"]}, "$tags": {"$all": ["even", "t2"]}}')",
       [](mnemo_filter* f) {
         uint32_t kids[2], node = 0;
         const char* tags[] = {"even", "t2"};
         ok(mnemo_filter_tags(f, MNEMO_OP_ALL, tags, 2, &kids[0]));
         kids[1] = attr(f, "lang", MNEMO_OP_IN, {str("de"), str("fr")});
         ok(mnemo_filter_and(f, kids, 2, &node));
       }},
      // Both forms: a memory must match each.
      {R"(--where 'tag:odd' --where-json '{"year": {"$lt": 2010}}')",
       [](mnemo_filter* f) {
         uint32_t kids[2], node = 0;
         const char* odd[] = {"odd"};
         ok(mnemo_filter_tags(f, MNEMO_OP_ANY, odd, 1, &kids[0]));
         kids[1] = attr(f, "year", MNEMO_OP_LT, {num(2010)});
         ok(mnemo_filter_and(f, kids, 2, &node));
       }},
      // Fewer matches than k: padding rows are left out of the TSV.
      {"--where 'id:5,17,250'",
       [](mnemo_filter* f) {
         cli::AVec<uint64_t> ids = {5, 17, 250};
         uint32_t node = 0;
         ok(mnemo_filter_ids(f, ids.data(), 3, &node));
       }},
  };
  for (const auto& c : cases) {
    ASSERT_EQ(
        run("search --store '" + store + "' --queries '" + q + "' --k " + std::to_string(k) + " " + c.args, out, err),
        0)
        << c.args << ": " << slurp(err);
    mnemo_filter* f = nullptr;
    ok(mnemo_filter_create(&f));
    c.build(f);
    mnemo_search_options so = mnemo_search_options_default();
    so.where = f;
    cli::AVec<uint64_t> ids(nq * k);
    cli::AVec<float> scores(nq * k);
    ok(mnemo_store_search(s, qa.data(), nq, k, &so, ids.data(), scores.data()));
    uint64_t written = 0, total = 0;
    ok(mnemo_store_select(s, f, 0, 0, nullptr, &written, &total));
    mnemo_filter_destroy(f);
    EXPECT_GT(total, 0u) << c.args;
    EXPECT_EQ(slurp(out), tsv(ids, scores, nq, k)) << c.args;
    EXPECT_NE(slurp(err).find(std::to_string(total) + " of 300 memories match"), std::string::npos) << slurp(err);
  }

  // A malformed expression: status 2, the column and a caret, nothing read.
  EXPECT_EQ(run("search --store '" + store + "' --queries '" + q + "' --k 3 --where 'year >= and ok'", out, err), 2);
  const std::string e = slurp(err);
  EXPECT_NE(e.find("--where: column 9: expected a value after '>='"), std::string::npos) << e;
  EXPECT_NE(e.find("  year >= and ok\n          ^"), std::string::npos) << e;
  EXPECT_EQ(
      run("search --store '" + store + "' --queries '" + q + "' --k 3 --where-json '{\"a\": {\"$x\": 1}}'", out, err),
      2);
  EXPECT_NE(slurp(err).find("--where-json: at a.$x: unknown operator"), std::string::npos) << slurp(err);
  // A filter the library refuses while it is built (nested past 256
  // levels): status 1 and its message.
  std::string deep;
  for (int i = 0; i < 300; ++i) deep += "not ";
  EXPECT_EQ(run("search --store '" + store + "' --queries '" + q + "' --k 3 --where '" + deep + "tag:x'", out, err), 1);
  EXPECT_NE(slurp(err).find("--where: MNEMO_E_INVALID_ARGUMENT"), std::string::npos) << slurp(err);
  EXPECT_NE(slurp(err).find("256"), std::string::npos) << slurp(err);
  // A fields file with a line too few, and a key the library refuses.
  put(scratch("short.jsonl"), "{}\n");
  EXPECT_EQ(run("build --input '" + b + "' --fields '" + scratch("short.jsonl") + "' --out '" + store + "'", out, err),
            1);
  EXPECT_NE(slurp(err).find("--fields holds 1 lines for 300 rows"), std::string::npos) << slurp(err);
  std::string long_key;
  for (uint64_t i = 0; i < n; ++i) long_key += i == 7 ? "{\"key\": \"" + std::string(1025, 'k') + "\"}\n" : "{}\n";
  put(scratch("long.jsonl"), long_key);
  EXPECT_EQ(run("build --input '" + b + "' --fields '" + scratch("long.jsonl") + "' --out '" + store + "'", out, err),
            1);
  EXPECT_NE(slurp(err).find("fields[j] is row 0 + j"), std::string::npos) << slurp(err);
  EXPECT_NE(slurp(err).find("fields[7].key"), std::string::npos) << slurp(err);
  mnemo_store_destroy(s);
  mnemo_runtime_destroy(rt);
}

#endif  // MNEMO_CLI_PATH

}  // namespace
