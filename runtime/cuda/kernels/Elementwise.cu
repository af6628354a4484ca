// Elementwise kernels on the device, the port of runtime/host/Elementwise.cpp: broadcasting
// arithmetic, activations and their derivatives (for mt.activation_grad), select and cast.
#include "runtime/cuda/kernels/Access.cuh"
#include "runtime/cuda/kernels/KernelArgs.h"

#include <algorithm>
#include <array>
#include <string>

namespace mt::cuda {
namespace {

constexpr float kSqrt2 = 1.4142135623730951f;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kTwoOverSqrtPi = 1.1283791670955126f;
constexpr float kGeluCubic = 0.044715f;

constexpr int kThreads = 256;
/// Grid-stride loops cover the rest: a few waves of the H200's 132 SMs hide memory latency.
constexpr unsigned kMaxBlocks = 4096;
constexpr int kMaxRank = 8;

unsigned gridFor(int64_t n) { return std::min(blocksFor(n, kThreads), kMaxBlocks); }

/// The result's shape and each operand's strides into it (0 on broadcast axes), by value.
template <int N>
struct Walk {
  int rank;
  int64_t shape[kMaxRank];
  int64_t strides[N][kMaxRank];
};

/// Operands with the result's shape: element i of each is element i of the result.
template <int N, typename Body>
__global__ void contiguousKernel(int64_t n, Body body) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t at[N];
    for (int k = 0; k < N; ++k)
      at[k] = i;
    body(i, at);
  }
}

/// Broadcast operands: each result index is split into per-axis indices. Index is 32-bit when
/// the result fits, because 64-bit division is emulated and would make the kernel compute
/// bound; every operand offset is below the result's size, so it fits too.
template <typename Index, int N, typename Body>
__global__ void broadcastKernel(Index n, Walk<N> walk, Body body) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index at[N] = {};
    Index rest = i;
    for (int d = walk.rank - 1; d >= 0; --d) {
      Index size = static_cast<Index>(walk.shape[d]);
      Index quotient = rest / size;
      Index index = rest - quotient * size;
      rest = quotient;
      for (int k = 0; k < N; ++k)
        at[k] += index * static_cast<Index>(walk.strides[k][d]);
    }
    int64_t offsets[N];
    for (int k = 0; k < N; ++k)
      offsets[k] = at[k];
    body(static_cast<int64_t>(i), offsets);
  }
}

template <int N, typename Body>
void launchContiguous(const KernelArgs &args, int64_t n, const Body &body) {
  if (n == 0)
    return;
  contiguousKernel<N><<<gridFor(n), kThreads, 0, args.stream>>>(n, body);
  checkLaunch(args);
}

/// Applies body(i, offsets) to numpy-broadcast operands for every element i of the result.
/// Size-1 axes are dropped and axes that every operand walks contiguously are merged, so the
/// kernel divides as little as it can and only unmergeable walks of over 8 axes are refused.
template <int N, typename Body>
void broadcastInto(const KernelArgs &args, const std::array<const std::vector<int64_t> *, N> &shapes,
                   const std::vector<int64_t> &result, const Body &body) {
  bool same = true;
  for (const std::vector<int64_t> *shape : shapes)
    same = same && *shape == result;
  int64_t n = 1;
  for (int64_t d : result)
    n *= d;
  if (same) {
    launchContiguous<N>(args, n, body);
    return;
  }
  std::array<std::vector<int64_t>, N> strides;
  for (int k = 0; k < N; ++k)
    strides[k] = args.broadcastStrides(*shapes[k], result);

  std::vector<int64_t> axes;
  std::array<std::vector<int64_t>, N> axisStrides;
  for (size_t d = 0; d < result.size(); ++d) {
    if (result[d] == 1)
      continue;
    bool merge = !axes.empty();
    for (int k = 0; k < N && merge; ++k)
      merge = axisStrides[k].back() == strides[k][d] * result[d];
    if (merge) {
      axes.back() *= result[d];
      for (int k = 0; k < N; ++k)
        axisStrides[k].back() = strides[k][d];
    } else {
      axes.push_back(result[d]);
      for (int k = 0; k < N; ++k)
        axisStrides[k].push_back(strides[k][d]);
    }
  }
  bool contiguous = axes.size() <= 1;
  for (int k = 0; k < N && contiguous; ++k)
    contiguous = axes.empty() || axisStrides[k][0] == 1;
  if (contiguous) {
    launchContiguous<N>(args, n, body);
    return;
  }
  if (axes.size() > static_cast<size_t>(kMaxRank))
    args.fail("broadcasting walks " + std::to_string(axes.size()) +
              " axes that do not merge; the CUDA kernels take at most " +
              std::to_string(kMaxRank));
  if (n == 0)
    return;

  Walk<N> walk{};
  walk.rank = static_cast<int>(axes.size());
  for (size_t d = 0; d < axes.size(); ++d) {
    walk.shape[d] = axes[d];
    for (int k = 0; k < N; ++k)
      walk.strides[k][d] = axisStrides[k][d];
  }
  if (n <= INT32_MAX)
    broadcastKernel<uint32_t, N>
        <<<gridFor(n), kThreads, 0, args.stream>>>(static_cast<uint32_t>(n), walk, body);
  else
    broadcastKernel<int64_t, N><<<gridFor(n), kThreads, 0, args.stream>>>(n, walk, body);
  checkLaunch(args);
}

