// Device ports of runtime/host/Normalization.cpp: reduce_*, softmax, rms_norm, layer_norm,
// cross_entropy and linear_cross_entropy with their gradients, in fp32 with fixed-order
// reductions so runs reproduce.
#include "plan/DeviceLayout.h"
#include "plan/KernelScratch.h"
#include "runtime/KernelShapes.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/kernels/Access.cuh"
#include "runtime/cuda/kernels/KernelArgs.h"
#include "runtime/cuda/kernels/Products.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace mt::cuda {
namespace {

using Shape = std::vector<int64_t>;

constexpr int kWarp = 32;
/// Threads of the launches that give each thread its own element, output or line.
constexpr int kThreads = 256;
/// Grid-stride loops cover whatever a grid this size does not.
constexpr int64_t kMaxBlocks = 65535;
/// Lines shorter than this go one per thread: a block would idle most of its lanes.
constexpr int64_t kBlockLine = 64;
/// About one wave of resident threads on an H200 (132 SMs x 2048): the parallelism a
/// reduction with few outputs splits its reduced extent to reach.
constexpr int64_t kBusyThreads = 132 * 2048;
/// Merged dimensions a reduction's layout may have (see reductionOf).
constexpr int kMaxDims = 8;

// ---- Host-side helpers ----------------------------------------------------------------------

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}

unsigned gridFor(int64_t blocks) { return static_cast<unsigned>(std::min(blocks, kMaxBlocks)); }

/// Threads of a block that owns one line of `length`: whole warps, about eight elements each.
int lineThreads(int64_t length) {
  return static_cast<int>(
      std::clamp<int64_t>(ceilDiv(length, 8 * kWarp) * kWarp, 2 * kWarp, 512));
}

float *scratchFloats(const KernelArgs &args, int64_t count) {
  return count > 0 ? static_cast<float *>(args.scratch(static_cast<size_t>(count) * sizeof(float)))
                   : nullptr;
}

Ref floatRef(float *data) { return {data, Storage::F32}; }

/// How a reduced extent of `length` per output is cut into chunks, each reduced on its own
/// into a partial result, so that few outputs still keep the device busy.
struct Split {
  int64_t chunk, chunks;
};

Split splitReduction(int64_t outputs, int64_t length, int64_t threadsPerChunk, int64_t minChunk) {
  int64_t wanted = ceilDiv(kBusyThreads, std::max<int64_t>(outputs * threadsPerChunk, 1));
  int64_t chunks = std::max<int64_t>(std::min({wanted, length / minChunk, kMaxChunks}), 1);
  int64_t chunk = std::max<int64_t>(ceilDiv(length, chunks), 1);
  return {chunk, std::max<int64_t>(ceilDiv(length, chunk), 1)};
}

// ---- Device-side helpers --------------------------------------------------------------------

__device__ __forceinline__ int64_t lesser(int64_t a, int64_t b) { return a < b ? a : b; }

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

/// A running maximum and the sum of exp(x - max) over the elements seen: softmax statistics
/// in one pass over a row, which matters for vocabulary-wide rows.
struct MaxSum {
  float max, sum;
};

__device__ __forceinline__ float shuffleDown(float value, int offset) {
  return __shfl_down_sync(0xffffffffu, value, offset);
}
__device__ __forceinline__ MaxSum shuffleDown(MaxSum value, int offset) {
  return {shuffleDown(value.max, offset), shuffleDown(value.sum, offset)};
}

/// Lane 0 gets the combination of lanes [0, count) in a fixed tree.
template <typename T, typename Combine>
__device__ T warpReduce(T value, Combine combine, int count) {
  int lane = threadIdx.x % kWarp;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    T other = shuffleDown(value, offset);
    if (lane + offset < count)
      value = combine(value, other);
  }
  return value;
}

/// Every thread gets the block's combination in a fixed tree (warps, then the warps' results
/// in order), so results never depend on timing. The block must be whole warps. Consecutive
/// calls need no barrier in between: a call writes `partial` after the last call's second
/// barrier, before which warp 0 read it, and `total` after its own first barrier, which every
/// thread reaches only once it has read the last call's total.
template <typename T, typename Combine>
__device__ T blockReduce(T value, Combine combine) {
  __shared__ T partial[kWarp];
  __shared__ T total;
  int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  value = warpReduce(value, combine, kWarp);
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  if (warp == 0) {
    int warps = blockDim.x / kWarp;
    value = warpReduce(lane < warps ? partial[lane] : value, combine, warps);
    if (lane == 0)
      total = value;
  }
  __syncthreads();
  return total;
}

/// Who works on one line (a row, or an output's reduced extent): a whole block, which ends
/// with a tree reduction, or a single thread, for short lines or strided ones a block would
/// read uncoalesced. Lines are handed out grid-stride; in a block the loop is uniform.
template <bool Block>
struct Team {
  __device__ static int64_t firstItem() {
    return Block ? blockIdx.x : static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  }
  __device__ static int64_t itemStep() {
    return Block ? gridDim.x : static_cast<int64_t>(gridDim.x) * blockDim.x;
  }
  __device__ static int64_t rank() { return Block ? threadIdx.x : 0; }
  __device__ static int64_t size() { return Block ? blockDim.x : 1; }
  template <typename T, typename Combine>
  __device__ static T reduce(T value, Combine combine) {
    if constexpr (Block)
      return blockReduce(value, combine);
    else
      return value;
  }
};

/// Adds x to the statistics as the host's two passes count it: NaN propagates, -inf adds
/// nothing and an infinite maximum makes the sum NaN (the host's exp(inf - inf)). The fast
/// exp is enough for the sum's terms and keeps 128k-wide rows memory bound.
__device__ __forceinline__ void accumulate(MaxSum &state, float x) {
  if (x > state.max) {
    state.sum = state.sum * __expf(state.max - x) + (isinf(x) ? NAN : 1.f);
    state.max = x;
  } else if (x != -INFINITY) {
    state.sum += __expf(x - state.max);
  }
}

