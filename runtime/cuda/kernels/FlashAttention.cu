// Flash attention on tensor cores: bf16 products (mma.sync m16n8k16) with fp32 accumulation,
// online softmax, O(T) memory, deterministic (no atomics; every sum runs in a fixed order).
#include "runtime/cuda/kernels/FlashAttention.h"

#include "runtime/cuda/kernels/Access.cuh"

#include <cuda_bf16.h>
#include <math_constants.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mt::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr unsigned kAllLanes = 0xffffffffu;

// A block owns 64 rows of one side (queries forward and for dq, keys for dk and dv) and
// walks tiles of 64 rows of the other side, staged in shared memory as bf16.
constexpr int kTile = 64;
/// One product tile high: each warp of the forward and dq kernels owns a strip of 16 rows.
constexpr int kStrip = 16;
constexpr int kWarps = kTile / kStrip;
/// The dk/dv kernel gives each strip two warps, each taking half of the queries of a tile
/// for P^T and dS^T and half of the depth for the products.
constexpr int kKeyWarps = 2 * kWarps;
// Shared row strides, in bf16: ldmatrix reads rows of 16 bytes, and the 8 beyond the 64 or D
// columns move consecutive rows onto other banks.
constexpr int kProbStride = kTile + 8;             // [.][kTile] probability strips
template <int D> constexpr int kRowStride = D + 8; // [kTile][D] tiles

__host__ __device__ int64_t tilesOf(int64_t rows) { return (rows + kTile - 1) / kTile; }

/// How many of a tile's `count` rows lie before `limit` (counted from the tile's start).
__device__ __forceinline__ int rowsBefore(int64_t limit, int count) {
  return limit <= 0 ? 0 : limit < count ? static_cast<int>(limit) : count;
}

/// Starts copying 16 bytes from global `from` to shared `to` without a trip through
/// registers, or zeroes `to` (reading nothing) when not `inside`.
__device__ __forceinline__ void copyAsync(bf16 *to, const bf16 *from, bool inside) {
  auto address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address),
               "l"(__cvta_generic_to_global(from)), "r"(inside ? 16 : 0)
               : "memory");
}

/// Starts copying `count` rows of D bf16, `stride` elements apart, from `from` into a
/// kTile-row shared tile and zeroing the rest, with all threads of the block in 16-byte
/// pieces. Zero rows (not garbage that could be NaN) are what keep padded rows out of every
/// product.
template <int D>
__device__ __forceinline__ void stageTile(bf16 *to, const bf16 *from, int count, int64_t stride) {
  constexpr int pieces = D / 8;
  for (int e = threadIdx.x; e < kTile * pieces; e += blockDim.x) {
    int row = e / pieces, column = e % pieces * 8;
    bool inside = row < count;
    copyAsync(to + row * kRowStride<D> + column, inside ? from + row * stride + column : from,
              inside);
  }
}

/// Waits for this thread's copies, then for the block's: the staged tiles are readable.
__device__ __forceinline__ void landCopies() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncthreads();
}

/// Closes the group of copies this thread started; waits until at most `pending` of its
/// groups are still landing.
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int pending> __device__ __forceinline__ void awaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

// Every product keeps its tile in registers (mma.sync m16n8k16, fragments read from shared
// tiles by ldmatrix): a warp's 16 x 64 scores never leave them, and its probabilities (or
// dS) become the A fragments of the next product as they lie, FlashAttention-2's
// arrangement. A lane holds, of each 16 x 8 accumulator, rows lane / 4 and lane / 4 + 8 at
// columns 2 (lane % 4) and the next: element e of tile n is row lane / 4 + 8 (e / 2),
// column 8 n + 2 (lane % 4) + e % 2.

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

/// The A fragment of columns 16 kk.. of the 16 rows from `rows` (`stride` bf16 apart).
template <int stride>
__device__ __forceinline__ void loadRows(uint32_t (&a)[4], const bf16 *rows, int kk) {
  const int lane = threadIdx.x % 32;
  loadMatrices<false>(a, rows + (lane % 16) * stride + kk * 16 + lane / 16 * 8);
}

