// Fused attention through cuDNN's graph API (its flash-attention engines on Hopper): the
// forward with its log-sum-exp and the backward from it, planned once per shape.
#ifndef MT_RUNTIME_CUDA_CUDNNATTENTION_H
#define MT_RUNTIME_CUDA_CUDNNATTENTION_H

#include "runtime/cuda/Cudnn.h"
#include "tensor/Shapes.h"

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace mt::cuda {

/// One call's shape: q [batch, queryHeads, queries, depth], k and v [batch, kvHeads, keys,
/// depth] (each [batch, sequence, heads, depth] in memory when the extents are
/// sequence-major), all bf16 and dense; logits scale * q.k, causal from the first query and
/// key.
struct CudnnAttentionShape {
  shapes::AttentionExtents extents;
  float scale;
  bool causal;
};

/// The tensors of a forward (lse: fp32, one per query row, or null) or a backward; the
/// pointers 16-byte aligned.
struct CudnnAttentionForward {
  const void *q, *k, *v;
  void *out;
  float *lse;
};
struct CudnnAttentionBackward {
  const void *q, *k, *v, *out, *grad;
  const float *lse;
  void *dq, *dk, *dv;
};

/// Device memory for a call's workspace: `bytes`, or null when that is more than is free.
using WorkspaceSource = std::function<void *(size_t bytes)>;

class CudnnAttention {
public:
  /// Null when cuDNN cannot be loaded or give this device a handle; `why` says which.
  /// `backward`: cuDNN serves the backward too (else backward() declines every call).
  /// `deterministic`: the backward's dq from one product, where the faster form sums it with
  /// atomics in an fp32 accumulator (the same run twice then differs in the last bits).
  static std::unique_ptr<CudnnAttention> create(bool backward, bool deterministic,
                                                std::string *why);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention &) = delete;
  CudnnAttention &operator=(const CudnnAttention &) = delete;

  /// Enqueue on `stream` and return true, or return false with nothing run when cuDNN has no
  /// engine for the shape (remembered, with its reason) or its workspace is not to be had.
  bool forward(const CudnnAttentionShape &shape, const CudnnAttentionForward &tensors,
               cudaStream_t stream, const WorkspaceSource &workspace);
  bool backward(const CudnnAttentionShape &shape, const CudnnAttentionBackward &tensors,
                cudaStream_t stream, const WorkspaceSource &workspace);
  bool deterministic() const { return isDeterministic; }
  bool servesBackward() const { return backwardOn; }

  /// cuDNN's version, e.g. "9.19.0".
  std::string version() const;
  /// The calls cuDNN ran, and the first reason it declined a shape (empty if none).
  int64_t forwardCalls() const { return calls[0]; }
  int64_t backwardCalls() const { return calls[1]; }
  /// The most device memory (scratch) one call took.
  int64_t workspaceBytes() const { return largestWorkspace; }
  /// Device memory held beside the plan's, for calls whose workspace its scratch lacked.
  int64_t ownBytes() const { return ownCapacity; }
  const std::string &declined() const { return firstDecline; }

  struct Graph;

private:
  CudnnAttention(const CudnnApi &api, cudnnHandle_t handle, bool backward, bool deterministic);
  /// The planned graph for a shape, built on first use (null: cuDNN has none).
  const Graph *graphFor(const CudnnAttentionShape &shape, bool backward, bool deterministic);
  /// Remembers the first shape cuDNN cannot serve, and says so once on stderr.
  void decline(const CudnnAttentionShape &shape, bool backward, const std::string &why);
  bool run(const Graph &graph, bool backward, const std::vector<const void *> &pointers,
           cudaStream_t stream, const WorkspaceSource &workspace);
  /// `bytes` of cuDNN's own device memory (null where the device has not that much free).
  char *ownWorkspace(int64_t bytes);

  const CudnnApi &api;
  cudnnHandle_t handle;
  bool backwardOn, isDeterministic;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, float,
                         bool, bool, bool>;
  std::map<Key, std::unique_ptr<Graph>> graphs; // null entries: declined shapes
  int64_t calls[2] = {0, 0};                    // forward, backward
  int64_t largestWorkspace = 0;
  char *own = nullptr; // grown to the largest call the plan's scratch could not hold
  int64_t ownCapacity = 0;
  int64_t ownRefused = 0; // the least the device refused (0: none)
  std::string firstDecline;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_CUDNNATTENTION_H
