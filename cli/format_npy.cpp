// NumPy .npy (format 1.0, 2.0, 3.0): a little-endian f32 ('<f4') or f16
// ('<f2') array of two dimensions in C order. f16 is widened to f32.
#include <cmath>
#include <cstring>
#include <string>

#include "file_reader.h"
#include "formats.h"

namespace cli {

namespace {

float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -24);  // zero, subnormal
  if (exp == 31) return man ? NAN : sign * INFINITY;
  return sign * std::ldexp(static_cast<float>(man | 0x400), exp - 25);
}

// The value text after 'key': in the header dict.
std::string field(const FileReader& r, const std::string& header, const std::string& key) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) r.bad("npy header has no '" + key + "'");
  size_t p = header.find(':', k);
  if (p == std::string::npos) r.bad("npy header: malformed '" + key + "'");
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t e = p;
  if (p < header.size() && header[p] == '(') {
    e = header.find(')', p);
    if (e == std::string::npos) r.bad("npy header: unclosed shape");
    return header.substr(p, e - p + 1);
  }
  while (e < header.size() && header[e] != ',' && header[e] != '}') ++e;
  return header.substr(p, e - p);
}

}  // namespace

FloatRows read_npy(const std::string& path) {
  FileReader r(path);
  char magic[8];
  r.read(magic, 8, "the npy magic");
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0) r.bad("not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  uint64_t hlen = 0;
  if (major == 1) {
    uint16_t h = 0;
    r.read(&h, 2, "the npy header length");
    hlen = h;
  } else if (major == 2 || major == 3) {
    uint32_t h = 0;
    r.read(&h, 4, "the npy header length");
    hlen = h;
  } else {
    r.bad("unknown npy format version " + std::to_string(major));
  }
  if (hlen > (1u << 20)) r.bad("npy header of " + std::to_string(hlen) + " bytes is implausible");
  std::string header(hlen, '\0');
  r.read(header.data(), hlen, "the npy header");
  const std::string descr = field(r, header, "descr");
  size_t item = 0;
  if (descr == "'<f4'")
    item = 4;
  else if (descr == "'<f2'")
    item = 2;
  else
    r.bad("npy dtype " + descr + " is not supported (use little-endian float32 '<f4' or float16 '<f2')");
  if (field(r, header, "fortran_order") != "False") r.bad("npy array is in Fortran order (save it in C order)");
  const std::string shape = field(r, header, "shape");
  uint64_t dims[3] = {0, 0, 0};
  int nd = 0;
  for (size_t p = 1; p < shape.size();) {
    while (p < shape.size() && (shape[p] == ' ' || shape[p] == ',')) ++p;
    if (p >= shape.size() || shape[p] == ')') break;
    size_t e = p;
    uint64_t v = 0;
    while (e < shape.size() && shape[e] >= '0' && shape[e] <= '9') {
      if (v > (UINT64_MAX - 9) / 10) r.bad("npy shape overflows");
      v = v * 10 + static_cast<uint64_t>(shape[e] - '0');
      ++e;
    }
    if (e == p || nd == 3) r.bad("npy shape " + shape + " is malformed or has more than two dimensions");
    dims[nd++] = v;
    p = e;
  }
  if (nd != 2) r.bad("npy shape " + shape + " must have two dimensions (rows, dim)");
  if (dims[1] == 0 || dims[1] > kMaxFileDim)
    r.bad("npy dimension " + std::to_string(dims[1]) + " must be 1 to " + std::to_string(kMaxFileDim));
  const uint64_t bytes = mul_or_fail(r, mul_or_fail(r, dims[0], dims[1], "rows x dim"), item, "data size");
  if (bytes != r.size() - r.pos())
    r.bad("shape " + shape + " needs " + std::to_string(bytes) + " bytes of data but the file holds " +
          std::to_string(r.size() - r.pos()) + ": " + (bytes > r.size() - r.pos() ? "truncated" : "trailing data"));
  FloatRows m;
  m.rows = dims[0];
  m.dim = dims[1];
  m.v.resize(m.rows * m.dim);
  if (item == 4) {
    r.read(m.v.data(), bytes, "values");
  } else {
    std::vector<uint16_t> h(m.rows * m.dim);
    r.read(h.data(), bytes, "values");
    for (size_t i = 0; i < h.size(); ++i) m.v[i] = half_to_float(h[i]);
  }
  return m;
}

}  // namespace cli
