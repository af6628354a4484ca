// Flash attention on tensor cores: bf16 products (the forward on mma.sync, the gradients on
// WMMA) with fp32 accumulation, online softmax, O(T) memory, deterministic (no atomics;
// every sum runs in a fixed order).
#include "runtime/cuda/kernels/FlashAttention.h"

#include "plan/KernelScratch.h"
#include "runtime/cuda/kernels/Access.cuh"

#include <cuda_bf16.h>
#include <math_constants.h>
#include <mma.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mt::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr unsigned kAllLanes = 0xffffffffu;

// A block owns 64 rows of one side (queries forward and for dq, keys for dk and dv) and
// walks tiles of 64 rows of the other side, staged in shared memory as bf16.
constexpr int kTile = 64;
/// One WMMA tile high: each warp of the forward and dq kernels owns a strip of 16 rows.
constexpr int kStrip = 16;
constexpr int kWarps = kTile / kStrip;
/// The dk/dv kernel gives each strip two warps, each taking half of every product.
constexpr int kKeyWarps = 2 * kWarps;
// Shared row strides: WMMA wants multiples of 8 bf16 (4 floats); the padding beyond the
// 64 or D columns moves consecutive rows onto other banks.
constexpr int kScoreStride = kTile + 4; // fp32 [kStrip][kTile] score strips
constexpr int kProbStride = kTile + 8;  // bf16 [.][kTile] probability strips
template <int D>
constexpr int kRowStride = D + 8; // bf16 [kTile][D] tiles

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
/// B read as the transpose of row-major rows: the k (or v) tile for q k^T (or g v^T).
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
static_assert(Accumulator::num_elements == 8, "Positions packs 8 elements");

__host__ __device__ int64_t tilesOf(int64_t rows) { return (rows + kTile - 1) / kTile; }

/// How many of a tile's `count` rows lie before `limit` (counted from the tile's start).
__device__ __forceinline__ int rowsBefore(int64_t limit, int count) {
  return limit <= 0 ? 0 : limit < count ? static_cast<int>(limit) : count;
}

/// Where the elements a lane holds of an Accumulator lie in its 16 x 16 tile, 4 bits each.
/// WMMA leaves the layout opaque (the same for every fragment of the type), so it is read
/// back once from a loaded tile whose entries are their own positions.
struct Positions {
  uint32_t rows = 0, cols = 0;
  __device__ int row(int i) const { return rows >> (4 * i) & 15; }
  __device__ int col(int i) const { return cols >> (4 * i) & 15; }
};

/// All threads of the block call it; `scratch` is 256 floats of shared memory, free again
/// on return.
__device__ Positions fragmentPositions(float *scratch) {
  for (int e = threadIdx.x; e < 256; e += blockDim.x)
    scratch[e] = static_cast<float>(e);
  __syncthreads();
  Accumulator tile;
  wmma::load_matrix_sync(tile, scratch, 16, wmma::mem_row_major);
  __syncthreads();
  Positions at;
#pragma unroll
  for (int i = 0; i < Accumulator::num_elements; ++i) {
    auto e = static_cast<uint32_t>(tile.x[i]);
    at.rows |= e / 16 << (4 * i);
    at.cols |= e % 16 << (4 * i);
  }
  return at;
}

/// Starts copying 16 bytes from global `from` to shared `to` without a trip through
/// registers, or zeroes `to` (reading nothing) when not `inside`.
__device__ __forceinline__ void copyAsync(bf16 *to, const bf16 *from, bool inside) {
  auto address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address),
               "l"(__cvta_generic_to_global(from)), "r"(inside ? 16 : 0)
               : "memory");
}

/// Starts copying `count` rows of D bf16 from `from` into a kTile-row shared tile and
/// zeroing the rest, with all threads of the block in 16-byte pieces. Zero rows (not
/// garbage that could be NaN) are what keep padded rows out of every product.
template <int D>
__device__ __forceinline__ void stageTile(bf16 *to, const bf16 *from, int count) {
  constexpr int pieces = D / 8;
  for (int e = threadIdx.x; e < kTile * pieces; e += blockDim.x) {
    int row = e / pieces, column = e % pieces * 8;
    bool inside = row < count;
    copyAsync(to + row * kRowStride<D> + column, inside ? from + int64_t(row) * D + column : from,
              inside);
  }
}

/// Waits for this thread's copies, then for the block's: the staged tiles are readable.
__device__ __forceinline__ void landCopies() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncthreads();
}

