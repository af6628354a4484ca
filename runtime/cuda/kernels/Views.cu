// Data movement on the device, the port of runtime/host/Views.cpp: reshape, transpose, slice
// and its gradient pad, concat, expand, gather and its gradient scatter_add.
#include "plan/KernelScratch.h"
#include "runtime/KernelShapes.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/kernels/Access.cuh"
#include "runtime/cuda/kernels/KernelArgs.h"

#include <math_constants.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mt::cuda {
namespace {

using Shape = std::vector<int64_t>;

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}
int64_t product(const Shape &shape) { return product(shape, 0, shape.size()); }

/// A row-major walk over a shape: element i moves from src[srcBase + sum(index * srcStrides)]
/// to dst[dstBase + sum(index * dstStrides)]. Axes are stored innermost first.
struct Walk {
  int rank;
  int64_t shape[kMaxRank];
  int64_t srcStrides[kMaxRank], dstStrides[kMaxRank];
  int64_t srcBase, dstBase;
};

/// The walk over `shape` with size-1 axes dropped and neighbours merged where both sides stay
/// contiguous, so that most moves index few axes and contiguous ones become one copy.
Walk makeWalk(const KernelArgs &args, const Shape &shape, const Shape &srcStrides,
              int64_t srcBase, const Shape &dstStrides, int64_t dstBase) {
  Shape sizes, src, dst;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1)
      continue;
    if (!sizes.empty() && srcStrides[d] == src.back() * sizes.back() &&
        dstStrides[d] == dst.back() * sizes.back()) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    src.push_back(srcStrides[d]);
    dst.push_back(dstStrides[d]);
  }
  if (sizes.size() > kMaxRank)
    args.fail("moves elements along " + std::to_string(sizes.size()) +
              " axes that do not merge; the device kernels index at most " +
              std::to_string(kMaxRank));
  Walk walk{};
  walk.rank = static_cast<int>(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    walk.shape[k] = sizes[k];
    walk.srcStrides[k] = src[k];
    walk.dstStrides[k] = dst[k];
  }
  walk.srcBase = srcBase;
  walk.dstBase = dstBase;
  return walk;
}

/// Moves element s of one tensor to element d of another: raw bits when both store alike,
/// else through fp32 (reals) or int64 (integers).
template <typename E>
struct Copy {
  const E *src;
  E *dst;
  __device__ void operator()(int64_t s, int64_t d) const { dst[d] = src[s]; }
};
struct ConvertReal {
  Ref src, dst;
  __device__ void operator()(int64_t s, int64_t d) const { storeReal(dst, d, loadReal(src, s)); }
};
struct ConvertInt {
  Ref src, dst;
  __device__ void operator()(int64_t s, int64_t d) const { storeInt(dst, d, loadInt(src, s)); }
};

/// Calls launch(move) with the mover for `from`'s elements into `to`, whose element kinds the
/// caller has checked to agree.
template <typename F>
void withMove(const DeviceTensor &from, const DeviceTensor &to, F &&launch) {
  if (from.storage == to.storage) {
    switch (widthOf(from.storage)) {
    case 1:
      return launch(Copy<uint8_t>{static_cast<const uint8_t *>(from.data),
                                  static_cast<uint8_t *>(to.data)});
    case 2:
      return launch(Copy<uint16_t>{static_cast<const uint16_t *>(from.data),
                                   static_cast<uint16_t *>(to.data)});
    case 4:
      return launch(Copy<uint32_t>{static_cast<const uint32_t *>(from.data),
                                   static_cast<uint32_t *>(to.data)});
    default:
      return launch(Copy<uint64_t>{static_cast<const uint64_t *>(from.data),
                                   static_cast<uint64_t *>(to.data)});
    }
  }
  if (from.isFloat())
    launch(ConvertReal{from.ref(), to.ref()});
  else
    launch(ConvertInt{from.ref(), to.ref()});
}

/// 16 bytes a move: what a walk moves in pieces of `lanes` elements.
struct alignas(16) Piece {
  uint4 bits;
};