/// Rescaling is skipped at equal maxima so that -inf (nothing seen) merges without NaN.
struct MergeMaxSum {
  __device__ static float rescaled(MaxSum s, float max) {
    return s.max == max ? s.sum : s.sum * __expf(s.max - max);
  }
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
    float max = fmaxf(a.max, b.max);
    return {max, rescaled(a, max) + rescaled(b, max)};
  }
};

/// The statistics of the line of `length` elements at base, base + stride, ...
template <bool Block>
__device__ MaxSum lineMaxSum(Ref x, int64_t base, int64_t length, int64_t stride) {
  MaxSum state{-INFINITY, 0.f};
  for (int64_t l = Team<Block>::rank(); l < length; l += Team<Block>::size())
    accumulate(state, loadReal(x, base + l * stride));
  return Team<Block>::reduce(state, MergeMaxSum{});
}

// ---- Reductions over axes -------------------------------------------------------------------

/// Dimensions (outermost first) with the stride each moves by in some tensor.
struct Dims {
  int rank;
  int64_t size[kMaxDims], stride[kMaxDims];
};

/// The offset of element `index` of dims, read row-major. Unrolled with a guard so the sizes
/// are read straight from the kernel's parameters; the outermost needs no division.
__device__ __forceinline__ int64_t offsetOf(const Dims &dims, int64_t index) {
  int64_t offset = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d > 0; --d)
    if (d < dims.rank) {
      offset += index % dims.size[d] * dims.stride[d];
      index /= dims.size[d];
    }
  return offset + index * dims.stride[0];
}

/// A reduction's layout over the input: output group g starts at offsetOf(kept, g), its
/// reduced element r lies offsetOf(reduced, r) further, and input element i belongs to group
/// offsetOf(groupOf, i).
struct Geometry {
  Dims kept, reduced, groupOf;
  int64_t groups, length;
};

struct Reduction {
  Shape kept, dropped;
  Geometry geometry;
  /// The innermost axes are reduced, so a block reads a group's elements contiguously.
  bool lastReduced;
};

/// The host's reductionGroups, plus a layout that merges size-1 axes away and joins
/// neighbouring axes that are both kept or both reduced: [outer, reduced, inner] in the usual
/// case, any interleaving up to kMaxDims runs otherwise.
Reduction reductionOf(const KernelArgs &args, const Shape &shape) {
  Reduction reduction{};
  std::vector<bool> reduced;
  std::vector<int64_t> axes = args.attrInts("axes");
  if (std::string error = reductionShapes(shape, axes, reduced, reduction.kept, reduction.dropped);
      !error.empty())
    args.fail(error);

  std::vector<std::pair<int64_t, bool>> runs;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!runs.empty() && runs.back().second == reduced[d])
      runs.back().first *= shape[d];
    else
      runs.emplace_back(shape[d], reduced[d]);
  }
  if (runs.size() > static_cast<size_t>(kMaxDims)) {
    std::string list;
    for (int64_t axis : axes)
      list += (list.empty() ? "" : ", ") + std::to_string(axis);
    args.fail("reducing axes [" + list + "] of a rank-" + std::to_string(shape.size()) +
              " tensor alternates kept and reduced axes " + std::to_string(runs.size()) +
              " times; the CUDA kernels handle at most " + std::to_string(kMaxDims));
  }

  Geometry &geometry = reduction.geometry;
  std::vector<int64_t> inputStrides(runs.size());
  int64_t stride = 1, groupStride = 1;
  for (size_t k = runs.size(); k-- > 0;) {
    inputStrides[k] = stride;
    stride *= runs[k].first;
    geometry.groupOf.size[k] = runs[k].first;
    geometry.groupOf.stride[k] = runs[k].second ? 0 : groupStride;
    if (!runs[k].second)
      groupStride *= runs[k].first;
  }
  geometry.groupOf.rank = static_cast<int>(runs.size());
  geometry.groups = geometry.length = 1;
  for (size_t k = 0; k < runs.size(); ++k) {
    Dims &dims = runs[k].second ? geometry.reduced : geometry.kept;
    dims.size[dims.rank] = runs[k].first;
    dims.stride[dims.rank] = inputStrides[k];
    ++dims.rank;
    (runs[k].second ? geometry.length : geometry.groups) *= runs[k].first;
  }
  reduction.lastReduced = !runs.empty() && runs.back().second;
  return reduction;
}

struct SumOp {
  __device__ float identity() const { return 0.f; }
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ float element(Ref x, int64_t offset, int64_t) const { return loadReal(x, offset); }
};

/// NaN wins, as in torch.amax and the host.
struct MaxOp {
  __device__ float identity() const { return -INFINITY; }
  __device__ float operator()(float a, float b) const { return isnan(b) || b > a ? b : a; }
  __device__ float element(Ref x, int64_t offset, int64_t) const { return loadReal(x, offset); }
};

/// Counts the elements equal to their group's maximum (exact below 2^24 ties a group).
struct TiesOp {
  const float *maxima;
  __device__ float identity() const { return 0.f; }
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ float element(Ref x, int64_t offset, int64_t group) const {
    return loadReal(x, offset) == maxima[group] ? 1.f : 0.f;
  }
};

