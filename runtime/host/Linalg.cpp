// Matrix products (mt.matmul, mt.linear): the bulk of a training step's time. Transposed
// operands are first copied into row-major [M, K] and [K, N], so that one cache-blocked,
// vectorizable loop computes every product, summing in double in a fixed order.
#include "runtime/host/KernelSupport.h"
#include "runtime/host/Products.h"

namespace mt::host::detail {
namespace {

template <typename T>
void matmul(const Args<T> &args) {
  args.expectCounts(2, 3, 1);
  const Shape &ls = args.in(0).shape, &rs = args.in(1).shape, &os = args.out(0).shape;
  if (ls.size() < 2 || rs.size() < 2 || os.size() < 2)
    args.fail("operands and result must have rank 2 or more");
  bool transposeLhs = args.flag("transpose_lhs"), transposeRhs = args.flag("transpose_rhs");
  size_t lr = ls.size(), rr = rs.size();
  int64_t m = transposeLhs ? ls[lr - 1] : ls[lr - 2];
  int64_t k = transposeLhs ? ls[lr - 2] : ls[lr - 1];
  int64_t rhsK = transposeRhs ? rs[rr - 1] : rs[rr - 2];
  int64_t n = transposeRhs ? rs[rr - 2] : rs[rr - 1];
  if (k != rhsK)
    args.fail("contracting sizes differ: " + std::to_string(k) + " and " +
              std::to_string(rhsK));
  if (os[os.size() - 2] != m || os.back() != n)
    args.fail("the result is not [..., " + std::to_string(m) + ", " + std::to_string(n) + "]");

  const std::vector<T> &lhsData = args.reals(0), &rhsData = args.reals(1);
  int64_t lhsCount = product(ls, 0, lr - 2), rhsCount = product(rs, 0, rr - 2);
  std::vector<T> lhsPacked, rhsPacked;
  const T *lhs = lhsData.data(), *rhs = rhsData.data();
  if (transposeLhs) {
    lhsPacked = transposeMatrices(lhs, lhsCount, k, m);
    lhs = lhsPacked.data();
  }
  if (transposeRhs) {
    rhsPacked = transposeMatrices(rhs, rhsCount, n, k);
    rhs = rhsPacked.data();
  }

  Shape batch(os.begin(), os.end() - 2);
  std::array<std::vector<int64_t>, 2> strides = {
      args.broadcastStrides(Shape(ls.begin(), ls.end() - 2), batch),
      args.broadcastStrides(Shape(rs.begin(), rs.end() - 2), batch)};
  std::vector<Product<T>> products;
  T *out = args.realResult(0).data();
  const T *addend = nullptr;
  if (args.operands.size() == 3) {
    if (args.in(2).shape != os)
      args.fail("the addend's shape is not the result's");
    addend = args.reals(2).data();
  }
  walk(batch, strides, [&](int64_t i, const std::array<int64_t, 2> &at) {
    products.push_back({lhs + at[0] * m * k, rhs + at[1] * k * n, out + i * m * n,
                        addend ? addend + i * m * n : nullptr});
  });
  multiply(products, m, n, k, static_cast<const T *>(nullptr));
}

template <typename T>
void linear(const Args<T> &args) {
  args.expectCounts(2, 3, 1);
  const Shape &xs = args.in(0).shape, &ws = args.in(1).shape, &os = args.out(0).shape;
  if (xs.empty() || ws.size() != 2)
    args.fail("needs an input of rank 1 or more and a weight of rank 2");
  bool transposeWeight = args.flag("transpose_weight");
  int64_t k = xs.back();
  int64_t weightK = transposeWeight ? ws[1] : ws[0];
  int64_t n = transposeWeight ? ws[0] : ws[1];
  if (k != weightK)
    args.fail("the input's last axis is " + std::to_string(k) + " but the weight's is " +
              std::to_string(weightK));
  Shape expected(xs.begin(), xs.end() - 1);
  expected.push_back(n);
  if (os != expected)
    args.fail("the result's shape is not the input's with a last axis of " + std::to_string(n));
  const T *bias = nullptr;
  if (args.operands.size() == 3) {
    if (args.in(2).size() != n)
      args.fail("the bias has " + std::to_string(args.in(2).size()) + " elements, not " +
                std::to_string(n));
    bias = args.reals(2).data();
  }
  const T *weight = args.reals(1).data();
  std::vector<T> packed;
  if (transposeWeight) {
    packed = transposeMatrices(weight, 1, n, k);
    weight = packed.data();
  }
  int64_t m = product(xs, 0, xs.size() - 1);
  multiply<T>({{args.reals(0).data(), weight, args.realResult(0).data()}}, m, n, k, bias);
}

} // namespace

template <typename T>
void addLinalgKernels(KernelMap<T> &kernels) {
  kernels["mt.matmul"] = matmul<T>;
  kernels["mt.linear"] = linear<T>;
}

template void addLinalgKernels<float>(KernelMap<float> &);
template void addLinalgKernels<double>(KernelMap<double> &);

} // namespace mt::host::detail
