// cuBLASLt products for the CUDA backend. Row-major products are column-major products of
// the transposes: C^T = op(B)^T op(A)^T, so B is cuBLASLt's first operand.
#include "runtime/cuda/CublasLt.h"

#include "runtime/cuda/CudaCheck.h"

#include <string>

namespace mt::cuda {

namespace {

/// The column-major layout of a row-major [rows, columns] matrix: its transpose.
cublasLtMatrixLayout_t layoutOf(cudaDataType_t type, int64_t rows, int64_t columns,
                                int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout;
  MT_CUDA_CHECK(cublasLtMatrixLayoutCreate(&layout, type, columns, rows, columns));
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    MT_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                   &count, sizeof(count)));
    MT_CUDA_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return layout;
}

} // namespace

CublasLt::CublasLt(size_t workspaceBytes) : workspaceBytes(workspaceBytes) {
  MT_CUDA_CHECK(cublasLtCreate(&handle));
  MT_CUDA_CHECK(cudaMalloc(&workspace, workspaceBytes));
}

CublasLt::~CublasLt() {
  for (auto &[key, plan] : plans) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    cublasLtMatmulDescDestroy(plan.operation);
  }
  cudaFree(workspace);
  cublasLtDestroy(handle);
}

const CublasLt::Plan &CublasLt::planFor(const MatmulShape &s, bool accumulate) {
  Key key{s.m, s.n, s.k, s.transposeA, s.transposeB, s.batch, s.strideA, s.strideB, s.strideC,
          static_cast<int>(s.output), static_cast<int>(s.input), s.bias, accumulate};
  auto found = plans.find(key);
  if (found != plans.end())
    return found->second;
  Plan plan;
  MT_CUDA_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt's first operand is B: transposing B in row-major is transposing it here too.
  cublasOperation_t first = s.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t second = s.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  MT_CUDA_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                               &first, sizeof(first)));
  MT_CUDA_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB,
                                               &second, sizeof(second)));
  if (s.bias) {
    // cuBLASLt's rows are the row-major product's columns: its per-row bias is ours per column.
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    MT_CUDA_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                 &epilogue, sizeof(epilogue)));
    MT_CUDA_CHECK(cublasLtMatmulDescSetAttribute(
        plan.operation, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &s.output, sizeof(s.output)));
  }
  plan.a = s.transposeB ? layoutOf(s.input, s.n, s.k, s.batch, s.strideB)
                        : layoutOf(s.input, s.k, s.n, s.batch, s.strideB);
  plan.b = s.transposeA ? layoutOf(s.input, s.k, s.m, s.batch, s.strideA)
                        : layoutOf(s.input, s.m, s.k, s.batch, s.strideA);
  plan.c = layoutOf(s.output, s.m, s.n, s.batch, s.strideC);

  cublasLtMatmulPreference_t preference;
  MT_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  MT_CUDA_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
      sizeof(workspaceBytes)));
  cublasLtMatmulHeuristicResult_t result;
  int found_count = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, plan.operation, plan.a, plan.b, plan.c, plan.c,
                                     preference, 1, &result, &found_count);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found_count == 0)
    throw CudaError("cuBLASLt has no algorithm for m=" + std::to_string(s.m) +
                    " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                    " batch=" + std::to_string(s.batch));
  plan.algorithm = result.algo;
  return plans.emplace(key, plan).first->second;
}

void CublasLt::matmul(const MatmulShape &shape, const void *a, const void *b, void *c,
                      bool accumulate, cudaStream_t stream, const void *bias) {
  if (shape.bias != (bias != nullptr))
    throw CudaError("a product with a bias epilogue needs the bias vector, and only it");
  const Plan &plan = planFor(shape, accumulate);
  if (bias)
    MT_CUDA_CHECK(cublasLtMatmulDescSetAttribute(
        plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  MT_CUDA_CHECK(cublasLtMatmul(handle, plan.operation, &alpha, b, plan.a, a, plan.b, &beta, c,
                               plan.c, c, plan.c, &plan.algorithm, workspace, workspaceBytes,
                               stream));
}

} // namespace mt::cuda