/// Item c * groups + g reduces chunk c of group g: straight into dest[g] (divided by
/// `divisor`, for means) when there is one chunk, else into partial[item].
template <bool Block, typename Op>
__global__ void reduceKernel(Ref x, Geometry geometry, Op op, int64_t chunk, int64_t chunks,
                             Ref dest, float divisor, float *partial) {
  using T = Team<Block>;
  int64_t items = geometry.groups * chunks;
  for (int64_t item = T::firstItem(); item < items; item += T::itemStep()) {
    int64_t group = item % geometry.groups, begin = item / geometry.groups * chunk;
    int64_t end = lesser(geometry.length, begin + chunk);
    int64_t base = offsetOf(geometry.kept, group);
    float acc = op.identity();
    for (int64_t r = begin + T::rank(); r < end; r += T::size())
      acc = op(acc, op.element(x, base + offsetOf(geometry.reduced, r), group));
    acc = T::reduce(acc, op);
    if (T::rank() == 0) {
      if (chunks == 1)
        storeReal(dest, group, acc / divisor);
      else
        partial[item] = acc;
    }
  }
}

/// dest[i] = the chunks' partial[c * outputs + i] combined in chunk order, over `divisor`.
template <typename Op>
__global__ void combinePartialsKernel(Op op, const float *partial, int64_t outputs,
                                      int64_t chunks, Ref dest, float divisor) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = op.identity();
    for (int64_t c = 0; c < chunks; ++c)
      acc = op(acc, partial[c * outputs + i]);
    storeReal(dest, i, acc / divisor);
  }
}

template <typename Op>
void combinePartials(const KernelArgs &args, Op op, const float *partial, int64_t outputs,
                     int64_t chunks, Ref dest, float divisor) {
  combinePartialsKernel<<<gridFor(ceilDiv(outputs, kThreads)), kThreads, 0, args.stream>>>(
      op, partial, outputs, chunks, dest, divisor);
  checkLaunch(args);
}

/// Reduces x into dest[group] / divisor. A block takes a group when its elements are
/// innermost and many; otherwise a thread takes one, and neighbouring threads read
/// neighbouring kept elements. Few groups split their extent into chunks (two passes).
template <typename Op>
void reduceInto(const KernelArgs &args, Ref x, const Reduction &reduction, Op op, Ref dest,
                float divisor) {
  const Geometry &geometry = reduction.geometry;
  if (geometry.groups == 0)
    return;
  bool block = reduction.lastReduced && geometry.length >= kBlockLine;
  int threads = block ? lineThreads(geometry.length) : kThreads;
  Split split = block ? splitReduction(geometry.groups, geometry.length, threads, 8 * threads)
                      : splitReduction(geometry.groups, geometry.length, 1, 32);
  int64_t items = geometry.groups * split.chunks;
  float *partial = split.chunks > 1 ? scratchFloats(args, items) : nullptr;
  if (block)
    reduceKernel<true><<<gridFor(items), threads, 0, args.stream>>>(
        x, geometry, op, split.chunk, split.chunks, dest, divisor, partial);
  else
    reduceKernel<false><<<gridFor(ceilDiv(items, kThreads)), kThreads, 0, args.stream>>>(
        x, geometry, op, split.chunk, split.chunks, dest, divisor, partial);
  checkLaunch(args);
  if (split.chunks > 1)
    combinePartials(args, op, partial, geometry.groups, split.chunks, dest, divisor);
}

enum class Reduce { Sum, Mean, Max };

void reduce(const KernelArgs &args, Reduce kind) {
  args.expectCounts(1, 1, 1);
  const Shape &shape = args.in(0).shape;
  Reduction reduction = reductionOf(args, shape);
  if (args.out(0).shape != (args.flag("keepdims") ? reduction.kept : reduction.dropped))
    args.fail("the result's shape does not match the reduced axes");
  Ref x = args.real(0).ref(), y = args.realResult(0).ref();
  if (kind == Reduce::Max)
    reduceInto(args, x, reduction, MaxOp{}, y, 1.f);
  else
    reduceInto(args, x, reduction, SumOp{}, y,
               kind == Reduce::Mean ? static_cast<float>(reduction.geometry.length) : 1.f);
}

/// Each group's gradient split evenly among the elements equal to its maximum.
__global__ void reduceMaxGradKernel(Ref x, Ref grad, Ref dx, int64_t n, Dims groupOf,
                                    const float *maxima, const float *ties) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t group = offsetOf(groupOf, i);
    storeReal(dx, i, loadReal(x, i) == maxima[group] ? loadReal(grad, group) / ties[group] : 0.f);
  }
}

void reduceMaxGrad(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  const Shape &shape = args.in(0).shape;
  Reduction reduction = reductionOf(args, shape);
  const Geometry &geometry = reduction.geometry;
  if (args.in(1).size() != geometry.groups || args.out(0).shape != shape)
    args.fail("grad and result shapes do not match the reduced axes");
  Ref x = args.real(0).ref(), grad = args.real(1).ref(), dx = args.realResult(0).ref();
  int64_t n = args.in(0).size();
  if (n == 0)
    return;
  float *maxima = scratchFloats(args, geometry.groups);
  float *ties = scratchFloats(args, geometry.groups);
  reduceInto(args, x, reduction, MaxOp{}, floatRef(maxima), 1.f);
  reduceInto(args, x, reduction, TiesOp{maxima}, floatRef(ties), 1.f);
  reduceMaxGradKernel<<<gridFor(ceilDiv(n, kThreads)), kThreads, 0, args.stream>>>(
      x, grad, dx, n, geometry.groupOf, maxima, ties);
  checkLaunch(args);
}

// ---- Softmax ----------------------------------------------------------------------------------

/// Line l of a split along an axis starts at (l / inner) * length * inner + l % inner and
/// steps by inner; blocks only get lines with inner == 1.
__device__ __forceinline__ int64_t lineBase(int64_t line, int64_t length, int64_t inner) {
  return line / inner * length * inner + line % inner;
}

template <bool Block>
__global__ void softmaxKernel(Ref x, Ref y, int64_t lines, int64_t length, int64_t inner) {
  using T = Team<Block>;
  for (int64_t line = T::firstItem(); line < lines; line += T::itemStep()) {
    int64_t base = lineBase(line, length, inner);
    MaxSum stats = lineMaxSum<Block>(x, base, length, inner);
    for (int64_t l = T::rank(); l < length; l += T::size()) {
      int64_t i = base + l * inner;
      storeReal(y, i, expf(loadReal(x, i) - stats.max) / stats.sum);
    }
  }
}

