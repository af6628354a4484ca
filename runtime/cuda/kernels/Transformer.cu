// The fused transformer kernels on the device: embedding lookup, rotary embedding and
// grouped-query attention (flash-style, online softmax, O(T) memory), with the gradients.
#include "plan/KernelScratch.h"
#include "runtime/KernelShapes.h"
#include "runtime/cuda/CudnnAttention.h"
#include "runtime/cuda/kernels/Access.cuh"
#include "runtime/cuda/kernels/FlashAttention.h"
#include "runtime/cuda/kernels/KernelArgs.h"

#include <math_constants.h>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace mt::cuda {

AttentionDims attentionDims(const KernelArgs &args, size_t spanOperand) {
  AttentionExtents e{};
  if (std::string error = attentionExtents(args.in(0).shape, args.in(1).shape, args.in(2).shape,
                                           args.flag("sequence_major"), e);
      !error.empty())
    args.fail(error);
  AttentionDims a{e,
                  static_cast<float>(args.attrFloat("scale")),
                  args.flag("causal"),
                  nullptr,
                  args.has("window") ? args.attrInt("window") : 0,
                  args.has("softcap") ? static_cast<float>(args.attrFloat("softcap")) : 0.0f};
  if (args.operandCount() > spanOperand) {
    const DeviceTensor &span = args.integer(spanOperand);
    if (std::string error = keySpanError(span.shape, e, nullptr); !error.empty())
      args.fail(error);
    if (span.storage != Storage::I64)
      args.fail("key_span must be int64 on the device");
    a.keySpan = static_cast<const int64_t *>(span.data);
  }
  return a;
}

namespace {

constexpr unsigned kAllLanes = 0xffffffffu;

/// Grid-stride launches cap their blocks; every kernel loops over what remains.
unsigned gridFor(int64_t n) { return std::min<unsigned>(blocksFor(n), 65535u * 8); }

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

// ---------------------------------------------------------------------------------------
// mt.embedding

/// out[i, c] = table[ids[i], c]. The runtime validates ids before upload; an id outside
/// the table still yields a NaN row here rather than a read out of bounds.
__global__ void embeddingRows(Ref table, Ref ids, Ref out, int64_t vocabulary, int64_t d,
                              int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = e / d, id = loadInt(ids, row);
    bool inside = id >= 0 && id < vocabulary;
    storeReal(out, e, inside ? loadReal(table, id * d + (e - row * d)) : CUDART_NAN_F);
  }
}

void embedding(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  const std::vector<int64_t> &table = args.in(0).shape;
  if (table.size() != 2)
    args.fail("the table must have rank 2");
  int64_t vocabulary = table[0], d = table[1];
  int64_t count = args.integer(1).size();
  if (args.out(0).size() != count * d)
    args.fail("the result is not [..., " + std::to_string(d) + "] over the ids");
  int64_t n = count * d;
  if (n == 0)
    return;
  embeddingRows<<<gridFor(n), 256, 0, args.stream>>>(args.real(0).ref(), args.in(1).ref(),
                                                     args.realResult(0).ref(), vocabulary, d, n);
  checkLaunch(args);
}

// ---------------------------------------------------------------------------------------
// mt.rope, mt.rope_grad

constexpr int kMaxRopeRank = 8;

/// The input's axes (collapsed where cos and sin step through them contiguously, so the
/// usual [B, H, T, D] against [1, 1, T, D] walks two axes) with the offsets of cos and sin.
struct RopeLayout {
  int rank;
  int64_t extent[kMaxRopeRank], cosStride[kMaxRopeRank], sinStride[kMaxRopeRank];
  int64_t total, depth, half;
  /// Distance in sin between an element and its rotate-half partner: the transposed
  /// rotation reads sin at the partner's position.
  int64_t sinStep;
};