/// The walk in pieces of `lanes` elements, when its innermost axis runs contiguously on both
/// sides in whole pieces, every stride and base is a whole number of pieces and both tensors
/// start 16-byte aligned: a transpose that keeps the last axis (the heads around attention),
/// a slice or concat along an outer one. Moving 16 bytes a thread rather than an element
/// takes such moves from a fraction of the memory's speed to near it.
bool inPieces(Walk &walk, int64_t lanes, const void *from, const void *to) {
  if (walk.rank == 0 || walk.srcStrides[0] != 1 || walk.dstStrides[0] != 1 ||
      walk.shape[0] % lanes != 0 || walk.srcBase % lanes != 0 || walk.dstBase % lanes != 0 ||
      reinterpret_cast<uintptr_t>(from) % 16 != 0 || reinterpret_cast<uintptr_t>(to) % 16 != 0)
    return false;
  for (int k = 1; k < walk.rank; ++k)
    if (walk.srcStrides[k] % lanes != 0 || walk.dstStrides[k] % lanes != 0)
      return false;
  walk.shape[0] /= lanes;
  for (int k = 1; k < walk.rank; ++k) {
    walk.srcStrides[k] /= lanes;
    walk.dstStrides[k] /= lanes;
  }
  walk.srcBase /= lanes;
  walk.dstBase /= lanes;
  return true;
}

/// 32-bit indexing when every offset fits, because 64-bit division is emulated and would
/// make these memory-bound kernels compute bound.
bool narrow(int64_t n, const DeviceTensor &from, const DeviceTensor &to) {
  return std::max({n, from.size(), to.size()}) <= INT32_MAX;
}

template <typename Index, typename Move>
__global__ void walkKernel(Walk walk, Index n, Move move) {
  Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  Index rest = i, src = static_cast<Index>(walk.srcBase), dst = static_cast<Index>(walk.dstBase);
  // Unrolled over the fixed bound so the walk's arrays stay in parameter space.
#pragma unroll
  for (int k = 0; k < kMaxRank; ++k)
    if (k < walk.rank) {
      Index size = static_cast<Index>(walk.shape[k]);
      Index quotient = rest / size;
      Index at = rest - quotient * size;
      rest = quotient;
      src += at * static_cast<Index>(walk.srcStrides[k]);
      dst += at * static_cast<Index>(walk.dstStrides[k]);
    }
  move(src, dst);
}

/// Moves the elements of a walk over `shape` from `from` to `to`: one cudaMemcpyAsync when
/// both store alike and the walk is contiguous on both sides, else a kernel.
void move(const KernelArgs &args, const DeviceTensor &from, const DeviceTensor &to,
          const Shape &shape, const Shape &srcStrides, int64_t srcBase, const Shape &dstStrides,
          int64_t dstBase) {
  int64_t n = product(shape);
  if (n == 0)
    return;
  Walk walk = makeWalk(args, shape, srcStrides, srcBase, dstStrides, dstBase);
  bool contiguous =
      walk.rank == 0 || (walk.rank == 1 && walk.srcStrides[0] == 1 && walk.dstStrides[0] == 1);
  if (contiguous && from.storage == to.storage) {
    int64_t width = widthOf(to.storage);
    MT_CUDA_CHECK(cudaMemcpyAsync(static_cast<char *>(to.data) + dstBase * width,
                                  static_cast<const char *>(from.data) + srcBase * width,
                                  static_cast<size_t>(n * width), cudaMemcpyDeviceToDevice,
                                  args.stream));
    return;
  }
  auto launch = [&](auto mover) {
    if (narrow(n, from, to))
      walkKernel<uint32_t><<<blocksFor(n, kThreads), kThreads, 0, args.stream>>>(
          walk, static_cast<uint32_t>(n), mover);
    else
      walkKernel<int64_t><<<blocksFor(n, kThreads), kThreads, 0, args.stream>>>(walk, n, mover);
    checkLaunch(args);
  };
  int64_t width = widthOf(to.storage);
  if (from.storage == to.storage && 16 % width == 0 &&
      inPieces(walk, 16 / width, from.data, to.data)) {
    n /= 16 / width;
    launch(Copy<Piece>{static_cast<const Piece *>(from.data), static_cast<Piece *>(to.data)});
    return;
  }
  withMove(from, to, launch);
}

/// The host's byElementKind check: every operand holds the result's kind of element.
void expectSameKind(const KernelArgs &args) {
  bool isFloat = args.out(0).isFloat();
  for (size_t i = 0; i < args.operandCount(); ++i)
    if (args.in(i).isFloat() != isFloat)
      args.fail("operand " + std::to_string(i) + " and the result differ in element kind");
}