template <bool Block>
__global__ void softmaxGradKernel(Ref y, Ref g, Ref dx, int64_t lines, int64_t length,
                                  int64_t inner) {
  using T = Team<Block>;
  for (int64_t line = T::firstItem(); line < lines; line += T::itemStep()) {
    int64_t base = lineBase(line, length, inner);
    float dot = 0.f;
    for (int64_t l = T::rank(); l < length; l += T::size()) {
      int64_t i = base + l * inner;
      dot += loadReal(g, i) * loadReal(y, i);
    }
    dot = T::reduce(dot, Add{});
    for (int64_t l = T::rank(); l < length; l += T::size()) {
      int64_t i = base + l * inner;
      storeReal(dx, i, loadReal(y, i) * (loadReal(g, i) - dot));
    }
  }
}

/// The sizes around `axis`: elements are at (outer * length + position) * inner + innerIndex.
struct AxisSplit {
  int64_t outer, length, inner;
  int64_t lines() const { return outer * inner; }
  /// A block per line when lines are contiguous and long enough to fill one.
  bool byBlock() const { return inner == 1 && length >= kBlockLine; }
};

AxisSplit splitAt(const KernelArgs &args, const Shape &shape) {
  int64_t axis = args.axis("axis", shape.size());
  if (shape.empty())
    return {1, 1, 1};
  return {product(shape, 0, axis), shape[axis], product(shape, axis + 1, shape.size())};
}

void softmax(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  if (args.in(0).shape != args.out(0).shape)
    args.fail("the result's shape differs from the input's");
  AxisSplit s = splitAt(args, args.in(0).shape);
  Ref x = args.real(0).ref(), y = args.realResult(0).ref();
  if (s.lines() == 0 || s.length == 0)
    return;
  if (s.byBlock())
    softmaxKernel<true><<<gridFor(s.lines()), lineThreads(s.length), 0, args.stream>>>(
        x, y, s.lines(), s.length, s.inner);
  else
    softmaxKernel<false><<<gridFor(ceilDiv(s.lines(), kThreads)), kThreads, 0, args.stream>>>(
        x, y, s.lines(), s.length, s.inner);
  checkLaunch(args);
}

void softmaxGrad(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  const Shape &shape = args.in(0).shape;
  if (args.in(1).shape != shape || args.out(0).shape != shape)
    args.fail("output, grad and result differ in shape");
  AxisSplit s = splitAt(args, shape);
  Ref y = args.real(0).ref(), g = args.real(1).ref(), dx = args.realResult(0).ref();
  if (s.lines() == 0 || s.length == 0)
    return;
  if (s.byBlock())
    softmaxGradKernel<true><<<gridFor(s.lines()), lineThreads(s.length), 0, args.stream>>>(
        y, g, dx, s.lines(), s.length, s.inner);
  else
    softmaxGradKernel<false><<<gridFor(ceilDiv(s.lines(), kThreads)), kThreads, 0,
                               args.stream>>>(y, g, dx, s.lines(), s.length, s.inner);
  checkLaunch(args);
}

// ---- Normalizations ---------------------------------------------------------------------------
// A block per row of d; rows are re-read rather than cached, as a row of up to 8192 stays
// in L1 between the passes. The weight and bias gradients are column sums over all rows,
// taken by normParamGrads from per-row statistics the row kernels leave in scratch.

__device__ float blockSum(float value) { return blockReduce(value, Add{}); }

/// The mean and 1 / sqrt(biased variance + epsilon) of a row, in two passes as on the host.
__device__ float2 rowMoments(Ref x, int64_t base, int64_t d, float epsilon) {
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    sum += loadReal(x, base + j);
  float mean = blockSum(sum) / static_cast<float>(d);
  float squares = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float centered = loadReal(x, base + j) - mean;
    squares += centered * centered;
  }
  return {mean, 1.f / sqrtf(blockSum(squares) / static_cast<float>(d) + epsilon)};
}

/// rms_norm, a block per row, each thread V reals at a time (loadReals).
template <int V>
__global__ void rmsNormKernel(Ref x, Ref w, Ref y, int64_t rows, int64_t d, float epsilon) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t base = row * d;
    float squares = 0.f;
    for (int64_t j = threadIdx.x * V; j < d; j += blockDim.x * V) {
      float xs[V];
      loadReals<V>(x, base + j, xs);
#pragma unroll
      for (int k = 0; k < V; ++k)
        squares += xs[k] * xs[k];
    }
    float inv = 1.f / sqrtf(blockSum(squares) / static_cast<float>(d) + epsilon);
    for (int64_t j = threadIdx.x * V; j < d; j += blockDim.x * V) {
      float xs[V], ws[V], ys[V];
      loadReals<V>(x, base + j, xs);
      loadReals<V>(w, j, ws);
#pragma unroll
      for (int k = 0; k < V; ++k)
        ys[k] = xs[k] * inv * ws[k];
      storeReals<V>(y, base + j, ys);
    }
  }
}