/// The 16 x D strip at `rows` (a shared tile's rows) as A fragments.
template <int D>
__device__ __forceinline__ void loadStrip(FragA (&strip)[D / 16], const bf16 *rows) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wmma::load_matrix_sync(strip[kk], rows + kk * 16, kRowStride<D>);
}

// The products below finish one 16 x 16 fragment before the next: fewer live registers.

/// Leaves in `scores` ([kStrip][kScoreStride] fp32) the dot products of the strip's rows
/// (as A fragments) with the 64 rows of `tile`.
template <int D>
__device__ __forceinline__ void storeScores(float *scores, const FragA (&strip)[D / 16],
                                            const bf16 *tile) {
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) {
    Accumulator s;
    wmma::fill_fragment(s, 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      FragBT b;
      wmma::load_matrix_sync(b, tile + n * 16 * kRowStride<D> + kk * 16, kRowStride<D>);
      wmma::mma_sync(s, strip[kk], b, s);
    }
    wmma::store_matrix_sync(scores + n * 16, s, kScoreStride, wmma::mem_row_major);
  }
}

/// out = the dot products of 16 rows of a shared tile with 16 rows of another (both
/// kRowStride<D> apart).
template <int D>
__device__ __forceinline__ void dotRows(Accumulator &out, const bf16 *rows, const bf16 *others) {
  wmma::fill_fragment(out, 0.0f);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    FragA a;
    FragBT b;
    wmma::load_matrix_sync(a, rows + kk * 16, kRowStride<D>);
    wmma::load_matrix_sync(b, others + kk * 16, kRowStride<D>);
    wmma::mma_sync(out, a, b, out);
  }
}

/// acc[n] += weights (16 x 64 bf16, rows kProbStride apart) times columns 16n.. of the 64
/// rows of `tile` (already offset to its first column).
template <int D, int N>
__device__ __forceinline__ void accumulateProducts(Accumulator (&acc)[N], const bf16 *weights,
                                                   const bf16 *tile) {
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    FragA w;
    wmma::load_matrix_sync(w, weights + kk * 16, kProbStride);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      FragB b;
      wmma::load_matrix_sync(b, tile + kk * 16 * kRowStride<D> + n * 16, kRowStride<D>);
      wmma::mma_sync(acc[n], w, b, acc[n]);
    }
  }
}

/// Multiplies row r of every accumulator of a strip by factor[r].
template <int N>
__device__ __forceinline__ void scaleRows(Accumulator (&acc)[N], const float *factor,
                                          Positions at) {
  float f[Accumulator::num_elements];
#pragma unroll
  for (int i = 0; i < Accumulator::num_elements; ++i)
    f[i] = factor[at.row(i)];
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int i = 0; i < Accumulator::num_elements; ++i)
      acc[n].x[i] *= f[i];
}

/// Writes the first `rows` rows of a strip (acc[n] holding columns 16n..) times `factor`
/// into rows `width` apart from element `first` of `out`.
template <int N>
__device__ __forceinline__ void storeRows(Ref out, int64_t first, int width, int rows,
                                          const Accumulator (&acc)[N], Positions at,
                                          float factor) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int i = 0; i < Accumulator::num_elements; ++i)
      if (at.row(i) < rows)
        storeReal(out, first + int64_t(at.row(i)) * width + n * 16 + at.col(i),
                  acc[n].x[i] * factor);
}

// The row-wise passes over a warp's 16 x 64 score strip give each row two lanes, 16 apart,
// each taking 32 consecutive columns in float4 reads: every quarter warp then covers the 32
// banks once (rows 68 floats apart start 4 banks on).

/// Four scores of a lane's row.
__device__ __forceinline__ void readQuad(float (&to)[4], const float *from) {
  float4 quad = *reinterpret_cast<const float4 *>(from);
  to[0] = quad.x;
  to[1] = quad.y;
  to[2] = quad.z;
  to[3] = quad.w;
}

/// Writes four weights of a lane's row as bf16, in one 8-byte store.
__device__ __forceinline__ void writeQuad(bf16 *to, const float (&from)[4]) {
  __nv_bfloat162 low = __floats2bfloat162_rn(from[0], from[1]),
                 high = __floats2bfloat162_rn(from[2], from[3]);
  uint2 packed;
  memcpy(&packed.x, &low, sizeof low);
  memcpy(&packed.y, &high, sizeof high);
  *reinterpret_cast<uint2 *>(to) = packed;
}

/// The columns [lower, limit) of a lane's 32 in a tile that its row sees: from its window's
/// first key to its last visible one.
struct Columns {
  int lower, limit;