/// mt.rope: x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x[D/2:], x[:D/2]).
/// transposed (mt.rope_grad): g * cos + rotate_half^T(g * sin), where
/// rotate_half^T(y) = concat(y[D/2:], -y[:D/2]).
__global__ void rotate(Ref x, Ref cos, Ref sin, Ref out, RopeLayout layout, bool transposed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < layout.total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, cosAt = 0, sinAt = 0;
#pragma unroll
    for (int d = kMaxRopeRank - 1; d >= 0; --d)
      if (d < layout.rank) {
        int64_t index = rest % layout.extent[d];
        rest /= layout.extent[d];
        cosAt += index * layout.cosStride[d];
        sinAt += index * layout.sinStride[d];
      }
    bool low = i % layout.depth < layout.half;
    float rotated;
    if (!transposed)
      rotated = (low ? -loadReal(x, i + layout.half) : loadReal(x, i - layout.half)) *
                loadReal(sin, sinAt);
    else if (low)
      rotated = loadReal(x, i + layout.half) * loadReal(sin, sinAt + layout.sinStep);
    else
      rotated = -loadReal(x, i - layout.half) * loadReal(sin, sinAt - layout.sinStep);
    storeReal(out, i, loadReal(x, i) * loadReal(cos, cosAt) + rotated);
  }
}

void rope(const KernelArgs &args, bool transposed) {
  args.expectCounts(3, 3, 1);
  const std::vector<int64_t> &shape = args.in(0).shape;
  if (shape.empty() || shape.back() % 2 != 0)
    args.fail("the last axis must exist and have an even size");
  if (args.out(0).shape != shape)
    args.fail("the result's shape differs from the input's");
  std::vector<int64_t> cosStrides = args.broadcastStrides(args.in(1).shape, shape);
  std::vector<int64_t> sinStrides = args.broadcastStrides(args.in(2).shape, shape);
  const DeviceTensor &x = args.real(0), &cos = args.real(1), &sin = args.real(2);
  const DeviceTensor &out = args.realResult(0);

  RopeLayout layout{};
  layout.total = product(shape);
  layout.depth = shape.back();
  layout.half = layout.depth / 2;
  layout.sinStep = sinStrides.back() * layout.half;
  if (layout.total == 0)
    return;
  // Collapse from the innermost axis out, dropping axes of size 1; built innermost first.
  std::vector<int64_t> extent, cosStride, sinStride;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1)
      continue;
    if (!extent.empty() && cosStrides[d] == cosStride.back() * extent.back() &&
        sinStrides[d] == sinStride.back() * extent.back()) {
      extent.back() *= shape[d];
      continue;
    }
    extent.push_back(shape[d]);
    cosStride.push_back(cosStrides[d]);
    sinStride.push_back(sinStrides[d]);
  }
  if (extent.size() > static_cast<size_t>(kMaxRopeRank))
    args.fail("the input " + shapeText(shape) + " against cos and sin walks more than " +
              std::to_string(kMaxRopeRank) + " axes");
  layout.rank = static_cast<int>(extent.size());
  for (int d = 0; d < layout.rank; ++d) {
    int from = layout.rank - 1 - d;
    layout.extent[d] = extent[from];
    layout.cosStride[d] = cosStride[from];
    layout.sinStride[d] = sinStride[from];
  }
  rotate<<<gridFor(layout.total), 256, 0, args.stream>>>(x.ref(), cos.ref(), sin.ref(),
                                                         out.ref(), layout, transposed);
  checkLaunch(args);
}

// ---------------------------------------------------------------------------------------
// mt.attention, mt.attention_grad
//
// bf16 attention at head depth 64 or 128 runs on tensor cores (FlashAttention.cu); these
// kernels, on CUDA cores in fp32, serve every other case.
//
// Each warp owns one row (a query row forward and for the query gradient, a key row for
// the key and value gradients); the kWarps warps of a block own neighbouring rows of one
// head and share the tiles of kTile rows of the other side that they stage, as fp32, in
// shared memory. Within a tile each lane scores one staged row against the warp's own row
// (held in shared memory), then the warp accumulates the tile's rows into per-lane
// registers: lane l holds columns l, l + 32, ... of the row it builds, N of them. Only
// [rows] statistics (logsumexp and delta) ever reach global memory, and every sum runs in a
// fixed order, so results are deterministic.

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 32;
constexpr int kMaxDepth = 256;


