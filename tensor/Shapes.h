// The shape rules of mt's ops in plain C++, below everything that uses them: the op verifiers
// and the ONNX frontend (through ir/ShapeRules) and both backends' kernels (through
// runtime/KernelShapes) check shapes with these, so that a rule is written once. Each rule
// returns "" and its result, or why the shapes do not fit (the caller names the op).
#ifndef MT_TENSOR_SHAPES_H
#define MT_TENSOR_SHAPES_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mt::shapes {

using Dims = std::vector<int64_t>;

/// Read-only dimensions (a shape, axes, a permutation) from any contiguous int64s with
/// data() and size(): std::vector, llvm::ArrayRef, llvm::SmallVector.
class DimsRef {
public:
  DimsRef() = default;
  DimsRef(const int64_t *data, size_t size) : first(data), count(size) {}
  template <typename Container, typename = decltype(static_cast<const int64_t *>(
                                    std::declval<const Container &>().data()))>
  DimsRef(const Container &dims) : first(dims.data()), count(dims.size()) {}

  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  const int64_t *begin() const { return first; }
  const int64_t *end() const { return first + count; }
  int64_t operator[](size_t i) const { return first[i]; }
  int64_t back() const { return first[count - 1]; }
  Dims vector() const { return Dims(begin(), end()); }

private:
  const int64_t *first = nullptr;
  size_t count = 0;
};

/// "[2, 16, 32]", for messages.
std::string format(DimsRef dims);
int64_t elements(DimsRef shape);
/// Row-major strides of `shape`.
Dims strides(DimsRef shape);

/// Numpy broadcasting of two shapes.
std::string broadcast(DimsRef lhs, DimsRef rhs, Dims &result);
/// Whether `input` broadcasts to `target` without changing it; broadcastTo says why not.
bool broadcastsTo(DimsRef input, DimsRef target);
std::string broadcastTo(DimsRef input, DimsRef target);
/// Batched matrix product; each flag transposes its operand's last two axes.
std::string matmul(DimsRef lhs, DimsRef rhs, bool transposeLhs, bool transposeRhs, Dims &result);
/// input [..., K] times weight [K, N] (or [N, K] when transposed), bias [N] (null: none).
std::string linear(DimsRef input, DimsRef weight, const DimsRef *bias, bool transposeWeight,
                   Dims &result);
/// Axes must be in range, ascending and unique; keepDims leaves them as 1.
std::string reduce(DimsRef input, DimsRef axes, bool keepDims, Dims &result);
std::string transpose(DimsRef input, DimsRef permutation, Dims &result);
/// Every `strides[d]`-th element of axis d from starts[d] up to limits[d].
std::string slice(DimsRef input, DimsRef starts, DimsRef limits, DimsRef strides, Dims &result);
std::string concat(const std::vector<DimsRef> &inputs, int64_t axis, Dims &result);
/// The input with axis `axis` replaced by the indices' shape.
std::string gather(DimsRef input, DimsRef indices, int64_t axis, Dims &result);

/// How gather and scatter_add move rows: the indexed tensor is [outer, length, inner] around
/// the axis, the gathered side [outer, count (the indices' elements), inner]; row j of each
/// outer slice comes from row indices[j].
struct IndexedLayout {
  int64_t outer = 0, length = 0, inner = 0, count = 0;
};
/// That layout of `full` indexed along `axis` by `indices`, after checking that `gathered`
/// is the gather's shape.
std::string indexedLayout(DimsRef full, DimsRef indices, DimsRef gathered, int64_t axis,
                          IndexedLayout &layout);

/// How an operand of shape `shape` is read as `target` under numpy broadcasting: its
/// row-major strides, 0 on broadcast axes; "" or why it does not broadcast.
std::string broadcastStrides(DimsRef shape, DimsRef target, Dims &strides);
/// The strides of `input` in its transpose's axis order (`permutation` already checked).
Dims permutedStrides(DimsRef input, DimsRef permutation);
/// A window of `full` from `starts` by `steps` (a slice; a step may be negative in ONNX's):
/// the offset of its first element and the strides of its axes in `full`.
void windowStrides(DimsRef full, DimsRef starts, DimsRef steps, int64_t &base, Dims &strides);

/// Calls body(i, offsets) for every element i of `shape` in row-major order, where
/// offsets[k] is its position in operand k as addressed by strides[k]: how the host kernels
/// and the ONNX constant folder walk views and broadcasts.
template <size_t N, typename F>
void walk(DimsRef shape, const std::array<Dims, N> &strides, F &&body) {
  int64_t total = elements(shape);
  size_t rank = shape.size();
  Dims index(rank, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t i = 0; i < total; ++i) {
    body(i, offsets);
    for (size_t d = rank; d-- > 0;) {
      for (size_t k = 0; k < N; ++k)
        offsets[k] += strides[k][d];
      if (++index[d] < shape[d])
        break;
      for (size_t k = 0; k < N; ++k)
        offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

// The attention kernels on the device address rows through AttentionExtents too.
#ifdef __CUDACC__
#define MT_HOST_DEVICE __host__ __device__
#else
#define MT_HOST_DEVICE
#endif

/// The extents of attention over query [B, Hq, Tq, D], key [B, Hkv, Tk, D] and value
/// [B, Hkv, Tk, Dv], with grouped-query heads (Hkv divides Hq); its result is
/// [B, Hq, Tq, Dv]. Causal attention needs Tq = Tk. Sequence-major attention takes and gives
/// [B, T, H, D] instead: the rows of the projections that feed it, without transposes.
struct AttentionExtents {
  int64_t batch, queryHeads, kvHeads, queries, keys, depth, valueDepth;
  bool sequenceMajor;

  /// Where row `t` of query head `head` (over batch and heads) begins, rows of `width`
  /// elements; the same for key/value head `head`; the elements from one row to the next.
  MT_HOST_DEVICE int64_t queryRow(int64_t head, int64_t t, int64_t width) const {
    return rowOffset(head, t, queryHeads, queries, width);
  }
  MT_HOST_DEVICE int64_t keyRow(int64_t head, int64_t t, int64_t width) const {
    return rowOffset(head, t, kvHeads, keys, width);
  }
  MT_HOST_DEVICE int64_t queryStride(int64_t width) const {
    return sequenceMajor ? queryHeads * width : width;
  }
  MT_HOST_DEVICE int64_t keyStride(int64_t width) const {
    return sequenceMajor ? kvHeads * width : width;
  }
  MT_HOST_DEVICE int64_t rowOffset(int64_t head, int64_t t, int64_t heads, int64_t length,
                                   int64_t width) const {
    int64_t b = head / heads, h = head % heads;
    return sequenceMajor ? ((b * length + t) * heads + h) * width : (head * length + t) * width;
  }
  /// Attention's result shape, in its layout.
  std::vector<int64_t> resultShape() const {
    return sequenceMajor ? std::vector<int64_t>{batch, queries, queryHeads, valueDepth}
                         : std::vector<int64_t>{batch, queryHeads, queries, valueDepth};
  }
};
std::string attention(DimsRef query, DimsRef key, DimsRef value, bool causal, bool sequenceMajor,
                      AttentionExtents &extents);
/// Attention's key span: a [first, end) pair per sequence of a batch of `batch`.
std::string keySpan(DimsRef span, int64_t batch);
/// Attention's log-sum-exp: one per query row, [B, Hq, Tq] in either layout.
std::string attentionLse(DimsRef lse, const AttentionExtents &extents);

} // namespace mt::shapes

#endif // MT_TENSOR_SHAPES_H
