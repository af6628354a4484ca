// Host evaluation of the ONNX ops that shape and mask subgraphs are made of.
#include "frontend/ConstantFolder.h"

#include "tensor/Shapes.h"

#include "llvm/ADT/StringSwitch.h"

#include <array>
#include <cmath>
#include <functional>

namespace mt {

namespace {

constexpr int32_t kBool = 9;

/// For each element of `out` (row-major), the element of `in` that broadcasts to it.
std::vector<int64_t> broadcastSources(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out) {
  // The importer checked the broadcast (broadcastShape): these are the same rule's strides.
  std::array<shapes::Dims, 1> strides;
  shapes::broadcastStrides(in, out, strides[0]);
  std::vector<int64_t> sources(numElements(out));
  shapes::walk<1>(out, strides,
                  [&](int64_t i, const std::array<int64_t, 1> &at) { sources[i] = at[0]; });
  return sources;
}

/// Copies element `from` of `src` into element `to` of `dst` without a round trip through
/// double for integers.
void copyElement(const HostTensor &src, int64_t from, HostTensor &dst, int64_t to) {
  if (src.isFloat())
    dst.set(to, src.reals[from]);
  else
    dst.setInteger(to, src.integers[from]);
}

} // namespace

std::optional<HostTensor> foldBinary(llvm::StringRef opType, const HostTensor &lhs,
                                     const HostTensor &rhs) {
  using RealFn = std::function<double(double, double)>;
  using IntFn = std::function<int64_t(int64_t, int64_t)>;
  struct Rule {
    RealFn real;
    IntFn integer;
    bool boolean;
  };
  std::optional<Rule> rule =
      llvm::StringSwitch<std::optional<Rule>>(opType)
          .Case("Add", Rule{std::plus<double>(), std::plus<int64_t>(), false})
          .Case("Sub", Rule{std::minus<double>(), std::minus<int64_t>(), false})
          .Case("Mul", Rule{std::multiplies<double>(), std::multiplies<int64_t>(), false})
          .Case("Div", Rule{std::divides<double>(),
                            [](int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }, false})
          .Case("Pow", Rule{[](double a, double b) { return std::pow(a, b); },
                            [](int64_t a, int64_t b) {
                              return static_cast<int64_t>(std::pow(double(a), double(b)));
                            },
                            false})
          .Case("Max", Rule{[](double a, double b) { return std::max(a, b); },
                            [](int64_t a, int64_t b) { return std::max(a, b); }, false})
          .Case("Min", Rule{[](double a, double b) { return std::min(a, b); },
                            [](int64_t a, int64_t b) { return std::min(a, b); }, false})
          .Case("Equal", Rule{std::equal_to<double>(), std::equal_to<int64_t>(), true})
          .Case("Less", Rule{std::less<double>(), std::less<int64_t>(), true})
          .Case("LessOrEqual", Rule{std::less_equal<double>(), std::less_equal<int64_t>(), true})
          .Case("Greater", Rule{std::greater<double>(), std::greater<int64_t>(), true})
          .Case("GreaterOrEqual",
                Rule{std::greater_equal<double>(), std::greater_equal<int64_t>(), true})
          .Case("And", Rule{[](double a, double b) { return double(a != 0 && b != 0); },
                            [](int64_t a, int64_t b) { return int64_t(a != 0 && b != 0); }, true})
          .Case("Or", Rule{[](double a, double b) { return double(a != 0 || b != 0); },
                           [](int64_t a, int64_t b) { return int64_t(a != 0 || b != 0); }, true})
          .Default(std::nullopt);
  if (!rule)
    return std::nullopt;
  mlir::FailureOr<Shape> shape = broadcastShape(lhs.shape, rhs.shape, [] {
    return mlir::InFlightDiagnostic();
  });
  if (mlir::failed(shape))
    return std::nullopt;
  HostTensor result = HostTensor::zeros(rule->boolean ? kBool : lhs.dataType, *shape);
  std::vector<int64_t> lhsAt = broadcastSources(lhs.shape, *shape);
  std::vector<int64_t> rhsAt = broadcastSources(rhs.shape, *shape);
  bool real = lhs.isFloat() || rhs.isFloat();
  for (int64_t i = 0, e = result.size(); i < e; ++i) {
    if (real)
      result.set(i, rule->real(lhs.real(lhsAt[i]), rhs.real(rhsAt[i])));
    else
      result.setInteger(i, rule->integer(lhs.integers[lhsAt[i]], rhs.integers[rhsAt[i]]));
  }
  return result;
}

std::optional<HostTensor> foldUnary(llvm::StringRef opType, const HostTensor &input) {
  using Fn = double (*)(double);
  Fn fn = llvm::StringSwitch<Fn>(opType)
              .Case("Neg", [](double x) { return -x; })
              .Case("Sqrt", [](double x) { return std::sqrt(x); })
              .Case("Reciprocal", [](double x) { return 1.0 / x; })
              .Case("Exp", [](double x) { return std::exp(x); })
              .Case("Log", [](double x) { return std::log(x); })
              .Case("Tanh", [](double x) { return std::tanh(x); })
              .Case("Erf", [](double x) { return std::erf(x); })
              .Case("Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); })
              .Case("Relu", [](double x) { return std::max(x, 0.0); })
              .Case("Cos", [](double x) { return std::cos(x); })
              .Case("Sin", [](double x) { return std::sin(x); })
              .Case("Abs", [](double x) { return std::fabs(x); })
              .Case("Floor", [](double x) { return std::floor(x); })
              .Case("Ceil", [](double x) { return std::ceil(x); })
              .Case("Not", [](double x) { return double(x == 0); })
              .Case("IsNaN", [](double x) { return double(std::isnan(x)); })
              .Case("IsInf", [](double x) { return double(std::isinf(x)); })
              .Default(nullptr);
  if (!fn)
    return std::nullopt;
  bool boolean = opType == "Not" || opType == "IsNaN" || opType == "IsInf";
  HostTensor result = HostTensor::zeros(boolean ? kBool : input.dataType, input.shape);
  for (int64_t i = 0, e = input.size(); i < e; ++i) {
    if (!input.isFloat() && opType == "Neg")
      result.setInteger(i, -input.integers[i]);
    else
      result.set(i, fn(input.real(i)));
  }
  return result;
}

HostTensor whereTensor(const HostTensor &condition, const HostTensor &onTrue,
                       const HostTensor &onFalse) {
  auto noError = [] { return mlir::InFlightDiagnostic(); };
  Shape shape = *broadcastShape(*broadcastShape(condition.shape, onTrue.shape, noError),
                                onFalse.shape, noError);
  HostTensor result = HostTensor::zeros(onTrue.dataType, shape);
  std::vector<int64_t> c = broadcastSources(condition.shape, shape);
  std::vector<int64_t> t = broadcastSources(onTrue.shape, shape);
  std::vector<int64_t> f = broadcastSources(onFalse.shape, shape);
  for (int64_t i = 0, e = result.size(); i < e; ++i) {
    if (condition.integer(c[i]))
      copyElement(onTrue, t[i], result, i);
    else
      copyElement(onFalse, f[i], result, i);
  }
  return result;
}

HostTensor expandTensor(const HostTensor &input, llvm::ArrayRef<int64_t> shape) {
  HostTensor result = HostTensor::zeros(input.dataType, Shape(shape));
  std::vector<int64_t> sources = broadcastSources(input.shape, shape);
  for (int64_t i = 0, e = result.size(); i < e; ++i)
    copyElement(input, sources[i], result, i);
  return result;
}

HostTensor transposeTensor(const HostTensor &input, llvm::ArrayRef<int64_t> permutation) {
  // The importer checked the permutation (transposeShape): this is the same rule's shape.
  shapes::Dims dims;
  shapes::transpose(input.shape, permutation, dims);
  HostTensor result = HostTensor::zeros(input.dataType, Shape(dims.begin(), dims.end()));
  shapes::walk<1>(
      dims, {shapes::permutedStrides(input.shape, permutation)},
      [&](int64_t i, const std::array<int64_t, 1> &at) { copyElement(input, at[0], result, i); });
  return result;
}

HostTensor gatherTensor(const HostTensor &input, const HostTensor &indices, int64_t axis) {
  // The importer checked the axis and the indices (gatherShape, each index in range and
  // counted from the front): the layout of the kernels that gather.
  shapes::Dims dims;
  shapes::gather(input.shape, indices.shape, axis, dims);
  shapes::IndexedLayout layout;
  shapes::indexedLayout(input.shape, indices.shape, dims, axis, layout);
  HostTensor result = HostTensor::zeros(input.dataType, Shape(dims.begin(), dims.end()));
  for (int64_t o = 0; o < layout.outer; ++o)
    for (int64_t j = 0; j < layout.count; ++j)
      for (int64_t e = 0; e < layout.inner; ++e)
        copyElement(input, (o * layout.length + indices.integer(j)) * layout.inner + e, result,
                    (o * layout.count + j) * layout.inner + e);
  return result;
}

HostTensor gatherNdTensor(const HostTensor &input, const HostTensor &indices, int64_t batchDims) {
  int64_t depth = indices.shape.back();
  Shape shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.append(input.shape.begin() + batchDims + depth, input.shape.end());
  HostTensor result = HostTensor::zeros(input.dataType, shape);
  Shape inStrides = stridesOf(input.shape);
  int64_t slice = inStrides[batchDims + depth - 1], rows = indices.size() / depth;
  // Rows per batch entry: the index axes between the batch axes and the last.
  int64_t rowsPerBatch = numElements(llvm::ArrayRef<int64_t>(indices.shape).drop_front(batchDims).drop_back());
  int64_t batchStride = batchDims ? inStrides[batchDims - 1] : 0;
  int64_t out = 0;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t source = row / rowsPerBatch * batchStride;
    for (int64_t j = 0; j < depth; ++j)
      source += indices.integer(row * depth + j) * inStrides[batchDims + j];
    for (int64_t e = 0; e < slice; ++e)
      copyElement(input, source + e, result, out++);
  }
  return result;
}

HostTensor cumSumTensor(const HostTensor &input, int64_t axis, bool exclusive, bool reverse) {
  HostTensor result = HostTensor::zeros(input.dataType, input.shape);
  int64_t inner = stridesOf(input.shape)[axis], size = input.shape[axis];
  int64_t outer = size ? input.size() / (inner * size) : 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      int64_t integerSum = 0;
      auto write = [&](int64_t at) {
        if (input.isFloat())
          result.set(at, sum);
        else
          result.setInteger(at, integerSum);
      };
      for (int64_t step = 0; step < size; ++step) {
        int64_t at = (o * size + (reverse ? size - 1 - step : step)) * inner + i;
        if (exclusive)
          write(at);
        if (input.isFloat())
          sum += input.reals[at];
        else
          integerSum += input.integers[at];
        if (!exclusive)
          write(at);
      }
    }
  return result;
}

