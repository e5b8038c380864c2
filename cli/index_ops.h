// The inverted-file index from the command line: --index ivf and its
// training options (build, eval), --nprobe lists (eval) and a one-line
// summary of a store's index.
#pragma once

#include <string>
#include <vector>

#include "common.h"

namespace cli {

// The index options named on the command line: --index (ivf; none or absent
// for no index, unless `implied`), --nlist N (0 or absent: sqrt of the
// count), --train-iters N, --index-seed S. *wanted says whether an index is
// to be built (--index ivf, or implied and not --index none); --nlist,
// --train-iters or --index-seed without one is a UsageError. Automatic
// rebuilds run inside the write (background = 0): a tool run is one process.
mnemo_index_options index_options(const Args& a, bool implied, bool* wanted);
// Builds the index; returns the seconds it took.
double build_index(mnemo_store* s, const mnemo_index_options& o);
// The store's index state (nlist 0: none).
mnemo_index_info index_info(const mnemo_store* s);
// "ivf, 224 lists (largest 512, 0 hot), built in 1.23 s" (the time when it
// was built since the store was opened), or "none".
std::string index_summary(const mnemo_store* s);
// "1,4,16,64": whole numbers from 1 to 2^32 - 1, comma-separated, in the
// order given (nprobe = 0 is the exact scan, which eval always measures).
std::vector<uint32_t> parse_nprobe_list(const std::string& option, const std::string& text);

}  // namespace cli
