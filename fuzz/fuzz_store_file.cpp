// Store files given to mnemo_store_open: raw bytes, or a valid image built
// from the input and then mutated (bytes flipped or set, cut, grown), with
// checksums repaired or not. An image the format accepts must open to
// exactly its contents; any other must give MNEMO_E_CORRUPT and no store.
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <map>

#include "fuzz_support.h"
#include "reference.h"
#include "store_image.h"

namespace {

// The newest format version this library writes: read from a file it saves.
uint32_t library_version(mnemo_runtime* rt) {
  static const uint32_t v = [rt] {
    mnemo_store* s = nullptr;
    FZ_CHECK(mnemo_store_create(rt, 1, MNEMO_DTYPE_F32, MNEMO_METRIC_DOT, &s) == MNEMO_OK, "create");
    const std::string path = fz::scratch_dir() + "/version.mnemo";
    FZ_CHECK(mnemo_store_save(s, path.c_str()) == MNEMO_OK, "save of an empty store");
    mnemo_store_destroy(s);
    std::ifstream f(path, std::ios::binary);
    char head[12] = {};
    f.read(head, sizeof head);
    ::unlink(path.c_str());
    uint32_t version = 0;
    std::memcpy(&version, head + 8, 4);
    FZ_CHECK(version == 1 || version == 2,
             "store files of format version " + std::to_string(version) + ": teach fuzz/store_image.cpp that format");
    return version;
  }();
  return v;
}

fz::StoreImage random_image(FuzzedDataProvider& fdp, uint32_t max_version) {
  fz::StoreImage s;
  s.version = fdp.ConsumeIntegralInRange<uint32_t>(1, max_version);
  if (s.version == 2) s.seq = fdp.ConsumeIntegral<uint64_t>();
  s.dim = fdp.ConsumeIntegralInRange<uint64_t>(1, 9);
  s.dtype = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_DTYPE_F32, MNEMO_DTYPE_BF16);
  s.metric = fdp.ConsumeIntegralInRange<int32_t>(MNEMO_METRIC_COSINE, MNEMO_METRIC_L2SQ);
  const size_t count = fdp.ConsumeIntegralInRange<size_t>(0, 6);
  const size_t es = fz::dtype_bytes(s.dtype);
  s.vectors.resize(count * s.dim * es);
  for (size_t i = 0; i < count; ++i) {
    // Distinct ids unless the input asks for a repeat.
    s.ids.push_back(fdp.ConsumeIntegralInRange<int>(0, 15) ? i * 7 + 3 : fdp.ConsumeIntegral<uint64_t>());
    s.biases.push_back(static_cast<float>(fdp.ConsumeIntegralInRange<int>(-8, 8)) / 4.0f);
    for (uint64_t j = 0; j < s.dim; ++j) {
      float v = fz::hurt_float(fdp);
      // Keep the f16 image finite: a value beyond its range is a mutation's job.
      if (s.dtype == MNEMO_DTYPE_F16 && !(std::fabs(v) < 65504.0f)) v = std::copysign(65504.0f, v);
      if (s.dtype == MNEMO_DTYPE_BF16 && !(std::fabs(v) < 3.38e38f)) v = std::copysign(3.38e38f, v);
      fz::put_elem(s.vectors.data(), s.dtype, i * s.dim + j, v);
    }
  }
  return s;
}

