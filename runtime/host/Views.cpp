// Data movement: reshape, transpose, slice and its gradient pad, concat, expand, gather and
// its gradient scatter_add. All but the two gradients work on integer tensors too.
#include "runtime/host/KernelSupport.h"

namespace mt::host::detail {
namespace {

template <typename T>
void reshape(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  if (args.in(0).size() != args.out(0).size())
    args.fail("reshapes " + std::to_string(args.in(0).size()) + " elements into " +
              std::to_string(args.out(0).size()));
  byElementKind(args, [&](auto member) { args.out(0).*member = args.in(0).*member; });
}

template <typename T>
void transpose(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  const Shape &in = args.in(0).shape, &out = args.out(0).shape;
  std::vector<int64_t> permutation = args.attrInts("permutation");
  if (permutation.size() != in.size() || out.size() != in.size())
    args.fail("the permutation, input and result differ in rank");
  std::vector<bool> seen(in.size(), false);
  for (size_t d = 0; d < permutation.size(); ++d) {
    int64_t from = permutation[d];
    if (from < 0 || from >= static_cast<int64_t>(in.size()) || seen[from] ||
        out[d] != in[from])
      args.fail("permutation entry " + std::to_string(d) + " = " + std::to_string(from) +
                " does not map the input's shape to the result's");
    seen[from] = true;
  }
  std::vector<int64_t> strides = shapes::permutedStrides(in, permutation);
  byElementKind(args, [&](auto member) {
    const auto &src = args.in(0).*member;
    auto &dst = args.out(0).*member;
    walk<1>(out, {strides},
            [&](int64_t i, const std::array<int64_t, 1> &at) { dst[i] = src[at[0]]; });
  });
}

/// The window (starts, limits, strides) of `full`: the offset of its first element and the
/// strides of `window`'s elements in `full`, checking that `window` is its shape.
template <typename T>
std::pair<int64_t, std::vector<int64_t>> stridedWindow(const Args<T> &args, const Shape &full,
                                                       const Shape &window) {
  int64_t base = 0;
  std::vector<int64_t> strides;
  if (std::string error = mt::stridedWindow(full, window, args.attrInts("starts"),
                                            args.attrInts("limits"), args.attrInts("strides"),
                                            base, strides);
      !error.empty())
    args.fail(error);
  return {base, strides};
}

template <typename T>
void slice(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  auto [base, strides] = stridedWindow(args, args.in(0).shape, args.out(0).shape);
  byElementKind(args, [&, base = base, &strides = strides](auto member) {
    const auto &src = args.in(0).*member;
    auto &dst = args.out(0).*member;
    walk<1>(args.out(0).shape, {strides}, [&](int64_t i, const std::array<int64_t, 1> &at) {
      dst[i] = src[base + at[0]];
    });
  });
}

template <typename T>
void pad(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  auto [base, strides] = stridedWindow(args, args.out(0).shape, args.in(0).shape);
  const std::vector<T> &src = args.reals(0);
  std::vector<T> &dst = args.realResult(0);
  std::fill(dst.begin(), dst.end(), T(0));
  walk<1>(args.in(0).shape, {strides}, [&, base = base](int64_t i,
                                                        const std::array<int64_t, 1> &at) {
    dst[base + at[0]] = src[i];
  });
}

template <typename T>
void concat(const Args<T> &args) {
  if (args.operands.empty())
    args.fail("needs at least one operand");
  args.expectCounts(1, args.operands.size(), 1);
  const Shape &out = args.out(0).shape;
  int64_t axis = args.axis("axis", out.size());
  int64_t outer = product(out, 0, axis), inner = product(out, axis + 1, out.size());
  std::vector<const Shape *> shapes;
  for (const HostTensor<T> *operand : args.operands)
    shapes.push_back(&operand->shape);
  if (std::string error = concatShapes(shapes, out, axis); !error.empty())
    args.fail(error);
  byElementKind(args, [&](auto member) {
    auto &dst = args.out(0).*member;
    int64_t offset = 0;
    for (size_t i = 0; i < args.operands.size(); ++i) {
      const auto &src = args.in(i).*member;
      int64_t chunk = args.in(i).shape[axis] * inner;
      for (int64_t o = 0; o < outer; ++o)
        std::copy_n(src.begin() + o * chunk, chunk, dst.begin() + o * out[axis] * inner + offset);
      offset += chunk;
    }
  });
}

template <typename T>
void expand(const Args<T> &args) {
  args.expectCounts(1, 1, 1);
  std::vector<int64_t> strides = args.broadcastStrides(args.in(0).shape, args.out(0).shape);
  byElementKind(args, [&](auto member) {
    const auto &src = args.in(0).*member;
    auto &dst = args.out(0).*member;
    walk<1>(args.out(0).shape, {strides},
            [&](int64_t i, const std::array<int64_t, 1> &at) { dst[i] = src[at[0]]; });
  });
}

/// The layout shared by gather and scatter_add (shapes::indexedLayout), with the
/// indices read and checked: they may count from the back as in ONNX Gather.
template <typename T>
IndexedLayout indexedLayout(const Args<T> &args, size_t indicesOperand, const Shape &full,
                            const Shape &gathered, std::vector<int64_t> &indices) {
  IndexedLayout layout;
  int64_t axis = full.empty() ? 0 : args.axis("axis", full.size());
  if (std::string error =
          shapes::indexedLayout(full, args.in(indicesOperand).shape, gathered, axis, layout);
      !error.empty())
    args.fail(error);
  indices = args.ints(indicesOperand);
  for (size_t j = 0; j < indices.size(); ++j) {
    if (indices[j] < -layout.length || indices[j] >= layout.length)
      args.fail("index " + std::to_string(indices[j]) + " at position " + std::to_string(j) +
                " is outside axis " + std::to_string(axis) + " of size " +
                std::to_string(layout.length));
    if (indices[j] < 0)
      indices[j] += layout.length;
  }
  return layout;
}

template <typename T>
void gather(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  std::vector<int64_t> indices;
  auto [outer, length, inner, count] =
      indexedLayout(args, 1, args.in(0).shape, args.out(0).shape, indices);
  if (args.in(0).isFloat != args.out(0).isFloat)
    args.fail("the input and the result differ in element kind");
  auto copy = [&, outer = outer, length = length, inner = inner, count = count](auto member) {
    const auto &src = args.in(0).*member;
    auto &dst = args.out(0).*member;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < count; ++j)
        std::copy_n(src.begin() + (o * length + indices[j]) * inner, inner,
                    dst.begin() + (o * count + j) * inner);
  };
  if (args.out(0).isFloat)
    copy(&HostTensor<T>::reals);
  else
    copy(&HostTensor<T>::ints);
}

template <typename T>
void scatterAdd(const Args<T> &args) {
  args.expectCounts(2, 2, 1);
  std::vector<int64_t> indices;
  auto [outer, length, inner, count] =
      indexedLayout(args, 0, args.out(0).shape, args.in(1).shape, indices);
  const std::vector<T> &grad = args.reals(1);
  std::vector<double> acc(static_cast<size_t>(args.out(0).size()), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      double *dst = acc.data() + (o * length + indices[j]) * inner;
      const T *src = grad.data() + (o * count + j) * inner;
      for (int64_t e = 0; e < inner; ++e)
        dst[e] += static_cast<double>(src[e]);
    }
  std::vector<T> &out = args.realResult(0);
  for (size_t i = 0; i < acc.size(); ++i)
    out[i] = static_cast<T>(acc[i]);
}

} // namespace

template <typename T>
void addViewKernels(KernelMap<T> &kernels) {
  kernels["mt.reshape"] = reshape<T>;
  kernels["mt.transpose"] = transpose<T>;
  kernels["mt.slice"] = slice<T>;
  kernels["mt.pad"] = pad<T>;
  kernels["mt.concat"] = concat<T>;
  kernels["mt.expand"] = expand<T>;
  kernels["mt.gather"] = gather<T>;
  kernels["mt.scatter_add"] = scatterAdd<T>;
}

template void addViewKernels<float>(KernelMap<float> &);
template void addViewKernels<double>(KernelMap<double> &);

} // namespace mt::host::detail
