// Tensor-map encoding shared by the kernels that load with TMA.
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "device/cuda_util.cuh"
#include "device/tensor_map.h"

namespace mnemo::cuda {

namespace {

// cuTensorMapEncodeTiled from the driver, or null.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

bool tensor_maps_available() { return tensor_map_encoder() != nullptr; }

CUtensorMap row_box_map(const void* base, DType t, uint64_t ld, uint64_t rows, uint32_t box_rows) {
  const size_t esz = dtype_size(t);
  const CUtensorMapDataType type = t == DType::f16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                   : t == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                      : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  const cuuint64_t dims[2] = {ld, rows};
  const cuuint64_t strides[1] = {ld * esz};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / esz), box_rows};
  const cuuint32_t estr[2] = {1, 1};
  CUtensorMap m{};
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) fail(Code::backend, "the CUDA driver cannot encode tensor maps");
  const CUresult r =
      encode(&m, type, 2, const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    fail(Code::backend, "cuTensorMapEncodeTiled failed with " + std::to_string(static_cast<int>(r)));
  return m;
}

}  // namespace mnemo::cuda