void mutate(FuzzedDataProvider& fdp, std::string& b) {
  const int n = fdp.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < n && !b.empty(); ++i) {
    const size_t pos = fdp.ConsumeIntegralInRange<size_t>(0, b.size() - 1);
    switch (fdp.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: b[pos] = static_cast<char>(b[pos] ^ (1 << fdp.ConsumeIntegralInRange<int>(0, 7))); break;
      case 1: b[pos] = static_cast<char>(fdp.ConsumeIntegral<uint8_t>()); break;
      case 2: b.resize(pos); break;
      case 3: b.insert(pos, fdp.ConsumeBytesAsString(fdp.ConsumeIntegralInRange<size_t>(1, 16))); break;
      case 4: {  // an 8-byte field (a count, a size, an id) set to a chosen value
        const uint64_t v =
            fdp.ConsumeBool() ? fdp.ConsumeIntegral<uint64_t>() : fdp.ConsumeIntegralInRange<uint64_t>(0, 70000);
        const size_t at = std::min(pos, b.size() >= 8 ? b.size() - 8 : 0);
        if (b.size() >= 8) std::memcpy(&b[at], &v, 8);
        break;
      }
      default: b.erase(pos, fdp.ConsumeIntegralInRange<size_t>(1, 16)); break;
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// What a store holds, element by element: id -> (vector bytes, bias bits).
std::map<uint64_t, std::pair<std::string, uint32_t>> contents(const fz::StoreImage& s) {
  std::map<uint64_t, std::pair<std::string, uint32_t>> m;
  const size_t row = s.dim * fz::dtype_bytes(s.dtype);
  for (size_t i = 0; i < s.ids.size(); ++i) {
    uint32_t bias;
    std::memcpy(&bias, &s.biases[i], 4);
    m[s.ids[i]] = {std::string(reinterpret_cast<const char*>(s.vectors.data()) + i * row, row), bias};
  }
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  mnemo_runtime* rt = fz::cpu_runtime(true);
  const uint32_t max_version = library_version(rt);
  std::string bytes;
  const int mode = fdp.ConsumeIntegralInRange<int>(0, 3);
  if (mode == 0) {
    bytes = fdp.ConsumeRemainingBytesAsString();
  } else {
    bytes = fz::write_image(random_image(fdp, max_version));
    mutate(fdp, bytes);
    if (mode >= 2) fz::fix_checksums(bytes);
  }
  fz::StoreImage want;
  std::string why;
  const bool valid = fz::parse_image(bytes, &want, &why, max_version);

  const std::string path = fz::scratch_dir() + "/load.mnemo";
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    FZ_CHECK(f.good(), "cannot write " + path);
  }
  mnemo_store* const sentinel = reinterpret_cast<mnemo_store*>(0x30);
  mnemo_store* s = sentinel;
  const mnemo_status st = mnemo_store_open(rt, path.c_str(), &s);
  ::unlink(path.c_str());
  FZ_CHECK(fz::defined_status(st), "undefined status " + std::to_string(st));
  if (!valid) {
    FZ_CHECK(st == MNEMO_E_CORRUPT, "an invalid file (" + why + ") opened with " + fz::status_text(st));
    FZ_CHECK(s == sentinel, "a failed open wrote *out");
    FZ_CHECK(std::strstr(mnemo_last_error(), path.c_str()) != nullptr, "the message does not name the file");
    return 0;
  }
  FZ_CHECK(st == MNEMO_OK, "a valid file was refused: " + fz::status_text(st));
  // Everything the file holds, and nothing else: save the store again and
  // compare what that file holds.
  uint64_t dim = 0, count = 0;
  int32_t dtype = 0, metric = 0;
  FZ_CHECK(mnemo_store_shape(s, &dim, &dtype, &metric) == MNEMO_OK, "shape");
  FZ_CHECK(dim == want.dim && dtype == want.dtype && metric == want.metric, "shape differs from the file");
  FZ_CHECK(mnemo_store_count(s, &count) == MNEMO_OK && count == want.ids.size(), "count differs from the file");
  const std::string again = fz::scratch_dir() + "/again.mnemo";
  FZ_CHECK(mnemo_store_save(s, again.c_str()) == MNEMO_OK, "save of a loaded store: " + fz::status_text(st));
  fz::StoreImage got;
  const bool ok = fz::parse_image(read_file(again), &got, &why, max_version);
  ::unlink(again.c_str());
  FZ_CHECK(ok, "a loaded store saved an invalid file: " + why);
  FZ_CHECK(contents(got) == contents(want), "the loaded store differs from the file");
  if (count > 0) {
    // It answers a search over all of its vectors.
    fz::Buf q(dim * 4), ids(count * 8), sc(count * 4);
    for (uint64_t j = 0; j < dim; ++j) q.as<float>()[j] = 1.0f;
    const mnemo_status ss = mnemo_store_search(s, q.as<float>(), 1, count, nullptr, ids.as<uint64_t>(), sc.as<float>());
    FZ_CHECK(ss == MNEMO_OK, "search of a loaded store: " + fz::status_text(ss));
  }
  mnemo_store_destroy(s);
  return 0;
}