/// rms_norm_grad's input gradient, as rmsNormKernel reads rows; each row's 1 / rms to `invs`.
template <int V>
__global__ void rmsNormGradKernel(Ref x, Ref w, Ref g, Ref dx, int64_t rows, int64_t d,
                                  float epsilon, float *invs) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t base = row * d;
    float squares = 0.f, dot = 0.f;
    for (int64_t j = threadIdx.x * V; j < d; j += blockDim.x * V) {
      float xs[V], ws[V], gs[V];
      loadReals<V>(x, base + j, xs);
      loadReals<V>(w, j, ws);
      loadReals<V>(g, base + j, gs);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        squares += xs[k] * xs[k];
        dot += gs[k] * ws[k] * xs[k];
      }
    }
    squares = blockSum(squares);
    dot = blockSum(dot);
    float inv = 1.f / sqrtf(squares / static_cast<float>(d) + epsilon);
    float correction = inv * inv * inv * dot / static_cast<float>(d);
    for (int64_t j = threadIdx.x * V; j < d; j += blockDim.x * V) {
      float xs[V], ws[V], gs[V], dxs[V];
      loadReals<V>(x, base + j, xs);
      loadReals<V>(w, j, ws);
      loadReals<V>(g, base + j, gs);
#pragma unroll
      for (int k = 0; k < V; ++k)
        dxs[k] = inv * ws[k] * gs[k] - xs[k] * correction;
      storeReals<V>(dx, base + j, dxs);
    }
    if (threadIdx.x == 0)
      invs[row] = inv;
  }
}

__global__ void layerNormKernel(Ref x, Ref w, Ref b, bool hasBias, Ref y, int64_t rows,
                                int64_t d, float epsilon) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t base = row * d;
    float2 moments = rowMoments(x, base, d, epsilon);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float v = (loadReal(x, base + j) - moments.x) * moments.y * loadReal(w, j);
      storeReal(y, base + j, hasBias ? v + loadReal(b, j) : v);
    }
  }
}

__global__ void layerNormGradKernel(Ref x, Ref w, Ref g, Ref dx, int64_t rows, int64_t d,
                                    float epsilon, float *means, float *invs) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t base = row * d;
    float2 moments = rowMoments(x, base, d, epsilon);
    float mean = moments.x, inv = moments.y;
    float sumDn = 0.f, sumDnN = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float dn = loadReal(g, base + j) * loadReal(w, j);
      sumDn += dn;
      sumDnN += dn * ((loadReal(x, base + j) - mean) * inv);
    }
    float meanDn = blockSum(sumDn) / static_cast<float>(d);
    float meanDnN = blockSum(sumDnN) / static_cast<float>(d);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float normalized = (loadReal(x, base + j) - mean) * inv;
      float dn = loadReal(g, base + j) * loadReal(w, j);
      storeReal(dx, base + j, inv * (dn - meanDn - normalized * meanDnN));
    }
    if (threadIdx.x == 0) {
      means[row] = mean;
      invs[row] = inv;
    }
  }
}

/// Item c * d + j sums column j over chunk c of the rows: g * x * inv for rms_norm's weight,
/// g * normalized and g for layer_norm's weight and bias. Neighbouring threads take
/// neighbouring columns, so each row is read coalesced; no atomics, so sums are reproducible.
template <bool Layer>
__global__ void normParamGradKernel(Ref x, Ref g, const float *means, const float *invs,
                                    int64_t rows, int64_t d, int64_t chunk, int64_t chunks,
                                    Ref dw, Ref db, float *dwPartial, float *dbPartial) {
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       item < chunks * d; item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t j = item % d, begin = item / d * chunk, end = lesser(rows, begin + chunk);
    float dwAcc = 0.f, dbAcc = 0.f;
    for (int64_t r = begin; r < end; ++r) {
      float gj = loadReal(g, r * d + j), xj = loadReal(x, r * d + j);
      if constexpr (Layer) {
        dwAcc += gj * ((xj - means[r]) * invs[r]);
        dbAcc += gj;
      } else {
        dwAcc += gj * xj * invs[r];
      }
    }
    if (chunks == 1) {
      storeReal(dw, j, dwAcc);
      if constexpr (Layer)
        storeReal(db, j, dbAcc);
    } else {
      dwPartial[item] = dwAcc;
      if constexpr (Layer)
        dbPartial[item] = dbAcc;
    }
  }
}

/// The weight (and for layer_norm the bias) gradient: rows split into chunks so that narrow
/// rows still fill the device, then the chunks' partials summed in chunk order.
template <bool Layer>
void normParamGrads(const KernelArgs &args, Ref x, Ref g, const float *means, const float *invs,
                    int64_t rows, int64_t d, Ref dw, Ref db) {
  if (d == 0)
    return;
  Split split = splitReduction(d, rows, 1, 32);
  int64_t items = d * split.chunks;
  float *dwPartial = nullptr, *dbPartial = nullptr;
  if (split.chunks > 1) {
    dwPartial = scratchFloats(args, items);
    if constexpr (Layer)
      dbPartial = scratchFloats(args, items);
  }
  normParamGradKernel<Layer><<<gridFor(ceilDiv(items, kThreads)), kThreads, 0, args.stream>>>(
      x, g, means, invs, rows, d, split.chunk, split.chunks, dw, db, dwPartial, dbPartial);
  checkLaunch(args);
  if (split.chunks > 1) {
    combinePartials(args, SumOp{}, dwPartial, d, split.chunks, dw, 1.f);
    if constexpr (Layer)
      combinePartials(args, SumOp{}, dbPartial, d, split.chunks, db, 1.f);
  }
}

/// Whether rows of `d` reals of every tensor of `refs` run in 16-byte pieces (loadReals<8>).
bool inPieces(int64_t d, std::initializer_list<Ref> refs) {
  return d % 8 == 0 && std::all_of(refs.begin(), refs.end(), aligned16);
}

/// The row length (last axis) of a normalization, checking its weight-like operands.
int64_t normRow(const KernelArgs &args, std::initializer_list<size_t> vectors) {
  std::vector<std::pair<size_t, int64_t>> sizes;
  for (size_t operand : vectors)
    sizes.emplace_back(operand, args.in(operand).size());
  int64_t d = 0;
  if (std::string error = mt::normRow(args.in(0).shape, sizes, d); !error.empty())
    args.fail(error);
  return d;
}

