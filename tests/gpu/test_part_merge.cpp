// The GPU merge of per-shard result lists (select/part_merge.cu) against the
// library's host merge (mnemo_topk_merge) on random sorted lists: 2 to 8
// parts, k from 1 to 1025, lists filled to random depths with padding after
// (a kNoId id, a NaN score, or both), ties in the scores, both orders, and
// outputs poisoned first. Skips where no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mnemo.h"
#include "select/part_merge.h"

namespace {

struct Entry {
  float score;
  uint64_t id;
};

template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(size_t n) { cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};

bool gpu_usable() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(GpuPartMerge, MatchesTheHostMerge) {
  if (!gpu_usable()) GTEST_SKIP() << "no usable GPU";
  std::mt19937_64 rng(std::random_device{}());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const uint32_t parts : {2u, 3u, 4u, 8u}) {
    for (const uint64_t nq : {uint64_t{1}, uint64_t{7}, uint64_t{33}}) {
      for (const uint64_t k : {uint64_t{1}, uint64_t{10}, uint64_t{100}, uint64_t{1025}}) {
        for (const bool lower : {false, true}) {
          const std::string what = std::to_string(parts) + " parts, nq " + std::to_string(nq) + ", k " +
                                   std::to_string(k) + (lower ? ", lower first" : ", higher first");
          const uint64_t per = nq * k;
          std::vector<uint64_t> ids(parts * per);
          std::vector<float> scores(parts * per);
          std::vector<int32_t> statuses(parts);
          uint64_t next_id = rng() % 1000;
          for (uint32_t p = 0; p < parts; ++p) {
            statuses[p] = (rng() % 4 == 0) ? MNEMO_E_NON_FINITE : MNEMO_OK;
            for (uint64_t q = 0; q < nq; ++q) {
              // Depths 0..k, full lists often; a few distinct score values
              // give ties across parts.
              const uint64_t depth = rng() % 3 == 0 ? k : rng() % (k + 1);
              std::vector<Entry> list(depth);
              for (auto& e : list) {
                e.score = static_cast<float>(static_cast<int>(rng() % 64) - 32) / 8.0f;
                if (rng() % 16 == 0) e.score = -0.0f;
                e.id = next_id;
                next_id += 1 + rng() % 5;
              }
              std::sort(list.begin(), list.end(), [lower](const Entry& a, const Entry& b) {
                const float ka = lower ? -a.score : a.score, kb = lower ? -b.score : b.score;
                return ka > kb || (ka == kb && a.id < b.id);
              });
              for (uint64_t j = 0; j < k; ++j) {
                const uint64_t at = (p * nq + q) * k + j;
                if (j < depth) {
                  ids[at] = list[j].id;
                  scores[at] = list[j].score;
                } else {
                  const int kind = static_cast<int>(rng() % 3);
                  ids[at] = kind == 1 ? 12345 : MNEMO_NO_ID;
                  scores[at] = kind == 2 ? 1.0f : nan;
                }
              }
            }
          }
          std::vector<uint64_t> want_ids(per);
          std::vector<float> want_scores(per);
          ASSERT_EQ(mnemo_topk_merge(lower ? MNEMO_METRIC_L2SQ : MNEMO_METRIC_DOT, parts, nq, k, ids.data(),
                                     scores.data(), want_ids.data(), want_scores.data()),
                    MNEMO_OK)
              << mnemo_last_error();
          Dev<uint64_t> d_ids(parts * per), d_out_ids(per);
          Dev<float> d_scores(parts * per), d_out_scores(per);
          Dev<int32_t> d_statuses(parts), d_status(4);
          cudaMemcpy(d_ids.p, ids.data(), parts * per * 8, cudaMemcpyHostToDevice);
          cudaMemcpy(d_scores.p, scores.data(), parts * per * 4, cudaMemcpyHostToDevice);
          cudaMemcpy(d_statuses.p, statuses.data(), parts * 4, cudaMemcpyHostToDevice);
          cudaMemset(d_out_ids.p, 0xAB, per * 8);
          cudaMemset(d_out_scores.p, 0xAB, per * 4);
          cudaMemset(d_status.p, 0x5A, 16);
          mnemo::cuda::launch_merge_parts(d_ids.p, d_scores.p, parts, nq, k, lower, d_out_ids.p, d_out_scores.p,
                                          d_statuses.p, d_status.p, nullptr);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          std::vector<uint64_t> got_ids(per);
          std::vector<float> got_scores(per);
          int32_t status = -1;
          cudaMemcpy(got_ids.data(), d_out_ids.p, per * 8, cudaMemcpyDeviceToHost);
          cudaMemcpy(got_scores.data(), d_out_scores.p, per * 4, cudaMemcpyDeviceToHost);
          cudaMemcpy(&status, d_status.p, 4, cudaMemcpyDeviceToHost);
          for (uint64_t i = 0; i < per; ++i) {
            ASSERT_EQ(got_ids[i], want_ids[i]) << what << ": query " << i / k << " place " << i % k;
            ASSERT_EQ(0, std::memcmp(&got_scores[i], &want_scores[i], 4))
                << what << ": score bits, query " << i / k << " place " << i % k;
          }
          int32_t want_status = MNEMO_OK;
          for (int32_t s : statuses)
            if (s != MNEMO_OK) {
              want_status = s;
              break;
            }
          EXPECT_EQ(status, want_status) << what;
        }
      }
    }
  }
}

// Without a status word the merge leaves the statuses alone; an empty
// batch writes only the status.
TEST(GpuPartMerge, StatusOnly) {
  if (!gpu_usable()) GTEST_SKIP() << "no usable GPU";
  Dev<int32_t> d_statuses(2), d_status(4);
  const int32_t st[2] = {MNEMO_OK, MNEMO_E_NON_FINITE};
  cudaMemcpy(d_statuses.p, st, 8, cudaMemcpyHostToDevice);
  cudaMemset(d_status.p, 0x5A, 16);
  mnemo::cuda::launch_merge_parts(nullptr, nullptr, 2, 0, 10, false, nullptr, nullptr, d_statuses.p, d_status.p,
                                  nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int32_t got = -1;
  cudaMemcpy(&got, d_status.p, 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(got, MNEMO_E_NON_FINITE);
}

}  // namespace
