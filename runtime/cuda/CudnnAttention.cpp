// Fused attention through cuDNN: each shape's forward and backward are written as the graph of
// products, pointwise ops and reductions that cuDNN's flash-attention engines recognise (the
// form cuDNN 9 fuses on Hopper), planned once by its heuristics, then run from a variant pack.
#include "runtime/cuda/CudnnAttention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace mt::cuda {

namespace {

using Dims = std::vector<int64_t>;

/// The uids of the tensors a call binds, in the variant pack's order of its pointers.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kOut,
  kStats,
  kGrad,
  kDq,
  kDk,
  kDv,
  kSumGradOut, // the backward's rowsum(grad * out): fp32 scratch
  kDqSum,      // the backward's fp32 dq accumulator: scratch (the non-deterministic graph)
  kScale,      // by value, from here on
  kNegInf,
  kOne,
  kFirstVirtual = 100,
};

Dims contiguous(const Dims &d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

/// The strides of an operand or result [b, h, s, d] in memory: as its dims, or
/// [b, s, h, d] when the call is sequence-major.
Dims laidOut(const Dims &d, bool sequenceMajor) {
  return sequenceMajor ? Dims{d[1] * d[2] * d[3], d[3], d[1] * d[3], 1} : contiguous(d);
}

/// The view of a [b, h, s, d] tensor as [b, h, d, s] (the same memory).
Dims swapLast(Dims d) {
  std::swap(d[2], d[3]);
  return d;
}

} // namespace

/// A planned graph and what running it needs.
struct CudnnAttention::Graph {
  std::vector<std::unique_ptr<CudnnDescriptor>> parts; // tensors, ops, the graph: kept alive
  std::unique_ptr<CudnnDescriptor> plan;
  int64_t workspace = 0;                          // cuDNN's own, beside the scratch tensors below
  int64_t sumBytes = 0, dqSumBytes = 0;           // the backward's scratch tensors (0: none)
  std::vector<std::pair<int64_t, float>> scalars; // the by-value tensors the graph reads

  /// The device memory a call takes: the scratch tensors, then cuDNN's workspace.
  int64_t callBytes() const;
};

namespace {

/// Writes one graph's descriptors.
class GraphWriter {
public:
  GraphWriter(const CudnnApi &api, CudnnAttention::Graph &graph) : api(api), graph(graph) {}