__device__ __forceinline__ float warpMax(float x) {
  for (int offset = 16; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(kAllLanes, x, offset));
  return x;
}

/// A butterfly: every lane ends with the same bits, since each step adds pairs that are
/// equal up to commutation.
__device__ __forceinline__ float warpSum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1)
    x += __shfl_xor_sync(kAllLanes, x, offset);
  return x;
}

/// How many of a tile's `count` rows lie before `limit` (counted from the tile's start).
__device__ __forceinline__ int rowsBefore(int64_t limit, int count) {
  return limit <= 0 ? 0 : limit < count ? static_cast<int>(limit) : count;
}

/// Keys the last of the block's rows from `first` (of query head `head`) sees: the most
/// any of its rows sees.
__device__ __forceinline__ int64_t blockVisible(const AttentionDims &a, int64_t head,
                                                int64_t first) {
  return a.visible(head, (first + kWarps < a.queries ? first + kWarps : a.queries) - 1);
}

__device__ __forceinline__ float dot(const float *a, const float *b, int n) {
  float sum = 0.0f;
#pragma unroll 4
  for (int c = 0; c < n; ++c)
    sum += a[c] * b[c];
  return sum;
}

/// Copies `count` rows of `width` reals, `fromStride` apart from element `first` of `from`
/// on, into shared rows `stride` floats apart, with all threads of the block.
__device__ __forceinline__ void stageRows(float *to, int stride, Ref from, int64_t first,
                                          int64_t fromStride, int count, int width) {
  for (int e = threadIdx.x; e < count * width; e += blockDim.x) {
    int row = e / width, column = e - row * width;
    to[row * stride + column] = loadReal(from, first + row * fromStride + column);
  }
}

/// Copies one row of `width` reals into shared memory with the lanes of a warp.
__device__ __forceinline__ void loadRow(float *to, Ref from, int64_t first, int width, int lane) {
  for (int c = lane; c < width; c += 32)
    to[c] = loadReal(from, first + c);
}

/// One warp per query row: online softmax over the visible keys, out = sum_j p_j v_j, and
/// the row's log-sum-exp into `lse` unless null.
/// Shared: keys [kTile][depth + 1] (padded so that lanes scoring different keys hit
/// different banks), values [kTile][valueDepth], the warps' query rows [kWarps][depth].
template <int N>
__global__ void __launch_bounds__(kThreads)
    attentionForward(Ref q, Ref k, Ref v, Ref out, float *lse, AttentionDims a) {
  extern __shared__ float shared[];
  const int depth = static_cast<int>(a.depth), valueDepth = static_cast<int>(a.valueDepth);
  const int keyStride = depth + 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *keys = shared, *values = keys + kTile * keyStride;
  float *query = values + kTile * valueDepth + warp * depth;

  int64_t rowBlocks = (a.queries + kWarps - 1) / kWarps;
  int64_t head = blockIdx.x / rowBlocks, first = blockIdx.x % rowBlocks * kWarps;
  int64_t row = first + warp;
  bool active = row < a.queries;
  int64_t kvHead = a.kvHeadOf(head);
  if (active)
    loadRow(query, q, a.queryRow(head, row, depth), depth, lane);
  int64_t visible = active ? a.visible(head, row) : 0, seen = blockVisible(a, head, first);
  int64_t lowest = active ? a.firstVisible(head, row) : 0;

  float runningMax = -CUDART_INF_F, total = 0.0f, acc[N] = {};
  for (int64_t t0 = a.firstVisible(head, first); t0 < seen; t0 += kTile) {
    int count = rowsBefore(seen - t0, kTile);
    __syncthreads(); // every warp is done with the previous tile
    stageRows(keys, keyStride, k, a.keyRow(kvHead, t0, depth), a.keyStride(depth), count, depth);
    stageRows(values, valueDepth, v, a.keyRow(kvHead, t0, valueDepth), a.keyStride(valueDepth),
              count, valueDepth);
    __syncthreads();
    int mine = rowsBefore(visible - t0, count);
    if (mine == 0 || t0 + mine <= lowest)
      continue;
    float score = lane < mine && t0 + lane >= lowest
                      ? a.logit(dot(query, keys + lane * keyStride, depth))
                      : -CUDART_INF_F;
    float next = fmaxf(runningMax, warpMax(score));
    float correction = expf(runningMax - next);
    float p = expf(score - next);
    total = total * correction + warpSum(p);
#pragma unroll
    for (int r = 0; r < N; ++r)
      acc[r] *= correction;
    for (int j = 0; j < mine; ++j) {
      float pj = __shfl_sync(kAllLanes, p, j);
#pragma unroll
      for (int r = 0; r < N; ++r) {
        int c = lane + 32 * r;
        if (c < valueDepth)
          acc[r] += pj * values[j * valueDepth + c];
      }
    }
    runningMax = next;
  }
  if (!active)
    return;
  int64_t base = a.queryRow(head, row, valueDepth);
#pragma unroll
  for (int r = 0; r < N; ++r) {
    int c = lane + 32 * r;
    // No visible key (keys == 0) leaves the row zero and its log-sum-exp 0, as on the host.
    if (c < valueDepth)
      storeReal(out, base + c, total > 0.0f ? acc[r] / total : 0.0f);
  }
  if (lse && lane == 0)
    lse[head * a.queries + row] = total > 0.0f ? runningMax + logf(total) : 0.0f;
}

