// Reductions and the kernels built on them: reduce_*, softmax, rms_norm, layer_norm,
// cross_entropy and linear_cross_entropy (the loss fused with its head) with their gradients. Every
// sum is taken in double, in element order, so float training stays close to PyTorch's and runs are
// reproducible.
#include "runtime/host/KernelSupport.h"
#include "runtime/host/Products.h"

#include <cmath>
#include <limits>

namespace mt::host::detail {
namespace {

enum class Reduction { Sum, Mean, Max };

/// How a reduction over `axes` groups the elements of `shape`: each element's group is the
/// dot product of its index with `strides` (zero on reduced axes).
struct ReductionGroups {
  Shape kept, dropped;
  std::vector<int64_t> strides;
  int64_t count = 1;
};

template <typename T>
ReductionGroups reductionGroups(const Args<T> &args, const Shape &shape) {
  ReductionGroups groups;
  std::vector<bool> reduced;
  if (std::string error =
          reductionShapes(shape, args.attrInts("axes"), reduced, groups.kept, groups.dropped);
      !error.empty())
    args.fail(error);
  groups.strides = stridesOf(groups.kept);
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d])
      groups.strides[d] = 0;
  groups.count = product(groups.kept);
  return groups;
}

/// The maximum of each group; NaN wins, as in torch.amax.
template <typename T>
std::vector<double> groupMaxima(const Shape &shape, const ReductionGroups &groups,
                                const std::vector<T> &x) {
  std::vector<double> maxima(static_cast<size_t>(groups.count),
                             -std::numeric_limits<double>::infinity());
  walk<1>(shape, {groups.strides}, [&](int64_t i, const std::array<int64_t, 1> &at) {
    double v = static_cast<double>(x[i]);
    double &m = maxima[at[0]];
    if (std::isnan(v) || v > m)
      m = v;
  });
  return maxima;
}

template <typename T>
void reduce(const Args<T> &args, Reduction kind) {
  args.expectCounts(1, 1, 1);
  const Shape &shape = args.in(0).shape;
  ReductionGroups groups = reductionGroups(args, shape);
  if (args.out(0).shape != (args.flag("keepdims") ? groups.kept : groups.dropped))
    args.fail("the result's shape does not match the reduced axes");
  const std::vector<T> &x = args.reals(0);
  std::vector<double> acc;
  if (kind == Reduction::Max) {
    acc = groupMaxima(shape, groups, x);
  } else {
    acc.assign(static_cast<size_t>(groups.count), 0.0);
    walk<1>(shape, {groups.strides}, [&](int64_t i, const std::array<int64_t, 1> &at) {
      acc[at[0]] += static_cast<double>(x[i]);
    });
  }
  double count = static_cast<double>(product(shape)) / static_cast<double>(groups.count);
  std::vector<T> &out = args.realResult(0);
  for (int64_t i = 0; i < groups.count; ++i)
    out[i] = static_cast<T>(kind == Reduction::Mean ? acc[i] / count : acc[i]);
}

/// The gradient of reduce_max: each group's gradient split evenly among the elements equal to
/// its maximum (torch.amax's rule).
template <typename T>
void reduceMaxGrad(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  const Shape &shape = args.in(0).shape;
  ReductionGroups groups = reductionGroups(args, shape);
  if (args.in(1).size() != groups.count || args.out(0).shape != shape)
    args.fail("grad and result shapes do not match the reduced axes");
  const std::vector<T> &x = args.reals(0), &g = args.reals(1);
  std::vector<double> maxima = groupMaxima(shape, groups, x);
  std::vector<int64_t> ties(static_cast<size_t>(groups.count), 0);
  walk<1>(shape, {groups.strides}, [&](int64_t i, const std::array<int64_t, 1> &at) {
    ties[at[0]] += static_cast<double>(x[i]) == maxima[at[0]];
  });
  std::vector<T> &dx = args.realResult(0);
  walk<1>(shape, {groups.strides}, [&](int64_t i, const std::array<int64_t, 1> &at) {
    dx[i] = static_cast<double>(x[i]) == maxima[at[0]]
                ? static_cast<T>(static_cast<double>(g[at[0]]) / ties[at[0]])
                : T(0);
  });
}

/// The sizes around `axis`: elements are at (outer * length + position) * inner + innerIndex.
struct AxisSplit {
  int64_t outer, length, inner;
};

template <typename T>
AxisSplit splitAt(const Args<T> &args, const Shape &shape) {
  int64_t axis = args.axis("axis", shape.size());
  if (shape.empty())
    return {1, 1, 1};
  return {product(shape, 0, axis), shape[axis], product(shape, axis + 1, shape.size())};
}

