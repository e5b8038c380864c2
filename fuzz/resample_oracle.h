// The resampling rule of mnemo.h as a plain check, shared by the resampling
// and precision harnesses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fz {

// Checks the output of a successful mnemo_resample: targets past their
// valid length are zero, end and repeated-time targets are exact copies of a
// sample, interpolated ones are within the reference bound of
// a + w (b - a) (w from the exact times). Times are given as doubles
// ([batch x n_src] and [batch x n_tgt]); lengths may be empty (full rows).
// Returns "" or what is wrong.
std::string check_resample(const std::vector<double>& src_times, const std::vector<double>& tgt_times, const void* data,
                           const void* out, int32_t data_dtype, uint64_t batch, uint64_t n_src, uint64_t dim,
                           uint64_t n_tgt, const std::vector<uint64_t>& src_len, const std::vector<uint64_t>& tgt_len);

}  // namespace fz