/// delta = grad . output for each query row (of `width`; rows over batch, heads and queries
/// in that order, whatever the layout), a warp per row, into fp32.
__global__ void attentionDelta(Ref grad, Ref output, float *delta, int64_t rows, int width,
                               AttentionDims a) {
  const int lane = threadIdx.x % 32;
  for (int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x / 32) {
    const int64_t at = a.queryRow(row / a.queries, row % a.queries, width);
    float sum = 0.0f;
    for (int c = lane; c < width; c += 32)
      sum += loadReal(grad, at + c) * loadReal(output, at + c);
    sum = warpSum(sum);
    if (lane == 0)
      delta[row] = sum;
  }
}

/// Gradient pass A, one warp per query row: dq = scale * sum_j p_j (g . v_j - delta) k_j
/// over the visible keys, p_j = exp(logit_j - lse) from the forward's log-sum-exp and
/// delta = g . out (attentionDelta), each fp32 [batch * query heads * queries].
/// Shared: keys [kTile][depth + 1], values [kTile][valueDepth + 1] (both scored a row per
/// lane, hence padded), then per warp its query row [depth] and grad row [valueDepth].
template <int N>
__global__ void __launch_bounds__(kThreads)
    attentionQueryGrad(Ref q, Ref k, Ref v, Ref g, Ref dq, const float *lse, const float *delta,
                       AttentionDims a) {
  extern __shared__ float shared[];
  const int depth = static_cast<int>(a.depth), valueDepth = static_cast<int>(a.valueDepth);
  const int keyStride = depth + 1, valueStride = valueDepth + 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *keys = shared, *values = keys + kTile * keyStride;
  float *query = values + kTile * valueStride + warp * (depth + valueDepth);
  float *grad = query + depth;

  int64_t rowBlocks = (a.queries + kWarps - 1) / kWarps;
  int64_t head = blockIdx.x / rowBlocks, first = blockIdx.x % rowBlocks * kWarps;
  int64_t row = first + warp, at = head * a.queries + row; // its lse and delta
  bool active = row < a.queries;
  int64_t kvHead = a.kvHeadOf(head);
  if (active) {
    loadRow(query, q, a.queryRow(head, row, depth), depth, lane);
    loadRow(grad, g, a.queryRow(head, row, valueDepth), valueDepth, lane);
  }
  int64_t visible = active ? a.visible(head, row) : 0, seen = blockVisible(a, head, first);
  int64_t lowest = active ? a.firstVisible(head, row) : 0, start = a.firstVisible(head, first);

  // Stages tile t0 and has each lane score its key: score = the logit of q.k_j and
  // dp = g.v_j, for the keys of the tile that this warp's row sees; `mine` is 0 when it
  // sees none, and a lane's score is -inf for a key outside the row's window.
  struct Scored {
    int mine;
    float score, dp;
  };
  auto scoreTile = [&](int64_t t0) {
    int count = rowsBefore(seen - t0, kTile);
    __syncthreads();
    stageRows(keys, keyStride, k, a.keyRow(kvHead, t0, depth), a.keyStride(depth), count, depth);
    stageRows(values, valueStride, v, a.keyRow(kvHead, t0, valueDepth), a.keyStride(valueDepth),
              count, valueDepth);
    __syncthreads();
    int mine = rowsBefore(visible - t0, count);
    Scored s{t0 + mine <= lowest ? 0 : mine, -CUDART_INF_F, 0.0f};
    if (lane < s.mine && t0 + lane >= lowest) {
      s.score = a.logit(dot(query, keys + lane * keyStride, depth));
      s.dp = dot(grad, values + lane * valueStride, valueDepth);
    }
    return s;
  };

  float rowLse = active ? lse[at] : 0.0f, rowDelta = active ? delta[at] : 0.0f;

  float acc[N] = {};
  for (int64_t t0 = start; t0 < seen; t0 += kTile) {
    Scored s = scoreTile(t0);
    if (s.mine == 0)
      continue;
    float ds = s.score != -CUDART_INF_F
                   ? expf(s.score - rowLse) * (s.dp - rowDelta) * a.slope(s.score) * a.scale
                   : 0.0f;
    for (int j = 0; j < s.mine; ++j) {
      float dsj = __shfl_sync(kAllLanes, ds, j);
#pragma unroll
      for (int r = 0; r < N; ++r) {
        int c = lane + 32 * r;
        if (c < depth)
          acc[r] += dsj * keys[j * keyStride + c];
      }
    }
  }
  if (!active)
    return;
#pragma unroll
  for (int r = 0; r < N; ++r) {
    int c = lane + 32 * r;
    if (c < depth)
      storeReal(dq, a.queryRow(head, row, depth) + c, acc[r]);
  }
}