template <typename T>
void softmax(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  if (args.in(0).shape != args.out(0).shape)
    args.fail("the result's shape differs from the input's");
  AxisSplit s = splitAt(args, args.in(0).shape);
  const std::vector<T> &x = args.reals(0);
  std::vector<T> &y = args.realResult(0);
  std::vector<double> e(static_cast<size_t>(s.length));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      int64_t base = o * s.length * s.inner + in;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < s.length; ++l)
        max = std::max(max, static_cast<double>(x[base + l * s.inner]));
      double sum = 0.0;
      for (int64_t l = 0; l < s.length; ++l)
        sum += e[l] = std::exp(static_cast<double>(x[base + l * s.inner]) - max);
      for (int64_t l = 0; l < s.length; ++l)
        y[base + l * s.inner] = static_cast<T>(e[l] / sum);
    }
}

template <typename T>
void softmaxGrad(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  const Shape &shape = args.in(0).shape;
  if (args.in(1).shape != shape || args.out(0).shape != shape)
    args.fail("output, grad and result differ in shape");
  AxisSplit s = splitAt(args, shape);
  const std::vector<T> &y = args.reals(0), &g = args.reals(1);
  std::vector<T> &dx = args.realResult(0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      int64_t base = o * s.length * s.inner + in;
      double dot = 0.0;
      for (int64_t l = 0; l < s.length; ++l) {
        int64_t i = base + l * s.inner;
        dot += static_cast<double>(g[i]) * static_cast<double>(y[i]);
      }
      for (int64_t l = 0; l < s.length; ++l) {
        int64_t i = base + l * s.inner;
        dx[i] = static_cast<T>(static_cast<double>(y[i]) * (static_cast<double>(g[i]) - dot));
      }
    }
}

/// The row length (last axis) of a normalization, checking its weight-like operands.
template <typename T>
int64_t normRow(const Args<T> &args, std::initializer_list<size_t> vectors) {
  std::vector<std::pair<size_t, int64_t>> sizes;
  for (size_t operand : vectors)
    sizes.emplace_back(operand, args.in(operand).size());
  int64_t d = 0;
  if (std::string error = mt::normRow(args.in(0).shape, sizes, d); !error.empty())
    args.fail(error);
  return d;
}

template <typename T>
void rmsNorm(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  int64_t d = normRow(args, {1});
  double epsilon = args.attrFloat("epsilon");
  const std::vector<T> &x = args.reals(0), &w = args.reals(1);
  std::vector<T> &y = args.realResult(0);
  int64_t rows = args.in(0).size() / std::max<int64_t>(d, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x.data() + r * d;
    double squares = 0.0;
    for (int64_t j = 0; j < d; ++j)
      squares += static_cast<double>(xr[j]) * static_cast<double>(xr[j]);
    double inv = 1.0 / std::sqrt(squares / static_cast<double>(d) + epsilon);
    for (int64_t j = 0; j < d; ++j)
      y[r * d + j] = static_cast<T>(static_cast<double>(xr[j]) * inv * static_cast<double>(w[j]));
  }
}

template <typename T>
void rmsNormGrad(const Args<T> &args) {
  args.expectCounts(3, 3, 2);
  int64_t d = normRow(args, {1});
  if (args.in(2).shape != args.in(0).shape)
    args.fail("grad and input differ in shape");
  double epsilon = args.attrFloat("epsilon");
  const std::vector<T> &x = args.reals(0), &w = args.reals(1), &g = args.reals(2);
  std::vector<T> &dx = args.realResult(0), &dw = args.realResult(1);
  std::vector<double> dwAcc(static_cast<size_t>(d), 0.0);
  int64_t rows = args.in(0).size() / std::max<int64_t>(d, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x.data() + r * d, *gr = g.data() + r * d;
    double squares = 0.0, dot = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      double xj = static_cast<double>(xr[j]);
      squares += xj * xj;
      dot += static_cast<double>(gr[j]) * static_cast<double>(w[j]) * xj;
    }
    double inv = 1.0 / std::sqrt(squares / static_cast<double>(d) + epsilon);
    double correction = inv * inv * inv * dot / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) {
      double xj = static_cast<double>(xr[j]), gj = static_cast<double>(gr[j]);
      dx[r * d + j] = static_cast<T>(inv * static_cast<double>(w[j]) * gj - xj * correction);
      dwAcc[j] += gj * xj * inv;
    }
  }
  for (int64_t j = 0; j < d; ++j)
    dw[j] = static_cast<T>(dwAcc[j]);
}