void reshape(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const DeviceTensor &in = args.in(0), &out = args.out(0);
  if (in.size() != out.size())
    args.fail("reshapes " + std::to_string(in.size()) + " elements into " +
              std::to_string(out.size()));
  expectSameKind(args);
  // A view (mtc placed the result on its operand's bytes) copies nothing; otherwise the
  // result has bytes of its own: a copy, or a conversion of storage.
  if (in.data == out.data && in.storage == out.storage)
    return;
  move(args, in, out, {in.size()}, {1}, 0, {1}, 0);
}

void transpose(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const Shape &in = args.in(0).shape, &out = args.out(0).shape;
  Shape permutation = args.attrInts("permutation");
  if (permutation.size() != in.size() || out.size() != in.size())
    args.fail("the permutation, input and result differ in rank");
  Shape inStrides = stridesOf(in), strides(in.size());
  std::vector<bool> seen(in.size(), false);
  for (size_t d = 0; d < permutation.size(); ++d) {
    int64_t from = permutation[d];
    if (from < 0 || from >= static_cast<int64_t>(in.size()) || seen[from] || out[d] != in[from])
      args.fail("permutation entry " + std::to_string(d) + " = " + std::to_string(from) +
                " does not map the input's shape to the result's");
    seen[from] = true;
    strides[d] = inStrides[from];
  }
  expectSameKind(args);
  move(args, args.in(0), args.out(0), out, strides, 0, stridesOf(out), 0);
}

/// The window (starts, limits, strides) of `full`: the offset of its first element and the
/// strides of `window`'s elements in `full`, checking that `window` is its shape.
std::pair<int64_t, Shape> stridedWindow(const KernelArgs &args, const Shape &full,
                                        const Shape &window) {
  int64_t base = 0;
  Shape strides;
  if (std::string error = mt::stridedWindow(full, window, args.attrInts("starts"),
                                            args.attrInts("limits"), args.attrInts("strides"),
                                            base, strides);
      !error.empty())
    args.fail(error);
  return {base, strides};
}

void slice(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const Shape &out = args.out(0).shape;
  auto [base, strides] = stridedWindow(args, args.in(0).shape, out);
  expectSameKind(args);
  move(args, args.in(0), args.out(0), out, strides, base, stridesOf(out), 0);
}

void pad(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const Shape &in = args.in(0).shape;
  auto [base, strides] = stridedWindow(args, args.out(0).shape, in);
  const DeviceTensor &src = args.real(0);
  const DeviceTensor &dst = args.realResult(0);
  // Zero bits are +0 in both real storages; a window as large as the result covers it all.
  if (src.size() != dst.size())
    MT_CUDA_CHECK(cudaMemsetAsync(dst.data, 0, static_cast<size_t>(dst.bytes()), args.stream));
  move(args, src, dst, in, stridesOf(in), 0, strides, base);
}

void concat(const KernelArgs &args) {
  if (args.operandCount() == 0)
    args.fail("needs at least one operand");
  args.expectCounts(1, args.operandCount(), 1);
  const Shape &out = args.out(0).shape;
  if (out.empty())
    args.fail("the result must have rank 1 or more");
  int64_t axis = args.axis("axis", out.size());
  int64_t outer = product(out, 0, axis), inner = product(out, axis + 1, out.size());
  std::vector<const Shape *> shapes;
  for (size_t i = 0; i < args.operandCount(); ++i)
    shapes.push_back(&args.in(i).shape);
  if (std::string error = concatShapes(shapes, out, axis); !error.empty())
    args.fail(error);
  expectSameKind(args);
  // Operand i fills columns [offset, offset + chunk) of the result read as [outer, row].
  int64_t row = out[axis] * inner, offset = 0;
  for (size_t i = 0; i < args.operandCount(); ++i) {
    int64_t chunk = args.in(i).shape[axis] * inner;
    move(args, args.in(i), args.out(0), {outer, chunk}, {chunk, 1}, 0, {row, 1}, offset);
    offset += chunk;
  }
}

void expand(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const Shape &out = args.out(0).shape;
  Shape strides = args.broadcastStrides(args.in(0).shape, out);
  expectSameKind(args);
  move(args, args.in(0), args.out(0), out, strides, 0, stridesOf(out), 0);
}