/// s[n] += the dot products of 16 rows (A fragments from `rowsAt(kk, a)`, D deep) with rows
/// 8n.. of `tile` (kRowStride<D> apart): scores q k^T, or g v^T.
template <int D, int N, typename RowsAt>
__device__ __forceinline__ void dotTile(float (&s)[N][4], RowsAt &&rowsAt, const bf16 *tile) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    rowsAt(kk, a);
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      uint32_t b[4];
      loadMatrices<false>(b, tile + (n * 8 + lane % 8 + lane / 16 * 8) * kRowStride<D> + kk * 16 +
                                 lane / 8 % 2 * 8);
      mma16816(s[n], a, b[0], b[1]);
      mma16816(s[n + 1], a, b[2], b[3]);
    }
  }
}

/// acc[n] += weights (16 x 64, A fragments) times columns 8n.. of the 64 rows of `tile`
/// (kRowStride<D> apart, already offset to its first column): p v, ds k, p^T g, ds^T q.
template <int D, int N>
__device__ __forceinline__ void
addProducts(float (&acc)[N][4], const uint32_t (&weights)[kTile / 16][4], const bf16 *tile) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk)
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      uint32_t b[4];
      loadMatrices<true>(b, tile + (kk * 16 + lane % 8 + lane / 8 % 2 * 8) * kRowStride<D> + n * 8 +
                                lane / 16 * 8);
      mma16816(acc[n], weights[kk], b[0], b[1]);
      mma16816(acc[n + 1], weights[kk], b[2], b[3]);
    }
}

/// Two floats as the bf16 pair of one register, the first in the low half.
__device__ __forceinline__ uint32_t packPair(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

/// A strip's 16 x 64 values in accumulator layout as the A fragments of a product over the
/// 64 columns: the registers m16n8k16 reads, with no trip through shared memory.
__device__ __forceinline__ void packWeights(uint32_t (&weights)[kTile / 16][4],
                                            const float (&s)[kTile / 8][4]) {
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n) {
    weights[n / 2][n % 2 * 2] = packPair(s[n][0], s[n][1]);
    weights[n / 2][n % 2 * 2 + 1] = packPair(s[n][2], s[n][3]);
  }
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

/// The factor that moves sums taken under `runningMax` to `next`. A row that has seen no
/// key yet (only a padding row past the queries) stays at -inf, and its sums at 0.
__device__ __forceinline__ float correctionFor(float runningMax, float next) {
  return next == -CUDART_INF_F ? 1.0f : __expf(runningMax - next);
}

/// Writes the lane's part of a strip of 16 rows (acc[n] holding columns 8n..) times
/// `factor` into rows `width` apart from element `corner` of `out`, the first `rows` rows.
template <int N>
__device__ __forceinline__ void storeStrip(Ref out, int64_t corner, int64_t width, int rows,
                                           const float (&acc)[N][4], float factor) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = lane / 4 + 8 * h;
    if (row >= rows)
      continue;
    const int64_t at = corner + row * width + 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      storeReal(out, at + n * 8, acc[n][2 * h] * factor);
      storeReal(out, at + n * 8 + 1, acc[n][2 * h + 1] * factor);
    }
  }
}

/// The key tiles of the forward and dq kernels, two stages deep: stage(t0, buffer) starts
/// copying the tile from key t0 (its first `seen - t0` rows) into buffer 0 or 1; walk(body)
/// calls body(t0, keyTile, valueTile) for each tile of [start, seen) once it has landed, the
/// next tile landing meanwhile.
template <int D> struct KeyTiles {
  bf16 *keys, *values; // two tiles each
  const bf16 *k, *v;   // the key/value head's first row
  int64_t stride;      // from one key/value row to the next
  int64_t start, seen;

  static constexpr int tileElements = kTile * kRowStride<D>;

  __device__ __forceinline__ void stage(int64_t t0, int buffer) const {
    const int count = rowsBefore(seen - t0, kTile);
    stageTile<D>(keys + buffer * tileElements, k + t0 * stride, count, stride);
    stageTile<D>(values + buffer * tileElements, v + t0 * stride, count, stride);
    commitCopies();
  }

  template <typename Body> __device__ __forceinline__ void walk(Body &&body) const {
    if (start < seen)
      stage(start, 0);
    int buffer = 0;
    for (int64_t t0 = start; t0 < seen; t0 += kTile, buffer ^= 1) {
      if (t0 + kTile < seen) {
        stage(t0 + kTile, buffer ^ 1);
        awaitCopies<1>();
      } else {
        awaitCopies<0>();
      }
      __syncthreads(); // every thread's copies of this tile have landed
      body(t0, keys + buffer * tileElements, values + buffer * tileElements);
      __syncthreads(); // every warp is done with this stage before the next copy over it
    }
  }
};