/// The mean and 1 / sqrt(biased variance + epsilon) of a row.
template <typename T>
std::pair<double, double> rowMoments(const T *row, int64_t d, double epsilon) {
  double sum = 0.0;
  for (int64_t j = 0; j < d; ++j)
    sum += static_cast<double>(row[j]);
  double mean = sum / static_cast<double>(d);
  double squares = 0.0;
  for (int64_t j = 0; j < d; ++j) {
    double centered = static_cast<double>(row[j]) - mean;
    squares += centered * centered;
  }
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(d) + epsilon)};
}

template <typename T>
void layerNorm(const Args<T> &args) {
  args.expectCounts(2, 3, 1);
  bool hasBias = args.operands.size() == 3;
  int64_t d = hasBias ? normRow(args, {1, 2}) : normRow(args, {1});
  double epsilon = args.attrFloat("epsilon");
  const std::vector<T> &x = args.reals(0), &w = args.reals(1);
  const T *b = hasBias ? args.reals(2).data() : nullptr;
  std::vector<T> &y = args.realResult(0);
  int64_t rows = args.in(0).size() / std::max<int64_t>(d, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x.data() + r * d;
    auto [mean, inv] = rowMoments(xr, d, epsilon);
    for (int64_t j = 0; j < d; ++j) {
      double v = (static_cast<double>(xr[j]) - mean) * inv * static_cast<double>(w[j]);
      y[r * d + j] = static_cast<T>(b ? v + static_cast<double>(b[j]) : v);
    }
  }
}

template <typename T>
void layerNormGrad(const Args<T> &args) {
  args.expectCounts(3, 3, 3);
  int64_t d = normRow(args, {1});
  if (args.in(2).shape != args.in(0).shape)
    args.fail("grad and input differ in shape");
  double epsilon = args.attrFloat("epsilon");
  const std::vector<T> &x = args.reals(0), &w = args.reals(1), &g = args.reals(2);
  std::vector<T> &dx = args.realResult(0), &dw = args.realResult(1), &db = args.realResult(2);
  std::vector<double> dwAcc(static_cast<size_t>(d), 0.0), dbAcc(static_cast<size_t>(d), 0.0);
  std::vector<double> normalized(static_cast<size_t>(d));
  int64_t rows = args.in(0).size() / std::max<int64_t>(d, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x.data() + r * d, *gr = g.data() + r * d;
    auto [mean, inv] = rowMoments(xr, d, epsilon);
    double sumDn = 0.0, sumDnN = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      double gj = static_cast<double>(gr[j]);
      normalized[j] = (static_cast<double>(xr[j]) - mean) * inv;
      double dn = gj * static_cast<double>(w[j]);
      sumDn += dn;
      sumDnN += dn * normalized[j];
      dwAcc[j] += gj * normalized[j];
      dbAcc[j] += gj;
    }
    double meanDn = sumDn / static_cast<double>(d), meanDnN = sumDnN / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) {
      double dn = static_cast<double>(gr[j]) * static_cast<double>(w[j]);
      dx[r * d + j] = static_cast<T>(inv * (dn - meanDn - normalized[j] * meanDnN));
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    dw[j] = static_cast<T>(dwAcc[j]);
    db[j] = static_cast<T>(dbAcc[j]);
  }
}

/// Checks that operand `operand` holds `positions` targets, each in [0, v) or ignored.
template <typename T>
void checkTargetIds(const Args<T> &args, size_t operand, int64_t v, int64_t positions) {
  const std::vector<int64_t> &targets = args.ints(operand);
  if (static_cast<int64_t>(targets.size()) != positions)
    args.fail("has " + std::to_string(targets.size()) + " targets for " +
              std::to_string(positions) + " positions");
  for (int64_t i = 0; i < positions; ++i)
    if ((targets[i] < 0 || targets[i] >= v) && targets[i] != kIgnoredTarget)
      args.fail("target " + std::to_string(targets[i]) + " at position " + std::to_string(i) +
                " is outside the vocabulary of " + std::to_string(v));
}

/// The vocabulary size and the position count of a cross-entropy, checking the targets.
template <typename T> std::pair<int64_t, int64_t> checkTargets(const Args<T> &args) {
  const Shape &shape = args.in(0).shape;
  if (shape.empty())
    args.fail("the logits must have rank 1 or more");
  int64_t v = shape.back();
  int64_t positions = product(shape, 0, shape.size() - 1);
  checkTargetIds(args, 1, v, positions);
  return {v, positions};
}