/// Gradient pass B, one warp per key row j of a key/value head: over the query heads of
/// its group in order and the queries that see j (i >= j when causal) in order,
/// dk_j = scale * sum p_ij (g_i . v_j - delta_i) q_i and dv_j = sum p_ij g_i, with
/// p_ij = exp(scale q_i . k_j - lse_i). Summing the group's heads here is what keeps
/// grouped-query gradients free of atomics.
/// Shared: queries [kTile][depth + 1], grads [kTile][valueDepth + 1], their lse and delta
/// [kTile] each, then per warp its key row [depth] and value row [valueDepth].
template <int N>
__global__ void __launch_bounds__(kThreads)
    attentionKeyGrad(Ref q, Ref k, Ref v, Ref g, const float *lse, const float *delta, Ref dk,
                     Ref dv, AttentionDims a) {
  extern __shared__ float shared[];
  const int depth = static_cast<int>(a.depth), valueDepth = static_cast<int>(a.valueDepth);
  const int queryStride = depth + 1, gradStride = valueDepth + 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *queries = shared, *grads = queries + kTile * queryStride;
  float *tileLse = grads + kTile * gradStride, *tileDelta = tileLse + kTile;
  float *key = tileDelta + kTile + warp * (depth + valueDepth);
  float *value = key + depth;

  int64_t rowBlocks = (a.keys + kWarps - 1) / kWarps;
  int64_t kvHead = blockIdx.x / rowBlocks, first = blockIdx.x % rowBlocks * kWarps;
  int64_t row = first + warp;
  // Padding keys (before and after the sequence's tokens) are seen by no query: zero
  // gradients.
  int64_t sequence = kvHead / a.kvHeads;
  bool active = row < a.keys, seen = row >= a.keyStart(sequence) && row < a.keyEnd(sequence);
  if (active) {
    loadRow(key, k, a.keyRow(kvHead, row, depth), depth, lane);
    loadRow(value, v, a.keyRow(kvHead, row, valueDepth), valueDepth, lane);
  }
  int64_t group = a.queryHeads / a.kvHeads;
  int64_t firstHead = kvHead / a.kvHeads * a.queryHeads + kvHead % a.kvHeads * group;
  // Under causal no query before the block's first key sees any of its keys; under a
  // window none from its last key's window on.
  int64_t start = a.causal ? first : 0;
  int64_t last = first + kWarps - 1;
  int64_t end = a.window > 0 && last + a.window < a.queries ? last + a.window : a.queries;

  float dkAcc[N] = {}, dvAcc[N] = {};
  for (int64_t h = 0; h < group; ++h) {
    int64_t queryFirst = (firstHead + h) * a.queries; // its lse and delta
    for (int64_t t0 = start; t0 < end; t0 += kTile) {
      int count = rowsBefore(a.queries - t0, kTile);
      __syncthreads();
      stageRows(queries, queryStride, q, a.queryRow(firstHead + h, t0, depth), a.queryStride(depth),
                count, depth);
      stageRows(grads, gradStride, g, a.queryRow(firstHead + h, t0, valueDepth),
                a.queryStride(valueDepth), count, valueDepth);
      if (threadIdx.x < count) {
        tileLse[threadIdx.x] = lse[queryFirst + t0 + threadIdx.x];
        tileDelta[threadIdx.x] = delta[queryFirst + t0 + threadIdx.x];
      }
      __syncthreads();
      // Query t0 + i sees key `row` unless causal and t0 + i < row.
      int from = a.causal ? rowsBefore(row - t0, count) : 0;
      if (!seen)
        from = count;
      if (from == count)
        continue;
      float p = 0.0f, ds = 0.0f;
      if (lane >= from && lane < count && a.inWindow(t0 + lane, row)) {
        float score = a.logit(dot(queries + lane * queryStride, key, depth));
        p = expf(score - tileLse[lane]);
        float dp = dot(grads + lane * gradStride, value, valueDepth);
        ds = p * (dp - tileDelta[lane]) * a.slope(score) * a.scale;
      }
      for (int i = from; i < count; ++i) {
        float pi = __shfl_sync(kAllLanes, p, i), dsi = __shfl_sync(kAllLanes, ds, i);
#pragma unroll
        for (int r = 0; r < N; ++r) {
          int c = lane + 32 * r;
          if (c < depth)
            dkAcc[r] += dsi * queries[i * queryStride + c];
          if (c < valueDepth)
            dvAcc[r] += pi * grads[i * gradStride + c];
        }
      }
    }
  }
  if (!active)
    return;
#pragma unroll
  for (int r = 0; r < N; ++r) {
    int c = lane + 32 * r;
    if (c < depth)
      storeReal(dk, a.keyRow(kvHead, row, depth) + c, dkAcc[r]);
    if (c < valueDepth)
      storeReal(dv, a.keyRow(kvHead, row, valueDepth) + c, dvAcc[r]);
  }
}