/// The layout shared by gather and scatter_add (shapes::indexedLayout), checked as the
/// host checks it. The indices' values stay on the device, so the kernels check their range
/// (ONNX Gather's negative indices count from the back) instead of failing.
IndexedLayout indexedLayout(const KernelArgs &args, size_t indicesOperand, const Shape &full,
                            const Shape &gathered) {
  IndexedLayout layout;
  int64_t axis = full.empty() ? 0 : args.axis("axis", full.size());
  if (std::string error =
          shapes::indexedLayout(full, args.in(indicesOperand).shape, gathered, axis, layout);
      !error.empty())
    args.fail(error);
  args.integer(indicesOperand);
  return layout;
}

/// Marks a result element read through an index out of range so that it cannot pass
/// unnoticed: NaN for reals; for integers the most negative value the storage holds (the
/// largest for U8), which no later gather accepts as an index either.
__device__ void poison(Ref ref, int64_t i) {
  switch (ref.storage) {
  case Storage::F32: case Storage::BF16: storeReal(ref, i, CUDART_NAN_F); break;
  case Storage::I32: storeInt(ref, i, INT32_MIN); break;
  case Storage::U8: storeInt(ref, i, UINT8_MAX); break;
  default: storeInt(ref, i, INT64_MIN);
  }
}

template <typename Index, typename Move>
__global__ void gatherKernel(Ref indices, Ref result, Index count, Index length, Index inner,
                             Index n, Move move) {
  Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  Index row = i / inner, e = i - row * inner;
  Index o = row / count, j = row - o * count;
  int64_t index = loadInt(indices, j), size = static_cast<int64_t>(length);
  if (index < -size || index >= size) {
    poison(result, i);
    return;
  }
  if (index < 0)
    index += size;
  move((o * length + static_cast<Index>(index)) * inner + e, i);
}

void gather(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  const DeviceTensor &in = args.in(0), &out = args.out(0);
  IndexedLayout layout = indexedLayout(args, 1, in.shape, out.shape);
  if (in.isFloat() != out.isFloat())
    args.fail("the input and the result differ in element kind");
  int64_t n = out.size();
  if (n == 0)
    return;
  Ref indices = args.in(1).ref(), result = out.ref();
  bool small = narrow(n, in, out);
  withMove(in, out, [&](auto mover) {
    if (small)
      gatherKernel<uint32_t><<<blocksFor(n, kThreads), kThreads, 0, args.stream>>>(
          indices, result, static_cast<uint32_t>(layout.count),
          static_cast<uint32_t>(layout.length), static_cast<uint32_t>(layout.inner),
          static_cast<uint32_t>(n), mover);
    else
      gatherKernel<int64_t><<<blocksFor(n, kThreads), kThreads, 0, args.stream>>>(
          indices, result, layout.count, layout.length, layout.inner, n, mover);
    checkLaunch(args);
  });
}

constexpr int kIndexChunk = 1024;
constexpr int kBatch = 8;
/// About a wave of blocks on the H200's 132 SMs: more would fill it no better, and every
/// block scans all the indices.
constexpr int64_t kScatterBlocks = 1024;

