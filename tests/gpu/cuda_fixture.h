// A test fixture holding a CUDA runtime, or skipping with the reason where
// none can be made: the GPU suites' filtered-search tests share it.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "../support.h"

namespace mt {

class CudaRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    rt_ = cuda_runtime_or_why(&why);
    if (!rt_) GTEST_SKIP() << why;
  }
  RuntimePtr rt_;
};

}  // namespace mt