// Shared memory of each kernel as byte offsets, every piece 16-byte aligned for ldmatrix
// and cp.async. Each kernel's __launch_bounds__ asks for the blocks its shared memory lets
// an SM (228 KiB) hold, so that registers limit no further, except where that would leave
// fewer than 128 registers a thread: the forward at depth 64 (4 of 6).

template <int D>
struct ForwardLayout {
  static constexpr size_t tile = sizeof(bf16) * kTile * kRowStride<D>;
  /// Two stages of key and value tiles, the next pair landing while the warps multiply the
  /// last; the queries are staged in the first key tile before the walk starts.
  static constexpr size_t keys = 0, values = keys + 2 * tile;
  static constexpr size_t bytes = values + 2 * tile;
  static_assert(values % 16 == 0);
};

template <int D>
struct QueryGradLayout {
  static constexpr size_t tile = sizeof(bf16) * kTile * kRowStride<D>;
  /// The block's queries and output gradients, then two stages of key and value tiles.
  static constexpr size_t queries = 0, grads = queries + tile;
  static constexpr size_t keys = grads + tile, values = keys + 2 * tile;
  static constexpr size_t bytes = values + 2 * tile;
  static_assert(tile % 16 == 0);
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
  static_assert(tile % 16 == 0 && stats % 16 == 0 && probs % 16 == 0 && slopes % 16 == 0);
};

/// The rows of a 64-row block a lane's two rows (lane / 4 and lane / 4 + 8 of its warp's
/// strip) are, and which keys each sees.
struct LaneRows {
  int strip;          // the first row's place in the block
  // Key indices as int (a sequence's keys are far below 2^31), to spare registers.
  int visible[2]; // keys [lowest, visible) are visible
  int lowest[2];

  __device__ LaneRows(const AttentionDims &a, int64_t head, int64_t first) {
    strip = threadIdx.x / 32 * kStrip + threadIdx.x % 32 / 4;
    for (int h = 0; h < 2; ++h) {
      const int64_t row = first + strip + 8 * h;
      visible[h] = static_cast<int>(row < a.queries ? a.visible(head, row) : 0);
      lowest[h] = static_cast<int>(a.firstVisible(head, row));
    }
  }

  /// Whether the row of element e of an accumulator tile sees `key`.
  __device__ bool sees(int e, int64_t key) const {
    return key >= lowest[e / 2] && key < visible[e / 2];
  }
};

/// The keys [from, to) that every row of the strip of 16 from row `stripFirst` sees: a tile
/// wholly among them takes no mask (all but the tiles on the diagonal, a window's edge or
/// padding). Computed from values the warp shares, so that it costs no per-lane registers.
struct StripKeys {
  int64_t from, to;

  __device__ StripKeys(const AttentionDims &a, int64_t head, int64_t stripFirst) {
    // Both bounds grow with the row: the last row's first key, the first row's last.
    const int64_t last = stripFirst + kStrip - 1;
    from = a.firstVisible(head, last);
    to = last < a.queries ? a.visible(head, stripFirst) : 0;
  }

  __device__ bool all(int64_t t0) const { return t0 >= from && t0 + kTile <= to; }
};

/// The key of element e of accumulator tile n in a tile from key t0.
__device__ __forceinline__ int64_t keyOf(int64_t t0, int n, int e) {
  return t0 + n * 8 + 2 * (threadIdx.x % 4) + e % 2;
}

/// The logits of a strip's scores s (dot products) against the tile from key t0: -inf where
/// the row does not see the key; with `all` (StripKeys::all) no key is masked.
__device__ __forceinline__ void maskedLogits(float (&s)[kTile / 8][4], const LaneRows &mine,
                                             bool all, const AttentionDims &a, int64_t t0) {
  if (all) {
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[n][e] = a.logit(s[n][e]);
    return;
  }
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      s[n][e] = mine.sees(e, keyOf(t0, n, e)) ? a.logit(s[n][e]) : -CUDART_INF_F;
}

