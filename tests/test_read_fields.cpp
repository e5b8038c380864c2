// mnemo_store_read_fields: a read of some fields of each memory (and of its
// time and importance or not) gives exactly those of a full read
// (mnemo_store_read), `set` naming the ones read that the memory has; bad
// arguments are refused with a status and a message, leaving *out as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fields_check.h"

namespace {

using namespace mt::fields;

struct RecordsPtr {
  mnemo_records* r = nullptr;
  ~RecordsPtr() { mnemo_records_destroy(r); }
};

std::vector<std::string> strings(const char* const* v, uint32_t n) { return std::vector<std::string>(v, v + n); }

TEST(ReadFields, EachMaskGivesThoseFieldsOfTheFullRead) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 60, 4, mt::rt());
  mt::Buf<uint64_t> ids(fx.mems.size() + 1);
  for (size_t i = 0; i < fx.mems.size(); ++i) ids[i] = fx.mems[i].id;
  ids[fx.mems.size()] = 987654;  // not in the store
  const uint64_t n = fx.mems.size() + 1;
  RecordsPtr full;
  ASSERT_EQ(mnemo_store_read(fx.store.get(), ids.data(), n, &full.r), MNEMO_OK);
  for (uint32_t mask = 0; mask <= (MNEMO_FIELD_ALL | MNEMO_READ_META); ++mask) {
    if (mask > MNEMO_FIELD_ALL && mask < MNEMO_READ_META) continue;
    RecordsPtr part;
    ASSERT_EQ(mnemo_store_read_fields(fx.store.get(), ids.data(), n, mask, &part.r), MNEMO_OK) << mnemo_last_error();
    ASSERT_EQ(mnemo_records_count(part.r), n);
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t found_a = 9, found_b = 9;
      uint64_t id_a = 0, id_b = 0;
      double time_a = -1, time_b = -2;
      float imp_a = -1, imp_b = -2;
      mnemo_memory_fields a = mnemo_memory_fields_default(), b = mnemo_memory_fields_default();
      ASSERT_EQ(mnemo_records_get(full.r, i, &found_a, &id_a, &a, &time_a, &imp_a), MNEMO_OK);
      ASSERT_EQ(mnemo_records_get(part.r, i, &found_b, &id_b, &b, &time_b, &imp_b), MNEMO_OK);
      ASSERT_EQ(found_a, found_b);
      if (!found_a) continue;
      EXPECT_EQ(id_a, id_b);
      const bool meta = mask & MNEMO_READ_META;
      EXPECT_EQ(time_b, meta ? time_a : 0.0);
      EXPECT_EQ(imp_b, meta ? imp_a : 0.0f);
      EXPECT_EQ(b.set, a.set & mask) << "mask " << mask << ", memory " << id_a;
      const bool key = mask & MNEMO_FIELD_KEY, ns = mask & MNEMO_FIELD_NAMESPACE, tags = mask & MNEMO_FIELD_TAGS,
                 attrs = mask & MNEMO_FIELD_ATTRIBUTES, payload = mask & MNEMO_FIELD_PAYLOAD;
      EXPECT_EQ(b.key ? std::string(b.key) : "", key && a.key ? std::string(a.key) : "");
      EXPECT_EQ(strings(b.namespace_parts, b.namespace_depth),
                ns ? strings(a.namespace_parts, a.namespace_depth) : std::vector<std::string>());
      EXPECT_EQ(strings(b.tags, b.tag_count), tags ? strings(a.tags, a.tag_count) : std::vector<std::string>());
      ASSERT_EQ(b.attribute_count, attrs ? a.attribute_count : 0u);
      for (uint32_t j = 0; j < b.attribute_count; ++j) {
        EXPECT_STREQ(b.attributes[j].name, a.attributes[j].name);
        EXPECT_EQ(b.attributes[j].value.type, a.attributes[j].value.type);
      }
      ASSERT_EQ(b.payload_bytes, payload ? a.payload_bytes : 0u);
      if (b.payload_bytes) {
        EXPECT_EQ(std::memcmp(b.payload, a.payload, b.payload_bytes), 0);
      }
    }
  }
}

TEST(ReadFields, BadArgumentsAreRefusedAndLeaveOutAsItWas) {
  auto g = mt::rng_for_test();
  Fixture fx = make_fixture(g, 10, 4, mt::rt());
  mt::Buf<uint64_t> ids(2);
  ids[0] = fx.mems[0].id, ids[1] = fx.mems[1].id;
  mnemo_records* const sentinel = reinterpret_cast<mnemo_records*>(0x10);
  mnemo_records* out = sentinel;
  auto refused = [&](mnemo_status got, mnemo_status want, const char* words) {
    EXPECT_EQ(got, want);
    EXPECT_EQ(out, sentinel);
    const std::string text = mnemo_last_error();
    EXPECT_NE(text.find("mnemo_store_read_fields"), std::string::npos) << text;
    EXPECT_NE(text.find(words), std::string::npos) << text;
  };
  refused(mnemo_store_read_fields(fx.store.get(), ids.data(), 2, MNEMO_FIELD_ALL + 1, &out), MNEMO_E_INVALID_ARGUMENT,
          "MNEMO_FIELD_ALL | MNEMO_READ_META");
  refused(mnemo_store_read_fields(fx.store.get(), ids.data(), 2, MNEMO_READ_META << 1, &out), MNEMO_E_INVALID_ARGUMENT,
          "fields");
  refused(mnemo_store_read_fields(fx.store.get(), ids.data(), 2, 0x80000000u | MNEMO_FIELD_KEY, &out),
          MNEMO_E_INVALID_ARGUMENT, "fields");
  refused(mnemo_store_read_fields(nullptr, ids.data(), 2, MNEMO_FIELD_KEY, &out), MNEMO_E_NULL_POINTER, "store");
  refused(mnemo_store_read_fields(fx.store.get(), nullptr, 2, MNEMO_FIELD_KEY, &out), MNEMO_E_NULL_POINTER, "ids");
  refused(mnemo_store_read_fields(fx.store.get(),
                                  reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(ids.data()) + 4), 1,
                                  MNEMO_FIELD_KEY, &out),
          MNEMO_E_MISALIGNED, "ids");
  EXPECT_EQ(mnemo_store_read_fields(fx.store.get(), ids.data(), 2, MNEMO_FIELD_KEY, nullptr), MNEMO_E_NULL_POINTER);
  // No ids: an empty set of records; unknown ids: entries not found.
  RecordsPtr none;
  ASSERT_EQ(mnemo_store_read_fields(fx.store.get(), nullptr, 0, MNEMO_FIELD_KEY, &none.r), MNEMO_OK);
  EXPECT_EQ(mnemo_records_count(none.r), 0u);
  ids[0] = 5555555, ids[1] = MNEMO_NO_ID;
  RecordsPtr unknown;
  ASSERT_EQ(mnemo_store_read_fields(fx.store.get(), ids.data(), 2, MNEMO_FIELD_KEY, &unknown.r), MNEMO_OK);
  for (uint64_t i = 0; i < 2; ++i) {
    uint32_t found = 9;
    ASSERT_EQ(mnemo_records_get(unknown.r, i, &found, nullptr, nullptr, nullptr, nullptr), MNEMO_OK);
    EXPECT_EQ(found, 0u);
  }
  // The store is as it was.
  uint64_t count = 0;
  ASSERT_EQ(mnemo_store_count(fx.store.get(), &count), MNEMO_OK);
  EXPECT_EQ(count, fx.mems.size());
}

}  // namespace