  /// For a row seeing keys [from, to) in the tile from key t0, in the half `half` of it.
  __device__ static Columns of(int64_t from, int64_t to, int64_t t0, int half) {
    auto clamp = [](int64_t c) { return static_cast<int>(c < 0 ? 0 : c > 32 ? 32 : c); };
    return {clamp(from - t0 - 32 * half), clamp(to - t0 - 32 * half)};
  }
  __device__ bool has(int column) const { return column >= lower && column < limit; }
};

/// The row's maximum over `runningMax` and its logits in the tile, given the lane's 32
/// products (from `cells` on), of which `seen` are visible.
__device__ __forceinline__ float rowMax(const float *cells, Columns seen, const AttentionDims &a,
                                        float runningMax) {
  float tileMax = -CUDART_INF_F;
#pragma unroll
  for (int quad = 0; quad < 8; ++quad) {
    float cell[4];
    readQuad(cell, cells + 4 * quad);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (seen.has(4 * quad + j))
        tileMax = fmaxf(tileMax, a.logit(cell[j]));
  }
  return fmaxf(runningMax, fmaxf(tileMax, __shfl_xor_sync(kAllLanes, tileMax, 16)));
}

/// A row's sum from its two lanes' halves: both lanes get the same bits (a + b == b + a), so
/// they keep identical running statistics.
__device__ __forceinline__ float rowSum(float half) {
  return half + __shfl_xor_sync(kAllLanes, half, 16);
}

/// The factor that moves sums taken under `runningMax` to `next`. A row that has seen no
/// key yet (only a padding row past the queries) stays at -inf, and its sums at 0.
__device__ __forceinline__ float correctionFor(float runningMax, float next) {
  return next == -CUDART_INF_F ? 1.0f : __expf(runningMax - next);
}

// Shared memory of each kernel as byte offsets, every piece 32-byte aligned for WMMA. Each
// kernel's __launch_bounds__ asks for the blocks its shared memory lets an SM (228 KiB)
// hold, so that registers limit no further, except where that would leave fewer than 128
// registers a thread: the forward at depth 64 (4 of 6) and the dk/dv kernel (2).

template <int D>
struct ForwardLayout {
  static constexpr size_t tile = sizeof(bf16) * kTile * kRowStride<D>;
  /// Two stages of key and value tiles, the next pair landing while the warps multiply the
  /// last; the queries are staged in the first key tile before the walk starts.
  static constexpr size_t keys = 0, values = keys + 2 * tile;
  static constexpr size_t bytes = values + 2 * tile;
  static_assert(values % 32 == 0);
};

template <int D>
struct QueryGradLayout {
  static constexpr size_t tile = sizeof(bf16) * kTile * kRowStride<D>;
  static constexpr size_t keys = 0, values = keys + tile;
  /// Per warp: scores and dots [kStrip][kScoreStride], slopes (dS) [kStrip][kProbStride].
  static constexpr size_t scores = values + tile;
  static constexpr size_t dots = scores + sizeof(float) * kWarps * kStrip * kScoreStride;
  static constexpr size_t slopes = dots + sizeof(float) * kWarps * kStrip * kScoreStride;
  static constexpr size_t bytes = slopes + sizeof(bf16) * kWarps * kStrip * kProbStride;
  static_assert(values % 32 == 0 && scores % 32 == 0 && dots % 32 == 0 && slopes % 32 == 0);
};

template <int D>
struct KeyGradLayout {
  static constexpr size_t tile = sizeof(bf16) * kTile * kRowStride<D>;
  static constexpr size_t keys = 0, values = keys + tile, queries = values + tile;
  static constexpr size_t grads = queries + tile;
  /// The query tile's lse and delta [kTile] each.
  static constexpr size_t stats = grads + tile;
  /// P^T and dS^T of the block's keys against the query tile, [kTile][kProbStride] each.
  static constexpr size_t probs = stats + sizeof(float) * 2 * kTile;
  static constexpr size_t slopes = probs + sizeof(bf16) * kTile * kProbStride;
  static constexpr size_t bytes = slopes + sizeof(bf16) * kTile * kProbStride;
  static_assert(values % 32 == 0 && queries % 32 == 0 && grads % 32 == 0 && stats % 32 == 0 &&
                probs % 32 == 0 && slopes % 32 == 0);
  static_assert(sizeof(float) * 256 <= sizeof(bf16) * kTile * kProbStride,
                "fragmentPositions borrows probs");
};