/// Calls body(std::integral_constant<int, N>) with the fewest columns per lane N (1, 2, 4
/// or 8) that hold both head depths.
template <typename F>
void withColumnsPerLane(const KernelArgs &args, const AttentionDims &a, F &&body) {
  int64_t widest = std::max(a.depth, a.valueDepth);
  if (widest <= 32)
    body(std::integral_constant<int, 1>{});
  else if (widest <= 64)
    body(std::integral_constant<int, 2>{});
  else if (widest <= 128)
    body(std::integral_constant<int, 4>{});
  else if (widest <= kMaxDepth)
    body(std::integral_constant<int, 8>{});
  else
    args.fail("head depths above " + std::to_string(kMaxDepth) + " (query/key " +
              std::to_string(a.depth) + ", value " + std::to_string(a.valueDepth) +
              ") are not supported on the device");
}

/// The data of `lse`, an attention's log-sum-exp (a result or operand of `args`), checked to
/// be one fp32 per query row.
float *lseOf(const KernelArgs &args, const DeviceTensor &lse, const AttentionDims &a) {
  if (std::string error = shapes::attentionLse(lse.shape, a); !error.empty())
    args.fail(error);
  if (lse.storage != Storage::F32)
    args.fail("lse must be fp32 on the device");
  return static_cast<float *>(lse.data);
}