// Integer arithmetic wraps through uint64 like the host's int64 does in practice, without
// the undefined behaviour of signed overflow.
__device__ __forceinline__ int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
};

struct Sub {
  __device__ float operator()(float a, float b) const { return a - b; }
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  }
};

struct Mul {
  __device__ float operator()(float a, float b) const { return a * b; }
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  }
};

// The host refuses integer division by zero and negative integer exponents; a kernel cannot
// fail once enqueued, so on the device those elements are 0 rather than undefined.
struct Div {
  __device__ float operator()(float a, float b) const { return a / b; }
  __device__ int64_t operator()(int64_t a, int64_t b) const { return b == 0 ? 0 : a / b; }
};

struct Pow {
  __device__ float operator()(float a, float b) const { return powf(a, b); }
  __device__ int64_t operator()(int64_t base, int64_t exponent) const {
    if (exponent < 0)
      return 0;
    uint64_t result = 1, power = static_cast<uint64_t>(base);
    for (; exponent > 0; exponent >>= 1, power *= power)
      if (exponent & 1)
        result *= power;
    return wrap(result);
  }
};

template <typename Op>
struct RealBinary {
  Ref lhs, rhs, out;
  __device__ void operator()(int64_t i, const int64_t (&at)[2]) const {
    storeReal(out, i, Op{}(loadReal(lhs, at[0]), loadReal(rhs, at[1])));
  }
};

template <typename Op>
struct IntBinary {
  Ref lhs, rhs, out;
  __device__ void operator()(int64_t i, const int64_t (&at)[2]) const {
    storeInt(out, i, Op{}(loadInt(lhs, at[0]), loadInt(rhs, at[1])));
  }
};