// The forward keeps every product in registers (mma.sync m16n8k16, fragments read from
// shared tiles by ldmatrix): a warp's 16 x 64 scores never leave them, and its
// probabilities become the A fragments of the P V product as they lie, FlashAttention-2's
// arrangement. A lane holds, of each 16 x 8 accumulator, rows lane / 4 and lane / 4 + 8 at
// columns 2 (lane % 4) and the next.

/// c += a b for one m16n8k16 tile: a 16 x 16 bf16 A fragment, b 16 x 8 bf16 (b0, b1).
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Four 8 x 8 bf16 matrices from shared memory, each lane naming a row of one (lanes 8m to
/// 8m + 7 the rows of matrix m); `transposed` hands each lane column pairs instead of rows.
template <bool transposed>
__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4], const bf16 *row) {
  auto address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

/// Two floats as the bf16 pair of one register, the first in the low half.
__device__ __forceinline__ uint32_t packPair(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

/// Closes the group of copies this thread started; waits until at most `pending` of its
/// groups are still landing.
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int pending> __device__ __forceinline__ void awaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

/// The maximum of a row's value over the four lanes that hold it.
__device__ __forceinline__ float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(kAllLanes, x, 1));
  return fmaxf(x, __shfl_xor_sync(kAllLanes, x, 2));
}
/// The sum of a row's value over the four lanes that hold it, the same bits in each.
__device__ __forceinline__ float quadSum(float x) {
  x += __shfl_xor_sync(kAllLanes, x, 1);
  return x + __shfl_xor_sync(kAllLanes, x, 2);
}

/// out = softmax(scale q k^T) v for 64 queries of one head, a strip of 16 per warp. Per key
/// tile the warp scores its strip into registers, runs the online softmax there (running
/// max and sum per row, each row's over the four lanes that hold it) and adds the bf16
/// probabilities times the value tile to its 16 x D output. Key and value tiles land two
/// stages deep.
template <int D>
__global__ void __launch_bounds__(kWarps * 32, D == 64 ? 4 : 3)
    flashForward(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                 const bf16 *__restrict__ v, Ref out, AttentionDims a) {
  using L = ForwardLayout<D>;
  constexpr int stride = kRowStride<D>, tileElements = kTile * stride;
  extern __shared__ __align__(128) unsigned char shared[];
  bf16 *keys = reinterpret_cast<bf16 *>(shared + L::keys);
  bf16 *values = reinterpret_cast<bf16 *>(shared + L::values);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // The row tiles that see the most keys (causal: the last) run first, so that the short
  // ones fill the device's tail.
  const int64_t rowBlocks = tilesOf(a.queries);
  const int64_t head = blockIdx.x / rowBlocks;
  const int64_t first = (rowBlocks - 1 - blockIdx.x % rowBlocks) * kTile;
  const int rows = rowsBefore(a.queries - first, kTile);
  const int64_t kvFirst = a.kvHeadOf(head) * a.keys;

  stageTile<D>(keys, q + (head * a.queries + first) * D, rows);
  landCopies();
  uint32_t query[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    loadMatrices<false>(query[kk],
                        keys + (warp * kStrip + lane % 16) * stride + kk * 16 + lane / 16 * 8);
  __syncthreads(); // the query tile is read before the first key tile lands on it

  // This lane's two rows: what each sees, from its window's first key.
  const int strip = warp * kStrip + lane / 4;
  int64_t visible[2], lowest[2];
  for (int h = 0; h < 2; ++h) {
    const int64_t row = first + strip + 8 * h;
    visible[h] = row < a.queries ? a.visible(head, row) : 0;
    lowest[h] = a.firstVisible(row);
  }
  // Key tiles past what the block's last row sees (above the diagonal, or padding) and
  // before its first row's window are skipped.
  const int64_t seen = a.visible(head, first + rows - 1);
  const int64_t start = a.firstVisible(first);
  auto stage = [&](int64_t t0, int buffer) {
    const int count = rowsBefore(seen - t0, kTile);
    stageTile<D>(keys + buffer * tileElements, k + (kvFirst + t0) * D, count);
    stageTile<D>(values + buffer * tileElements, v + (kvFirst + t0) * D, count);
    commitCopies();
  };
  if (start < seen)
    stage(start, 0);

  float runningMax[2] = {-CUDART_INF_F, -CUDART_INF_F}, total[2] = {0.0f, 0.0f};
  float acc[D / 8][4] = {};
  int buffer = 0;
  for (int64_t t0 = start; t0 < seen; t0 += kTile, buffer ^= 1) {
    if (t0 + kTile < seen) {
      stage(t0 + kTile, buffer ^ 1);
      awaitCopies<1>();
    } else {
      awaitCopies<0>();
    }
    __syncthreads(); // every thread's copies of this tile have landed
    const bf16 *keyTile = keys + buffer * tileElements;
    const bf16 *valueTile = values + buffer * tileElements;

    float s[kTile / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int n = 0; n < kTile / 8; n += 2) {
        uint32_t b[4];
        loadMatrices<false>(b, keyTile + (n * 8 + lane % 8 + lane / 16 * 8) * stride + kk * 16 +
                                   lane / 8 % 2 * 8);
        mma16816(s[n], query[kk], b[0], b[1]);
        mma16816(s[n + 1], query[kk], b[2], b[3]);
      }

    // Logits where the row sees the key, -inf elsewhere; then the online softmax.
    float tileMax[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const int64_t key = t0 + n * 8 + 2 * (lane % 4) + e % 2;
        s[n][e] = key >= lowest[h] && key < visible[h] ? a.logit(s[n][e]) : -CUDART_INF_F;
        tileMax[h] = fmaxf(tileMax[h], s[n][e]);
      }
    float correction[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float next = fmaxf(runningMax[h], quadMax(tileMax[h]));
      correction[h] = correctionFor(runningMax[h], next);
      runningMax[h] = next;
    }
    uint32_t weights[kTile / 16][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        s[n][e] = s[n][e] == -CUDART_INF_F ? 0.0f : __expf(s[n][e] - runningMax[h]);
        sum[h] += s[n][e];
      }
      weights[n / 2][n % 2 * 2] = packPair(s[n][0], s[n][1]);
      weights[n / 2][n % 2 * 2 + 1] = packPair(s[n][2], s[n][3]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
      total[h] = total[h] * correction[h] + quadSum(sum[h]);
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[n][e] *= correction[e / 2];

#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk)
#pragma unroll
      for (int n = 0; n < D / 8; n += 2) {
        uint32_t b[4];
        loadMatrices<true>(b, valueTile + (kk * 16 + lane % 8 + lane / 8 % 2 * 8) * stride + n * 8 +
                                  lane / 16 * 8);
        mma16816(acc[n], weights[kk], b[0], b[1]);
        mma16816(acc[n + 1], weights[kk], b[2], b[3]);
      }
    __syncthreads(); // every warp is done with this stage before the next copy over it
  }
  // No visible key (keys == 0) leaves the row zero, as on the host.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (strip + 8 * h >= rows)
      continue;
    const float factor = total[h] > 0.0f ? 1.0f / total[h] : 0.0f;
    const int64_t at = (head * a.queries + first + strip + 8 * h) * D + 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      storeReal(out, at + n * 8, acc[n][2 * h] * factor);
      storeReal(out, at + n * 8 + 1, acc[n][2 * h + 1] * factor);
    }
  }
}

