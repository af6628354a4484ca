// The host's matrix product: row-major [M, K] @ [K, N] in cache blocks, summed in double in a
// fixed order over the cores; for mt.matmul, mt.linear and the fused loss.
#ifndef MT_RUNTIME_HOST_PRODUCTS_H
#define MT_RUNTIME_HOST_PRODUCTS_H

#include "runtime/host/KernelSupport.h"

#include <vector>

namespace mt::host::detail {

constexpr int64_t kRowBlock = 4;
constexpr int64_t kColumnBlock = 256;

/// c[rows, n] = a[rows, k] @ b[k, n] (+ bias[n]) (+ addend[rows, n]) for rows <= kRowBlock,
/// all row-major: the sums start from the bias or the addend, so the result rounds once.
template <typename T>
void productRows(const T *a, const T *b, const T *bias, const T *addend, T *c, int64_t rows,
                 int64_t n, int64_t k) {
  double acc[kRowBlock][kColumnBlock];
  for (int64_t j0 = 0; j0 < n; j0 += kColumnBlock) {
    int64_t columns = std::min(kColumnBlock, n - j0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < columns; ++j)
        acc[r][j] = (bias ? static_cast<double>(bias[j0 + j]) : 0.0) +
                    (addend ? static_cast<double>(addend[r * n + j0 + j]) : 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const T *bRow = b + p * n + j0;
      for (int64_t r = 0; r < rows; ++r) {
        double scale = static_cast<double>(a[r * k + p]);
        double *accRow = acc[r];
        for (int64_t j = 0; j < columns; ++j)
          accRow[j] += scale * static_cast<double>(bRow[j]);
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < columns; ++j)
        c[r * n + j0 + j] = static_cast<T>(acc[r][j]);
  }
}

template <typename T> struct Product {
  const T *a;                // [m, k]
  const T *b;                // [k, n]
  T *c;                      // [m, n]
  const T *addend = nullptr; // [m, n]
};

/// Every product of `products`, split over the cores by blocks of output rows.
template <typename T>
void multiply(const std::vector<Product<T>> &products, int64_t m, int64_t n, int64_t k,
              const T *bias) {
  int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
  int64_t tasks = static_cast<int64_t>(products.size()) * blocks;
  parallelFor(tasks, static_cast<double>(kRowBlock * n * k), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const Product<T> &product = products[task / blocks];
      int64_t row = (task % blocks) * kRowBlock;
      productRows(product.a + row * k, product.b, bias,
                  product.addend ? product.addend + row * n : nullptr, product.c + row * n,
                  std::min(kRowBlock, m - row), n, k);
    }
  });
}

/// `count` row-major [rows, columns] matrices, each transposed into [columns, rows].
template <typename T>
std::vector<T> transposeMatrices(const T *data, int64_t count, int64_t rows, int64_t columns) {
  std::vector<T> out(static_cast<size_t>(count * rows * columns));
  for (int64_t m = 0; m < count; ++m) {
    const T *src = data + m * rows * columns;
    T *dst = out.data() + m * rows * columns;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < columns; ++j)
        dst[j * rows + i] = src[i * columns + j];
  }
  return out;
}

} // namespace mt::host::detail

#endif // MT_RUNTIME_HOST_PRODUCTS_H