/// The host writes through vectors sized by its results' shapes; on the device a result too
/// small would be written past, so its size is checked.
void expectResultSize(const KernelArgs &args, size_t result, int64_t size) {
  if (args.out(result).size() != size)
    args.fail("result " + std::to_string(result) + " has " +
              std::to_string(args.out(result).size()) + " elements, not " +
              std::to_string(size));
}

int64_t rowsOf(const KernelArgs &args, int64_t d) {
  return args.in(0).size() / std::max<int64_t>(d, 1);
}

void rmsNorm(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  int64_t d = normRow(args, {1});
  float epsilon = static_cast<float>(args.attrFloat("epsilon"));
  Ref x = args.real(0).ref(), w = args.real(1).ref(), y = args.realResult(0).ref();
  expectResultSize(args, 0, args.in(0).size());
  int64_t rows = rowsOf(args, d);
  if (rows == 0)
    return;
  auto kernel = inPieces(d, {x, w, y}) ? rmsNormKernel<8> : rmsNormKernel<1>;
  kernel<<<gridFor(rows), lineThreads(d), 0, args.stream>>>(x, w, y, rows, d, epsilon);
  checkLaunch(args);
}

void rmsNormGrad(const KernelArgs &args) {
  args.expectCounts(3, 3, 2);
  int64_t d = normRow(args, {1});
  if (args.in(2).shape != args.in(0).shape)
    args.fail("grad and input differ in shape");
  float epsilon = static_cast<float>(args.attrFloat("epsilon"));
  Ref x = args.real(0).ref(), w = args.real(1).ref(), g = args.real(2).ref();
  Ref dx = args.realResult(0).ref(), dw = args.realResult(1).ref();
  expectResultSize(args, 0, args.in(0).size());
  expectResultSize(args, 1, d);
  int64_t rows = rowsOf(args, d);
  float *invs = scratchFloats(args, rows);
  if (rows > 0) {
    auto kernel = inPieces(d, {x, w, g, dx}) ? rmsNormGradKernel<8> : rmsNormGradKernel<1>;
    kernel<<<gridFor(rows), lineThreads(d), 0, args.stream>>>(x, w, g, dx, rows, d, epsilon, invs);
    checkLaunch(args);
  }
  normParamGrads<false>(args, x, g, nullptr, invs, rows, d, dw, Ref{});
}

void layerNorm(const KernelArgs &args) {
  args.expectCounts(2, 3, 1);
  bool hasBias = args.operandCount() == 3;
  int64_t d = hasBias ? normRow(args, {1, 2}) : normRow(args, {1});
  float epsilon = static_cast<float>(args.attrFloat("epsilon"));
  Ref x = args.real(0).ref(), w = args.real(1).ref();
  Ref b = hasBias ? args.real(2).ref() : Ref{};
  Ref y = args.realResult(0).ref();
  expectResultSize(args, 0, args.in(0).size());
  int64_t rows = rowsOf(args, d);
  if (rows == 0)
    return;
  layerNormKernel<<<gridFor(rows), lineThreads(d), 0, args.stream>>>(x, w, b, hasBias, y, rows,
                                                                      d, epsilon);
  checkLaunch(args);
}

void layerNormGrad(const KernelArgs &args) {
  args.expectCounts(3, 3, 3);
  int64_t d = normRow(args, {1});
  if (args.in(2).shape != args.in(0).shape)
    args.fail("grad and input differ in shape");
  float epsilon = static_cast<float>(args.attrFloat("epsilon"));
  Ref x = args.real(0).ref(), w = args.real(1).ref(), g = args.real(2).ref();
  Ref dx = args.realResult(0).ref(), dw = args.realResult(1).ref(), db = args.realResult(2).ref();
  expectResultSize(args, 0, args.in(0).size());
  expectResultSize(args, 1, d);
  expectResultSize(args, 2, d);
  int64_t rows = rowsOf(args, d);
  float *means = scratchFloats(args, rows), *invs = scratchFloats(args, rows);
  if (rows > 0) {
    layerNormGradKernel<<<gridFor(rows), lineThreads(d), 0, args.stream>>>(x, w, g, dx, rows, d,
                                                                            epsilon, means, invs);
    checkLaunch(args);
  }
  normParamGrads<true>(args, x, g, means, invs, rows, d, dw, db);
}

// ---- Cross-entropy ----------------------------------------------------------------------------
// The host rejects a target outside the vocabulary; the device cannot stop the step without
// a synchronization, so such a row's loss and gradient are NaN instead: the error shows in
// the loss rather than passing unnoticed, and nothing is clamped. A row whose target is
// kIgnoredTarget (padding) adds nothing, and the mean is over the other rows.

__device__ __forceinline__ bool inVocabulary(int64_t target, int64_t v) {
  return target >= 0 && target < v;
}

/// Each row's logsumexp(row) - row[target], into losses[row] (0 for an ignored row).
__global__ void crossEntropyRowsKernel(Ref logits, Ref targets, int64_t rows, int64_t v,
                                       float *losses) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t target = loadInt(targets, row);
    if (target == kIgnoredTarget) {
      if (threadIdx.x == 0)
        losses[row] = 0.f;
      continue;
    }
    int64_t base = row * v;
    MaxSum stats = lineMaxSum<true>(logits, base, v, 1);
    if (threadIdx.x == 0)
      losses[row] = inVocabulary(target, v)
                        ? stats.max + logf(stats.sum) - loadReal(logits, base + target)
                        : NAN;
  }
}

/// The rows whose targets count, by one block in a fixed order, into *counted.
__global__ void countTargetsKernel(Ref targets, int64_t rows, float *counted) {
  float count = 0.f;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    count += loadInt(targets, i) != kIgnoredTarget;
  count = blockSum(count);
  if (threadIdx.x == 0)
    *counted = count;
}