/// Gradient kernel 1, 64 queries of one head, a strip per warp as in the forward. A first
/// sweep over the visible key tiles recomputes each row's logsumexp and
/// delta = sum_j p_j (g . v_j) (= g . out) online and writes both to fp32
/// [batch * query heads * queries] for kernel 2; the second accumulates
/// dq = scale * sum_j p_j (g . v_j - delta) k_j, the bf16 dS strip times the key tile.
template <int D>
__global__ void __launch_bounds__(kWarps * 32, D == 64 ? 3 : 2)
    flashQueryGrad(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                   const bf16 *__restrict__ v, const bf16 *__restrict__ g, Ref dq,
                   float *__restrict__ lse, float *__restrict__ delta, AttentionDims a) {
  using L = QueryGradLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  const int warp = threadIdx.x / 32;
  bf16 *keys = reinterpret_cast<bf16 *>(shared + L::keys);
  bf16 *values = reinterpret_cast<bf16 *>(shared + L::values);
  float *scores = reinterpret_cast<float *>(shared + L::scores) + warp * kStrip * kScoreStride;
  float *dots = reinterpret_cast<float *>(shared + L::dots) + warp * kStrip * kScoreStride;
  bf16 *slopes = reinterpret_cast<bf16 *>(shared + L::slopes) + warp * kStrip * kProbStride;

  const int64_t rowBlocks = tilesOf(a.queries);
  const int64_t head = blockIdx.x / rowBlocks, first = blockIdx.x % rowBlocks * kTile;
  const int rows = rowsBefore(a.queries - first, kTile);
  const int64_t kvFirst = a.kvHeadOf(head) * a.keys;
  const Positions at = fragmentPositions(reinterpret_cast<float *>(values));

  stageTile<D>(keys, q + (head * a.queries + first) * D, rows);
  stageTile<D>(values, g + (head * a.queries + first) * D, rows);
  landCopies();
  FragA query[D / 16], grad[D / 16];
  loadStrip<D>(query, keys + warp * kStrip * kRowStride<D>);
  loadStrip<D>(grad, values + warp * kStrip * kRowStride<D>);

  const int lane = threadIdx.x % 32, cellRow = lane % kStrip, cellHalf = lane / kStrip;
  const float *scoreCells = scores + cellRow * kScoreStride + cellHalf * 32;
  const float *dotCells = dots + cellRow * kScoreStride + cellHalf * 32;
  bf16 *slopeCells = slopes + cellRow * kProbStride + cellHalf * 32;
  const int64_t row = first + warp * kStrip + cellRow;
  const int64_t visible = row < a.queries ? a.visible(head, row) : 0;
  const int64_t lowest = a.firstVisible(row), start = a.firstVisible(first);
  const int64_t seen = a.visible(head, first + rows - 1);

  // Stages key tile t0 and leaves the strip's scores q.k_j and dots g.v_j against it in the
  // warp's buffers; returns which of the lane's 32 columns of the tile its row sees.
  auto scoreTile = [&](int64_t t0) {
    const int count = rowsBefore(seen - t0, kTile);
    __syncthreads();
    stageTile<D>(keys, k + (kvFirst + t0) * D, count);
    stageTile<D>(values, v + (kvFirst + t0) * D, count);
    landCopies();
    storeScores<D>(scores, query, keys);
    storeScores<D>(dots, grad, values);
    __syncwarp();
    return Columns::of(lowest, visible, t0, cellHalf);
  };

  float runningMax = -CUDART_INF_F, total = 0.0f, weighted = 0.0f;
  for (int64_t t0 = start; t0 < seen; t0 += kTile) {
    const Columns mine = scoreTile(t0);
    const float next = rowMax(scoreCells, mine, a, runningMax);
    const float correction = correctionFor(runningMax, next);
    float sum = 0.0f, dotSum = 0.0f;
#pragma unroll
    for (int quad = 0; quad < 8; ++quad) {
      float score[4], dot[4];
      readQuad(score, scoreCells + 4 * quad);
      readQuad(dot, dotCells + 4 * quad);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float p = mine.has(4 * quad + j) ? __expf(a.logit(score[j]) - next) : 0.0f;
        sum += p;
        dotSum += p * dot[j];
      }
    }
    total = total * correction + rowSum(sum);
    weighted = weighted * correction + rowSum(dotSum);
    runningMax = next;
  }
  // Rows that see no key (padding, or keys == 0) get finite statistics nobody reads.
  const bool any = total > 0.0f;
  const float rowLse = any ? runningMax + logf(total) : 0.0f;
  const float rowDelta = any ? weighted / total : 0.0f;
  if (cellHalf == 0 && row < a.queries) {
    lse[head * a.queries + row] = rowLse;
    delta[head * a.queries + row] = rowDelta;
  }

  Accumulator acc[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n)
    wmma::fill_fragment(acc[n], 0.0f);
  for (int64_t t0 = start; t0 < seen; t0 += kTile) {
    const Columns mine = scoreTile(t0);
#pragma unroll
    for (int quad = 0; quad < 8; ++quad) {
      float score[4], dot[4], ds[4];
      readQuad(score, scoreCells + 4 * quad);
      readQuad(dot, dotCells + 4 * quad);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float logit = a.logit(score[j]);
        ds[j] = mine.has(4 * quad + j)
                    ? __expf(logit - rowLse) * (dot[j] - rowDelta) * a.slope(logit)
                    : 0.0f;
      }
      writeQuad(slopeCells + 4 * quad, ds);
    }
    __syncwarp();
    accumulateProducts<D>(acc, slopes, keys);
  }
  storeRows(dq, (head * a.queries + first + warp * kStrip) * D, D, rows - warp * kStrip, acc,
            at, a.scale);
}

