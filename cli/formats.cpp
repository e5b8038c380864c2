// Picks the reader by file extension.
#include "formats.h"

namespace cli {

FloatRows read_vectors(const std::string& path) {
  if (ends_with(path, ".fvecs")) return read_fvecs(path);
  if (ends_with(path, ".bvecs")) return read_bvecs(path);
  if (ends_with(path, ".fbin")) return read_fbin(path);
  if (ends_with(path, ".npy")) return read_npy(path);
  throw Error("'" + path + "': unknown vector format (use .fvecs, .bvecs, .fbin or .npy)");
}

IntRows read_ints(const std::string& path) {
  if (ends_with(path, ".ivecs")) return read_ivecs(path);
  if (ends_with(path, ".ibin")) return read_ibin(path);
  throw Error("'" + path + "': unknown id-list format (use .ivecs or .ibin)");
}

}  // namespace cli
