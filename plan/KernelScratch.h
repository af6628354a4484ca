// The scratch (device memory beside the arena) that kernels take, in floats: one formula for
// the CUDA kernels that take it and the compiler that reserves it (passes/DeviceReserve).
#ifndef MT_PLAN_KERNELSCRATCH_H
#define MT_PLAN_KERNELSCRATCH_H

#include "plan/DeviceLayout.h"

#include <algorithm>
#include <cstdint>

namespace mt::scratch {

/// A reduction of `elements` into `groups` results that splits each group's extent into
/// chunks: at most kMaxChunks partial results a group, never more than the elements.
inline int64_t reductionPartials(int64_t elements, int64_t groups) {
  return std::min(elements, groups * kMaxChunks);
}

/// reduce_max_grad: each group's maximum and count of ties, each reduced with its partials.
inline int64_t reduceMaxGradFloats(int64_t elements, int64_t groups) {
  return 2 * groups + 2 * reductionPartials(elements, groups);
}

/// rms_norm_grad over rows of d: each row's statistic, then the weight gradient's partials;
/// layer_norm_grad twice that (the means beside, the bias gradient's partials).
inline int64_t normGradFloats(int64_t rows, int64_t d, bool layerNorm) {
  return (layerNorm ? 2 : 1) * (rows + reductionPartials(rows * d, d));
}

/// A cross-entropy over `positions`: each one's loss, then the count of those that count.
inline int64_t crossEntropyFloats(int64_t positions) { return positions + 1; }

/// linear_cross_entropy over `rows` positions, `cells` logits a chunk: the chunk's fp32
/// logits, then each position's loss and the count.
inline int64_t linearLossFloats(int64_t cells, int64_t rows) {
  return cells + crossEntropyFloats(rows);
}

/// linear_cross_entropy_grad's scratch, as byte offsets: a chunk's `cells` fp32 logits
/// (their gradient, made in place), its bf16 copy where the products run in bf16 (else the
/// products read the logits), then the count of the targets that count; every piece 16-byte
/// aligned, as cuBLASLt's operands want.
struct LinearLossGradScratch {
  int64_t slopes, count, bytes;

  LinearLossGradScratch(int64_t cells, bool bf16Products) {
    auto aligned = [](int64_t b) { return (b + 15) / 16 * 16; };
    slopes = bf16Products ? aligned(cells * 4) : 0;
    count = aligned(cells * 4) + (bf16Products ? aligned(cells * 2) : 0);
    bytes = count + 4;
  }
};

/// attention_grad: each query row's delta = grad . output (rows: batch x heads x queries),
/// which cuDNN's backward writes in the same place (rowsum(grad * output)), then room for
/// cuDNN's fp32 dq accumulator of `depth` floats a row (the atomic form sums dq there; the
/// deterministic form's engine asks for its own of that size). An engine asking more gets
/// device memory of cuDNN's own beside the plan's (runtime/cuda/CudnnAttention).
inline int64_t attentionGradFloats(int64_t rows, int64_t depth) { return rows * (depth + 1); }

/// attention without a log-sum-exp result: cuDNN's forward writes each row's there.
inline int64_t attentionFloats(int64_t rows, bool hasLse) { return hasLse ? 0 : rows; }

/// scatter_add into a result not stored in fp32: an fp32 table of the result to sum into.
inline int64_t scatterAddFloats(int64_t resultElements) { return resultElements; }

/// A product's fp32 operand beside a bf16 one, copied to bf16, in bytes.
inline int64_t bf16CopyBytes(int64_t elements) { return elements * 2; }

} // namespace mt::scratch

#endif // MT_PLAN_KERNELSCRATCH_H