/// cuDNN's shape of the call when cuDNN is on and its graphs say what the call does:
/// operands [0, operands) and results [0, results) bf16 and 16-byte aligned, no padding span,
/// window or cap. Else none: mt's own kernels run it.
std::optional<CudnnAttentionShape> cudnnShape(const KernelArgs &args, const AttentionDims &a,
                                              size_t operands, size_t results) {
  if (!args.cudnn || a.keySpan || a.window > 0 || a.softcap > 0.0f)
    return std::nullopt;
  auto fits = [](const DeviceTensor &t) {
    return t.storage == Storage::BF16 && reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
  };
  for (size_t i = 0; i < operands; ++i)
    if (!fits(args.in(i)))
      return std::nullopt;
  for (size_t r = 0; r < results; ++r)
    if (!fits(args.out(r)))
      return std::nullopt;
  return CudnnAttentionShape{a, a.scale, a.causal};
}

WorkspaceSource workspaceOf(const KernelArgs &args) {
  return [&args](size_t bytes) { return args.scratchIfFree(bytes); };
}

void attention(const KernelArgs &args) {
  args.expectCounts(3, 4, 1, 2);
  AttentionDims a = attentionDims(args, 3);
  if (args.out(0).shape != a.resultShape())
    args.fail("the result is not " + shapeText(a.resultShape()) + " (attention's layout)");
  float *lse = args.resultCount() == 2 ? lseOf(args, args.out(1), a) : nullptr;
  Ref q = args.real(0).ref(), k = args.real(1).ref(), v = args.real(2).ref();
  Ref out = args.realResult(0).ref();
  int64_t blocks = a.batch * a.queryHeads * ((a.queries + kWarps - 1) / kWarps);
  if (blocks == 0)
    return;
  if (auto s = cudnnShape(args, a, 3, 1);
      s && args.cudnn->forward(*s, {q.data, k.data, v.data, out.data, lse}, args.stream,
                               workspaceOf(args)))
    return;
  if (flashAttention(args, a, lse))
    return;
  withColumnsPerLane(args, a, [&](auto columns) {
    constexpr int N = decltype(columns)::value;
    size_t bytes =
        sizeof(float) * (kTile * (a.depth + 1) + kTile * a.valueDepth + kWarps * a.depth);
    allowSharedMemory(args, attentionForward<N>, bytes);
    attentionForward<N>
        <<<static_cast<unsigned>(blocks), kThreads, bytes, args.stream>>>(q, k, v, out, lse, a);
    checkLaunch(args);
  });
}