int64_t countedTargets(const std::vector<int64_t> &targets) {
  return std::count_if(targets.begin(), targets.end(),
                       [](int64_t target) { return target != kIgnoredTarget; });
}

template <typename T>
double logSumExp(const T *row, int64_t v) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < v; ++j)
    max = std::max(max, static_cast<double>(row[j]));
  double sum = 0.0;
  for (int64_t j = 0; j < v; ++j)
    sum += std::exp(static_cast<double>(row[j]) - max);
  return max + std::log(sum);
}

template <typename T>
void crossEntropy(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  auto [v, positions] = checkTargets(args);
  if (args.out(0).size() != 1)
    args.fail("the result must be a scalar");
  const std::vector<T> &logits = args.reals(0);
  const std::vector<int64_t> &targets = args.ints(1);
  double total = 0.0;
  for (int64_t i = 0; i < positions; ++i) {
    const T *row = logits.data() + i * v;
    if (targets[i] != kIgnoredTarget)
      total += logSumExp(row, v) - static_cast<double>(row[targets[i]]);
  }
  args.realResult(0)[0] =
      static_cast<T>(total / static_cast<double>(countedTargets(targets)));
}

template <typename T>
void crossEntropyGrad(const Args<T> &args) {
  args.expectCounts(3, 3, 1);
  auto [v, positions] = checkTargets(args);
  if (args.in(2).size() != 1)
    args.fail("the grad must be a scalar");
  if (args.out(0).shape != args.in(0).shape)
    args.fail("the result's shape differs from the logits'");
  const std::vector<T> &logits = args.reals(0);
  const std::vector<int64_t> &targets = args.ints(1);
  double scale =
      static_cast<double>(args.reals(2)[0]) / static_cast<double>(countedTargets(targets));
  std::vector<T> &out = args.realResult(0);
  for (int64_t i = 0; i < positions; ++i) {
    const T *row = logits.data() + i * v;
    if (targets[i] == kIgnoredTarget) {
      std::fill(out.begin() + i * v, out.begin() + (i + 1) * v, T(0));
      continue;
    }
    double lse = logSumExp(row, v);
    for (int64_t j = 0; j < v; ++j) {
      double p = std::exp(static_cast<double>(row[j]) - lse);
      out[i * v + j] = static_cast<T>((p - (j == targets[i] ? 1.0 : 0.0)) * scale);
    }
  }
}

/// A linear cross-entropy's extents (input [rows, k], the head's logits [rows, v]), its head
/// as row-major [k, v] and as [v, k], checked with its targets (operand 2).
template <typename T> struct LinearLoss {
  int64_t rows, k, v, chunk;
  std::vector<T> byColumns; // the head as [k, v]

  explicit LinearLoss(const Args<T> &args) {
    const Shape &xs = args.in(0).shape, &ws = args.in(1).shape;
    bool transposed = args.flag("transpose_weight");
    if (xs.empty() || ws.size() != 2 || xs.back() != (transposed ? ws[1] : ws[0]))
      args.fail("the input's last axis does not meet the weight");
    k = xs.back();
    v = transposed ? ws[0] : ws[1];
    rows = product(xs, 0, xs.size() - 1);
    chunk = args.attrInt("chunk");
    if (chunk < 1)
      args.fail("chunk must be at least one row");
    checkTargetIds(args, 2, v, rows);
    const T *w = args.reals(1).data();
    byColumns = transposed ? transposeMatrices(w, 1, v, k) : std::vector<T>(w, w + k * v);
  }

  /// The head as [v, k], which only the gradient reads.
  std::vector<T> byRows() const { return transposeMatrices(byColumns.data(), 1, k, v); }

  /// The logits of rows [first, first + count) into `logits` [count, v], rounded as
  /// mt.linear rounds them.
  void logitsOf(const T *x, int64_t first, int64_t count, std::vector<T> &logits) const {
    logits.resize(static_cast<size_t>(count * v));
    multiply<T>({{x + first * k, byColumns.data(), logits.data()}}, count, v, k, nullptr);
  }
};

/// mt.linear_cross_entropy: mt.cross_entropy's sum over the chunks' logits, the same mean.
template <typename T> void linearCrossEntropy(const Args<T> &args) {
  args.expectCounts(3, 3, 1);
  LinearLoss<T> loss(args);
  if (args.out(0).size() != 1)
    args.fail("the result must be a scalar");
  const std::vector<int64_t> &targets = args.ints(2);
  std::vector<T> logits;
  double total = 0.0;
  for (int64_t first = 0; first < loss.rows; first += loss.chunk) {
    int64_t count = std::min(loss.chunk, loss.rows - first);
    loss.logitsOf(args.reals(0).data(), first, count, logits);
    for (int64_t i = 0; i < count; ++i) {
      const T *row = logits.data() + i * loss.v;
      if (int64_t target = targets[first + i]; target != kIgnoredTarget)
        total += logSumExp(row, loss.v) - static_cast<double>(row[target]);
    }
  }
  args.realResult(0)[0] = static_cast<T>(total / static_cast<double>(countedTargets(targets)));
}

