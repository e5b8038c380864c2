// TexMex .fvecs/.ivecs/.bvecs: each row is an int32 dimension followed by
// that many f32, int32 or uint8 values; every row must have the same one.
#include <cstring>
#include <fstream>

#include "file_reader.h"
#include "formats.h"

namespace cli {

namespace {

// Reads every row into dst (rows x dim elements of `elem` bytes).
template <class T, class Out>
void read_vecs(const std::string& path, const char* kind, uint64_t& rows, uint64_t& dim, Out& out) {
  FileReader r(path);
  if (r.size() == 0) r.bad(std::string("empty file (a .") + kind + " file holds at least one row)");
  int32_t d = 0;
  r.read(&d, 4, "the first row's dimension");
  if (d <= 0 || static_cast<uint64_t>(d) > kMaxFileDim)
    r.bad("first row has dimension " + std::to_string(d) + " (must be 1 to " + std::to_string(kMaxFileDim) +
          "): not a ." + kind + " file?");
  const uint64_t row_bytes = 4 + static_cast<uint64_t>(d) * sizeof(T);
  if (r.size() % row_bytes != 0)
    r.bad("size " + std::to_string(r.size()) + " is not a whole number of rows of " + std::to_string(row_bytes) +
          " bytes (4 + " + std::to_string(d) + " x " + std::to_string(sizeof(T)) + "): truncated or not a ." + kind +
          " file");
  rows = r.size() / row_bytes;
  dim = static_cast<uint64_t>(d);
  out.resize(rows * dim);
  std::vector<T> row(dim);
  for (uint64_t i = 0; i < rows; ++i) {
    if (i > 0) {
      int32_t di = 0;
      r.read(&di, 4, "a row dimension");
      if (di != d)
        r.bad("row " + std::to_string(i) + " has dimension " + std::to_string(di) + " but the first row has " +
              std::to_string(d));
    }
    r.read(row.data(), dim * sizeof(T), "row values");
    for (uint64_t j = 0; j < dim; ++j) out[i * dim + j] = static_cast<typename Out::value_type>(row[j]);
  }
}

template <class T, class Rows>
void write_vecs(const std::string& path, const Rows& m) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot create '" + path + "'");
  const int32_t d = static_cast<int32_t>(m.dim);
  for (uint64_t i = 0; i < m.rows; ++i) {
    f.write(reinterpret_cast<const char*>(&d), 4);
    f.write(reinterpret_cast<const char*>(m.row(i)), static_cast<std::streamsize>(m.dim * sizeof(T)));
  }
  f.flush();
  if (!f) throw Error("cannot write '" + path + "'");
}

}  // namespace

FloatRows read_fvecs(const std::string& path) {
  FloatRows m;
  read_vecs<float>(path, "fvecs", m.rows, m.dim, m.v);
  return m;
}

FloatRows read_bvecs(const std::string& path) {
  FloatRows m;
  read_vecs<uint8_t>(path, "bvecs", m.rows, m.dim, m.v);
  return m;
}

IntRows read_ivecs(const std::string& path) {
  IntRows m;
  read_vecs<int32_t>(path, "ivecs", m.rows, m.dim, m.v);
  return m;
}

void write_fvecs(const std::string& path, const FloatRows& m) { write_vecs<float>(path, m); }
void write_ivecs(const std::string& path, const IntRows& m) { write_vecs<int32_t>(path, m); }

}  // namespace cli
