// The shape rules of mt's ops.
#include "tensor/Shapes.h"

#include <algorithm>

namespace mt::shapes {

std::string format(DimsRef dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

int64_t elements(DimsRef shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Dims strides(DimsRef shape) {
  Dims strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

std::string broadcastStrides(DimsRef shape, DimsRef target, Dims &strides) {
  if (std::string error = broadcastTo(shape, target); !error.empty())
    return error;
  Dims own = shapes::strides(shape);
  strides.assign(target.size(), 0);
  size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    strides[lead + d] = shape[d] == 1 ? 0 : own[d];
  return "";
}

Dims permutedStrides(DimsRef input, DimsRef permutation) {
  Dims own = strides(input), permuted;
  for (int64_t from : permutation)
    permuted.push_back(own[from]);
  return permuted;
}

void windowStrides(DimsRef full, DimsRef starts, DimsRef steps, int64_t &base, Dims &strides) {
  Dims own = shapes::strides(full);
  strides.assign(full.size(), 0);
  base = 0;
  for (size_t d = 0; d < full.size(); ++d) {
    base += starts[d] * own[d];
    strides[d] = steps[d] * own[d];
  }
}

std::string broadcast(DimsRef lhs, DimsRef rhs, Dims &result) {
  size_t rank = std::max(lhs.size(), rhs.size());
  result.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t b = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1)
      return "shapes " + format(lhs) + " and " + format(rhs) + " do not broadcast";
    result[i] = a == 1 ? b : a;
  }
  return "";
}

bool broadcastsTo(DimsRef input, DimsRef target) {
  if (input.size() > target.size())
    return false;
  size_t lead = target.size() - input.size();
  for (size_t i = 0; i < input.size(); ++i)
    if (input[i] != 1 && input[i] != target[lead + i])
      return false;
  return true;
}

std::string broadcastTo(DimsRef input, DimsRef target) {
  return broadcastsTo(input, target)
             ? ""
             : "cannot broadcast " + format(input) + " to " + format(target);
}

std::string matmul(DimsRef lhs, DimsRef rhs, bool transposeLhs, bool transposeRhs, Dims &result) {
  if (lhs.size() < 2 || rhs.size() < 2)
    return "matmul operands need rank 2 or more, got " + format(lhs) + " and " + format(rhs);
  int64_t m = lhs[lhs.size() - (transposeLhs ? 1 : 2)];
  int64_t k = lhs[lhs.size() - (transposeLhs ? 2 : 1)];
  int64_t k2 = rhs[rhs.size() - (transposeRhs ? 1 : 2)];
  int64_t n = rhs[rhs.size() - (transposeRhs ? 2 : 1)];
  if (k != k2)
    return "matmul contraction sizes differ: " + format(lhs) + (transposeLhs ? "^T" : "") + " @ " +
           format(rhs) + (transposeRhs ? "^T" : "");
  std::string error =
      broadcast(DimsRef(lhs.begin(), lhs.size() - 2), DimsRef(rhs.begin(), rhs.size() - 2), result);
  if (!error.empty())
    return error;
  result.push_back(m);
  result.push_back(n);
  return "";
}

std::string linear(DimsRef input, DimsRef weight, const DimsRef *bias, bool transposeWeight,
                   Dims &result) {
  if (input.empty() || weight.size() != 2)
    return "linear needs an input of rank 1 or more and a weight of rank 2, got " + format(input) +
           " and " + format(weight);
  int64_t k = weight[transposeWeight ? 1 : 0];
  int64_t n = weight[transposeWeight ? 0 : 1];
  if (input.back() != k)
    return "linear input " + format(input) + " does not match weight " + format(weight) +
           (transposeWeight ? " (transposed)" : "");
  if (bias && (bias->size() != 1 || (*bias)[0] != n))
    return "linear bias " + format(*bias) + " must be [" + std::to_string(n) + "]";
  result = input.vector();
  result.back() = n;
  return "";
}

std::string reduce(DimsRef input, DimsRef axes, bool keepDims, Dims &result) {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(input.size()) ||
        (i > 0 && axes[i] <= axes[i - 1]))
      return "reduction axes " + format(axes) + " must be ascending, unique and within rank " +
             std::to_string(input.size());
  result.clear();
  for (int64_t d = 0, e = input.size(); d < e; ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end())
      result.push_back(input[d]);
    else if (keepDims)
      result.push_back(1);
  }
  return "";
}

