// Result-shape rules shared by the ONNX frontend and the op verifiers.
#include "ir/ShapeRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace mt {

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  return "[" + llvm::join(llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }),
                          ", ") +
         "]";
}

int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

FailureOr<Shape> broadcastShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                                EmitError emitError) {
  size_t rank = std::max(lhs.size(), rhs.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t b = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1) {
      emitError() << "shapes " << formatShape(lhs) << " and " << formatShape(rhs)
                  << " do not broadcast";
      return failure();
    }
    result[i] = a == 1 ? b : a;
  }
  return result;
}

bool broadcastsTo(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> target) {
  if (input.size() > target.size())
    return false;
  size_t lead = target.size() - input.size();
  for (size_t i = 0; i < input.size(); ++i)
    if (input[i] != 1 && input[i] != target[lead + i])
      return false;
  return true;
}

FailureOr<Shape> matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                             bool transposeLhs, bool transposeRhs, EmitError emitError) {
  if (lhs.size() < 2 || rhs.size() < 2) {
    emitError() << "matmul operands need rank 2 or more, got " << formatShape(lhs) << " and "
                << formatShape(rhs);
    return failure();
  }
  int64_t m = lhs[lhs.size() - (transposeLhs ? 1 : 2)];
  int64_t k = lhs[lhs.size() - (transposeLhs ? 2 : 1)];
  int64_t k2 = rhs[rhs.size() - (transposeRhs ? 1 : 2)];
  int64_t n = rhs[rhs.size() - (transposeRhs ? 2 : 1)];
  if (k != k2) {
    emitError() << "matmul contraction sizes differ: " << formatShape(lhs)
                << (transposeLhs ? "^T" : "") << " @ " << formatShape(rhs)
                << (transposeRhs ? "^T" : "");
    return failure();
  }
  FailureOr<Shape> batch =
      broadcastShape(lhs.drop_back(2), rhs.drop_back(2), emitError);
  if (failed(batch))
    return failure();
  batch->push_back(m);
  batch->push_back(n);
  return batch;
}

FailureOr<Shape> linearShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> weight,
                             std::optional<llvm::ArrayRef<int64_t>> bias, bool transposeWeight,
                             EmitError emitError) {
  if (input.empty() || weight.size() != 2) {
    emitError() << "linear needs an input of rank 1 or more and a weight of rank 2, got "
                << formatShape(input) << " and " << formatShape(weight);
    return failure();
  }
  int64_t k = weight[transposeWeight ? 1 : 0];
  int64_t n = weight[transposeWeight ? 0 : 1];
  if (input.back() != k) {
    emitError() << "linear input " << formatShape(input) << " does not match weight "
                << formatShape(weight) << (transposeWeight ? " (transposed)" : "");
    return failure();
  }
  if (bias && (bias->size() != 1 || (*bias)[0] != n)) {
    emitError() << "linear bias " << formatShape(*bias) << " must be [" << n << "]";
    return failure();
  }
  Shape result(input.begin(), input.end());
  result.back() = n;
  return result;
}

FailureOr<Shape> reduceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> axes,
                             bool keepDims, EmitError emitError) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(input.size()) ||
        (i > 0 && axes[i] <= axes[i - 1])) {
      emitError() << "reduction axes " << formatShape(axes)
                  << " must be ascending, unique and within rank " << input.size();
      return failure();
    }
  }
  Shape result;
  for (int64_t d = 0, e = input.size(); d < e; ++d) {
    if (!llvm::is_contained(axes, d))
      result.push_back(input[d]);
    else if (keepDims)
      result.push_back(1);
  }
  return result;
}

FailureOr<Shape> transposeShape(llvm::ArrayRef<int64_t> input,
                                llvm::ArrayRef<int64_t> permutation, EmitError emitError) {
  llvm::SmallVector<bool> seen(input.size(), false);
  bool valid = permutation.size() == input.size();
  for (int64_t p : permutation) {
    if (!valid || p < 0 || p >= static_cast<int64_t>(input.size()) || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid) {
    emitError() << "permutation " << formatShape(permutation) << " is not a permutation of "
                << input.size() << " axes";
    return failure();
  }
  Shape result;
  for (int64_t p : permutation)
    result.push_back(input[p]);
  return result;
}

FailureOr<Shape> sliceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> starts,
                            llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> strides,
                            EmitError emitError) {
  if (starts.size() != input.size() || limits.size() != input.size() ||
      strides.size() != input.size()) {
    emitError() << "slice needs one start, limit and stride per axis of " << formatShape(input);
    return failure();
  }
  Shape result;
  for (size_t d = 0; d < input.size(); ++d) {
    if (strides[d] < 1 || starts[d] < 0 || starts[d] > limits[d] || limits[d] > input[d]) {
      emitError() << "slice of axis " << d << " (size " << input[d] << ") from " << starts[d]
                  << " to " << limits[d] << " by " << strides[d] << " is out of range";
      return failure();
    }
    result.push_back((limits[d] - starts[d] + strides[d] - 1) / strides[d]);
  }
  return result;
}

FailureOr<Shape> concatShape(llvm::ArrayRef<Shape> inputs, int64_t axis, EmitError emitError) {
  if (inputs.empty()) {
    emitError() << "concat needs at least one input";
    return failure();
  }
  Shape result = inputs.front();
  if (axis < 0 || axis >= static_cast<int64_t>(result.size())) {
    emitError() << "concat axis " << axis << " is out of range for rank " << result.size();
    return failure();
  }
  for (const Shape &shape : inputs.drop_front()) {
    bool same = shape.size() == result.size();
    for (size_t d = 0; same && d < shape.size(); ++d)
      same = static_cast<int64_t>(d) == axis || shape[d] == result[d];
    if (!same) {
      emitError() << "concat inputs " << formatShape(inputs.front()) << " and "
                  << formatShape(shape) << " differ off axis " << axis;
      return failure();
    }
    result[axis] += shape[axis];
  }
  return result;
}

FailureOr<Shape> gatherShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> indices,
                             int64_t axis, EmitError emitError) {
  if (axis < 0 || axis >= static_cast<int64_t>(input.size())) {
    emitError() << "gather axis " << axis << " is out of range for rank " << input.size();
    return failure();
  }
  Shape result(input.begin(), input.begin() + axis);
  result.append(indices.begin(), indices.end());
  result.append(input.begin() + axis + 1, input.end());
  return result;
}

FailureOr<Shape> attentionShape(llvm::ArrayRef<int64_t> query, llvm::ArrayRef<int64_t> key,
                                llvm::ArrayRef<int64_t> value, bool causal,
                                EmitError emitError) {
  if (query.size() != 4 || key.size() != 4 || value.size() != 4) {
    emitError() << "attention operands must be [batch, heads, sequence, head size], got "
                << formatShape(query) << ", " << formatShape(key) << ", " << formatShape(value);
    return failure();
  }
  if (key[0] != query[0] || value[0] != query[0] || key[1] != value[1] ||
      key[2] != value[2] || key[3] != query[3] || key[1] == 0 || query[1] % key[1] != 0) {
    emitError() << "attention query " << formatShape(query) << ", key " << formatShape(key)
                << " and value " << formatShape(value)
                << " disagree (key/value heads must divide query heads)";
    return failure();
  }
  if (causal && query[2] != key[2]) {
    emitError() << "causal attention needs as many queries as keys, got " << query[2] << " and "
                << key[2];
    return failure();
  }
  return Shape{query[0], query[1], query[2], value[3]};
}

} // namespace mt