/// Gradient kernel 2, 64 keys of one key/value head: over the query heads of its group in
/// order and the query tiles that see its keys (from the block's first key on when causal)
/// in order, dv_j = sum_i p_ij g_i and dk_j = scale * sum_i p_ij (g_i . v_j - delta_i) q_i,
/// p_ij = exp(scale q_i . k_j - lse_i). Summing the group's heads here keeps grouped-query
/// gradients free of atomics. Per query tile the warps first build P^T and dS^T (each a
/// 16-key strip against half of the queries, elementwise on the fragments), then add the
/// products (each a strip against half of the depth) to accumulators held to the end.
template <int D>
__global__ void __launch_bounds__(kKeyWarps * 32, 2)
    flashKeyGrad(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                 const bf16 *__restrict__ v, const bf16 *__restrict__ g,
                 const float *__restrict__ lse, const float *__restrict__ delta, Ref dk, Ref dv,
                 AttentionDims a) {
  using L = KeyGradLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  bf16 *keys = reinterpret_cast<bf16 *>(shared + L::keys);
  bf16 *values = reinterpret_cast<bf16 *>(shared + L::values);
  bf16 *queries = reinterpret_cast<bf16 *>(shared + L::queries);
  bf16 *grads = reinterpret_cast<bf16 *>(shared + L::grads);
  float *tileLse = reinterpret_cast<float *>(shared + L::stats), *tileDelta = tileLse + kTile;
  bf16 *probs = reinterpret_cast<bf16 *>(shared + L::probs);
  bf16 *slopes = reinterpret_cast<bf16 *>(shared + L::slopes);
  const int warp = threadIdx.x / 32, strip = warp % kWarps, part = warp / kWarps;

  const int64_t rowBlocks = tilesOf(a.keys);
  const int64_t kvHead = blockIdx.x / rowBlocks, first = blockIdx.x % rowBlocks * kTile;
  const int rows = rowsBefore(a.keys - first, kTile);
  // Keys from the sequence's length on are padding, seen by no query: zero gradients.
  const int live = rowsBefore(a.keysOf(kvHead / a.kvHeads) - first, kTile);
  const Positions at = fragmentPositions(reinterpret_cast<float *>(probs));
  stageTile<D>(keys, k + (kvHead * a.keys + first) * D, rows);
  stageTile<D>(values, v + (kvHead * a.keys + first) * D, rows);
  landCopies();

  const int64_t group = a.queryHeads / a.kvHeads;
  const int64_t firstHead = kvHead / a.kvHeads * a.queryHeads + kvHead % a.kvHeads * group;
  // Under causal no query before the block's first key sees any of its keys; under a
  // window none from its last key's window on.
  const int64_t start = a.causal ? first : 0;
  const int64_t end = a.window > 0 && first + rows - 1 + a.window < a.queries
                          ? first + rows - 1 + a.window
                          : a.queries;
  Accumulator dkAcc[D / 32], dvAcc[D / 32];
#pragma unroll
  for (int n = 0; n < D / 32; ++n) {
    wmma::fill_fragment(dkAcc[n], 0.0f);
    wmma::fill_fragment(dvAcc[n], 0.0f);
  }
  for (int64_t h = 0; h < group; ++h) {
    const int64_t queryFirst = (firstHead + h) * a.queries;
    for (int64_t t0 = start; t0 < end; t0 += kTile) {
      const int count = rowsBefore(a.queries - t0, kTile);
      // Key `first + key` is visible to query `t0 + query` when key - query <= diagonal:
      // under causal the tile starts a multiple of kTile past the block's first key.
      const int diagonal = a.causal ? static_cast<int>(t0 - first) : kTile;
      __syncthreads(); // every warp is done with the previous tile
      stageTile<D>(queries, q + (queryFirst + t0) * D, count);
      stageTile<D>(grads, g + (queryFirst + t0) * D, count);
      if (threadIdx.x < kTile) {
        bool inside = static_cast<int>(threadIdx.x) < count;
        tileLse[threadIdx.x] = inside ? lse[queryFirst + t0 + threadIdx.x] : 0.0f;
        tileDelta[threadIdx.x] = inside ? delta[queryFirst + t0 + threadIdx.x] : 0.0f;
      }
      landCopies();
      // P^T and dS^T of the warp's 16 keys against its 32 queries, 16 at a time.
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int from = part * 32 + n * 16;
        Accumulator s, dp;
        dotRows<D>(s, keys + strip * kStrip * kRowStride<D>, queries + from * kRowStride<D>);
        dotRows<D>(dp, values + strip * kStrip * kRowStride<D>, grads + from * kRowStride<D>);
#pragma unroll
        for (int i = 0; i < Accumulator::num_elements; ++i) {
          int key = strip * kStrip + at.row(i), query = from + at.col(i);
          float p = 0.0f, ds = 0.0f;
          if (query < count && key < live && key - query <= diagonal &&
              a.inWindow(t0 + query, first + key)) {
            const float logit = a.logit(s.x[i]);
            p = __expf(logit - tileLse[query]);
            ds = p * (dp.x[i] - tileDelta[query]) * a.slope(logit);
          }
          probs[key * kProbStride + query] = __float2bfloat16(p);
          slopes[key * kProbStride + query] = __float2bfloat16(ds);
        }
      }
      __syncthreads();
      const int column = part * (D / 2);
      accumulateProducts<D>(dvAcc, probs + strip * kStrip * kProbStride, grads + column);
      accumulateProducts<D>(dkAcc, slopes + strip * kStrip * kProbStride, queries + column);
    }
  }
  const int64_t corner = (kvHead * a.keys + first + strip * kStrip) * D + part * (D / 2);
  storeRows(dk, corner, D, rows - strip * kStrip, dkAcc, at, a.scale);
  storeRows(dv, corner, D, rows - strip * kStrip, dvAcc, at, 1.0f);
}