std::string transpose(DimsRef input, DimsRef permutation, Dims &result) {
  std::vector<bool> seen(input.size(), false);
  bool valid = permutation.size() == input.size();
  for (int64_t p : permutation) {
    if (!valid || p < 0 || p >= static_cast<int64_t>(input.size()) || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid)
    return "permutation " + format(permutation) + " is not a permutation of " +
           std::to_string(input.size()) + " axes";
  result.clear();
  for (int64_t p : permutation)
    result.push_back(input[p]);
  return "";
}

std::string slice(DimsRef input, DimsRef starts, DimsRef limits, DimsRef strides, Dims &result) {
  if (starts.size() != input.size() || limits.size() != input.size() ||
      strides.size() != input.size())
    return "slice needs one start, limit and stride per axis of " + format(input);
  result.clear();
  for (size_t d = 0; d < input.size(); ++d) {
    if (strides[d] < 1 || starts[d] < 0 || starts[d] > limits[d] || limits[d] > input[d])
      return "slice of axis " + std::to_string(d) + " (size " + std::to_string(input[d]) +
             ") from " + std::to_string(starts[d]) + " to " + std::to_string(limits[d]) + " by " +
             std::to_string(strides[d]) + " is out of range";
    result.push_back((limits[d] - starts[d] + strides[d] - 1) / strides[d]);
  }
  return "";
}

std::string concat(const std::vector<DimsRef> &inputs, int64_t axis, Dims &result) {
  if (inputs.empty())
    return "concat needs at least one input";
  result = inputs.front().vector();
  if (axis < 0 || axis >= static_cast<int64_t>(result.size()))
    return "concat axis " + std::to_string(axis) + " is out of range for rank " +
           std::to_string(result.size());
  for (size_t i = 1; i < inputs.size(); ++i) {
    DimsRef shape = inputs[i];
    bool same = shape.size() == result.size();
    for (size_t d = 0; same && d < shape.size(); ++d)
      same = static_cast<int64_t>(d) == axis || shape[d] == result[d];
    if (!same)
      return "concat inputs " + format(inputs.front()) + " and " + format(shape) +
             " differ off axis " + std::to_string(axis);
    result[axis] += shape[axis];
  }
  return "";
}

std::string gather(DimsRef input, DimsRef indices, int64_t axis, Dims &result) {
  if (axis < 0 || axis >= static_cast<int64_t>(input.size()))
    return "gather axis " + std::to_string(axis) + " is out of range for rank " +
           std::to_string(input.size());
  result.assign(input.begin(), input.begin() + axis);
  result.insert(result.end(), indices.begin(), indices.end());
  result.insert(result.end(), input.begin() + axis + 1, input.end());
  return "";
}

std::string indexedLayout(DimsRef full, DimsRef indices, DimsRef gathered, int64_t axis,
                          IndexedLayout &layout) {
  if (full.empty())
    return "the indexed tensor must have rank 1 or more";
  Dims expected;
  if (std::string error = gather(full, indices, axis, expected); !error.empty())
    return error;
  if (gathered.vector() != expected)
    return "the gathered shape " + format(gathered) + " is not " + format(expected) +
           ", the input's with axis " + std::to_string(axis) + " replaced by the indices' shape";
  auto product = [](const int64_t *begin, const int64_t *end) {
    int64_t n = 1;
    for (const int64_t *d = begin; d != end; ++d)
      n *= *d;
    return n;
  };
  layout = {product(full.begin(), full.begin() + axis), full[axis],
            product(full.begin() + axis + 1, full.end()), product(indices.begin(), indices.end())};
  return "";
}

std::string attention(DimsRef query, DimsRef key, DimsRef value, bool causal, bool sequenceMajor,
                      AttentionExtents &extents) {
  const char *layout =
      sequenceMajor ? "[batch, sequence, heads, head size]" : "[batch, heads, sequence, head size]";
  if (query.size() != 4 || key.size() != 4 || value.size() != 4)
    return std::string("attention operands must be ") + layout + ", got " + format(query) + ", " +
           format(key) + ", " + format(value);
  // Heads and sequence at axes 1 and 2, whichever the layout.
  auto headMajor = [&](DimsRef d) {
    return sequenceMajor ? std::array<int64_t, 4>{d[0], d[2], d[1], d[3]}
                         : std::array<int64_t, 4>{d[0], d[1], d[2], d[3]};
  };
  std::array<int64_t, 4> q = headMajor(query), k = headMajor(key), v = headMajor(value);
  if (k[0] != q[0] || v[0] != q[0] || k[1] != v[1] || k[2] != v[2] || k[3] != q[3] || k[1] == 0 ||
      q[1] % k[1] != 0)
    return "attention query " + format(query) + ", key " + format(key) + " and value " +
           format(value) + " disagree (key/value heads must divide query heads), read as " + layout;
  if (causal && q[2] != k[2])
    return "causal attention needs as many queries as keys, got " + std::to_string(q[2]) + " and " +
           std::to_string(k[2]);
  extents = {q[0], q[1], k[1], q[2], k[2], q[3], v[3], sequenceMajor};
  return "";
}

std::string keySpan(DimsRef span, int64_t batch) {
  if (span.size() == 2 && span[0] == batch && span[1] == 2)
    return "";
  return "key_span " + format(span) + " should be a [first, end) pair per sequence, [" +
         std::to_string(batch) + ", 2]";
}

std::string attentionLse(DimsRef lse, const AttentionExtents &e) {
  std::vector<int64_t> rows{e.batch, e.queryHeads, e.queries};
  if (lse.size() == 3 && std::equal(lse.begin(), lse.end(), rows.begin()))
    return "";
  return "attention lse " + format(lse) + " should be one per query row, " + format(rows);
}

} // namespace mt::shapes