template <typename Op>
void binary(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  const DeviceTensor &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  for (size_t i = 0; i < args.operandCount(); ++i)
    if (args.in(i).isFloat() != out.isFloat())
      args.fail("operand " + std::to_string(i) + " and the result differ in element kind");
  if (out.isFloat())
    broadcastInto<2>(args, {&lhs.shape, &rhs.shape}, out.shape,
                     RealBinary<Op>{lhs.ref(), rhs.ref(), out.ref()});
  else
    broadcastInto<2>(args, {&lhs.shape, &rhs.shape}, out.shape,
                     IntBinary<Op>{lhs.ref(), rhs.ref(), out.ref()});
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

struct Neg {
  __device__ float operator()(float x) const { return -x; }
};
struct Sqrt {
  __device__ float operator()(float x) const { return sqrtf(x); }
};
// 1 / sqrtf rather than rsqrtf, whose approximation the host does not make.
struct Rsqrt {
  __device__ float operator()(float x) const { return 1.0f / sqrtf(x); }
};
struct Reciprocal {
  __device__ float operator()(float x) const { return 1.0f / x; }
};
struct Exp {
  __device__ float operator()(float x) const { return expf(x); }
};
struct Log {
  __device__ float operator()(float x) const { return logf(x); }
};
struct Tanh {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct Erf {
  __device__ float operator()(float x) const { return erff(x); }
};
struct Sigmoid {
  __device__ float operator()(float x) const { return sigmoid(x); }
};
// x < 0 rather than max(x, 0), so that NaN passes through as on the host.
struct Relu {
  __device__ float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};
struct Cos {
  __device__ float operator()(float x) const { return cosf(x); }
};
struct Sin {
  __device__ float operator()(float x) const { return sinf(x); }
};
struct Silu {
  __device__ float operator()(float x) const { return x * sigmoid(x); }
};
struct GeluExact {
  __device__ float operator()(float x) const { return 0.5f * x * (1.0f + erff(x / kSqrt2)); }
};
struct GeluTanh {
  __device__ float operator()(float x) const {
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  }
};

template <typename F>
struct RealUnary {
  Ref x, y;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    storeReal(y, i, F{}(loadReal(x, i)));
  }
};

template <typename F>
void unary(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const DeviceTensor &x = args.real(0);
  const DeviceTensor &y = args.realResult(0);
  if (x.shape != y.shape)
    args.fail("the result's shape differs from the input's");
  launchContiguous<1>(args, y.size(), RealUnary<F>{x.ref(), y.ref()});
}

void gelu(const KernelArgs &args) {
  std::string approximate = args.attrString("approximate", "none");
  if (approximate == "none")
    unary<GeluExact>(args);
  else if (approximate == "tanh")
    unary<GeluTanh>(args);
  else
    args.fail("unknown approximate = \"" + approximate + "\"");
}

// f'(x) of each activation that autodiff differentiates through mt.activation_grad.
struct GeluExactDerivative {
  __device__ float operator()(float x) const {
    return 0.5f * (1.0f + erff(x / kSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
  }
};
struct GeluTanhDerivative {
  __device__ float operator()(float x) const {
    float t = tanhf(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  }
};
struct SiluDerivative {
  __device__ float operator()(float x) const {
    float s = sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  }
};
struct ReluDerivative {
  __device__ float operator()(float x) const { return x > 0.0f ? 1.0f : 0.0f; }
};
struct ErfDerivative {
  __device__ float operator()(float x) const { return kTwoOverSqrtPi * expf(-x * x); }
};
struct SigmoidDerivative {
  __device__ float operator()(float x) const {
    float s = sigmoid(x);
    return s * (1.0f - s);
  }
};
struct TanhDerivative {
  __device__ float operator()(float x) const {
    float t = tanhf(x);
    return 1.0f - t * t;
  }
};

template <typename D>
struct ChainRule {
  Ref x, g, out;
  __device__ void operator()(int64_t i, const int64_t (&)[2]) const {
    storeReal(out, i, loadReal(g, i) * D{}(loadReal(x, i)));
  }
};

template <typename D>
void chainRule(const KernelArgs &args) {
  const DeviceTensor &x = args.real(0);
  const DeviceTensor &g = args.real(1);
  const DeviceTensor &out = args.realResult(0);
  if (x.size() != g.size() || x.size() != out.size())
    args.fail("input, grad and result differ in size");
  launchContiguous<2>(args, out.size(), ChainRule<D>{x.ref(), g.ref(), out.ref()});
}

void activationGrad(const KernelArgs &args) {
  args.expectCounts(2, 2, 1);
  std::string name = args.attrString("activation", "");
  if (name == "gelu")
    chainRule<GeluExactDerivative>(args);
  else if (name == "gelu_tanh")
    chainRule<GeluTanhDerivative>(args);
  else if (name == "silu")
    chainRule<SiluDerivative>(args);
  else if (name == "relu")
    chainRule<ReluDerivative>(args);
  else if (name == "erf")
    chainRule<ErfDerivative>(args);
  else if (name == "sigmoid")
    chainRule<SigmoidDerivative>(args);
  else if (name == "tanh")
    chainRule<TanhDerivative>(args);
  else
    args.fail("unknown activation \"" + name + "\"");
}

/// mt.glu (out = f(gate) * up) or, with Grad, mt.glu_grad (out = g * up * f'(gate),
/// upOut = g * f(gate)), V reals a thread at a time (loadReals).
template <typename F, typename D, int V, bool Grad>
__global__ void gluKernel(Ref gate, Ref up, Ref g, Ref out, Ref upOut, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * V;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V; i < n;
       i += stride) {
    float x[V], u[V], r[V];
    loadReals<V>(gate, i, x);
    loadReals<V>(up, i, u);
    if constexpr (Grad) {
      float gs[V], du[V];
      loadReals<V>(g, i, gs);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        r[k] = gs[k] * u[k] * D{}(x[k]);
        du[k] = gs[k] * F{}(x[k]);
      }
      storeReals<V>(upOut, i, du);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        r[k] = F{}(x[k]) * u[k];
    }
    storeReals<V>(out, i, r);
  }
}

template <typename F, typename D, bool Grad> void launchGlu(const KernelArgs &args) {
  Ref gate = args.real(0).ref(), up = args.real(1).ref(), out = args.realResult(0).ref();
  Ref g = Grad ? args.real(2).ref() : Ref{}, upOut = Grad ? args.realResult(1).ref() : Ref{};
  int64_t n = args.in(0).size();
  for (size_t i = 1; i < args.operandCount(); ++i)
    if (args.in(i).size() != n)
      args.fail("operand " + std::to_string(i) + " differs in size from the gate");
  for (size_t r = 0; r < args.resultCount(); ++r)
    if (args.out(r).size() != n)
      args.fail("result " + std::to_string(r) + " differs in size from the gate");
  if (n == 0)
    return;
  bool pieces = n % 8 == 0 && aligned16(gate) && aligned16(up) && aligned16(out) &&
                (!Grad || (aligned16(g) && aligned16(upOut)));
  if (pieces)
    gluKernel<F, D, 8, Grad>
        <<<gridFor(n / 8), kThreads, 0, args.stream>>>(gate, up, g, out, upOut, n);
  else
    gluKernel<F, D, 1, Grad><<<gridFor(n), kThreads, 0, args.stream>>>(gate, up, g, out, upOut, n);
  checkLaunch(args);
}

template <bool Grad> void glu(const KernelArgs &args) {
  args.expectCounts(Grad ? 3 : 2, Grad ? 3 : 2, Grad ? 2 : 1);
  std::string name = args.attrString("activation", "");
  if (name == "silu")
    launchGlu<Silu, SiluDerivative, Grad>(args);
  else if (name == "gelu")
    launchGlu<GeluExact, GeluExactDerivative, Grad>(args);
  else if (name == "gelu_tanh")
    launchGlu<GeluTanh, GeluTanhDerivative, Grad>(args);
  else
    args.fail("unknown gate activation \"" + name + "\"");
}

template <bool Real>
struct Select {
  Ref condition, onTrue, onFalse, out;
  __device__ void operator()(int64_t i, const int64_t (&at)[3]) const {
    bool pick = loadInt(condition, at[0]) != 0;
    Ref from = pick ? onTrue : onFalse;
    int64_t offset = pick ? at[1] : at[2];
    if constexpr (Real)
      storeReal(out, i, loadReal(from, offset));
    else
      storeInt(out, i, loadInt(from, offset));
  }
};

void where(const KernelArgs &args) {
  args.expectCounts(3, 3, 1);
  const DeviceTensor &condition = args.integer(0);
  const DeviceTensor &a = args.in(1), &b = args.in(2), &r = args.out(0);
  if (a.isFloat() != r.isFloat() || b.isFloat() != r.isFloat())
    args.fail("the values and the result differ in element kind");
  if (r.isFloat())
    broadcastInto<3>(args, {&condition.shape, &a.shape, &b.shape}, r.shape,
                     Select<true>{condition.ref(), a.ref(), b.ref(), r.ref()});
  else
    broadcastInto<3>(args, {&condition.shape, &a.shape, &b.shape}, r.shape,
                     Select<false>{condition.ref(), a.ref(), b.ref(), r.ref()});
}

/// A boolean result from a test of each real: NaN, or an infinity of a sign not ignored.
struct Classify {
  Ref x, y;
  bool nan, negative, positive;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    float v = loadReal(x, i);
    storeInt(y, i, nan ? isnan(v) : isinf(v) && (v < 0.0f ? negative : positive));
  }
};

void classify(const KernelArgs &args, bool nan) {
  args.expectCounts(1, 1, 1);
  const DeviceTensor &x = args.real(0), &y = args.out(0);
  if (y.isFloat() || x.shape != y.shape)
    args.fail("the result must be a boolean tensor of the input's shape");
  launchContiguous<1>(args, y.size(),
                      Classify{x.ref(), y.ref(), nan, !args.flag("ignore_negative"),
                               !args.flag("ignore_positive")});
}

/// Converts between element kinds (and storages of one kind). Reals become integers by
/// truncation; the host refuses non-finite reals, which a kernel cannot, so here they follow
/// the hardware conversion: NaN gives 0 and infinities saturate to the int64 limits.
template <bool FromReal, bool ToReal>
struct Convert {
  Ref x, y;
  __device__ void operator()(int64_t i, const int64_t (&)[1]) const {
    if constexpr (FromReal && ToReal)
      storeReal(y, i, loadReal(x, i));
    else if constexpr (FromReal)
      storeInt(y, i, __float2ll_rz(loadReal(x, i)));
    else if constexpr (ToReal)
      storeReal(y, i, static_cast<float>(loadInt(x, i)));
    else
      storeInt(y, i, loadInt(x, i));
  }
};

void cast(const KernelArgs &args) {
  args.expectCounts(1, 1, 1);
  const DeviceTensor &x = args.in(0), &y = args.out(0);
  if (x.size() != y.size())
    args.fail("the result's size differs from the input's");
  int64_t n = y.size();
  if (x.isFloat() && y.isFloat())
    launchContiguous<1>(args, n, Convert<true, true>{x.ref(), y.ref()});
  else if (!x.isFloat() && !y.isFloat())
    launchContiguous<1>(args, n, Convert<false, false>{x.ref(), y.ref()});
  else if (x.isFloat())
    launchContiguous<1>(args, n, Convert<true, false>{x.ref(), y.ref()});
  else
    launchContiguous<1>(args, n, Convert<false, true>{x.ref(), y.ref()});
}

} // namespace

