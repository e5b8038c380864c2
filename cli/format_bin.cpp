// big-ann .fbin/.ibin: uint32 rows, uint32 dim, then rows x dim f32 or int32.
#include "file_reader.h"
#include "formats.h"

namespace cli {

namespace {

template <class Out>
void read_bin(const std::string& path, const char* kind, uint64_t& rows, uint64_t& dim, Out& out) {
  FileReader r(path);
  uint32_t n = 0, d = 0;
  r.read(&n, 4, "the row count");
  r.read(&d, 4, "the dimension");
  if (d == 0 || d > kMaxFileDim)
    r.bad("dimension " + std::to_string(d) + " (must be 1 to " + std::to_string(kMaxFileDim) + "): not a ." + kind +
          " file?");
  const uint64_t want = 8 + mul_or_fail(r, mul_or_fail(r, n, d, "rows x dim"), 4, "data size");
  if (want != r.size())
    r.bad("header says " + std::to_string(n) + " rows x " + std::to_string(d) + " (" + std::to_string(want) +
          " bytes) but the file has " + std::to_string(r.size()) +
          " bytes: " + (want > r.size() ? "truncated" : "trailing data") + " or not a ." + kind + " file");
  rows = n;
  dim = d;
  out.resize(rows * dim);
  r.read(out.data(), rows * dim * 4, "values");
}

}  // namespace

FloatRows read_fbin(const std::string& path) {
  FloatRows m;
  read_bin(path, "fbin", m.rows, m.dim, m.v);
  return m;
}

IntRows read_ibin(const std::string& path) {
  IntRows m;
  read_bin(path, "ibin", m.rows, m.dim, m.v);
  return m;
}

}  // namespace cli
