// GPU test of the cuBLASLt products against a CPU reference on the same bf16-rounded inputs:
// every transpose combination, batches with a shared operand, fp32 and bf16 outputs, and
// accumulation into place; then the bf16 GEMM rate at 8192^3.
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaCheck.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using mt::cuda::CublasLt;
using mt::cuda::MatmulShape;

namespace {

uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
}

float fromBf16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

template <typename T>
T *upload(const std::vector<T> &host) {
  T *device;
  MT_CUDA_CHECK(cudaMalloc(&device, host.size() * sizeof(T)));
  MT_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

/// Runs one case; returns max |gpu - cpu| / max |cpu|.
double runCase(CublasLt &blas, const MatmulShape &s, bool accumulate, std::mt19937 &random) {
  std::normal_distribution<float> normal;
  int64_t batchA = s.strideA ? s.batch : 1, batchB = s.strideB ? s.batch : 1;
  std::vector<uint16_t> a(batchA * s.m * s.k), b(batchB * s.k * s.n);
  for (uint16_t &x : a)
    x = toBf16(normal(random));
  for (uint16_t &x : b)
    x = toBf16(normal(random));
  std::vector<float> initial(s.batch * s.m * s.n), bias(s.bias ? s.n : 0);
  for (float &x : initial)
    x = accumulate ? fromBf16(toBf16(normal(random))) : 0.0f;
  for (float &x : bias) // bf16 values, so that a bf16 bias holds them exactly
    x = fromBf16(toBf16(normal(random)));

  // The CPU reference in double on the same bf16 values.
  std::vector<double> expected(initial.begin(), initial.end());
  for (int64_t p = 0; p < s.batch; ++p)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          float x = fromBf16(a[(s.strideA ? p * s.strideA : 0) +
                               (s.transposeA ? l * s.m + i : i * s.k + l)]);
          float y = fromBf16(b[(s.strideB ? p * s.strideB : 0) +
                               (s.transposeB ? j * s.k + l : l * s.n + j)]);
          sum += static_cast<double>(x) * y;
        }
        expected[(p * s.m + i) * s.n + j] += sum + (s.bias ? bias[j] : 0.0);
      }

  uint16_t *deviceA = upload(a), *deviceB = upload(b);
  std::vector<float> got(initial.size());
  if (s.output == CUDA_R_32F) {
    float *deviceC = upload(initial);
    float *deviceBias = s.bias ? upload(bias) : nullptr;
    blas.matmul(s, deviceA, deviceB, deviceC, accumulate, nullptr, deviceBias);
    cudaFree(deviceBias);
    MT_CUDA_CHECK(cudaMemcpy(got.data(), deviceC, got.size() * 4, cudaMemcpyDeviceToHost));
    MT_CUDA_CHECK(cudaFree(deviceC));
  } else {
    std::vector<uint16_t> initialBf16(initial.size()), gotBf16(initial.size());
    std::transform(initial.begin(), initial.end(), initialBf16.begin(), toBf16);
    uint16_t *deviceC = upload(initialBf16);
    std::vector<uint16_t> biasBf16(bias.size());
    std::transform(bias.begin(), bias.end(), biasBf16.begin(), toBf16);
    uint16_t *deviceBias = s.bias ? upload(biasBf16) : nullptr;
    blas.matmul(s, deviceA, deviceB, deviceC, accumulate, nullptr, deviceBias);
    cudaFree(deviceBias);
    MT_CUDA_CHECK(cudaMemcpy(gotBf16.data(), deviceC, got.size() * 2, cudaMemcpyDeviceToHost));
    std::transform(gotBf16.begin(), gotBf16.end(), got.begin(), fromBf16);
    MT_CUDA_CHECK(cudaFree(deviceC));
  }
  MT_CUDA_CHECK(cudaFree(deviceA));
  MT_CUDA_CHECK(cudaFree(deviceB));
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - expected[i]));
    scale = std::max(scale, std::abs(expected[i]));
  }
  return worst / std::max(scale, 1e-30);
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 2;
  }
  CublasLt blas;
  std::mt19937 random(3);
  int cases = 0, failures = 0;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 48, 32}, {257, 129, 96}})
    for (int transposes = 0; transposes < 4; ++transposes)
      for (int64_t batch : {1, 3})
        for (cudaDataType_t output : {CUDA_R_32F, CUDA_R_16BF})
          for (int variant = 0; variant < 3; ++variant) {
            // Plain, accumulating into C, and with a bias epilogue.
            bool accumulate = variant == 1;
            MatmulShape s{m, n, k, bool(transposes & 1), bool(transposes & 2), batch,
                          batch > 1 ? m * k : 0, 0, batch > 1 ? m * n : 0, output};
            s.bias = variant == 2;
            double error = runCase(blas, s, accumulate, random);
            double tolerance = output == CUDA_R_32F ? 1e-4 : 1e-2;
            ++cases;
            if (error > tolerance) {
              ++failures;
              std::printf("FAIL: m=%lld n=%lld k=%lld transposes=%d batch=%lld %s%s: error %.2e\n",
                          (long long)m, (long long)n, (long long)k, transposes, (long long)batch,
                          output == CUDA_R_32F ? "fp32" : "bf16",
                          accumulate ? " accumulate" : s.bias ? " bias" : "", error);
            }
          }
  std::printf("%d of %d cuBLASLt cases match the CPU reference (fp32 within 1e-4, bf16 "
              "within 1e-2 relative)\n", cases - failures, cases);

  // The rate of one large product, as PERF.md measured it (bf16 in, fp32 accumulate).
  const int64_t size = 8192;
  MatmulShape big{size, size, size, false, false, 1, 0, 0, 0, CUDA_R_16BF};
  uint16_t *a, *b, *c;
  MT_CUDA_CHECK(cudaMalloc(&a, size * size * 2));
  MT_CUDA_CHECK(cudaMalloc(&b, size * size * 2));
  MT_CUDA_CHECK(cudaMalloc(&c, size * size * 2));
  MT_CUDA_CHECK(cudaMemset(a, 0, size * size * 2));
  MT_CUDA_CHECK(cudaMemset(b, 0, size * size * 2));
  blas.matmul(big, a, b, c, false, nullptr);
  MT_CUDA_CHECK(cudaDeviceSynchronize());
  const int runs = 20;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i)
    blas.matmul(big, a, b, c, false, nullptr);
  MT_CUDA_CHECK(cudaDeviceSynchronize());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("bf16 GEMM 8192^3: %.0f TFLOP/s\n", 2.0 * size * size * size * runs / seconds / 1e12);
  return failures ? 1 : 0;
}
