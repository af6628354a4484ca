// Attention on tensor cores for the common case of mt.attention and mt.attention_grad (bf16
// operands at head depth 64 or 128); Transformer.cu keeps the general kernels. CUDA only.
#ifndef MT_RUNTIME_CUDA_KERNELS_FLASHATTENTION_H
#define MT_RUNTIME_CUDA_KERNELS_FLASHATTENTION_H

#include "runtime/KernelShapes.h"
#include "runtime/cuda/kernels/KernelArgs.h"

#include <cstdint>
#include <string>

namespace mt::cuda {

/// q [batch, queryHeads, queries, depth], k [batch, kvHeads, keys, depth],
/// v [batch, kvHeads, keys, valueDepth]; logits are scale * q.k.
struct AttentionDims : AttentionExtents {
  float scale;
  bool causal;
  const int64_t *keySpan; // on the device, each sequence's tokens [first, end); null: all
  int64_t window;         // causal only: query i sees keys i - window < j <= i; 0: all
  float softcap;          // logits s become softcap * tanh(s / softcap); 0: as they are

  /// The end of sequence `b`'s tokens: the keys from it on are right padding.
  __device__ int64_t keyEnd(int64_t b) const {
    if (!keySpan)
      return keys;
    int64_t n = keySpan[2 * b + 1];
    return n < 0 ? 0 : n < keys ? n : keys;
  }

  /// The first of sequence `b`'s tokens: the keys before it are left padding.
  __device__ int64_t keyStart(int64_t b) const {
    return keySpan && keySpan[2 * b] > 0 ? keySpan[2 * b] : 0;
  }

  /// Keys [0, visible) that query row `query` of query head `head` (over batch and heads)
  /// attends to, from firstVisible on. Causal aligns the first query with the first key, as
  /// the host does: query i sees keys 0..i.
  __device__ int64_t visible(int64_t head, int64_t query) const {
    int64_t length = keyEnd(head / queryHeads);
    return causal && query + 1 < length ? query + 1 : length;
  }

  /// The first key query row `query` of query head `head` sees: its sliding window's, or
  /// its sequence's first token's.
  __device__ int64_t firstVisible(int64_t head, int64_t query) const {
    int64_t first = window > 0 && query + 1 > window ? query + 1 - window : 0;
    int64_t start = keyStart(head / queryHeads);
    return first > start ? first : start;
  }

  /// Whether query `query` sees key `key` by the window (causality and padding aside).
  __device__ bool inWindow(int64_t query, int64_t key) const {
    return window <= 0 || query - key < window;
  }

  /// The logit of a query . key product `dot`.
  __device__ float logit(float dot) const {
    float s = dot * scale;
    return softcap > 0.0f ? softcap * tanhf(s / softcap) : s;
  }

  /// d logit / d (scale * dot), from the logit: 1 without a cap.
  __device__ float slope(float logit) const {
    if (softcap <= 0.0f)
      return 1.0f;
    float t = logit / softcap;
    return 1.0f - t * t;
  }

  /// The key/value head (over batch and heads) that query head `head` (over batch and
  /// heads) reads.
  __host__ __device__ int64_t kvHeadOf(int64_t head) const {
    return head / queryHeads * kvHeads + head % queryHeads / (queryHeads / kvHeads);
  }
};

/// Lets `kernel` take `bytes` of dynamic shared memory: past 48 KiB it must opt in.
template <typename Kernel>
void allowSharedMemory(const KernelArgs &args, Kernel *kernel, size_t bytes) {
  if (bytes <= 48 * 1024)
    return;
  cudaError_t status = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (status != cudaSuccess) {
    cudaGetLastError(); // not sticky: keep it from failing the next launch's check
    args.fail("cannot give attention " + std::to_string(bytes) +
              " bytes of shared memory: " + cudaGetErrorString(status));
  }
}

/// The extents, scale and causality of mt.attention or mt.attention_grad (checked, failing
/// naming the op), with the key span operand `spanOperand` if the command has it.
AttentionDims attentionDims(const KernelArgs &args, size_t spanOperand);

/// Enqueues mt.attention on tensor cores and returns true when they serve it: q, k and v
/// bf16 and 16-byte aligned, one head depth of 64 or 128 for both. On false nothing ran.
/// The shapes must already be checked (attentionDims, the result's shape); `lse` (fp32, one
/// per query row) receives each row's log-sum-exp unless null.
bool flashAttention(const KernelArgs &args, const AttentionDims &a, float *lse);

/// The same for mt.attention_grad (operands q, k, v, grad, ...; results dq, dk, dv), the
/// grad bf16 too, from the forward's log-sum-exp and each row's delta = grad . output (fp32,
/// one per query row each).
bool flashAttentionGrad(const KernelArgs &args, const AttentionDims &a, const float *lse,
                        const float *delta);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_KERNELS_FLASHATTENTION_H