/// mt.linear_cross_entropy_grad: per chunk, the logits' gradient as mt.cross_entropy_grad
/// makes it, times the head into the chunk's input rows, and into the head's gradient.
template <typename T> void linearCrossEntropyGrad(const Args<T> &args) {
  args.expectCounts(4, 4, 2);
  LinearLoss<T> loss(args);
  if (args.in(3).size() != 1)
    args.fail("the grad must be a scalar");
  if (args.out(0).shape != args.in(0).shape || args.out(1).shape != args.in(1).shape)
    args.fail("the results' shapes differ from the input's and the weight's");
  const std::vector<int64_t> &targets = args.ints(2);
  double scale =
      static_cast<double>(args.reals(3)[0]) / static_cast<double>(countedTargets(targets));
  const T *x = args.reals(0).data();
  T *dx = args.realResult(0).data();
  bool transposed = args.flag("transpose_weight");
  std::vector<T> headGrad(static_cast<size_t>(loss.k * loss.v), T(0)); // as the weight lies
  std::vector<T> logits, byRows = loss.byRows();
  for (int64_t first = 0; first < loss.rows; first += loss.chunk) {
    int64_t count = std::min(loss.chunk, loss.rows - first);
    loss.logitsOf(x, first, count, logits);
    for (int64_t i = 0; i < count; ++i) {
      T *row = logits.data() + i * loss.v;
      int64_t target = targets[first + i];
      if (target == kIgnoredTarget) {
        std::fill(row, row + loss.v, T(0));
        continue;
      }
      double lse = logSumExp(row, loss.v);
      for (int64_t j = 0; j < loss.v; ++j) {
        double p = std::exp(static_cast<double>(row[j]) - lse);
        row[j] = static_cast<T>((p - (j == target ? 1.0 : 0.0)) * scale);
      }
    }
    // dx = dlogits @ head^T; the head's gradient += x^T @ dlogits (or its transpose).
    multiply<T>({{logits.data(), byRows.data(), dx + first * loss.k}}, count, loss.k, loss.v,
                nullptr);
    if (transposed) {
      std::vector<T> lT = transposeMatrices(logits.data(), 1, count, loss.v);
      multiply<T>({{lT.data(), x + first * loss.k, headGrad.data(), headGrad.data()}}, loss.v,
                  loss.k, count, nullptr);
    } else {
      std::vector<T> xT = transposeMatrices(x + first * loss.k, 1, count, loss.k);
      multiply<T>({{xT.data(), logits.data(), headGrad.data(), headGrad.data()}}, loss.k, loss.v,
                  count, nullptr);
    }
  }
  std::copy(headGrad.begin(), headGrad.end(), args.realResult(1).begin());
}

} // namespace

template <typename T>
void addNormalizationKernels(KernelMap<T> &kernels) {
  kernels["mt.reduce_sum"] = [](const Args<T> &args) { reduce(args, Reduction::Sum); };
  kernels["mt.reduce_mean"] = [](const Args<T> &args) { reduce(args, Reduction::Mean); };
  kernels["mt.reduce_max"] = [](const Args<T> &args) { reduce(args, Reduction::Max); };
  kernels["mt.reduce_max_grad"] = reduceMaxGrad<T>;
  kernels["mt.softmax"] = softmax<T>;
  kernels["mt.softmax_grad"] = softmaxGrad<T>;
  kernels["mt.rms_norm"] = rmsNorm<T>;
  kernels["mt.rms_norm_grad"] = rmsNormGrad<T>;
  kernels["mt.layer_norm"] = layerNorm<T>;
  kernels["mt.layer_norm_grad"] = layerNormGrad<T>;
  kernels["mt.cross_entropy"] = crossEntropy<T>;
  kernels["mt.cross_entropy_grad"] = crossEntropyGrad<T>;
  kernels["mt.linear_cross_entropy"] = linearCrossEntropy<T>;
  kernels["mt.linear_cross_entropy_grad"] = linearCrossEntropyGrad<T>;
}

template void addNormalizationKernels<float>(KernelMap<float> &);
template void addNormalizationKernels<double>(KernelMap<double> &);

} // namespace mt::host::detail
