// Matrix products (mt.matmul, mt.linear) through the one cuBLASLt owner: bf16 operands, fp32
// accumulation, results in the storage the plan gives them (bf16 activations, fp32
// gradients bound for the host).
#include "plan/KernelScratch.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/TensorCopy.h"
#include "runtime/cuda/kernels/Access.cuh"
#include "runtime/cuda/kernels/KernelArgs.h"
#include "runtime/cuda/kernels/Products.h"

#include <cuda_bf16.h>

namespace mt::cuda {
namespace {

__global__ void toBf16(Ref from, __nv_bfloat16 *to, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    to[i] = __float2bfloat16_rn(loadReal(from, i));
}

/// Adds bias[n] to every row of c[rows, n].
__global__ void addBias(Ref c, Ref bias, int64_t rows, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * n;
       i += int64_t(gridDim.x) * blockDim.x)
    storeReal(c, i, loadReal(c, i) + loadReal(bias, i % n));
}

unsigned gridFor(int64_t n) { return std::min<unsigned>(blocksFor(n), 65535u * 8); }

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}

void matmul(const KernelArgs &args) {
  args.expectCounts(2, 3, 1);
  const auto &ls = args.in(0).shape, &rs = args.in(1).shape, &os = args.out(0).shape;
  if (ls.size() < 2 || rs.size() < 2 || os.size() < 2)
    args.fail("operands and result must have rank 2 or more");
  MatmulShape shape;
  shape.transposeA = args.flag("transpose_lhs");
  shape.transposeB = args.flag("transpose_rhs");
  size_t lr = ls.size(), rr = rs.size();
  shape.m = shape.transposeA ? ls[lr - 1] : ls[lr - 2];
  shape.k = shape.transposeA ? ls[lr - 2] : ls[lr - 1];
  int64_t rhsK = shape.transposeB ? rs[rr - 1] : rs[rr - 2];
  shape.n = shape.transposeB ? rs[rr - 2] : rs[rr - 1];
  if (shape.k != rhsK)
    args.fail("contracting sizes differ: " + std::to_string(shape.k) + " and " +
              std::to_string(rhsK));
  if (os[os.size() - 2] != shape.m || os.back() != shape.n)
    args.fail("the result is not [..., " + std::to_string(shape.m) + ", " +
              std::to_string(shape.n) + "]");
  shape.output = productOutputType(args, 0);
  shape.input = productInputType(args);
  // An addend is summed in the product's epilogue (beta = 1) from the result's buffer: the
  // plan puts the result in the addend's buffer when it can; otherwise it is copied there.
  bool accumulate = args.operandCount() == 3;
  if (accumulate) {
    if (args.in(2).shape != os)
      args.fail("the addend's shape is not the result's");
    if (args.real(2).data != args.out(0).data)
      copyTensor(args.real(2), args.out(0), args.stream);
  }
  const char *lhs = static_cast<const char *>(operandAs(args, 0, shape.input));
  const char *rhs = static_cast<const char *>(operandAs(args, 1, shape.input));
  int64_t inWidth = shape.input == CUDA_R_16BF ? 2 : 4;
  char *out = static_cast<char *>(args.out(0).data);
  int64_t outWidth = shape.output == CUDA_R_16BF ? 2 : 4;

  std::vector<int64_t> batch(os.begin(), os.end() - 2);
  std::vector<int64_t> lhsBatch(ls.begin(), ls.end() - 2), rhsBatch(rs.begin(), rs.end() - 2);
  std::vector<int64_t> lhsStrides = args.broadcastStrides(lhsBatch, batch);
  std::vector<int64_t> rhsStrides = args.broadcastStrides(rhsBatch, batch);
  int64_t count = product(batch, 0, batch.size());
  int64_t lhsMatrix = shape.m * shape.k, rhsMatrix = shape.k * shape.n;
  // One strided-batched product when each operand is either the full batch or shared;
  // otherwise (partial broadcasting) one product per batch element.
  auto uniform = [&](const std::vector<int64_t> &own) {
    int64_t n = product(own, 0, own.size());
    return n == count || n == 1;
  };
  // A shared right operand times a whole batch of untransposed rows is one product of all
  // the rows (x [B, S, K] times w [K, N]): one larger GEMM instead of B of them.
  if (!shape.transposeA && count > 1 && product(rhsBatch, 0, rhsBatch.size()) == 1 &&
      product(lhsBatch, 0, lhsBatch.size()) == count) {
    shape.m *= count;
    args.blas.matmul(shape, lhs, rhs, out, accumulate, args.stream);
    return;
  }
  if (uniform(lhsBatch) && uniform(rhsBatch)) {
    shape.batch = count;
    shape.strideA = product(lhsBatch, 0, lhsBatch.size()) == 1 ? 0 : lhsMatrix;
    shape.strideB = product(rhsBatch, 0, rhsBatch.size()) == 1 ? 0 : rhsMatrix;
    shape.strideC = shape.m * shape.n;
    args.blas.matmul(shape, lhs, rhs, out, accumulate, args.stream);
    return;
  }
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t a = 0, b = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      a += index[d] * lhsStrides[d];
      b += index[d] * rhsStrides[d];
    }
    args.blas.matmul(shape, lhs + a * lhsMatrix * inWidth, rhs + b * rhsMatrix * inWidth,
                     out + i * shape.m * shape.n * outWidth, accumulate, args.stream);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d])
        break;
      index[d] = 0;
    }
  }
}