/// The mean of the rows' losses over the rows counted, summed by one block in a fixed order
/// (0 / 0 = NaN for no rows, as on the host).
__global__ void crossEntropyMeanKernel(const float *losses, int64_t rows, const float *counted,
                                       Ref loss) {
  float total = 0.f;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    total += losses[i];
  total = blockSum(total);
  if (threadIdx.x == 0)
    storeReal(loss, 0, total / *counted);
}

/// (softmax(row) - onehot(target)) * grad / rows counted; 0 for an ignored row.
__global__ void crossEntropyGradKernel(Ref logits, Ref targets, Ref grad, Ref dx, int64_t rows,
                                       int64_t v, const float *counted) {
  float scale = loadReal(grad, 0) / *counted;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t base = row * v;
    int64_t target = loadInt(targets, row);
    if (target == kIgnoredTarget) {
      for (int64_t j = threadIdx.x; j < v; j += blockDim.x)
        storeReal(dx, base + j, 0.f);
      continue;
    }
    MaxSum stats = lineMaxSum<true>(logits, base, v, 1);
    float logSumExp = stats.max + logf(stats.sum);
    bool valid = inVocabulary(target, v);
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
      float p = expf(loadReal(logits, base + j) - logSumExp);
      storeReal(dx, base + j, valid ? (p - (j == target ? 1.f : 0.f)) * scale : NAN);
    }
  }
}

/// The vocabulary size and the position count of a cross-entropy, checking the targets' count.
std::pair<int64_t, int64_t> checkTargets(const KernelArgs &args) {
  const Shape &shape = args.in(0).shape;
  if (shape.empty())
    args.fail("the logits must have rank 1 or more");
  int64_t v = shape.back();
  int64_t positions = product(shape, 0, shape.size() - 1);
  int64_t targets = args.integer(1).size();
  if (targets != positions)
    args.fail("has " + std::to_string(targets) + " targets for " + std::to_string(positions) +
              " positions");
  return {v, positions};
}

void crossEntropy(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  auto [v, positions] = checkTargets(args);
  if (args.out(0).size() != 1)
    args.fail("the result must be a scalar");
  Ref logits = args.real(0).ref(), targets = args.integer(1).ref();
  Ref loss = args.realResult(0).ref();
  float *losses = scratchFloats(args, scratch::crossEntropyFloats(positions)),
        *counted = losses + positions;
  if (positions > 0) {
    crossEntropyRowsKernel<<<gridFor(positions), lineThreads(v), 0, args.stream>>>(
        logits, targets, positions, v, losses);
    checkLaunch(args);
  }
  countTargetsKernel<<<1, 1024, 0, args.stream>>>(targets, positions, counted);
  checkLaunch(args);
  crossEntropyMeanKernel<<<1, 1024, 0, args.stream>>>(losses, positions, counted, loss);
  checkLaunch(args);
}

void crossEntropyGrad(const KernelArgs &args) {
  args.expectCounts(3, 3, 1);
  auto [v, positions] = checkTargets(args);
  if (args.in(2).size() != 1)
    args.fail("the grad must be a scalar");
  if (args.out(0).shape != args.in(0).shape)
    args.fail("the result's shape differs from the logits'");
  Ref logits = args.real(0).ref(), targets = args.integer(1).ref(), grad = args.real(2).ref();
  Ref dx = args.realResult(0).ref();
  if (positions == 0 || v == 0)
    return;
  float *counted = scratchFloats(args, 1);
  countTargetsKernel<<<1, 1024, 0, args.stream>>>(targets, positions, counted);
  checkLaunch(args);
  crossEntropyGradKernel<<<gridFor(positions), lineThreads(v), 0, args.stream>>>(
      logits, targets, grad, dx, positions, v, counted);
  checkLaunch(args);
}

// ---- Cross-entropy fused with its head ------------------------------------------------------
// mt.linear_cross_entropy makes the logits a chunk of rows at a time in fp32 scratch (a
// cuBLASLt product) and reduces them with the kernels above; the gradient remakes each
// chunk's logits, turns them into their gradient in place, and multiplies that (in bf16 when
// the operands are) into the chunk's input rows and, summed over the chunks, the head's
// gradient.

/// A linear cross-entropy's extents: input [rows, k], the head [k, v] ([v, k] transposed).
struct LinearLoss {
  int64_t rows, k, v, chunk;
  bool transposed;
};

LinearLoss linearLossOf(const KernelArgs &args) {
  const Shape &xs = args.in(0).shape, &ws = args.in(1).shape;
  bool transposed = args.flag("transpose_weight");
  if (xs.empty() || ws.size() != 2 || xs.back() != (transposed ? ws[1] : ws[0]))
    args.fail("the input's last axis does not meet the weight");
  int64_t rows = product(xs, 0, xs.size() - 1);
  LinearLoss loss{rows, xs.back(), transposed ? ws[0] : ws[1],
                  std::min(args.attrInt("chunk"), rows), transposed};
  if (args.attrInt("chunk") < 1)
    args.fail("chunk must be at least one row");
  if (args.integer(2).size() != rows)
    args.fail("has " + std::to_string(args.integer(2).size()) + " targets for " +
              std::to_string(rows) + " positions");
  return loss;
}

/// `ref` moved on by `elements`.
Ref shifted(Ref ref, int64_t elements) {
  return {static_cast<char *>(ref.data) + elements * widthOf(ref.storage), ref.storage};
}

/// Enqueues the logits of input rows [first, first + count) into fp32 `logits`.
void chunkLogits(const KernelArgs &args, const LinearLoss &loss, cudaDataType_t type, const void *x,
                 const void *w, int64_t first, int64_t count, float *logits) {
  MatmulShape shape;
  shape.m = count;
  shape.n = loss.v;
  shape.k = loss.k;
  shape.transposeB = loss.transposed;
  shape.input = type;
  shape.output = CUDA_R_32F;
  int64_t width = type == CUDA_R_16BF ? 2 : 4;
  args.blas.matmul(shape, static_cast<const char *>(x) + first * loss.k * width, w, logits, false,
                   args.stream);
}