HostTensor sliceTensor(const HostTensor &input, llvm::ArrayRef<int64_t> starts,
                       llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> steps) {
  // ONNX's slice: a step may be negative (the window runs backward from its start).
  Shape shape;
  for (size_t d = 0; d < input.shape.size(); ++d) {
    int64_t span = steps[d] > 0 ? limits[d] - starts[d] : starts[d] - limits[d];
    int64_t step = steps[d] > 0 ? steps[d] : -steps[d];
    shape.push_back(span <= 0 ? 0 : (span + step - 1) / step);
  }
  HostTensor result = HostTensor::zeros(input.dataType, shape);
  int64_t base = 0;
  std::array<shapes::Dims, 1> strides;
  shapes::windowStrides(input.shape, starts, steps, base, strides[0]);
  shapes::walk<1>(shape, strides, [&](int64_t i, const std::array<int64_t, 1> &at) {
    copyElement(input, base + at[0], result, i);
  });
  return result;
}

HostTensor concatTensors(llvm::ArrayRef<HostTensor> inputs, int64_t axis) {
  Shape shape = inputs.front().shape;
  shape[axis] = 0;
  for (const HostTensor &input : inputs)
    shape[axis] += input.shape[axis];
  HostTensor result = HostTensor::zeros(inputs.front().dataType, shape);
  // Each input is the window of the result from its offset along the axis.
  std::array<shapes::Dims, 1> outStrides = {shapes::strides(shape)};
  int64_t offset = 0;
  for (const HostTensor &input : inputs) {
    int64_t base = offset * outStrides[0][axis];
    shapes::walk<1>(input.shape, outStrides, [&](int64_t i, const std::array<int64_t, 1> &at) {
      copyElement(input, i, result, base + at[0]);
    });
    offset += input.shape[axis];
  }
  return result;
}

HostTensor triluTensor(const HostTensor &input, int64_t k, bool upper) {
  HostTensor result = HostTensor::zeros(input.dataType, input.shape);
  size_t rank = input.shape.size();
  int64_t rows = input.shape[rank - 2], columns = input.shape[rank - 1];
  for (int64_t i = 0, e = input.size(); i < e; ++i) {
    int64_t row = i / columns % rows, column = i % columns;
    if (upper ? column - row >= k : column - row <= k)
      copyElement(input, i, result, i);
  }
  return result;
}

HostTensor rangeTensor(const HostTensor &start, const HostTensor &limit,
                       const HostTensor &delta) {
  double first = start.real(0), step = delta.real(0);
  // Empty where the limit lies behind the start (fuzzing found a count of -8e32, past int64).
  double steps = std::ceil((limit.real(0) - first) / step);
  int64_t count = steps > 0 ? static_cast<int64_t>(steps) : 0;
  HostTensor result = HostTensor::zeros(start.dataType, Shape{count});
  for (int64_t i = 0; i < count; ++i) {
    if (start.isFloat())
      result.set(i, first + i * step);
    else
      result.setInteger(i, start.integers[0] + i * delta.integers[0]);
  }
  return result;
}

} // namespace mt
