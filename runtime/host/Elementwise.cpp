// Elementwise kernels: broadcasting arithmetic, activations and their derivatives (for
// mt.activation_grad), select and cast.
#include "runtime/host/KernelSupport.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

namespace mt::host::detail {
namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kTwoOverSqrtPi = 1.1283791670955126;
constexpr double kGeluCubic = 0.044715;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Applies op to numpy-broadcast operands, writing every element of the result in order.
template <typename T, size_t N, typename Op>
void broadcastInto(const Args<T> &args, const std::array<const Shape *, N> &shapes,
                   const Shape &result, Op &&op) {
  bool same = true;
  for (const Shape *shape : shapes)
    same = same && *shape == result;
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k)
    strides[k] = same ? stridesOf(result) : args.broadcastStrides(*shapes[k], result);
  if (same) {
    int64_t total = product(result);
    std::array<int64_t, N> offsets{};
    for (int64_t i = 0; i < total; ++i) {
      offsets.fill(i);
      op(i, offsets);
    }
    return;
  }
  walk(result, strides, op);
}

template <typename T, typename RealOp, typename IntOp>
void binary(const Args<T> &args, RealOp realOp, IntOp intOp) {
  args.expectCounts(2, 2, 1);
  byElementKind(args, [&](auto member) {
    const auto &lhs = args.in(0).*member;
    const auto &rhs = args.in(1).*member;
    auto &out = args.out(0).*member;
    broadcastInto<T, 2>(args, {&args.in(0).shape, &args.in(1).shape}, args.out(0).shape,
                        [&](int64_t i, const std::array<int64_t, 2> &at) {
                          if constexpr (std::is_floating_point_v<
                                            std::decay_t<decltype(out[0])>>)
                            out[i] = realOp(lhs[at[0]], rhs[at[1]]);
                          else
                            out[i] = intOp(lhs[at[0]], rhs[at[1]]);
                        });
  });
}

template <typename T>
void divide(const Args<T> &args) {
  binary(args, [](T a, T b) { return a / b; },
         [&](int64_t a, int64_t b) {
           if (b == 0)
             args.fail("integer division by zero");
           return a / b;
         });
}

template <typename T>
void power(const Args<T> &args) {
  binary(args, [](T a, T b) { return static_cast<T>(std::pow(a, b)); },
         [&](int64_t base, int64_t exponent) {
           if (exponent < 0)
             args.fail("negative integer exponent " + std::to_string(exponent));
           int64_t result = 1;
           for (; exponent > 0; exponent >>= 1, base *= base)
             if (exponent & 1)
               result *= base;
           return result;
         });
}

template <typename T, typename F>
void unary(const Args<T> &args, F f) {
  args.expectCounts(1, 1, 1);
  const std::vector<T> &x = args.reals(0);
  std::vector<T> &y = args.realResult(0);
  if (args.in(0).shape != args.out(0).shape)
    args.fail("the result's shape differs from the input's");
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = static_cast<T>(f(static_cast<double>(x[i])));
}

double silu(double x) { return x * sigmoid(x); }
double geluExact(double x) { return 0.5 * x * (1.0 + std::erf(x / kSqrt2)); }
double geluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

template <typename T>
void gelu(const Args<T> &args) {
  std::string approximate = args.attrString("approximate", "none");
  if (approximate == "none")
    unary(args, geluExact);
  else if (approximate == "tanh")
    unary(args, geluTanh);
  else
    args.fail("unknown approximate = \"" + approximate + "\"");
}