/// out = softmax(scale q k^T) v for 64 queries of one head, a strip of 16 per warp. Per key
/// tile the warp scores its strip into registers, runs the online softmax there (running
/// max and sum per row, each row's over the four lanes that hold it) and adds the bf16
/// probabilities times the value tile to its 16 x D output. Key and value tiles land two
/// stages deep. Each row's log-sum-exp goes to `lse` (fp32, one per query row) unless null.
template <int D>
__global__ void __launch_bounds__(kWarps * 32, D == 64 ? 4 : 3)
    flashForward(const bf16 *__restrict__ q, const bf16 *__restrict__ k, const bf16 *__restrict__ v,
                 Ref out, float *__restrict__ lse, AttentionDims a) {
  using L = ForwardLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  bf16 *keys = reinterpret_cast<bf16 *>(shared + L::keys);
  bf16 *values = reinterpret_cast<bf16 *>(shared + L::values);
  const int warp = threadIdx.x / 32;

  // The row tiles that see the most keys (causal: the last) run first, so that the short
  // ones fill the device's tail.
  const int64_t rowBlocks = tilesOf(a.queries);
  const int64_t head = blockIdx.x / rowBlocks;
  const int64_t first = (rowBlocks - 1 - blockIdx.x % rowBlocks) * kTile;
  const int rows = rowsBefore(a.queries - first, kTile);
  const int64_t kvHead = a.kvHeadOf(head);

  stageTile<D>(keys, q + a.queryRow(head, first, D), rows, a.queryStride(D));
  landCopies();
  uint32_t query[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    loadRows<kRowStride<D>>(query[kk], keys + warp * kStrip * kRowStride<D>, kk);
  __syncthreads(); // the query tile is read before the first key tile lands on it

  const LaneRows mine(a, head, first);
  const StripKeys stripKeys(a, head, first + warp * kStrip);
  // Key tiles past what the block's last row sees (above the diagonal, or padding) and
  // before its first row's window are skipped.
  const KeyTiles<D> tiles{keys,
                          values,
                          k + a.keyRow(kvHead, 0, D),
                          v + a.keyRow(kvHead, 0, D),
                          a.keyStride(D),
                          a.firstVisible(head, first),
                          a.visible(head, first + rows - 1)};
  float runningMax[2] = {-CUDART_INF_F, -CUDART_INF_F}, total[2] = {0.0f, 0.0f};
  float acc[D / 8][4] = {};
  tiles.walk([&](int64_t t0, const bf16 *keyTile, const bf16 *valueTile) {
    float s[kTile / 8][4] = {};
    dotTile<D>(
        s,
        [&](int kk, uint32_t(&frag)[4]) {
          for (int i = 0; i < 4; ++i)
            frag[i] = query[kk][i];
        },
        keyTile);

    // Logits where the row sees the key, -inf elsewhere; then the online softmax.
    maskedLogits(s, mine, stripKeys.all(t0), a, t0);
    float tileMax[2] = {-CUDART_INF_F, -CUDART_INF_F};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        tileMax[e / 2] = fmaxf(tileMax[e / 2], s[n][e]);
    float correction[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float next = fmaxf(runningMax[h], quadMax(tileMax[h]));
      correction[h] = correctionFor(runningMax[h], next);
      runningMax[h] = next;
    }
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        s[n][e] = s[n][e] == -CUDART_INF_F ? 0.0f : __expf(s[n][e] - runningMax[h]);
        sum[h] += s[n][e];
      }
#pragma unroll
    for (int h = 0; h < 2; ++h)
      total[h] = total[h] * correction[h] + quadSum(sum[h]);
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[n][e] *= correction[e / 2];
    uint32_t weights[kTile / 16][4];
    packWeights(weights, s);
    addProducts<D>(acc, weights, valueTile);
  });
  // No visible key (keys == 0) leaves the row zero and its log-sum-exp 0, as on the host.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float factor = total[h] > 0.0f ? 1.0f / total[h] : 0.0f;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      acc[n][2 * h] *= factor;
      acc[n][2 * h + 1] *= factor;
    }
    const int64_t row = first + mine.strip + 8 * h;
    if (lse && threadIdx.x % 4 == 0 && row < a.queries)
      lse[head * a.queries + row] = total[h] > 0.0f ? runningMax[h] + logf(total[h]) : 0.0f;
  }
  storeStrip(out, a.queryRow(head, first + warp * kStrip, D), a.queryStride(D),
             rows - warp * kStrip, acc, 1.0f);
}