  const CudnnDescriptor &tensor(int64_t uid, const Dims &dims, const Dims &strides,
                                cudnnDataType_t type, bool isVirtual = false,
                                bool byValue = false) {
    CudnnDescriptor &t = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, dims)
        .set(CUDNN_ATTR_TENSOR_STRIDES, strides)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, int64_t{16});
    bool yes = true;
    if (isVirtual)
      t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (byValue)
      t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    return t.finalize();
  }
  /// An intermediate the engine keeps to itself.
  const CudnnDescriptor &temp(const Dims &dims, cudnnDataType_t type, const Dims &strides = {}) {
    return tensor(nextVirtual++, dims, strides.empty() ? contiguous(dims) : strides, type, true);
  }
  /// A float the graph reads by value (from the host, as the work is enqueued).
  const CudnnDescriptor &scalar(int64_t uid, float value) {
    graph.scalars.emplace_back(uid, value);
    return tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  }

  void matmul(const CudnnDescriptor &a, const CudnnDescriptor &b, const CudnnDescriptor &c) {
    cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    CudnnDescriptor &desc = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    desc.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &fp32).finalize();
    op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR)
        .set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc)
        .finalize();
  }

  /// y = mode(x[, b[, t]]); GEN_INDEX takes `axis`.
  void pointwise(cudnnPointwiseMode_t mode, const CudnnDescriptor &x, const CudnnDescriptor *b,
                 const CudnnDescriptor *t, const CudnnDescriptor &y, int64_t axis = -1) {
    cudnnDataType_t precision =
        mode == CUDNN_POINTWISE_CMP_GE ? CUDNN_DATA_BOOLEAN : CUDNN_DATA_FLOAT;
    CudnnDescriptor &desc = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    if (axis >= 0)
      desc.set(CUDNN_ATTR_POINTWISE_AXIS, axis);
    desc.finalize();
    CudnnDescriptor &o = op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    o.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (b)
      o.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t)
      o.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    float unit = 1.0f;
    o.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &unit)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &unit)
        .finalize();
  }
  void unary(cudnnPointwiseMode_t mode, const CudnnDescriptor &x, const CudnnDescriptor &y) {
    pointwise(mode, x, nullptr, nullptr, y);
  }
  void binary(cudnnPointwiseMode_t mode, const CudnnDescriptor &x, const CudnnDescriptor &b,
              const CudnnDescriptor &y) {
    pointwise(mode, x, &b, nullptr, y);
  }

  /// From here on, reductions say they need not be deterministic, as cudnn-frontend's
  /// backward graphs do from cuDNN 9.11 on (the forward, seen serving without it, is left as
  /// it ran).
  void markReductions() { reductionsMarked = api.version() >= 91100; }

  /// y = the sum or maximum of x over the axes where y has extent 1.
  void reduce(cudnnReduceTensorOp_t mode, const CudnnDescriptor &x, const CudnnDescriptor &y) {
    cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    CudnnDescriptor &desc = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &fp32);
    if (reductionsMarked) {
      bool no = false;
      desc.set(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &no);
    }
    desc.finalize();
    op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc)
        .finalize();
  }

  /// y, a view of x in another layout.
  void reshape(const CudnnDescriptor &x, const CudnnDescriptor &y) {
    op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR)
        .set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y)
        .finalize();
  }

  /// The logits scale * q k^T, in fp32.
  const CudnnDescriptor &scores(const CudnnDescriptor &q, const CudnnDescriptor &kT,
                                const CudnnDescriptor &scale, const Dims &dims) {
    const CudnnDescriptor &dots = temp(dims, CUDNN_DATA_FLOAT);
    matmul(q, kT, dots);
    const CudnnDescriptor &logits = temp(dims, CUDNN_DATA_FLOAT);
    binary(CUDNN_POINTWISE_MUL, dots, scale, logits);
    return logits;
  }

  /// scores where the causal mask keeps them (query row >= key column), else -inf.
  const CudnnDescriptor &causalMask(const CudnnDescriptor &scores, const Dims &dims) {
    const CudnnDescriptor &negInf = scalar(kNegInf, -std::numeric_limits<float>::infinity());
    const CudnnDescriptor &row = temp(dims, CUDNN_DATA_INT32);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr, row, 2);
    const CudnnDescriptor &column = temp(dims, CUDNN_DATA_INT32);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, nullptr, column, 3);
    const CudnnDescriptor &keep = temp(dims, CUDNN_DATA_BOOLEAN);
    binary(CUDNN_POINTWISE_CMP_GE, row, column, keep);
    const CudnnDescriptor &masked = temp(dims, CUDNN_DATA_FLOAT);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, &negInf, &keep, masked);
    return masked;
  }

  /// The operation graph of the ops written so far, planned by cuDNN's heuristics (the first
  /// engine configuration that finalizes); throws with cuDNN's reason when none does.
  void plan(cudnnHandle_t handle) {
    CudnnDescriptor &opGraph = keep(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    opGraph
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
             static_cast<int64_t>(ops.size()), ops.data())
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .finalize();
    CudnnDescriptor &heuristics = keep(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, opGraph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
        .finalize();
    int64_t count = 0;
    checkCudnn(api,
               api.getAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
               "counting cuDNN's engine configurations");
    std::vector<std::unique_ptr<CudnnDescriptor>> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.push_back(std::make_unique<CudnnDescriptor>(api, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw.push_back(configs.back()->get());
    }
    int64_t returned = 0;
    if (count > 0)
      checkCudnn(api,
                 api.getAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()),
                 "reading cuDNN's engine configurations");
    std::string firstError = "cuDNN's heuristics offer no engine";
    for (int64_t i = 0; i < returned; ++i) {
      auto candidate =
          std::make_unique<CudnnDescriptor>(api, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      try {
        candidate->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[i])
            .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
            .finalize();
      } catch (const CudnnError &error) {
        if (i == 0)
          firstError = error.what();
        continue;
      }
      int64_t got = 0;
      checkCudnn(api,
                 api.getAttribute(candidate->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                  CUDNN_TYPE_INT64, 1, &got, &graph.workspace),
                 "reading the plan's workspace size");
      graph.plan = std::move(candidate);
      for (auto &config : configs)
        graph.parts.push_back(std::move(config));
      return;
    }
    throw CudnnError(firstError);
  }

private:
  CudnnDescriptor &keep(cudnnBackendDescriptorType_t type) {
    graph.parts.push_back(std::make_unique<CudnnDescriptor>(api, type));
    return *graph.parts.back();
  }
  CudnnDescriptor &op(cudnnBackendDescriptorType_t type) {
    CudnnDescriptor &o = keep(type);
    ops.push_back(o.get());
    return o;
  }

  const CudnnApi &api;
  CudnnAttention::Graph &graph;
  std::vector<cudnnBackendDescriptor_t> ops;
  int64_t nextVirtual = kFirstVirtual;
  bool reductionsMarked = false;
};

