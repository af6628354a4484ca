// Shape rules the kernels of both backends share: each computes what the kernel walks with
// and returns "" or the message the kernel fails with (naming its op).
#ifndef MT_RUNTIME_KERNELSHAPES_H
#define MT_RUNTIME_KERNELSHAPES_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mt {

/// A cross-entropy target that counts for nothing (PyTorch's ignore_index): the positions of
/// padding. The loss is the mean over the other positions.
constexpr int64_t kIgnoredTarget = -100;

/// Row-major strides of `shape`.
inline std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Sets `strides` to those of row-major `shape` read as `target` (0 on broadcast axes) and
/// returns "", or returns why `shape` does not broadcast to `target`.
inline std::string broadcastStrides(const std::vector<int64_t> &shape,
                                    const std::vector<int64_t> &target,
                                    std::vector<int64_t> &strides) {
  if (shape.size() > target.size())
    return "cannot broadcast rank " + std::to_string(shape.size()) + " to rank " +
           std::to_string(target.size());
  std::vector<int64_t> own = stridesOf(shape);
  strides.assign(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == target[lead + d])
      strides[lead + d] = shape[d] == 1 ? 0 : own[d];
    else if (shape[d] != 1)
      return "cannot broadcast axis " + std::to_string(d) + " of size " +
             std::to_string(shape[d]) + " to " + std::to_string(target[lead + d]);
  }
  return "";
}

/// The window (starts, limits, steps) of `full`: sets `base` to the offset of its first
/// element and `strides` to those of `window`'s elements in `full`, checking that `window`
/// is its shape.
inline std::string stridedWindow(const std::vector<int64_t> &full,
                                 const std::vector<int64_t> &window,
                                 const std::vector<int64_t> &starts,
                                 const std::vector<int64_t> &limits,
                                 const std::vector<int64_t> &steps, int64_t &base,
                                 std::vector<int64_t> &strides) {
  size_t rank = full.size();
  if (starts.size() != rank || limits.size() != rank || steps.size() != rank ||
      window.size() != rank)
    return "starts, limits, strides and both shapes must have one entry per axis";
  std::vector<int64_t> fullStrides = stridesOf(full);
  strides.assign(rank, 0);
  base = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (starts[d] < 0 || starts[d] > limits[d] || limits[d] > full[d] || steps[d] < 1 ||
        window[d] != (limits[d] - starts[d] + steps[d] - 1) / steps[d])
      return "the window of axis " + std::to_string(d) + " (" + std::to_string(starts[d]) +
             ", " + std::to_string(limits[d]) + ", " + std::to_string(steps[d]) +
             ") does not fit size " + std::to_string(full[d]) + " to give " +
             std::to_string(window[d]);
    base += starts[d] * fullStrides[d];
    strides[d] = steps[d] * fullStrides[d];
  }
  return "";
}

/// The row length `d` (last axis) of a normalization of `shape`, checking that each weight-like
/// operand (index, elements) has d elements.
inline std::string normRow(const std::vector<int64_t> &shape,
                           const std::vector<std::pair<size_t, int64_t>> &vectors, int64_t &d) {
  if (shape.empty())
    return "the input must have rank 1 or more";
  d = shape.back();
  for (auto [operand, size] : vectors)
    if (size != d)
      return "operand " + std::to_string(operand) + " has " + std::to_string(size) +
             " elements, not the last axis' " + std::to_string(d);
  return "";
}

/// Checks a concatenation of `shapes` along `axis` into `out`: each operand is the result's
/// shape off the axis, and their axis sizes sum to the result's.
inline std::string concatShapes(const std::vector<const std::vector<int64_t> *> &shapes,
                                const std::vector<int64_t> &out, int64_t axis) {
  int64_t total = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<int64_t> expected = out;
    const std::vector<int64_t> &shape = *shapes[i];
    if (shape.size() == out.size())
      expected[axis] = shape[axis];
    if (shape != expected)
      return "operand " + std::to_string(i) + " differs from the result off axis " +
             std::to_string(axis);
    total += shape[axis];
  }
  if (total != out[axis])
    return "the operands' axis sizes sum to " + std::to_string(total) + ", not " +
           std::to_string(out[axis]);
  return "";
}

/// A reduction of `shape` over `axes`: `reduced` marks them, `kept` is the shape with them set
/// to 1 (keepdims) and `dropped` the shape without them.
inline std::string reductionShapes(const std::vector<int64_t> &shape,
                                   const std::vector<int64_t> &axes, std::vector<bool> &reduced,
                                   std::vector<int64_t> &kept, std::vector<int64_t> &dropped) {
  reduced.assign(shape.size(), false);
  kept = shape;
  dropped.clear();
  for (int64_t axis : axes) {
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
      return "axis " + std::to_string(axis) + " is out of range for rank " +
             std::to_string(shape.size());
    reduced[axis] = true;
    kept[axis] = 1;
  }
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d])
      dropped.push_back(shape[d]);
  return "";
}

/// The extents of attention over query [B, Hq, Tq, D], key [B, Hkv, Tk, D] and value
/// [B, Hkv, Tk, Dv], with grouped-query heads (Hkv divides Hq).
struct AttentionExtents {
  int64_t batch, queryHeads, kvHeads, queries, keys, depth, valueDepth;
};
inline std::string attentionExtents(const std::vector<int64_t> &q, const std::vector<int64_t> &k,
                                    const std::vector<int64_t> &v, AttentionExtents &a) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return "query, key and value must have rank 4";
  a = {q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
  if (k[0] != a.batch || v[0] != a.batch || v[1] != a.kvHeads || v[2] != a.keys ||
      k[3] != a.depth)
    return "key or value does not match the query's batch and depth";
  if (a.kvHeads == 0 || a.queryHeads % a.kvHeads != 0)
    return std::to_string(a.kvHeads) + " key/value heads do not divide " +
           std::to_string(a.queryHeads) + " query heads";
  return "";
}

/// Why `lengths` (shape `shape`, host values, or null when they lie on the device) are not key
/// lengths of attention `a`: one per sequence, each within [0, keys]; empty if they are.
inline std::string keyLengthsError(const std::vector<int64_t> &shape, const AttentionExtents &a,
                                   const int64_t *lengths) {
  if (shape != std::vector<int64_t>{a.batch})
    return "key_lengths must be one per sequence, [" + std::to_string(a.batch) + "]";
  for (int64_t b = 0; lengths && b < a.batch; ++b)
    if (lengths[b] < 0 || lengths[b] > a.keys)
      return "key length " + std::to_string(lengths[b]) + " of sequence " + std::to_string(b) +
             " is not within [0, " + std::to_string(a.keys) + "]";
  return "";
}

} // namespace mt

#endif // MT_RUNTIME_KERNELSHAPES_H
