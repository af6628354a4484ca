// NCCL through dlopen: the few entry points data parallelism uses, checked, with errors that
// say which call failed and NCCL's reason.
#include "runtime/cuda/NcclCommunicator.h"

#include "runtime/cuda/CudaCheck.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace mt::cuda {

namespace {

struct Nccl {
  ncclResult_t (*getUniqueId)(ncclUniqueId *);
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*commAbort)(ncclComm_t);
  ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
  ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                            ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
                         ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*getVersion)(int *);
  const char *(*errorString)(ncclResult_t);
};

template <typename F>
void bind(void *library, const char *name, F &field) {
  field = reinterpret_cast<F>(dlsym(library, name));
  if (!field)
    throw CudaError(std::string("libnccl.so.2 has no ") + name);
}

const Nccl &nccl() {
  static const Nccl loaded = [] {
    // The loader's path first, then the CUDA runtime's folder, where toolkits keep NCCL.
    void *library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    std::string firstError = library ? "" : dlerror();
    Dl_info runtime;
    if (!library && dladdr(reinterpret_cast<void *>(&cudaGetDeviceCount), &runtime) &&
        runtime.dli_fname) {
      std::string folder = runtime.dli_fname;
      folder = folder.substr(0, folder.rfind('/') + 1);
      library = dlopen((folder + "libnccl.so.2").c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    if (!library)
      throw CudaError("cannot load NCCL (libnccl.so.2) for data parallelism: " + firstError +
                      "; put its folder on LD_LIBRARY_PATH");
    Nccl n{};
    bind(library, "ncclGetUniqueId", n.getUniqueId);
    bind(library, "ncclCommInitRank", n.commInitRank);
    bind(library, "ncclCommDestroy", n.commDestroy);
    bind(library, "ncclCommAbort", n.commAbort);
    bind(library, "ncclCommSplit", n.commSplit);
    bind(library, "ncclAllGather", n.allGather);
    bind(library, "ncclAllReduce", n.allReduce);
    bind(library, "ncclReduce", n.reduce);
    bind(library, "ncclBroadcast", n.broadcast);
    bind(library, "ncclGroupStart", n.groupStart);
    bind(library, "ncclGroupEnd", n.groupEnd);
    bind(library, "ncclGetVersion", n.getVersion);
    bind(library, "ncclGetErrorString", n.errorString);
    return n;
  }();
  return loaded;
}

void check(ncclResult_t status, const char *call) {
  if (status != ncclSuccess)
    throw CudaError(std::string(call) + " failed: " + nccl().errorString(status));
}

/// The collectives `issue` makes, as one NCCL group, which is closed also when one fails.
template <typename Issue>
void inGroup(Issue issue) {
  check(nccl().groupStart(), "ncclGroupStart");
  try {
    issue();
  } catch (...) {
    nccl().groupEnd();
    throw;
  }
  check(nccl().groupEnd(), "ncclGroupEnd");
}

} // namespace

ncclUniqueId newNcclGroup() {
  ncclUniqueId id;
  check(nccl().getUniqueId(&id), "ncclGetUniqueId");
  return id;
}

NcclCommunicator::NcclCommunicator(const ncclUniqueId &id, int rank, int ranks)
    : self(rank), ranks(ranks) {
  // NVLink multicast (NVLS) must stay off: on a shared host it can take every GPU out of
  // service.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  MT_CUDA_CHECK(cudaFree(nullptr)); // the context first, so that it is not counted as NCCL's
  size_t before = 0, after = 0, total = 0;
  MT_CUDA_CHECK(cudaMemGetInfo(&before, &total));
  try {
    check(nccl().commInitRank(&comm, ranks, id, rank), "ncclCommInitRank");
    check(nccl().commSplit(comm, 0, rank, &reductions, nullptr), "ncclCommSplit");
    check(nccl().commSplit(comm, 0, rank, &gathers, nullptr), "ncclCommSplit");
    MT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // Every collective a run makes, once, now: NCCL connects a communicator's peers for an
    // algorithm when it first uses it, which should not be during a step; and the staging
    // buffer is allocated now, where cudaMalloc does not stall a step.
    std::vector<float> zeros(ranks, 0.0f);
    allReduceSum(0.0);
    allGather(zeros.data(), ranks);
    MT_CUDA_CHECK(cudaMemsetAsync(buffer, 0, bufferBytes, stream));
    reduceMean(reinterpret_cast<float *>(buffer), ranks, stream);
    gather(buffer, ranks, sizeof(float), stream);
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
    MT_CUDA_CHECK(cudaMemGetInfo(&after, &total));
  } catch (...) {
    abort(); // a peer may never join: destroying would wait for it
    release();
    throw;
  }
  joinedBytes = static_cast<int64_t>(before) - static_cast<int64_t>(after);
}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() {
  for (ncclComm_t *own : {&gathers, &reductions, &comm}) {
    if (*own && !aborted)
      nccl().commDestroy(*own);
    *own = nullptr;
  }
  if (stream)
    cudaStreamDestroy(stream);
  stream = nullptr;
  cudaFree(buffer);
  buffer = nullptr;
}

void NcclCommunicator::abort() {
  // A thread that has held the right to issue for seconds is stuck in NCCL waiting for a
  // peer that is gone: abort under it, which is what ends its wait.
  std::unique_lock<std::timed_mutex> lock(issuing, std::defer_lock);
  (void)lock.try_lock_for(std::chrono::seconds(5));
  if (aborted)
    return;
  aborted = true;
  // Since NCCL 2.22 communicators whose kernels wait on each other are aborted together
  // (one at a time, the first abort could wait for the others' kernels).
  int version = 0;
  bool together = nccl().getVersion(&version) == ncclSuccess && version >= 22200;
  if (together)
    nccl().groupStart();
  for (ncclComm_t own : {gathers, reductions, comm})
    if (own)
      nccl().commAbort(own);
  if (together)
    nccl().groupEnd();
}

std::unique_lock<std::timed_mutex> NcclCommunicator::enter() {
  std::unique_lock<std::timed_mutex> lock(issuing);
  if (aborted)
    throw CudaError("the NCCL group was aborted (a rank failed)");
  return lock;
}

char *NcclCommunicator::staging(size_t bytes) {
  if (bytes > bufferBytes) {
    MT_CUDA_CHECK(cudaFree(buffer));
    buffer = nullptr;
    MT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&buffer), bytes));
    bufferBytes = bytes;
  }
  return buffer;
}