/// Whether the tensor-core kernels serve the first `operands` operands: bf16 at one head
/// depth of 64 or 128, aligned for 16-byte loads (rows of D bf16 then are too).
bool applies(const KernelArgs &args, const AttentionDims &a, size_t operands) {
  if (a.depth != a.valueDepth || (a.depth != 64 && a.depth != 128))
    return false;
  for (size_t i = 0; i < operands; ++i) {
    const DeviceTensor &t = args.in(i);
    if (t.storage != Storage::BF16 || reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
      return false;
  }
  return true;
}

const bf16 *bf16Data(const KernelArgs &args, size_t operand) {
  return static_cast<const bf16 *>(args.in(operand).data);
}

/// Calls body(std::integral_constant<int, D>) with the head depth, 64 or 128.
template <typename F>
void withDepth(int64_t depth, F &&body) {
  if (depth == 64)
    body(std::integral_constant<int, 64>{});
  else
    body(std::integral_constant<int, 128>{});
}

} // namespace

bool flashAttention(const KernelArgs &args, const AttentionDims &a) {
  if (!applies(args, a, 3))
    return false;
  const bf16 *q = bf16Data(args, 0), *k = bf16Data(args, 1), *v = bf16Data(args, 2);
  Ref out = args.realResult(0).ref();
  int64_t blocks = a.batch * a.queryHeads * tilesOf(a.queries);
  if (blocks == 0)
    return true;
  withDepth(a.depth, [&](auto depth) {
    constexpr int D = decltype(depth)::value;
    constexpr size_t bytes = ForwardLayout<D>::bytes;
    allowSharedMemory(args, flashForward<D>, bytes);
    flashForward<D><<<static_cast<unsigned>(blocks), kWarps * 32, bytes, args.stream>>>(
        q, k, v, out, a);
    checkLaunch(args);
  });
  return true;
}