void linearCrossEntropy(const KernelArgs &args) {
  args.expectCounts(3, 3, 1);
  LinearLoss loss = linearLossOf(args);
  if (args.out(0).size() != 1)
    args.fail("the result must be a scalar");
  cudaDataType_t type = productInputType(args);
  const void *x = operandAs(args, 0, type), *w = operandAs(args, 1, type);
  float *logits = scratchFloats(args, scratch::linearLossFloats(loss.chunk * loss.v, loss.rows));
  float *losses = logits + loss.chunk * loss.v, *counted = losses + loss.rows;
  Ref targets = args.integer(2).ref();
  for (int64_t first = 0; first < loss.rows && loss.v > 0; first += loss.chunk) {
    int64_t count = std::min(loss.chunk, loss.rows - first);
    chunkLogits(args, loss, type, x, w, first, count, logits);
    crossEntropyRowsKernel<<<gridFor(count), lineThreads(loss.v), 0, args.stream>>>(
        floatRef(logits), shifted(targets, first), count, loss.v, losses + first);
    checkLaunch(args);
  }
  countTargetsKernel<<<1, 1024, 0, args.stream>>>(targets, loss.rows, counted);
  checkLaunch(args);
  crossEntropyMeanKernel<<<1, 1024, 0, args.stream>>>(losses, loss.rows, counted,
                                                      args.realResult(0).ref());
  checkLaunch(args);
}

void linearCrossEntropyGrad(const KernelArgs &args) {
  args.expectCounts(4, 4, 2);
  LinearLoss loss = linearLossOf(args);
  if (args.in(3).size() != 1)
    args.fail("the grad must be a scalar");
  if (args.out(0).shape != args.in(0).shape || args.out(1).shape != args.in(1).shape)
    args.fail("the results' shapes differ from the input's and the weight's");
  cudaDataType_t type = productInputType(args);
  const void *x = operandAs(args, 0, type), *w = operandAs(args, 1, type);
  int64_t width = type == CUDA_R_16BF ? 2 : 4, cells = loss.chunk * loss.v;
  // The chunk's fp32 logits (their gradient, in place), its bf16 copy for the products, then
  // the count.
  const scratch::LinearLossGradScratch layout(cells, width == 2);
  auto *region = static_cast<char *>(args.scratch(layout.bytes));
  auto *logits = reinterpret_cast<float *>(region);
  const void *slopes = region + layout.slopes;
  auto *counted = reinterpret_cast<float *>(region + layout.count);
  Ref targets = args.integer(2).ref();
  countTargetsKernel<<<1, 1024, 0, args.stream>>>(targets, loss.rows, counted);
  checkLaunch(args);
  const DeviceTensor &dx = args.realResult(0), &dw = args.realResult(1);
  cudaDataType_t dxType = productOutputType(args, 0), dwType = productOutputType(args, 1);
  int64_t dxWidth = dxType == CUDA_R_16BF ? 2 : 4;
  for (int64_t first = 0; first < loss.rows && loss.v > 0; first += loss.chunk) {
    int64_t count = std::min(loss.chunk, loss.rows - first);
    chunkLogits(args, loss, type, x, w, first, count, logits);
    crossEntropyGradKernel<<<gridFor(count), lineThreads(loss.v), 0, args.stream>>>(
        floatRef(logits), shifted(targets, first), args.real(3).ref(), floatRef(logits), count,
        loss.v, counted);
    checkLaunch(args);
    if (width == 2)
      convertToBf16(args, floatRef(logits), const_cast<void *>(slopes), count * loss.v);
    const char *rows = static_cast<const char *>(x) + first * loss.k * width;
    // dx = dlogits @ head^T (the head as [k, v]; as [v, k] it is not transposed).
    MatmulShape input;
    input.m = count;
    input.n = loss.k;
    input.k = loss.v;
    input.transposeB = !loss.transposed;
    input.input = type;
    input.output = dxType;
    args.blas.matmul(input, slopes, w, static_cast<char *>(dx.data) + first * loss.k * dxWidth,
                     false, args.stream);
    // The head's gradient += dlogits^T @ x ([v, k]) or x^T @ dlogits ([k, v]).
    MatmulShape head;
    head.transposeA = true;
    head.k = count;
    head.m = loss.transposed ? loss.v : loss.k;
    head.n = loss.transposed ? loss.k : loss.v;
    head.input = type;
    head.output = dwType;
    args.blas.matmul(head, loss.transposed ? slopes : rows, loss.transposed ? rows : slopes,
                     dw.data, first > 0, args.stream);
  }
}

} // namespace

void addNormalizationKernels(DeviceKernelMap &kernels) {
  kernels["mt.reduce_sum"] = [](const KernelArgs &args) { reduce(args, Reduce::Sum); };
  kernels["mt.reduce_mean"] = [](const KernelArgs &args) { reduce(args, Reduce::Mean); };
  kernels["mt.reduce_max"] = [](const KernelArgs &args) { reduce(args, Reduce::Max); };
  kernels["mt.reduce_max_grad"] = reduceMaxGrad;
  kernels["mt.softmax"] = softmax;
  kernels["mt.softmax_grad"] = softmaxGrad;
  kernels["mt.rms_norm"] = rmsNorm;
  kernels["mt.rms_norm_grad"] = rmsNormGrad;
  kernels["mt.layer_norm"] = layerNorm;
  kernels["mt.layer_norm_grad"] = layerNormGrad;
  kernels["mt.cross_entropy"] = crossEntropy;
  kernels["mt.cross_entropy_grad"] = crossEntropyGrad;
  kernels["mt.linear_cross_entropy"] = linearCrossEntropy;
  kernels["mt.linear_cross_entropy_grad"] = linearCrossEntropyGrad;
}

} // namespace mt::cuda