void NcclCommunicator::copy(void *device, void *host, size_t bytes, cudaMemcpyKind kind) {
  MT_CUDA_CHECK(kind == cudaMemcpyHostToDevice
                    ? cudaMemcpyAsync(device, host, bytes, kind, stream)
                    : cudaMemcpyAsync(host, device, bytes, kind, stream));
}

void NcclCommunicator::reduceScatterMean(float *, int64_t) {
  throw CudaError("ranks over NCCL average their gradients on the device, not in host memory");
}

void NcclCommunicator::allGather(float *data, int64_t count) {
  int64_t block = shardBlock(count, ranks);
  float *send = reinterpret_cast<float *>(staging((ranks + 1) * block * sizeof(float)));
  float *receive = send + block;
  Shard shard = shardOf(count, self, ranks);
  MT_CUDA_CHECK(cudaMemsetAsync(send + shard.size(), 0, (block - shard.size()) * sizeof(float),
                                stream));
  copy(send, data + shard.begin, shard.size() * sizeof(float), cudaMemcpyHostToDevice);
  {
    std::unique_lock<std::timed_mutex> lock = enter();
    check(nccl().allGather(send, receive, block, ncclFloat, comm, stream), "ncclAllGather");
  }
  copy(receive, data, count * sizeof(float), cudaMemcpyDeviceToHost);
  MT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

double NcclCommunicator::allReduceSum(double value) {
  double *slot = reinterpret_cast<double *>(staging(sizeof(double)));
  MT_CUDA_CHECK(cudaMemcpyAsync(slot, &value, sizeof(double), cudaMemcpyHostToDevice, stream));
  {
    std::unique_lock<std::timed_mutex> lock = enter();
    check(nccl().allReduce(slot, slot, 1, ncclDouble, ncclSum, comm, stream), "ncclAllReduce");
  }
  MT_CUDA_CHECK(cudaMemcpyAsync(&value, slot, sizeof(double), cudaMemcpyDeviceToHost, stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return value;
}

// The plan's buffers hold a parameter's exact count, not the equal blocks that NCCL's
// reduce-scatter and all-gather take: a reduce or broadcast per rank, rooted at the rank
// that owns the shard, in one group, moves the same bytes without padding.
void NcclCommunicator::reduceMean(float *gradient, int64_t count, cudaStream_t stream) {
  std::unique_lock<std::timed_mutex> lock = enter();
  inGroup([&] {
    for (int r = 0; r < ranks; ++r) {
      Shard shard = shardOf(count, r, ranks);
      if (shard.size() > 0)
        check(nccl().reduce(gradient + shard.begin, gradient + shard.begin, shard.size(),
                            ncclFloat, ncclAvg, r, reductions, stream),
              "ncclReduce");
    }
  });
}

void NcclCommunicator::gather(void *weights, int64_t count, int width, cudaStream_t stream) {
  std::unique_lock<std::timed_mutex> lock = enter();
  char *bytes = static_cast<char *>(weights);
  inGroup([&] {
    for (int r = 0; r < ranks; ++r) {
      Shard shard = shardOf(count, r, ranks);
      if (shard.size() > 0)
        check(nccl().broadcast(bytes + shard.begin * width, bytes + shard.begin * width,
                               shard.size() * width, ncclUint8, r, gathers, stream),
              "ncclBroadcast");
    }
  });
}

} // namespace mt::cuda