/// Deterministic scatter_add without atomics. Block b owns columns [tile * blockDim, +blockDim)
/// of table rows [first, last) of slab o; it scans all indices in order and adds each matching
/// update row, so every table element is summed in fp32 by one thread in index order (the
/// host's order). `table` is the result itself when it is F32, else fp32 scratch converted
/// at the end. An index out of range is skipped and, since every block sees every index,
/// turns the whole result into NaN.
__global__ void scatterAddKernel(Ref indices, Ref updates, float *table, Ref result,
                                 bool convert, int64_t count, int64_t length, int64_t inner,
                                 int64_t tiles, int64_t ranges) {
  __shared__ int64_t rows[kIndexChunk];
  __shared__ int matches[kIndexChunk];
  __shared__ int matchCount;
  int64_t block = blockIdx.x;
  int64_t tile = block % tiles, range = block / tiles % ranges, o = block / tiles / ranges;
  int64_t first = range * length / ranges, last = (range + 1) * length / ranges;
  int64_t e = tile * blockDim.x + threadIdx.x;
  bool column = e < inner;
  float *slab = table + o * length * inner;
  const int64_t updateBase = o * count * inner;
  if (column)
    for (int64_t r = first; r < last; ++r)
      slab[r * inner + e] = 0.0f;
  bool invalid = false;
  for (int64_t start = 0; start < count; start += kIndexChunk) {
    int chunk = count - start < kIndexChunk ? static_cast<int>(count - start) : kIndexChunk;
    for (int k = threadIdx.x; k < chunk; k += blockDim.x) {
      int64_t index = loadInt(indices, start + k);
      if (index < -length || index >= length) {
        invalid = true;
        index = -1;
      } else if (index < 0) {
        index += length;
      }
      rows[k] = index >= first && index < last ? index : -1;
    }
    __syncthreads();
    // One warp lists the block's matches in index order, which every thread then follows.
    if (threadIdx.x < 32) {
      int listed = 0;
      for (int g = 0; g < chunk; g += 32) {
        int k = g + static_cast<int>(threadIdx.x);
        bool hit = k < chunk && rows[k] >= 0;
        unsigned mask = __ballot_sync(0xffffffffu, hit);
        if (hit)
          matches[listed + __popc(mask & ((1u << threadIdx.x) - 1))] = k;
        listed += __popc(mask);
      }
      if (threadIdx.x == 0)
        matchCount = listed;
    }
    __syncthreads();
    int m = matchCount;
    // Batches of matches load their table elements together instead of one dependent
    // read-modify-write each; repeats of a row within a batch add to its first slot in order.
    for (int b = 0; b < m; b += kBatch) {
      int64_t row[kBatch];
      float add[kBatch], sum[kBatch];
      bool lead[kBatch];
#pragma unroll
      for (int q = 0; q < kBatch; ++q) {
        bool valid = b + q < m;
        int k = valid ? matches[b + q] : 0;
        row[q] = valid ? rows[k] : -1;
        add[q] = valid && column ? loadReal(updates, updateBase + (start + k) * inner + e) : 0.0f;
      }
#pragma unroll
      for (int q = 0; q < kBatch; ++q) {
        lead[q] = row[q] >= 0;
#pragma unroll
        for (int p = 0; p < q; ++p)
          lead[q] = lead[q] && row[p] != row[q];
        sum[q] = lead[q] && column ? slab[row[q] * inner + e] : 0.0f;
      }
#pragma unroll
      for (int q = 0; q < kBatch; ++q) {
        bool placed = false;
#pragma unroll
        for (int p = 0; p <= q; ++p)
          if (!placed && row[p] == row[q]) {
            sum[p] += add[q];
            placed = true;
          }
      }
#pragma unroll
      for (int q = 0; q < kBatch; ++q)
        if (lead[q] && column)
          slab[row[q] * inner + e] = sum[q];
    }
    __syncthreads(); // the next chunk refills rows and matches
  }
  invalid = __syncthreads_or(invalid);
  if (!column || !(convert || invalid))
    return;
  for (int64_t r = first; r < last; ++r)
    storeReal(result, (o * length + r) * inner + e,
              invalid ? CUDART_NAN_F : slab[r * inner + e]);
}

void scatterAdd(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  const DeviceTensor &out = args.out(0);
  IndexedLayout layout = indexedLayout(args, 0, out.shape, args.in(1).shape);
  const DeviceTensor &updates = args.real(1);
  const DeviceTensor &result = args.realResult(0);
  if (result.size() == 0)
    return;
  bool convert = result.storage != Storage::F32;
  float *table = convert ? static_cast<float *>(args.scratch(
                               scratch::scatterAddFloats(result.size()) * sizeof(float)))
                         : static_cast<float *>(result.data);
  int threads = static_cast<int>(std::min<int64_t>(kThreads, (layout.inner + 31) / 32 * 32));
  int64_t tiles = (layout.inner + threads - 1) / threads;
  int64_t slabs = tiles * layout.outer;
  int64_t ranges =
      std::min(layout.length, std::max<int64_t>(1, (kScatterBlocks + slabs - 1) / slabs));
  scatterAddKernel<<<static_cast<unsigned>(slabs * ranges), threads, 0, args.stream>>>(
      args.in(0).ref(), updates.ref(), table, result.ref(), convert, layout.count,
      layout.length, layout.inner, tiles, ranges);
  checkLaunch(args);
}

} // namespace

void addViewKernels(DeviceKernelMap &kernels) {
  kernels["mt.reshape"] = reshape;
  kernels["mt.transpose"] = transpose;
  kernels["mt.slice"] = slice;
  kernels["mt.pad"] = pad;
  kernels["mt.concat"] = concat;
  kernels["mt.expand"] = expand;
  kernels["mt.gather"] = gather;
  kernels["mt.scatter_add"] = scatterAdd;
}

} // namespace mt::cuda