/// The dims of a call's tensors, each [b, h, s, d]: q, k, v, the output, the scores and the
/// per-row statistics; the strides of the first four (and their gradients) in memory.
struct AttentionTensors {
  Dims q, k, v, out, scores, rows;
  Dims qStrides, kStrides, vStrides, outStrides;
  explicit AttentionTensors(const shapes::AttentionExtents &e)
      : q{e.batch, e.queryHeads, e.queries, e.depth}, k{e.batch, e.kvHeads, e.keys, e.depth},
        v{e.batch, e.kvHeads, e.keys, e.valueDepth}, out{e.batch, e.queryHeads, e.queries,
                                                         e.valueDepth},
        scores{e.batch, e.queryHeads, e.queries, e.keys}, rows{e.batch, e.queryHeads, e.queries, 1},
        qStrides(laidOut(q, e.sequenceMajor)), kStrides(laidOut(k, e.sequenceMajor)),
        vStrides(laidOut(v, e.sequenceMajor)), outStrides(laidOut(out, e.sequenceMajor)) {}
};

/// The forward (2.2 of cuDNN's composite SDPA): scores, the causal mask, the softmax with
/// its log-sum-exp, and the product with v.
void writeForward(GraphWriter &w, const CudnnAttentionShape &s) {
  const shapes::AttentionExtents &e = s.extents;
  AttentionTensors d(e);
  const CudnnDescriptor &q = w.tensor(kQ, d.q, d.qStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &kT =
      w.tensor(kK, swapLast(d.k), swapLast(d.kStrides), CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &v = w.tensor(kV, d.v, d.vStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &out = w.tensor(kOut, d.out, d.outStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &stats = w.tensor(kStats, d.rows, contiguous(d.rows), CUDNN_DATA_FLOAT);
  const CudnnDescriptor &scale = w.scalar(kScale, s.scale);

  const CudnnDescriptor *scores = &w.scores(q, kT, scale, d.scores);
  if (s.causal)
    scores = &w.causalMask(*scores, d.scores);
  const CudnnDescriptor &max = w.temp(d.rows, CUDNN_DATA_FLOAT);
  w.reduce(CUDNN_REDUCE_TENSOR_MAX, *scores, max);
  const CudnnDescriptor &shifted = w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.binary(CUDNN_POINTWISE_SUB, *scores, max, shifted);
  const CudnnDescriptor &exps = w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.unary(CUDNN_POINTWISE_EXP, shifted, exps);
  const CudnnDescriptor &sum = w.temp(d.rows, CUDNN_DATA_FLOAT);
  w.reduce(CUDNN_REDUCE_TENSOR_ADD, exps, sum);
  const CudnnDescriptor &logSum = w.temp(d.rows, CUDNN_DATA_FLOAT);
  w.unary(CUDNN_POINTWISE_LOG, sum, logSum);
  w.binary(CUDNN_POINTWISE_ADD, max, logSum, stats);
  // The probabilities enter the second product in the operands' type.
  const CudnnDescriptor &probabilities = w.temp(d.scores, CUDNN_DATA_BFLOAT16);
  w.binary(CUDNN_POINTWISE_DIV, exps, sum, probabilities);
  w.matmul(probabilities, v, out);
}

/// The backward (3.2 of cuDNN's composite SDPA backward): rowsum(grad * out), the recomputed
/// probabilities from the forward's log-sum-exp, then dv, dk and dq. `deterministic`: dq is
/// written by its product directly, where the other form sums it in an fp32 accumulator.
void writeBackward(GraphWriter &w, const CudnnAttentionShape &s, bool deterministic) {
  const shapes::AttentionExtents &e = s.extents;
  AttentionTensors d(e);
  w.markReductions();
  Dims scoreTDims{e.batch, e.queryHeads, e.keys, e.queries};
  Dims scoreTStrides = swapLast(contiguous(d.scores));
  const CudnnDescriptor &q = w.tensor(kQ, d.q, d.qStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &kT =
      w.tensor(kK, swapLast(d.k), swapLast(d.kStrides), CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &vT =
      w.tensor(kV, swapLast(d.v), swapLast(d.vStrides), CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &out = w.tensor(kOut, d.out, d.outStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &grad = w.tensor(kGrad, d.out, d.outStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &stats = w.tensor(kStats, d.rows, contiguous(d.rows), CUDNN_DATA_FLOAT);
  const CudnnDescriptor &dq = w.tensor(kDq, d.q, d.qStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &dk = w.tensor(kDk, d.k, d.kStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &dv = w.tensor(kDv, d.v, d.vStrides, CUDNN_DATA_BFLOAT16);
  const CudnnDescriptor &one = w.scalar(kOne, 1.0f);
  const CudnnDescriptor &scale = w.scalar(kScale, s.scale);
  const CudnnDescriptor &sumGradOut =
      w.tensor(kSumGradOut, d.rows, contiguous(d.rows), CUDNN_DATA_FLOAT);

  // rowsum(grad * out), each row's softmax correction.
  const CudnnDescriptor &gradOut =
      w.temp(d.out, CUDNN_DATA_FLOAT,
             {e.queryHeads * e.queries * e.valueDepth, e.queries * e.valueDepth,
              e.queryHeads * e.valueDepth, 1});
  w.binary(CUDNN_POINTWISE_MUL, grad, out, gradOut);
  const CudnnDescriptor &rowSum = w.temp(d.rows, CUDNN_DATA_FLOAT);
  w.reduce(CUDNN_REDUCE_TENSOR_ADD, gradOut, rowSum);
  w.binary(CUDNN_POINTWISE_MUL, rowSum, one, sumGradOut);

  // The probabilities again, from the log-sum-exp.
  const CudnnDescriptor &scores = w.scores(q, kT, scale, d.scores);
  const CudnnDescriptor *shifted = &w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.binary(CUDNN_POINTWISE_SUB, scores, stats, *shifted);
  if (s.causal)
    shifted = &w.causalMask(*shifted, d.scores);
  const CudnnDescriptor &probabilities = w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.unary(CUDNN_POINTWISE_EXP, *shifted, probabilities);

  // result = scores^T other (dv from the probabilities, dk from dS), where the scores enter
  // the product transposed and in bf16; with fewer key/value heads than query heads, summed
  // over each group of query heads.
  auto keyProduct = [&](const CudnnDescriptor &scores, const CudnnDescriptor &other,
                        const CudnnDescriptor &result, int64_t depth) {
    const CudnnDescriptor &transposed = w.temp(scoreTDims, CUDNN_DATA_BFLOAT16, scoreTStrides);
    w.reshape(scores, transposed);
    if (e.kvHeads == e.queryHeads) {
      w.matmul(transposed, other, result);
      return;
    }
    const CudnnDescriptor &perHead =
        w.temp({e.batch, e.queryHeads, e.keys, depth}, CUDNN_DATA_BFLOAT16);
    w.matmul(transposed, other, perHead);
    w.reduce(CUDNN_REDUCE_TENSOR_ADD, perHead, result);
  };
  keyProduct(probabilities, grad, dv, e.valueDepth);

  // dS = P (grad v^T - rowsum) scale.
  const CudnnDescriptor &dp = w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.matmul(grad, vT, dp);
  const CudnnDescriptor &centred = w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.binary(CUDNN_POINTWISE_SUB, dp, sumGradOut, centred);
  const CudnnDescriptor &weighted = w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.binary(CUDNN_POINTWISE_MUL, centred, probabilities, weighted);
  const CudnnDescriptor &dS = w.temp(d.scores, CUDNN_DATA_FLOAT);
  w.binary(CUDNN_POINTWISE_MUL, weighted, scale, dS);
  keyProduct(dS, q, dk, e.depth);

  // dq = dS k, k the view of kT in k's own strides (as the frontend writes it: contiguous
  // strides here would ask for a transpose of a sequence-major k, which no engine fuses).
  const CudnnDescriptor &k = w.temp(d.k, CUDNN_DATA_FLOAT, d.kStrides);
  w.reshape(kT, k);
  if (deterministic) {
    w.matmul(dS, k, dq);
    return;
  }
  const CudnnDescriptor &dqSum = w.tensor(kDqSum, d.q, d.qStrides, CUDNN_DATA_FLOAT);
  w.matmul(dS, k, dqSum);
  w.unary(CUDNN_POINTWISE_IDENTITY, dqSum, dq);
}

int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

/// Why a planned graph did not run.
std::string lackOfMemory(const CudnnAttention::Graph &graph) {
  return "its workspace of " + std::to_string((graph.callBytes() + (1 << 20) - 1) >> 20) +
         " MiB is beyond the plan's kernel scratch and the device's free memory";
}

} // namespace

int64_t CudnnAttention::Graph::callBytes() const {
  return sumBytes + dqSumBytes + aligned(workspace);
}

std::unique_ptr<CudnnAttention> CudnnAttention::create(bool backward, bool deterministic,
                                                       std::string *why) {
  const CudnnApi *api = loadCudnn(why);
  if (!api)
    return nullptr;
  cudnnHandle_t handle = nullptr;
  cudnnStatus_t status = api->create(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    if (why)
      *why = std::string("cudnnCreate failed: ") + api->errorString(status);
    return nullptr;
  }
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(*api, handle, backward, deterministic));
}

CudnnAttention::CudnnAttention(const CudnnApi &api, cudnnHandle_t handle, bool backward,
                               bool deterministic)
    : api(api), handle(handle), backwardOn(backward), isDeterministic(deterministic) {}

CudnnAttention::~CudnnAttention() {
  graphs.clear(); // every descriptor before the handle
  api.destroy(handle);
  cudaFree(own);
}

char *CudnnAttention::ownWorkspace(int64_t bytes) {
  if (bytes <= ownCapacity)
    return own;
  // Refused once, refused for good: no device-wide wait and allocation every call.
  if (ownRefused > 0 && bytes >= ownRefused)
    return nullptr;
  // Grown at a shape's first call, so rarely: calls enqueued before may still read the old
  // region, on whichever stream they ran. The old region stays where the new is not had.
  if (cudaDeviceSynchronize() != cudaSuccess)
    return nullptr;
  char *grown = nullptr;
  if (cudaMalloc(reinterpret_cast<void **>(&grown), static_cast<size_t>(bytes)) != cudaSuccess) {
    cudaGetLastError(); // the failed allocation is not an error of later calls
    ownRefused = ownRefused > 0 ? std::min(ownRefused, bytes) : bytes;
    return nullptr;
  }
  cudaFree(own);
  own = grown;
  ownCapacity = bytes;
  return own;
}

std::string CudnnAttention::version() const {
  size_t v = api.version(); // major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

const CudnnAttention::Graph *CudnnAttention::graphFor(const CudnnAttentionShape &shape,
                                                      bool backward, bool deterministic) {
  const shapes::AttentionExtents &e = shape.extents;
  Key key{e.batch,      e.queryHeads,    e.kvHeads,   e.queries,    e.keys,   e.depth,
          e.valueDepth, e.sequenceMajor, shape.scale, shape.causal, backward, deterministic};
  auto found = graphs.find(key);
  if (found != graphs.end())
    return found->second.get();
  auto graph = std::make_unique<Graph>();
  try {
    GraphWriter writer(api, *graph);
    if (backward) {
      writeBackward(writer, shape, deterministic);
      int64_t rows = e.batch * e.queryHeads * e.queries;
      graph->sumBytes = aligned(rows * 4);
      graph->dqSumBytes = deterministic ? 0 : aligned(rows * e.depth * 4);
    } else {
      writeForward(writer, shape);
    }
    writer.plan(handle);
  } catch (const CudnnError &error) {
    decline(shape, backward, error.what());
    graph.reset();
  }
  return (graphs[key] = std::move(graph)).get();
}

void CudnnAttention::decline(const CudnnAttentionShape &shape, bool backward,
                             const std::string &why) {
  if (!firstDecline.empty())
    return;
  const shapes::AttentionExtents &e = shape.extents;
  firstDecline = std::string(backward ? "the backward" : "the forward") + " of q [" +
                 std::to_string(e.batch) + ", " + std::to_string(e.queryHeads) + ", " +
                 std::to_string(e.queries) + ", " + std::to_string(e.depth) + "]" +
                 (e.sequenceMajor ? " (sequence-major)" : "") + ": " + why;
  // Once a run: such shapes run on mt's own kernels, correct but slower.
  std::fprintf(stderr, "mt: cuDNN declines %s; mt's own kernels run it\n", firstDecline.c_str());
}

bool CudnnAttention::run(const Graph &graph, bool backward, const std::vector<const void *> &bound,
                         cudaStream_t stream, const WorkspaceSource &workspace) {
  std::vector<int64_t> uids;
  std::vector<void *> pointers;
  for (size_t i = 0; i < bound.size(); ++i)
    if (bound[i]) {
      uids.push_back(static_cast<int64_t>(i) + 1); // bound[i] is uid i + 1
      pointers.push_back(const_cast<void *>(bound[i]));
    }
  int64_t scratchBytes = graph.callBytes();
  char *scratch = nullptr;
  if (scratchBytes > 0 && !(scratch = static_cast<char *>(workspace(scratchBytes))) &&
      !(scratch = ownWorkspace(scratchBytes)))
    return false;
  largestWorkspace = std::max(largestWorkspace, scratchBytes);
  char *cursor = scratch;
  auto carve = [&](Uid uid, int64_t bytes) {
    if (bytes == 0)
      return;
    uids.push_back(uid);
    pointers.push_back(cursor);
    cursor += bytes;
  };
  carve(kSumGradOut, graph.sumBytes);
  carve(kDqSum, graph.dqSumBytes);
  void *engineWorkspace = graph.workspace > 0 ? cursor : nullptr;
  for (const auto &[uid, value] : graph.scalars) {
    uids.push_back(uid);
    pointers.push_back(const_cast<float *>(&value));
  }
  CudnnDescriptor pack(api, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids)
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(pointers.size()), pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &engineWorkspace)
      .finalize();
  checkCudnn(api, api.setStream(handle, stream), "cudnnSetStream");
  checkCudnn(api, api.execute(handle, graph.plan->get(), pack.get()), "cudnnBackendExecute");
  ++calls[backward ? 1 : 0];
  return true;
}

bool CudnnAttention::forward(const CudnnAttentionShape &shape, const CudnnAttentionForward &t,
                             cudaStream_t stream, const WorkspaceSource &workspace) {
  const Graph *graph = graphFor(shape, false, true);
  if (!graph)
    return false;
  float *lse = t.lse;
  int64_t rows = shape.extents.batch * shape.extents.queryHeads * shape.extents.queries;
  if ((!lse && !(lse = static_cast<float *>(workspace(rows * 4)))) ||
      !run(*graph, false, {t.q, t.k, t.v, t.out, lse}, stream, workspace)) {
    decline(shape, false, lackOfMemory(*graph));
    return false;
  }
  return true;
}

bool CudnnAttention::backward(const CudnnAttentionShape &shape, const CudnnAttentionBackward &t,
                              cudaStream_t stream, const WorkspaceSource &workspace) {
  if (!backwardOn)
    return false;
  std::vector<const void *> bound{t.q, t.k, t.v, t.out, t.lse, t.grad, t.dq, t.dk, t.dv};
  // The atomic form where its memory is to be had (the plan's scratch reserves its row sums
  // and accumulator: plan/KernelScratch.h), else the deterministic one.
  if (!isDeterministic)
    if (const Graph *graph = graphFor(shape, true, false);
        graph && run(*graph, true, bound, stream, workspace))
      return true;
  const Graph *graph = graphFor(shape, true, true);
  if (!graph)
    return false;
  if (!run(*graph, true, bound, stream, workspace)) {
    decline(shape, true, lackOfMemory(*graph));
    return false;
  }
  return true;
}

} // namespace mt::cuda
