// The one owner of cuBLASLt state (handle, workspace, the algorithm chosen per shape) for
// every matrix product of the CUDA backend: bf16 (or fp32) operands, fp32 accumulation.
#ifndef MT_RUNTIME_CUDA_CUBLASLT_H
#define MT_RUNTIME_CUDA_CUBLASLT_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace mt::cuda {

/// C[batch][m, n] = op(A) @ op(B), row-major like the plan's tensors: A is [m, k] ([k, m] when
/// transposed), B is [k, n] ([n, k] when transposed). Batches are `stride` elements apart
/// (0: the operand is shared by every batch).
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  cudaDataType_t output = CUDA_R_32F; // CUDA_R_32F or CUDA_R_16BF
  cudaDataType_t input = CUDA_R_16BF;  // both operands: CUDA_R_16BF or CUDA_R_32F
  /// Adds a bias vector of n elements, in the output's type, to every row of C in the
  /// product's epilogue: no extra pass over C.
  bool bias = false;
};

class CublasLt {
public:
  explicit CublasLt(size_t workspaceBytes = 64 << 20);
  ~CublasLt();
  CublasLt(const CublasLt &) = delete;
  CublasLt &operator=(const CublasLt &) = delete;

  /// Enqueues C = op(A) @ op(B) (+ bias) on `stream`, or C += op(A) @ op(B) with
  /// `accumulate` (weight gradients summed in place). Throws naming m, n and k when cuBLASLt
  /// has no algorithm.
  void matmul(const MatmulShape &shape, const void *a, const void *b, void *c, bool accumulate,
              cudaStream_t stream, const void *bias = nullptr);

private:
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t,
                         int64_t, int, int, bool, bool>;
  struct Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algorithm{};
  };
  const Plan &planFor(const MatmulShape &shape, bool accumulate);

  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes;
  std::map<Key, Plan> plans;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_CUBLASLT_H