/// Gradient kernel 1, 64 queries of one head, a strip per warp as in the forward, scores in
/// registers. One walk over the visible key tiles accumulates
/// dq = scale * sum_j p_j (g . v_j - delta) k_j, p_j = exp(logit_j - lse) from the forward's
/// log-sum-exp and delta = g . out (attentionDelta): the strip's bf16 dS, as A fragments,
/// times the key tile.
template <int D>
__global__ void __launch_bounds__(kWarps * 32, D == 64 ? 3 : 2)
    flashQueryGrad(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                   const bf16 *__restrict__ v, const bf16 *__restrict__ g, Ref dq,
                   const float *__restrict__ lse, const float *__restrict__ delta,
                   AttentionDims a) {
  using L = QueryGradLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  const int warp = threadIdx.x / 32;
  const bf16 *queries =
      reinterpret_cast<bf16 *>(shared + L::queries) + warp * kStrip * kRowStride<D>;
  const bf16 *grads = reinterpret_cast<bf16 *>(shared + L::grads) + warp * kStrip * kRowStride<D>;

  const int64_t rowBlocks = tilesOf(a.queries);
  const int64_t head = blockIdx.x / rowBlocks;
  const int64_t first = (rowBlocks - 1 - blockIdx.x % rowBlocks) * kTile;
  const int rows = rowsBefore(a.queries - first, kTile);
  const int64_t kvHead = a.kvHeadOf(head);

  stageTile<D>(reinterpret_cast<bf16 *>(shared + L::queries), q + a.queryRow(head, first, D), rows,
               a.queryStride(D));
  stageTile<D>(reinterpret_cast<bf16 *>(shared + L::grads), g + a.queryRow(head, first, D), rows,
               a.queryStride(D));
  landCopies();

  const LaneRows mine(a, head, first);
  const StripKeys stripKeys(a, head, first + warp * kStrip);
  const KeyTiles<D> tiles{reinterpret_cast<bf16 *>(shared + L::keys),
                          reinterpret_cast<bf16 *>(shared + L::values),
                          k + a.keyRow(kvHead, 0, D),
                          v + a.keyRow(kvHead, 0, D),
                          a.keyStride(D),
                          a.firstVisible(head, first),
                          a.visible(head, first + rows - 1)};
  // The strip's scores q.k_j (as logits, -inf where the row does not see key j) and dots
  // g.v_j against a key tile.
  auto score = [&](float(&s)[kTile / 8][4], float(&dp)[kTile / 8][4], int64_t t0,
                   const bf16 *keyTile, const bf16 *valueTile) {
    dotTile<D>(
        s, [&](int kk, uint32_t(&frag)[4]) { loadRows<kRowStride<D>>(frag, queries, kk); },
        keyTile);
    dotTile<D>(
        dp, [&](int kk, uint32_t(&frag)[4]) { loadRows<kRowStride<D>>(frag, grads, kk); },
        valueTile);
    maskedLogits(s, mine, stripKeys.all(t0), a, t0);
  };

  float rowLse[2], rowDelta[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = first + mine.strip + 8 * h;
    rowLse[h] = row < a.queries ? lse[head * a.queries + row] : 0.0f;
    rowDelta[h] = row < a.queries ? delta[head * a.queries + row] : 0.0f;
  }

  float acc[D / 8][4] = {};
  tiles.walk([&](int64_t t0, const bf16 *keyTile, const bf16 *valueTile) {
    float s[kTile / 8][4] = {}, dp[kTile / 8][4] = {};
    score(s, dp, t0, keyTile, valueTile);
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const float logit = s[n][e];
        s[n][e] = logit == -CUDART_INF_F
                      ? 0.0f
                      : __expf(logit - rowLse[h]) * (dp[n][e] - rowDelta[h]) * a.slope(logit);
      }
    uint32_t slopes[kTile / 16][4];
    packWeights(slopes, s);
    addProducts<D>(acc, slopes, keyTile);
  });
  storeStrip(dq, a.queryRow(head, first + warp * kStrip, D), a.queryStride(D), rows - warp * kStrip,
             acc, a.scale);
}

