// The CLI's file readers: each format read back exactly, and malformed files
// (empty, truncated, wrong sizes, inconsistent rows, bad headers) refused
// with an error that names the file, never a crash or a partial read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "formats.h"

namespace {

std::string scratch(const std::string& name) {
  static const std::string dir = [] {
    char t[] = "/tmp/mnemo_cli_XXXXXX";
    const char* p = mkdtemp(t);
    return std::string(p ? p : "/tmp");
  }();
  return dir + "/" + name;
}

void put(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
void app(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Refused with cli::Error whose message names the file and contains `why`.
void expect_refused(const std::function<void()>& read, const std::string& path, const std::string& why) {
  try {
    read();
    ADD_FAILURE() << path << ": malformed file accepted (" << why << ")";
  } catch (const cli::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << "message '" << m << "' lacks '" << why << "'";
  }
}

std::vector<float> random_values(size_t n) {
  std::mt19937 rng(static_cast<unsigned>(n * 7919 + 1));
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// rows x dim TexMex file with element type T.
template <class T>
std::string vecs_bytes(size_t rows, size_t dim, const std::vector<T>& v) {
  std::string b;
  for (size_t i = 0; i < rows; ++i) {
    app<int32_t>(b, static_cast<int32_t>(dim));
    b.append(reinterpret_cast<const char*>(v.data() + i * dim), dim * sizeof(T));
  }
  return b;
}

TEST(CliFormats, FvecsReadsBackAndRefusesMalformedFiles) {
  const size_t rows = 7, dim = 13;
  const std::vector<float> v = random_values(rows * dim);
  const std::string good = vecs_bytes(rows, dim, v), path = scratch("a.fvecs");
  put(path, good);
  const cli::FloatRows m = cli::read_vectors(path);
  ASSERT_EQ(m.rows, rows);
  ASSERT_EQ(m.dim, dim);
  EXPECT_EQ(std::memcmp(m.v.data(), v.data(), v.size() * 4), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.v.data()) % 16, 0u);

  auto rd = [&] { cli::read_fvecs(path); };
  put(path, "");
  expect_refused(rd, path, "empty");
  for (size_t cut : {size_t{2}, size_t{5}, good.size() - 1, good.size() - 4 * dim}) {
    put(path, good.substr(0, cut));
    expect_refused(rd, path, cut < 4 ? "truncated" : "whole number of rows");
  }
  std::string b = good;
  const int32_t other = dim + 1;
  std::memcpy(&b[3 * (4 + 4 * dim)], &other, 4);  // row 3 claims another dimension
  put(path, b);
  expect_refused(rd, path, "row 3 has dimension 14");
  for (int32_t d : {0, -5, 1 << 20}) {
    b = good;
    std::memcpy(&b[0], &d, 4);
    put(path, b);
    expect_refused(rd, path, "first row has dimension " + std::to_string(d));
  }
}

TEST(CliFormats, IvecsAndBvecs) {
  const size_t rows = 5, dim = 9;
  std::vector<int32_t> iv(rows * dim);
  std::vector<uint8_t> bv(rows * dim);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>(i * 37 % 1001) - 300, bv[i] = (i * 53) % 256;
  const std::string ip = scratch("a.ivecs"), bp = scratch("a.bvecs");
  put(ip, vecs_bytes(rows, dim, iv));
  put(bp, vecs_bytes(rows, dim, bv));
  const cli::IntRows im = cli::read_ints(ip);
  ASSERT_EQ(im.rows, rows);
  ASSERT_EQ(im.dim, dim);
  EXPECT_EQ(im.v, iv);
  const cli::FloatRows bm = cli::read_vectors(bp);
  ASSERT_EQ(bm.rows, rows);
  for (size_t i = 0; i < bv.size(); ++i) EXPECT_EQ(bm.v[i], static_cast<float>(bv[i]));

  const std::string ib = vecs_bytes(rows, dim, iv), bb = vecs_bytes(rows, dim, bv);
  put(ip, ib.substr(0, ib.size() - 3));
  expect_refused([&] { cli::read_ivecs(ip); }, ip, "whole number of rows");
  put(bp, bb.substr(0, bb.size() - 1));
  expect_refused([&] { cli::read_bvecs(bp); }, bp, "whole number of rows");
  // A .fvecs read as .bvecs has a size that does not fit its rows.
  put(bp, vecs_bytes(3, 4, random_values(12)));
  expect_refused([&] { cli::read_bvecs(bp); }, bp, "whole number of rows");
}

TEST(CliFormats, FbinAndIbin) {
  const uint32_t rows = 6, dim = 11;
  const std::vector<float> v = random_values(rows * dim);
  std::string b;
  app(b, rows);
  app(b, dim);
  b.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  const std::string fp = scratch("a.fbin"), ipath = scratch("a.ibin");
  put(fp, b);
  const cli::FloatRows m = cli::read_vectors(fp);
  ASSERT_EQ(m.rows, rows);
  ASSERT_EQ(m.dim, dim);
  EXPECT_EQ(std::memcmp(m.v.data(), v.data(), v.size() * 4), 0);
  put(ipath, b);
  EXPECT_EQ(cli::read_ints(ipath).rows, rows);

  auto rd = [&] { cli::read_fbin(fp); };
  put(fp, b.substr(0, 6));
  expect_refused(rd, fp, "truncated");
  put(fp, b.substr(0, b.size() - 4));
  expect_refused(rd, fp, "truncated");
  put(fp, b + "xx");
  expect_refused(rd, fp, "trailing data");
  std::string z = b;
  const uint32_t zero = 0, huge = 0xFFFFFFFFu;
  std::memcpy(&z[4], &zero, 4);
  put(fp, z);
  expect_refused(rd, fp, "dimension 0");
  z = b;
  std::memcpy(&z[0], &huge, 4);  // rows claim far more than the file holds
  put(fp, z);
  expect_refused(rd, fp, "truncated");
  put(ipath, b.substr(0, b.size() - 1));
  expect_refused([&] { cli::read_ibin(ipath); }, ipath, "truncated");
}

std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  std::string h = dict;
  const size_t pre = major == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string b = "\x93NUMPY";
  b += static_cast<char>(major);
  b += '\0';
  if (major == 1)
    app<uint16_t>(b, static_cast<uint16_t>(h.size()));
  else
    app<uint32_t>(b, static_cast<uint32_t>(h.size()));
  return b + h + data;
}

TEST(CliFormats, NpyF32AndF16) {
  const size_t rows = 4, dim = 6;
  const std::vector<float> v = random_values(rows * dim);
  const std::string data(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  const std::string p = scratch("a.npy");
  for (int major : {1, 2}) {
    put(p, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }", data, major));
    const cli::FloatRows m = cli::read_vectors(p);
    ASSERT_EQ(m.rows, rows);
    ASSERT_EQ(m.dim, dim);
    EXPECT_EQ(std::memcmp(m.v.data(), v.data(), v.size() * 4), 0);
  }
  // f16: 1.0, -2.5, 0.000061035 (smallest normal), 65504 (largest), a subnormal, zero.
  const uint16_t h[6] = {0x3C00, 0xC100, 0x0400, 0x7BFF, 0x0001, 0x0000};
  put(p, npy("{'descr': '<f2', 'fortran_order': False, 'shape': (1, 6), }",
             std::string(reinterpret_cast<const char*>(h), 12)));
  const cli::FloatRows hm = cli::read_npy(p);
  ASSERT_EQ(hm.dim, 6u);
  EXPECT_EQ(hm.v[0], 1.0f);
  EXPECT_EQ(hm.v[1], -2.5f);
  EXPECT_EQ(hm.v[2], std::ldexp(1.0f, -14));
  EXPECT_EQ(hm.v[3], 65504.0f);
  EXPECT_EQ(hm.v[4], std::ldexp(1.0f, -24));
  EXPECT_EQ(hm.v[5], 0.0f);

  auto rd = [&] { cli::read_npy(p); };
  put(p, "NOTNUMPY" + data);
  expect_refused(rd, p, "bad magic");
  put(p, npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4, 6), }", data));
  expect_refused(rd, p, "not supported");
  put(p, npy("{'descr': '<f4', 'fortran_order': True, 'shape': (4, 6), }", data));
  expect_refused(rd, p, "Fortran");
  put(p, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (24,), }", data));
  expect_refused(rd, p, "two dimensions");
  put(p, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5, 6), }", data));
  expect_refused(rd, p, "truncated");
  put(p, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }", data + "x"));
  expect_refused(rd, p, "trailing data");
  put(p, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 6), }", data));
  expect_refused(rd, p, "overflow");
  const std::string full = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 6), }", data);
  put(p, full.substr(0, 9));
  expect_refused(rd, p, "truncated");
  put(p, full.substr(0, 40));
  expect_refused(rd, p, "truncated");
}

TEST(CliFormats, UnknownExtensionAndMissingFile) {
  expect_refused([] { cli::read_vectors(scratch("x.txt")); }, scratch("x.txt"), "unknown vector format");
  expect_refused([] { cli::read_ints(scratch("x.fvecs")); }, scratch("x.fvecs"), "unknown id-list format");
  expect_refused([] { cli::read_fvecs(scratch("missing.fvecs")); }, scratch("missing.fvecs"), "cannot open");
}

}  // namespace
