// What the kernel families share: a command's operands, results and attributes with errors
// that name the op, numpy broadcasting walks and the split of heavy work over the cores, so
// that each family file holds only its arithmetic.
#ifndef MT_RUNTIME_HOST_KERNELSUPPORT_H
#define MT_RUNTIME_HOST_KERNELSUPPORT_H

#include "runtime/KernelShapes.h"
#include "runtime/CommandView.h"
#include "runtime/ThreadPool.h"
#include "runtime/host/Kernels.h"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>

namespace mt::host::detail {

/// The product of shape[begin, end).
inline int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}
inline int64_t product(const Shape &shape) { return product(shape, 0, shape.size()); }

template <typename T>
struct Args : CommandView<KernelError> {
  Args(const plan::Command &command, const std::vector<const HostTensor<T> *> &operands,
       const std::vector<HostTensor<T> *> &results)
      : CommandView<KernelError>{command}, operands(operands), results(results) {}

  const std::vector<const HostTensor<T> *> &operands;
  const std::vector<HostTensor<T> *> &results;

  void expectCounts(size_t minOperands, size_t maxOperands, size_t minResults,
                    size_t maxResults) const {
    CommandView::expectCounts(operands.size(), minOperands, maxOperands, results.size(), minResults,
                              maxResults);
    for (size_t i = 0; i < operands.size(); ++i) {
      const HostTensor<T> &t = *operands[i];
      size_t stored = t.isFloat ? t.reals.size() : t.ints.size();
      if (static_cast<int64_t>(stored) != t.size())
        fail("operand " + std::to_string(i) + " holds " + std::to_string(stored) +
             " elements for its shape of " + std::to_string(t.size()));
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const HostTensor<T> &t = *results[i];
      size_t stored = t.isFloat ? t.reals.size() : t.ints.size();
      if (static_cast<int64_t>(stored) != t.size())
        fail("result " + std::to_string(i) + " is not sized for its shape");
    }
  }
  void expectCounts(size_t minOperands, size_t maxOperands, size_t resultCount) const {
    expectCounts(minOperands, maxOperands, resultCount, resultCount);
  }

  const HostTensor<T> &in(size_t i) const { return *operands[i]; }
  HostTensor<T> &out(size_t i) const { return *results[i]; }

  const std::vector<T> &reals(size_t operand) const {
    if (!in(operand).isFloat)
      fail("operand " + std::to_string(operand) + " must be a float tensor");
    return in(operand).reals;
  }
  const std::vector<int64_t> &ints(size_t operand) const {
    if (in(operand).isFloat)
      fail("operand " + std::to_string(operand) + " must be an integer tensor");
    return in(operand).ints;
  }
  std::vector<T> &realResult(size_t result) const {
    if (!out(result).isFloat)
      fail("result " + std::to_string(result) + " must be a float tensor");
    return out(result).reals;
  }

  /// The strides of `shape` read as `target` under numpy broadcasting: 0 on broadcast axes.
  std::vector<int64_t> broadcastStrides(const Shape &shape, const Shape &target) const {
    std::vector<int64_t> strides;
    if (std::string error = mt::broadcastStrides(shape, target, strides); !error.empty())
      fail(error);
    return strides;
  }
};

using shapes::walk;

/// Runs body(begin, end) over [0, n) split into one contiguous range per core when the work
/// (about n * workPerItem multiply-adds) pays for threads. Each index is computed by one
/// thread in a fixed order, so results never depend on the split; bodies must not throw.
template <typename F>
void parallelFor(int64_t n, double workPerItem, F &&body) {
  int64_t cores = parallelism();
  if (cores == 1 || n < 2 || static_cast<double>(n) * workPerItem < 1e6) {
    body(int64_t{0}, n);
    return;
  }
  int64_t parts = std::min(cores, n);
  runParallel(parts, [&](int64_t p) { body(n * p / parts, n * (p + 1) / parts); });
}

/// Calls f with the HostTensor member holding the elements (reals or ints), for kernels
/// that move elements without looking at them.
template <typename T, typename F>
void byElementKind(const Args<T> &args, F &&f) {
  bool isFloat = args.out(0).isFloat;
  for (size_t i = 0; i < args.operands.size(); ++i)
    if (args.in(i).isFloat != isFloat)
      args.fail("operand " + std::to_string(i) + " and the result differ in element kind");
  if (isFloat)
    f(&HostTensor<T>::reals);
  else
    f(&HostTensor<T>::ints);
}

template <typename T>
using Kernel = void (*)(const Args<T> &);
template <typename T>
using KernelMap = std::unordered_map<std::string, Kernel<T>>;

template <typename T> void addElementwiseKernels(KernelMap<T> &kernels);
template <typename T> void addLinalgKernels(KernelMap<T> &kernels);
template <typename T> void addNormalizationKernels(KernelMap<T> &kernels);
template <typename T> void addTransformerKernels(KernelMap<T> &kernels);
template <typename T> void addViewKernels(KernelMap<T> &kernels);

} // namespace mt::host::detail

#endif // MT_RUNTIME_HOST_KERNELSUPPORT_H