/// f'(x) of each activation that autodiff differentiates through mt.activation_grad.
double (*activationDerivative(const std::string &name))(double) {
  if (name == "gelu")
    return [](double x) {
      return 0.5 * (1.0 + std::erf(x / kSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    };
  if (name == "gelu_tanh")
    return [](double x) {
      double t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
      return 0.5 * (1.0 + t) +
             0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
    };
  if (name == "silu")
    return [](double x) {
      double s = sigmoid(x);
      return s * (1.0 + x * (1.0 - s));
    };
  if (name == "relu")
    return [](double x) { return x > 0.0 ? 1.0 : 0.0; };
  if (name == "erf")
    return [](double x) { return kTwoOverSqrtPi * std::exp(-x * x); };
  if (name == "sigmoid")
    return [](double x) {
      double s = sigmoid(x);
      return s * (1.0 - s);
    };
  if (name == "tanh")
    return [](double x) {
      double t = std::tanh(x);
      return 1.0 - t * t;
    };
  return nullptr;
}

template <typename T>
void activationGrad(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  std::string name = args.attrString("activation", "");
  double (*derivative)(double) = activationDerivative(name);
  if (!derivative)
    args.fail("unknown activation \"" + name + "\"");
  const std::vector<T> &x = args.reals(0);
  const std::vector<T> &g = args.reals(1);
  std::vector<T> &out = args.realResult(0);
  if (x.size() != g.size() || x.size() != out.size())
    args.fail("input, grad and result differ in size");
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = static_cast<T>(static_cast<double>(g[i]) * derivative(static_cast<double>(x[i])));
}

/// f and f' of the gate activations mt.glu takes; {null, null} for another name.
std::pair<double (*)(double), double (*)(double)> gateFunctions(const std::string &name) {
  if (name == "silu")
    return {silu, activationDerivative(name)};
  if (name == "gelu")
    return {geluExact, activationDerivative(name)};
  if (name == "gelu_tanh")
    return {geluTanh, activationDerivative(name)};
  return {nullptr, nullptr};
}

/// The gate, up and (for the gradient) grad operands of mt.glu / mt.glu_grad, which must
/// agree in size with each other and the results.
template <typename T> auto gateFunctionsOf(const Args<T> &args) {
  auto functions = gateFunctions(args.attrString("activation", ""));
  if (!functions.first)
    args.fail("unknown gate activation \"" + args.attrString("activation", "") + "\"");
  for (size_t i = 1; i < args.operands.size(); ++i)
    if (args.in(i).size() != args.in(0).size())
      args.fail("operand " + std::to_string(i) + " differs in size from the gate");
  for (size_t r = 0; r < args.results.size(); ++r)
    if (args.out(r).size() != args.in(0).size())
      args.fail("result " + std::to_string(r) + " differs in size from the gate");
  return functions;
}

template <typename T> void glu(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  auto [f, derivative] = gateFunctionsOf(args);
  const std::vector<T> &gate = args.reals(0), &up = args.reals(1);
  std::vector<T> &out = args.realResult(0);
  for (size_t i = 0; i < gate.size(); ++i)
    out[i] = static_cast<T>(f(static_cast<double>(gate[i])) * static_cast<double>(up[i]));
}

template <typename T> void gluGrad(const Args<T> &args) {
  args.expectCounts(3, 3, 2);
  auto [f, derivative] = gateFunctionsOf(args);
  const std::vector<T> &gate = args.reals(0), &up = args.reals(1), &g = args.reals(2);
  std::vector<T> &dgate = args.realResult(0), &dup = args.realResult(1);
  for (size_t i = 0; i < gate.size(); ++i) {
    double x = static_cast<double>(gate[i]), gi = static_cast<double>(g[i]);
    dgate[i] = static_cast<T>(gi * static_cast<double>(up[i]) * derivative(x));
    dup[i] = static_cast<T>(gi * f(x));
  }
}

template <typename T>
void where(const Args<T> &args) {
  args.expectCounts(3, 3, 1);
  const std::vector<int64_t> &condition = args.ints(0);
  const HostTensor<T> &a = args.in(1), &b = args.in(2);
  HostTensor<T> &r = args.out(0);
  if (a.isFloat != r.isFloat || b.isFloat != r.isFloat)
    args.fail("the values and the result differ in element kind");
  auto select = [&](auto member) {
    const auto &onTrue = a.*member;
    const auto &onFalse = b.*member;
    auto &out = r.*member;
    broadcastInto<T, 3>(args, {&args.in(0).shape, &a.shape, &b.shape}, r.shape,
                        [&](int64_t i, const std::array<int64_t, 3> &at) {
                          out[i] = condition[at[0]] ? onTrue[at[1]] : onFalse[at[2]];
                        });
  };
  if (r.isFloat)
    select(&HostTensor<T>::reals);
  else
    select(&HostTensor<T>::ints);
}

/// A boolean result from a test of each real: is_nan, is_inf.
template <typename T, typename Test>
void classify(const Args<T> &args, Test test) {
  args.expectCounts(1, 1, 1);
  const std::vector<T> &x = args.reals(0);
  HostTensor<T> &r = args.out(0);
  if (r.isFloat || args.in(0).shape != r.shape)
    args.fail("the result must be a boolean tensor of the input's shape");
  for (size_t i = 0; i < x.size(); ++i)
    r.ints[i] = test(x[i]);
}

template <typename T>
void isInf(const Args<T> &args) {
  bool negative = !args.flag("ignore_negative"), positive = !args.flag("ignore_positive");
  classify(args, [&](T x) { return std::isinf(x) && (x < 0 ? negative : positive); });
}

template <typename T>
void cast(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  const HostTensor<T> &x = args.in(0);
  HostTensor<T> &y = args.out(0);
  if (x.size() != y.size())
    args.fail("the result's size differs from the input's");
  if (x.isFloat && y.isFloat)
    y.reals = x.reals;
  else if (!x.isFloat && !y.isFloat)
    y.ints = x.ints;
  else if (x.isFloat)
    for (size_t i = 0; i < x.reals.size(); ++i) {
      if (!std::isfinite(x.reals[i]))
        args.fail("element " + std::to_string(i) + " is not finite and has no integer value");
      y.ints[i] = static_cast<int64_t>(x.reals[i]);
    }
  else
    for (size_t i = 0; i < x.ints.size(); ++i)
      y.reals[i] = static_cast<T>(x.ints[i]);
}

} // namespace

template <typename T>
void addElementwiseKernels(KernelMap<T> &kernels) {
  kernels["mt.add"] = [](const Args<T> &args) {
    binary(args, [](T a, T b) { return a + b; }, [](int64_t a, int64_t b) { return a + b; });
  };
  kernels["mt.sub"] = [](const Args<T> &args) {
    binary(args, [](T a, T b) { return a - b; }, [](int64_t a, int64_t b) { return a - b; });
  };
  kernels["mt.mul"] = [](const Args<T> &args) {
    binary(args, [](T a, T b) { return a * b; }, [](int64_t a, int64_t b) { return a * b; });
  };
  kernels["mt.div"] = divide<T>;
  kernels["mt.pow"] = power<T>;
  kernels["mt.neg"] = [](const Args<T> &args) { unary(args, [](double x) { return -x; }); };
  kernels["mt.sqrt"] = [](const Args<T> &args) {
    unary(args, [](double x) { return std::sqrt(x); });
  };
  kernels["mt.rsqrt"] = [](const Args<T> &args) {
    unary(args, [](double x) { return 1.0 / std::sqrt(x); });
  };
  kernels["mt.reciprocal"] = [](const Args<T> &args) {
    unary(args, [](double x) { return 1.0 / x; });
  };
  kernels["mt.exp"] = [](const Args<T> &args) {
    unary(args, [](double x) { return std::exp(x); });
  };
  kernels["mt.log"] = [](const Args<T> &args) {
    unary(args, [](double x) { return std::log(x); });
  };
  kernels["mt.tanh"] = [](const Args<T> &args) {
    unary(args, [](double x) { return std::tanh(x); });
  };
  kernels["mt.erf"] = [](const Args<T> &args) {
    unary(args, [](double x) { return std::erf(x); });
  };
  kernels["mt.sigmoid"] = [](const Args<T> &args) { unary(args, sigmoid); };
  kernels["mt.relu"] = [](const Args<T> &args) {
    unary(args, [](double x) { return x < 0.0 ? 0.0 : x; });
  };
  kernels["mt.cos"] = [](const Args<T> &args) {
    unary(args, [](double x) { return std::cos(x); });
  };
  kernels["mt.sin"] = [](const Args<T> &args) {
    unary(args, [](double x) { return std::sin(x); });
  };
  kernels["mt.silu"] = [](const Args<T> &args) { unary(args, silu); };
  kernels["mt.gelu"] = gelu<T>;
  kernels["mt.activation_grad"] = activationGrad<T>;
  kernels["mt.glu"] = glu<T>;
  kernels["mt.glu_grad"] = gluGrad<T>;
  kernels["mt.where"] = where<T>;
  kernels["mt.is_nan"] = [](const Args<T> &args) {
    classify(args, [](T x) { return std::isnan(x); });
  };
  kernels["mt.is_inf"] = isInf<T>;
  kernels["mt.cast"] = cast<T>;
}

template void addElementwiseKernels<float>(KernelMap<float> &);
template void addElementwiseKernels<double>(KernelMap<double> &);

} // namespace mt::host::detail