void attentionGrad(const KernelArgs &args) {
  args.expectCounts(6, 7, 3);
  AttentionDims a = attentionDims(args, 6);
  if (args.in(3).shape != a.resultShape())
    args.fail("the grad is not " + shapeText(a.resultShape()) + " (attention's layout)");
  if (args.in(4).shape != args.in(3).shape)
    args.fail("the forward's output differs in shape from the grad");
  const float *lse = lseOf(args, args.in(5), a);
  for (size_t r = 0; r < 3; ++r)
    if (args.out(r).shape != args.in(r).shape)
      args.fail("result " + std::to_string(r) + " differs in shape from operand " +
                std::to_string(r));
  Ref q = args.real(0).ref(), k = args.real(1).ref(), v = args.real(2).ref(),
      g = args.real(3).ref();
  Ref dq = args.realResult(0).ref(), dk = args.realResult(1).ref(),
      dv = args.realResult(2).ref();
  int64_t rows = a.batch * a.queryHeads * a.queries;
  if (auto s = cudnnShape(args, a, 5, 3);
      s && rows > 0 && a.keys > 0 &&
      args.cudnn->backward(
          *s, {q.data, k.data, v.data, args.in(4).data, g.data, lse, dq.data, dk.data, dv.data},
          args.stream, workspaceOf(args)))
    return;
  float *delta = nullptr;
  if (rows > 0) {
    delta = static_cast<float *>(args.scratch(sizeof(float) * rows));
    attentionDelta<<<std::min<unsigned>(blocksFor(rows * 32), 65535u), 256, 0, args.stream>>>(
        g, args.real(4).ref(), delta, rows, static_cast<int>(a.valueDepth), a);
    checkLaunch(args);
  }
  if (flashAttentionGrad(args, a, lse, delta))
    return;
  withColumnsPerLane(args, a, [&](auto columns) {
    constexpr int N = decltype(columns)::value;
    if (rows > 0) {
      int64_t blocks = a.batch * a.queryHeads * ((a.queries + kWarps - 1) / kWarps);
      size_t bytes = sizeof(float) * (kTile * (a.depth + 1) + kTile * (a.valueDepth + 1) +
                                      kWarps * (a.depth + a.valueDepth));
      allowSharedMemory(args, attentionQueryGrad<N>, bytes);
      attentionQueryGrad<N><<<static_cast<unsigned>(blocks), kThreads, bytes, args.stream>>>(
          q, k, v, g, dq, lse, delta, a);
      checkLaunch(args);
    }
    int64_t blocks = a.batch * a.kvHeads * ((a.keys + kWarps - 1) / kWarps);
    if (blocks == 0)
      return;
    size_t bytes = sizeof(float) * (kTile * (a.depth + 1) + kTile * (a.valueDepth + 1) +
                                    2 * kTile + kWarps * (a.depth + a.valueDepth));
    allowSharedMemory(args, attentionKeyGrad<N>, bytes);
    attentionKeyGrad<N><<<static_cast<unsigned>(blocks), kThreads, bytes, args.stream>>>(
        q, k, v, g, lse, delta, dk, dv, a);
    checkLaunch(args);
  });
}

/// mt.key_span, a thread per row: its first nonzero entry and one past its last ([0, 0] for
/// none).
__global__ void keySpanKernel(Ref mask, Ref span, int64_t rows, int64_t width) {
  int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (b >= rows)
    return;
  int64_t first = 0, end = width;
  while (first < end && loadInt(mask, b * width + first) == 0)
    ++first;
  while (end > first && loadInt(mask, b * width + end - 1) == 0)
    --end;
  storeInt(span, 2 * b, first == end ? 0 : first);
  storeInt(span, 2 * b + 1, first == end ? 0 : end);
}

void keySpan(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const DeviceTensor &mask = args.integer(0), &span = args.out(0);
  if (mask.shape.size() != 2 || span.shape != std::vector<int64_t>{mask.shape[0], 2} ||
      span.isFloat())
    args.fail("the mask is not [batch, keys] or the result not integers [batch, 2]");
  if (mask.shape[0] == 0)
    return;
  keySpanKernel<<<blocksFor(mask.shape[0]), 256, 0, args.stream>>>(mask.ref(), span.ref(),
                                                                   mask.shape[0], mask.shape[1]);
  checkLaunch(args);
}

} // namespace

void addTransformerKernels(DeviceKernelMap &kernels) {
  kernels["mt.embedding"] = embedding;
  kernels["mt.rope"] = [](const KernelArgs &args) { rope(args, false); };
  kernels["mt.rope_grad"] = [](const KernelArgs &args) { rope(args, true); };
  kernels["mt.attention"] = attention;
  kernels["mt.attention_grad"] = attentionGrad;
  kernels["mt.key_span"] = keySpan;
}

} // namespace mt::cuda