void linear(const KernelArgs &args) {
  args.expectCounts(2, 3, 1);
  const auto &xs = args.in(0).shape, &ws = args.in(1).shape, &os = args.out(0).shape;
  if (xs.empty() || ws.size() != 2)
    args.fail("needs an input of rank 1 or more and a weight of rank 2");
  MatmulShape shape;
  shape.transposeB = args.flag("transpose_weight");
  shape.k = xs.back();
  int64_t weightK = shape.transposeB ? ws[1] : ws[0];
  shape.n = shape.transposeB ? ws[0] : ws[1];
  if (shape.k != weightK)
    args.fail("the input's last axis is " + std::to_string(shape.k) + " but the weight's is " +
              std::to_string(weightK));
  std::vector<int64_t> expected(xs.begin(), xs.end() - 1);
  expected.push_back(shape.n);
  if (os != expected)
    args.fail("the result's shape is not the input's with a last axis of " +
              std::to_string(shape.n));
  if (args.operandCount() == 3 && args.real(2).size() != shape.n)
    args.fail("the bias has " + std::to_string(args.in(2).size()) + " elements, not " +
              std::to_string(shape.n));
  shape.m = product(xs, 0, xs.size() - 1);
  shape.output = productOutputType(args, 0);
  shape.input = productInputType(args);
  // The bias goes in the product's epilogue when it is stored like the result; otherwise
  // (an fp32 bias next to a bf16 result) a pass adds it.
  bool hasBias = args.operandCount() == 3;
  shape.bias = hasBias && args.in(2).storage == args.out(0).storage;
  args.blas.matmul(shape, operandAs(args, 0, shape.input), operandAs(args, 1, shape.input),
                   args.out(0).data, false, args.stream, shape.bias ? args.in(2).data : nullptr);
  if (hasBias && !shape.bias) {
    addBias<<<gridFor(shape.m * shape.n), 256, 0, args.stream>>>(args.out(0).ref(),
                                                                  args.in(2).ref(), shape.m,
                                                                  shape.n);
    checkLaunch(args);
  }
}

} // namespace

/// Both operands in fp32 (a plan with fp32 device storage) are multiplied in fp32;
/// otherwise in bf16.
cudaDataType_t productInputType(const KernelArgs &args) {
  return args.real(0).storage == Storage::F32 && args.real(1).storage == Storage::F32 ? CUDA_R_32F
                                                                                      : CUDA_R_16BF;
}

/// The operand's elements in `type`: in place when the arena holds them so, else converted
/// to bf16 into scratch (an fp32 constant or gradient next to a bf16 operand).
const void *operandAs(const KernelArgs &args, size_t operand, cudaDataType_t type) {
  const DeviceTensor &tensor = args.real(operand);
  if (tensor.storage == (type == CUDA_R_32F ? Storage::F32 : Storage::BF16))
    return tensor.data;
  void *converted = args.scratch(scratch::bf16CopyBytes(tensor.size()));
  convertToBf16(args, tensor.ref(), converted, tensor.size());
  return converted;
}

void convertToBf16(const KernelArgs &args, Ref from, void *to, int64_t n) {
  if (n == 0)
    return;
  toBf16<<<gridFor(n), 256, 0, args.stream>>>(from, static_cast<__nv_bfloat16 *>(to), n);
  checkLaunch(args);
}

cudaDataType_t productOutputType(const KernelArgs &args, size_t result) {
  return args.realResult(result).storage == Storage::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

void addLinalgKernels(DeviceKernelMap &kernels) {
  kernels["mt.matmul"] = matmul;
  kernels["mt.linear"] = linear;
}

} // namespace mt::cuda
