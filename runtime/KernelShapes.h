// What the kernels of both backends walk with, from the shape rules (tensor/Shapes): each
// returns "" or the message the kernel fails with (naming its op).
#ifndef MT_RUNTIME_KERNELSHAPES_H
#define MT_RUNTIME_KERNELSHAPES_H

#include "tensor/Shapes.h"

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
  return shapes::strides(shape);
}

using shapes::broadcastStrides;

/// The window (starts, limits, steps) of `full`: sets `base` to the offset of its first
/// element and `strides` to those of `window`'s elements in `full`, checking that `window`
/// is its shape.
inline std::string stridedWindow(const std::vector<int64_t> &full,
                                 const std::vector<int64_t> &window,
                                 const std::vector<int64_t> &starts,
                                 const std::vector<int64_t> &limits,
                                 const std::vector<int64_t> &steps, int64_t &base,
                                 std::vector<int64_t> &strides) {
  shapes::Dims sliced;
  if (std::string error = shapes::slice(full, starts, limits, steps, sliced); !error.empty())
    return error;
  if (sliced != window)
    return "the slice of " + shapes::format(full) + " is " + shapes::format(sliced) + ", not " +
           shapes::format(window);
  shapes::windowStrides(full, starts, steps, base, strides);
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

/// Checks a concatenation of `inputs` along `axis` into `out`.
inline std::string concatShapes(const std::vector<const std::vector<int64_t> *> &inputs,
                                const std::vector<int64_t> &out, int64_t axis) {
  std::vector<shapes::DimsRef> dims;
  for (const std::vector<int64_t> *shape : inputs)
    dims.emplace_back(*shape);
  shapes::Dims joined;
  if (std::string error = shapes::concat(dims, axis, joined); !error.empty())
    return error;
  if (joined != out)
    return "the operands concatenate to " + shapes::format(joined) + ", not " + shapes::format(out);
  return "";
}

/// A reduction of `shape` over `axes`: `reduced` marks them, `kept` is the shape with them set
/// to 1 (keepdims) and `dropped` the shape without them.
inline std::string reductionShapes(const std::vector<int64_t> &shape,
                                   const std::vector<int64_t> &axes, std::vector<bool> &reduced,
                                   std::vector<int64_t> &kept, std::vector<int64_t> &dropped) {
  if (std::string error = shapes::reduce(shape, axes, /*keepDims=*/true, kept); !error.empty())
    return error;
  shapes::reduce(shape, axes, /*keepDims=*/false, dropped);
  reduced.assign(shape.size(), false);
  for (int64_t axis : axes)
    reduced[axis] = true;
  return "";
}

using IndexedLayout = shapes::IndexedLayout;
using shapes::indexedLayout;

using AttentionExtents = shapes::AttentionExtents;

/// The extents of attention over query, key and value in their layout (see
/// shapes::attention).
inline std::string attentionExtents(const std::vector<int64_t> &q, const std::vector<int64_t> &k,
                                    const std::vector<int64_t> &v, bool sequenceMajor,
                                    AttentionExtents &a) {
  return shapes::attention(q, k, v, /*causal=*/false, sequenceMajor, a);
}

/// The first position of a mask row of `length` entries (`token(i)` true where entry i is a
/// token) that is a token after padding after tokens, where the row stops being one span of
/// tokens (padding, tokens, padding) that attention's key span can stand for; -1 if none.
template <typename Token> int64_t tokenPastSpan(int64_t length, Token &&token) {
  bool tokens = false, paddingAfter = false;
  for (int64_t i = 0; i < length; ++i) {
    bool isToken = token(i);
    if (isToken && paddingAfter)
      return i;
    paddingAfter |= tokens && !isToken;
    tokens |= isToken;
  }
  return -1;
}

/// Why `span` (shape `shape`, host values, or null when they lie on the device) is not a key
/// span of attention `a`: a [first, end) pair per sequence with 0 <= first <= end <= keys;
/// empty if it is.
inline std::string keySpanError(const std::vector<int64_t> &shape, const AttentionExtents &a,
                                const int64_t *span) {
  if (std::string error = shapes::keySpan(shape, a.batch); !error.empty())
    return error;
  for (int64_t b = 0; span && b < a.batch; ++b)
    if (span[2 * b] < 0 || span[2 * b] > span[2 * b + 1] || span[2 * b + 1] > a.keys)
      return "key span [" + std::to_string(span[2 * b]) + ", " + std::to_string(span[2 * b + 1]) +
             ") of sequence " + std::to_string(b) + " is not within [0, " + std::to_string(a.keys) +
             "]";
  return "";
}

} // namespace mt

#endif // MT_RUNTIME_KERNELSHAPES_H