bool flashAttentionGrad(const KernelArgs &args, const AttentionDims &a) {
  if (!applies(args, a, 4))
    return false;
  const bf16 *q = bf16Data(args, 0), *k = bf16Data(args, 1), *v = bf16Data(args, 2),
             *g = bf16Data(args, 3);
  Ref dq = args.realResult(0).ref(), dk = args.realResult(1).ref(),
      dv = args.realResult(2).ref();
  withDepth(a.depth, [&](auto depth) {
    constexpr int D = decltype(depth)::value;
    int64_t rows = a.batch * a.queryHeads * a.queries;
    float *lse = nullptr, *delta = nullptr;
    if (rows > 0) {
      lse = static_cast<float *>(args.scratch(sizeof(float) * scratch::attentionGradFloats(rows)));
      delta = lse + rows;
      int64_t blocks = a.batch * a.queryHeads * tilesOf(a.queries);
      constexpr size_t bytes = QueryGradLayout<D>::bytes;
      allowSharedMemory(args, flashQueryGrad<D>, bytes);
      flashQueryGrad<D><<<static_cast<unsigned>(blocks), kWarps * 32, bytes, args.stream>>>(
          q, k, v, g, dq, lse, delta, a);
      checkLaunch(args);
    }
    // With no queries this still runs, leaving dk and dv zero.
    int64_t blocks = a.batch * a.kvHeads * tilesOf(a.keys);
    if (blocks == 0)
      return;
    constexpr size_t bytes = KeyGradLayout<D>::bytes;
    allowSharedMemory(args, flashKeyGrad<D>, bytes);
    flashKeyGrad<D><<<static_cast<unsigned>(blocks), kKeyWarps * 32, bytes, args.stream>>>(
        q, k, v, g, lse, delta, dk, dv, a);
    checkLaunch(args);
  });
  return true;
}

} // namespace mt::cuda