void addElementwiseKernels(DeviceKernelMap &kernels) {
  kernels["mt.add"] = binary<Add>;
  kernels["mt.sub"] = binary<Sub>;
  kernels["mt.mul"] = binary<Mul>;
  kernels["mt.div"] = binary<Div>;
  kernels["mt.pow"] = binary<Pow>;
  kernels["mt.neg"] = unary<Neg>;
  kernels["mt.sqrt"] = unary<Sqrt>;
  kernels["mt.rsqrt"] = unary<Rsqrt>;
  kernels["mt.reciprocal"] = unary<Reciprocal>;
  kernels["mt.exp"] = unary<Exp>;
  kernels["mt.log"] = unary<Log>;
  kernels["mt.tanh"] = unary<Tanh>;
  kernels["mt.erf"] = unary<Erf>;
  kernels["mt.sigmoid"] = unary<Sigmoid>;
  kernels["mt.relu"] = unary<Relu>;
  kernels["mt.cos"] = unary<Cos>;
  kernels["mt.sin"] = unary<Sin>;
  kernels["mt.silu"] = unary<Silu>;
  kernels["mt.glu"] = glu<false>;
  kernels["mt.glu_grad"] = glu<true>;
  kernels["mt.gelu"] = gelu;
  kernels["mt.activation_grad"] = activationGrad;
  kernels["mt.where"] = where;
  kernels["mt.is_nan"] = [](const KernelArgs &args) { classify(args, true); };
  kernels["mt.is_inf"] = [](const KernelArgs &args) { classify(args, false); };
  kernels["mt.cast"] = cast;
}

} // namespace mt::cuda