/// Gradient kernel 2, 64 keys of one key/value head: over the query heads of its group in
/// order and the query tiles that see its keys (from the block's first key on when causal)
/// in order, dv_j = sum_i p_ij g_i and dk_j = scale * sum_i p_ij (g_i . v_j - delta_i) q_i,
/// p_ij = exp(scale q_i . k_j - lse_i). Summing the group's heads here keeps grouped-query
/// gradients free of atomics. Per query tile each warp scores its 16 keys against half of
/// the queries in registers and leaves P^T and dS^T in shared memory as bf16; then it adds
/// the products of its strip with half of the depth to accumulators held to the end.
template <int D>
__global__ void __launch_bounds__(kKeyWarps * 32, 2)
    flashKeyGrad(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                 const bf16 *__restrict__ v, const bf16 *__restrict__ g,
                 const float *__restrict__ lse, const float *__restrict__ delta, Ref dk, Ref dv,
                 AttentionDims a) {
  using L = KeyGradLayout<D>;
  constexpr int stride = kRowStride<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  bf16 *keys = reinterpret_cast<bf16 *>(shared + L::keys);
  bf16 *values = reinterpret_cast<bf16 *>(shared + L::values);
  bf16 *queries = reinterpret_cast<bf16 *>(shared + L::queries);
  bf16 *grads = reinterpret_cast<bf16 *>(shared + L::grads);
  float *tileLse = reinterpret_cast<float *>(shared + L::stats), *tileDelta = tileLse + kTile;
  bf16 *probs = reinterpret_cast<bf16 *>(shared + L::probs);
  bf16 *slopes = reinterpret_cast<bf16 *>(shared + L::slopes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int strip = warp % kWarps, part = warp / kWarps;

  const int64_t rowBlocks = tilesOf(a.keys);
  const int64_t kvHead = blockIdx.x / rowBlocks, first = blockIdx.x % rowBlocks * kTile;
  const int rows = rowsBefore(a.keys - first, kTile);
  // The block's keys before `dead` and from `live` on are padding (before and after the
  // sequence's tokens), seen by no query: zero gradients.
  const int64_t sequence = kvHead / a.kvHeads;
  const int dead = rowsBefore(a.keyStart(sequence) - first, kTile);
  const int live = rowsBefore(a.keyEnd(sequence) - first, kTile);
  stageTile<D>(keys, k + a.keyRow(kvHead, first, D), rows, a.keyStride(D));
  stageTile<D>(values, v + a.keyRow(kvHead, first, D), rows, a.keyStride(D));
  landCopies();
  const bf16 *keyStrip = keys + strip * kStrip * stride;
  const bf16 *valueStrip = values + strip * kStrip * stride;

  const int64_t group = a.queryHeads / a.kvHeads;
  const int64_t firstHead = kvHead / a.kvHeads * a.queryHeads + kvHead % a.kvHeads * group;
  // Under causal no query before the block's first key sees any of its keys; under a
  // window none from its last key's window on.
  const int64_t start = a.causal ? first : 0;
  const int64_t end = a.window > 0 && first + rows - 1 + a.window < a.queries
                          ? first + rows - 1 + a.window
                          : a.queries;
  float dkAcc[D / 16][4] = {}, dvAcc[D / 16][4] = {};
  for (int64_t h = 0; h < group; ++h) {
    const int64_t queryFirst = (firstHead + h) * a.queries; // its lse and delta
    for (int64_t t0 = start; t0 < end; t0 += kTile) {
      const int count = rowsBefore(a.queries - t0, kTile);
      // Key `first + key` is visible to query `t0 + query` when key - query <= diagonal:
      // under causal the tile starts a multiple of kTile past the block's first key.
      const int diagonal = a.causal ? static_cast<int>(t0 - first) : kTile;
      __syncthreads(); // every warp is done with the previous tile
      stageTile<D>(queries, q + a.queryRow(firstHead + h, t0, D), count, a.queryStride(D));
      stageTile<D>(grads, g + a.queryRow(firstHead + h, t0, D), count, a.queryStride(D));
      if (threadIdx.x < kTile) {
        bool inside = static_cast<int>(threadIdx.x) < count;
        tileLse[threadIdx.x] = inside ? lse[queryFirst + t0 + threadIdx.x] : 0.0f;
        tileDelta[threadIdx.x] = inside ? delta[queryFirst + t0 + threadIdx.x] : 0.0f;
      }
      landCopies();
      // P^T and dS^T of the warp's 16 keys against its 32 queries.
      {
        float st[kTile / 16][4] = {}, dpt[kTile / 16][4] = {};
        const int from = part * (kTile / 2);
        // Whether every query of the tile sees every key of the block (the same for the
        // block): then no score takes a condition.
        const bool all = count == kTile && dead == 0 && live == kTile && diagonal >= kTile - 1 &&
                         (a.window <= 0 || t0 + kTile - 1 - first < a.window);
        dotTile<D>(
            st, [&](int kk, uint32_t(&frag)[4]) { loadRows<stride>(frag, keyStrip, kk); },
            queries + from * stride);
        dotTile<D>(
            dpt, [&](int kk, uint32_t(&frag)[4]) { loadRows<stride>(frag, valueStrip, kk); },
            grads + from * stride);
#pragma unroll
        for (int n = 0; n < kTile / 16; ++n)
#pragma unroll
          for (int e = 0; e < 4; e += 2) {
            const int key = strip * kStrip + lane / 4 + 8 * (e / 2);
            float p[2], ds[2];
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int query = from + n * 8 + 2 * (lane % 4) + j;
              p[j] = ds[j] = 0.0f;
              if (all || (query < count && key >= dead && key < live && key - query <= diagonal &&
                          a.inWindow(t0 + query, first + key))) {
                const float logit = a.logit(st[n][e + j]);
                p[j] = __expf(logit - tileLse[query]);
                ds[j] = p[j] * (dpt[n][e + j] - tileDelta[query]) * a.slope(logit);
              }
            }
            const int at = key * kProbStride + from + n * 8 + 2 * (lane % 4);
            *reinterpret_cast<uint32_t *>(probs + at) = packPair(p[0], p[1]);
            *reinterpret_cast<uint32_t *>(slopes + at) = packPair(ds[0], ds[1]);
          }
      }
      __syncthreads();
      const int column = part * (D / 2);
      uint32_t weights[kTile / 16][4];
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk)
        loadRows<kProbStride>(weights[kk], probs + strip * kStrip * kProbStride, kk);
      addProducts<D>(dvAcc, weights, grads + column);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk)
        loadRows<kProbStride>(weights[kk], slopes + strip * kStrip * kProbStride, kk);
      addProducts<D>(dkAcc, weights, queries + column);
    }
  }
  const int64_t corner = a.keyRow(kvHead, first + strip * kStrip, D) + part * (D / 2);
  storeStrip(dk, corner, a.keyStride(D), rows - strip * kStrip, dkAcc, a.scale);
  storeStrip(dv, corner, a.keyStride(D), rows - strip * kStrip, dvAcc, 1.0f);
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

bool flashAttention(const KernelArgs &args, const AttentionDims &a, float *lse) {
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
    flashForward<D>
        <<<static_cast<unsigned>(blocks), kWarps * 32, bytes, args.stream>>>(q, k, v, out, lse, a);
    checkLaunch(args);
  });
  return true;
}

bool flashAttentionGrad(const KernelArgs &args, const AttentionDims &a, const float *lse,
                        const float *delta) {
  if (!applies(args, a, 4))
    return false;
  const bf16 *q = bf16Data(args, 0), *k = bf16Data(args, 1), *v = bf16Data(args, 2),
             *g = bf16Data(args, 3);
  Ref dq = args.realResult(0).ref(), dk = args.realResult(1).ref(),
      dv = args.realResult(2).ref();
  withDepth(a.depth, [&](auto depth) {
    constexpr int D = decltype(depth)::value;
    if (int64_t blocks = a.batch * a.queryHeads * tilesOf(a.queries); blocks > 0) {
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
