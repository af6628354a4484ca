// Calibration of the CUDA machine, timed with CUDA events on named, non-default streams: each
// rate the best of a few runs, but the products', which are timed sustained.
#include "runtime/cuda/Calibration.h"

#include "plan/DeviceLayout.h"
#include "plan/DeviceProfile.h"

#include "runtime/AdamW.h"
#include "runtime/HostState.h"
#include "runtime/MasterHalves.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/GradientPuller.h"
#include "runtime/cuda/PinnedMemory.h"
#include "runtime/cuda/WeightSender.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

namespace mt::cuda {

namespace {

/// Seconds of the fastest of `runs` runs of `work`, enqueued on `stream`.
double fastest(int runs, cudaStream_t stream, const std::function<void()> &work) {
  cudaEvent_t start, stop;
  MT_CUDA_CHECK(cudaEventCreate(&start));
  MT_CUDA_CHECK(cudaEventCreate(&stop));
  work(); // warm-up: algorithm choice, first-touch
  float best = 1e30f;
  for (int i = 0; i < runs; ++i) {
    MT_CUDA_CHECK(cudaEventRecord(start, stream));
    work();
    MT_CUDA_CHECK(cudaEventRecord(stop, stream));
    MT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms;
    MT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, ms);
  }
  MT_CUDA_CHECK(cudaEventDestroy(start));
  MT_CUDA_CHECK(cudaEventDestroy(stop));
  return best / 1e3;
}

/// FLOPs a second of a transformer layer's products as a training step runs them, kept up
/// for over a second: a burst of one large square product runs at clocks a step does not
/// keep (an H100: 800 TFLOP/s in a burst, 657-720 within steps). The layer (hidden 4096,
/// feed-forward 14336, 16384 tokens, weights [out, in] as PyTorch keeps them): each
/// projection forward twice (the recompute), then its input's gradient (bf16) and its
/// weight's (fp32). `inputs` and `outputs`: device memory of at least 1 GiB each, `inputs`
/// holding random bf16 values.
double sustainedProductRate(CublasLt &blas, const void *inputs, void *outputs,
                            cudaStream_t stream) {
  const int64_t tokens = 16384, hidden = 4096, ffn = 14336;
  // Each projection: [tokens, in] x [out, in]^T -> [tokens, out].
  const int64_t projections[][2] = {
      {hidden, 3 * hidden}, {hidden, hidden}, {hidden, 2 * ffn}, {ffn, hidden}};
  double flops = 0; // a layer's
  for (const auto &[in, out] : projections)
    flops += 4 * 2.0 * tokens * in * out;
  const int timedLayers = 24;
  auto layers = [&] {
    for (int i = 0; i < timedLayers; ++i)
      for (const auto &[in, out] : projections) {
        MatmulShape forward{tokens, out, in, false, true, 1, 0, 0, 0, CUDA_R_16BF};
        MatmulShape inputGradient{tokens, in, out, false, false, 1, 0, 0, 0, CUDA_R_16BF};
        MatmulShape weightGradient{out, in, tokens, true, false, 1, 0, 0, 0, CUDA_R_32F};
        for (int pass = 0; pass < 2; ++pass)
          blas.matmul(forward, inputs, inputs, outputs, false, stream);
        blas.matmul(inputGradient, inputs, inputs, outputs, false, stream);
        blas.matmul(weightGradient, inputs, inputs, outputs, false, stream);
      }
  };
  // fastest's untimed first run (about a second) brings the GPU to the clocks it keeps under
  // load; the timed one follows.
  return timedLayers * flops / fastest(1, stream, layers);
}

} // namespace

bool deviceAvailable() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

std::string calibrateDevice(const std::string &path) {
  cudaDeviceProp properties;
  MT_CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
  cudaStream_t compute, h2d, d2h;
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&h2d, cudaStreamNonBlocking));
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&d2h, cudaStreamNonBlocking));

  // bf16 GEMM on random operands (zeros would draw less power and run faster).
  const int64_t size = 8192, elements = size * size;
  std::vector<uint16_t> host(elements);
  std::mt19937 random(5);
  for (uint16_t &x : host)
    x = static_cast<uint16_t>(0x3c00 + (random() & 0x3ff)) ^ static_cast<uint16_t>((random() & 1) << 15);
  void *a, *b, *c;
  MT_CUDA_CHECK(cudaMalloc(&a, elements * 2));
  MT_CUDA_CHECK(cudaMalloc(&b, elements * 2));
  MT_CUDA_CHECK(cudaMalloc(&c, elements * 2));
  MT_CUDA_CHECK(cudaMemcpy(a, host.data(), elements * 2, cudaMemcpyHostToDevice));
  MT_CUDA_CHECK(cudaMemcpy(b, host.data(), elements * 2, cudaMemcpyHostToDevice));
  CublasLt blas;
  MatmulShape shape{size, size, size, false, true, 1, 0, 0, 0, CUDA_R_16BF};
  double burst = 2.0 * size * size * size /
                 fastest(5, compute, [&] { blas.matmul(shape, a, b, c, false, compute); });
  double memory =
      2.0 * elements * 2 / fastest(5, compute, [&] {
        MT_CUDA_CHECK(cudaMemcpyAsync(c, a, elements * 2, cudaMemcpyDeviceToDevice, compute));
      });

  // Pinned copies of 1 GiB, each direction alone and both at once, from host memory pinned as
  // the runtime pins its own (each buffer one registration).
  const size_t bytes = 1ull << 30;
  std::unique_ptr<char, decltype(&std::free)> hostBuffers(
      static_cast<char *>(std::aligned_alloc(4096, 2 * bytes)), &std::free);
  if (!hostBuffers)
    throw CudaError("calibration: no 2 GiB of host memory for its copies");
  void *pinnedIn = hostBuffers.get(), *pinnedOut = hostBuffers.get() + bytes;
  PinnedMemory pinned({{pinnedIn, bytes}, {pinnedOut, bytes}});
  void *deviceIn, *deviceOut;
  std::memset(pinnedIn, 1, bytes);
  MT_CUDA_CHECK(cudaMalloc(&deviceIn, bytes));
  MT_CUDA_CHECK(cudaMalloc(&deviceOut, bytes));
  // The profile's product rate: a layer's products, sustained, on random operands.
  for (int64_t at = 0; at + elements * 2 <= static_cast<int64_t>(bytes); at += elements * 2)
    MT_CUDA_CHECK(cudaMemcpy(static_cast<char *>(deviceIn) + at, host.data(), elements * 2,
                             cudaMemcpyHostToDevice));
  double gemm = sustainedProductRate(blas, deviceIn, deviceOut, compute);
  auto toDevice = [&] {
    MT_CUDA_CHECK(cudaMemcpyAsync(deviceIn, pinnedIn, bytes, cudaMemcpyHostToDevice, h2d));
  };
  auto toHost = [&] {
    MT_CUDA_CHECK(cudaMemcpyAsync(pinnedOut, deviceOut, bytes, cudaMemcpyDeviceToHost, d2h));
  };
  double in = bytes / fastest(3, h2d, toDevice);
  double out = bytes / fastest(3, d2h, toHost);
  // Both at once: d2h starts when h2d does and h2d's timing ends after both are done.
  cudaEvent_t started, finished;
  MT_CUDA_CHECK(cudaEventCreate(&started));
  MT_CUDA_CHECK(cudaEventCreate(&finished));
  double both = fastest(3, h2d, [&] {
    MT_CUDA_CHECK(cudaEventRecord(started, h2d));
    MT_CUDA_CHECK(cudaStreamWaitEvent(d2h, started));
    toDevice();
    toHost();
    MT_CUDA_CHECK(cudaEventRecord(finished, d2h));
    MT_CUDA_CHECK(cudaStreamWaitEvent(h2d, finished));
  });
  double duplex = std::min(1.0, (bytes / both) / std::min(in, out));

  // AdamW as a step runs it, on split masters, over state far larger than the CPU's caches
  // (2.4 GB; hosts here have up to 300 MiB of L3): the rate the host's memory allows, which
  // the cost model slows by the step's copies (adamwSlowdown). Over 16M parameters it ran
  // from a large L3 at 6.0 G a second where the memory gave 5.1 (docs/PERFORMANCE.md).
  const int64_t params = 1 << 27;
  plan::AdamW adamw;
  adamw.set_beta1(0.9);
  adamw.set_beta2(0.95);
  adamw.set_eps(1e-8);
  std::vector<float> m(params), v(params), grad(params, 0.01f);
  std::vector<uint16_t> high(params), low(params);
  for (int64_t i = 0; i < params; ++i)
    splitMaster(1.0f, high[i], low[i]);
  // The fastest of three steps' updates (steps `first` on), each reading the gradient
  // through `read`, its masters' high halves (bf16 copies) in `copies`, in parameters a
  // second.
  using Update = std::function<void(const float *grad, int64_t first, int64_t count)>;
  auto adamRate = [&](int first, uint16_t *copies,
                      const std::function<void(const Update &)> &read) {
    double rate = 0;
    for (int run = first; run < first + 3; ++run) {
      auto start = std::chrono::steady_clock::now();
      read([&](const float *grad, int64_t from, int64_t count) {
        adamwUpdate(MasterWeights(copies + from, low.data() + from), m.data() + from,
                    v.data() + from, grad, count, 1e-3, 0.1, adamw, run);
      });
      rate = std::max(
          rate,
          params / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return rate;
  };
  double adam =
      adamRate(1, high.data(), [&](const Update &update) { update(grad.data(), 0, params); });
  // Again with the gradient pulled from device memory through the runtime's slots, each
  // chunk just before its update (the plan's pull_gradients): the rate tells how much of the
  // gradient the host's I/O writes leave in the CPU's cache (pulledGradientCacheShare). One
  // gradient of them all, so its first chunk's wait, which the cost model charges each
  // tensor, weighs nothing here. The 1 GiB copy buffers hold the gradient and the slots.
  MT_CUDA_CHECK(cudaMemcpy(deviceIn, grad.data(), params * sizeof(float), cudaMemcpyHostToDevice));
  double pulledAdam = 0;
  {
    GradientPuller puller(static_cast<float *>(pinnedOut), kPullChunk, pinned); // before they go
    pulledAdam = adamRate(4, high.data(), [&](const Update &update) {
      puller.pull(static_cast<const float *>(deviceIn), params, update);
    });
  }
  // Again with each piece's bf16 copy, written into pinned memory, sent to device memory as
  // the next is written (persistent weights), until the last has crossed: for the table, what
  // the crossings' reads of host memory cost those updates alone (within a step the cost
  // model counts them with the step's other copies).
  double sentAdam = 0;
  {
    WeightSender sender(pinned);
    const std::vector<uint16_t *> targets{static_cast<uint16_t *>(deviceOut)};
    auto *copies = static_cast<uint16_t *>(pinnedIn);
    std::copy(high.begin(), high.end(), copies);
    Event crossed = Event::forOrdering();
    sentAdam = adamRate(7, copies, [&](const Update &update) {
      sender.send(targets, copies, 0, params,
                  [&](int64_t at, int64_t count) { update(grad.data() + at, at, count); });
      sender.mark(crossed);
      MT_CUDA_CHECK(cudaEventSynchronize(crossed));
    });
  }
  size_t freeBytes, totalBytes;
  MT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));

  for (void *pointer : {a, b, c, deviceIn, deviceOut})
    MT_CUDA_CHECK(cudaFree(pointer));
  for (cudaStream_t stream : {compute, h2d, d2h})
    MT_CUDA_CHECK(cudaStreamDestroy(stream));
  MT_CUDA_CHECK(cudaEventDestroy(started));
  MT_CUDA_CHECK(cudaEventDestroy(finished));

  DeviceProfile profile{properties.name,
                        gemm,
                        memory,
                        in,
                        out,
                        duplex,
                        adam,
                        static_cast<double>(freeBytes),
                        static_cast<double>(physicalHostBytes())};
  profile.hostAdamPulledParamsPerSecond = pulledAdam;
  std::ofstream file(path);
  file << deviceProfileJson(profile);
  if (!file)
    throw CudaError("cannot write " + path);
  std::ostringstream table;
  table << properties.name << ", measured\n"
        << "  bf16 GEMM 8192^3 (random data)  " << burst / 1e12 << " TFLOP/s, best of 5\n"
        << "  a layer's products, sustained   " << gemm / 1e12 << " TFLOP/s (the profile's)\n"
        << "  device memory copy              " << memory / 1e9 << " GB/s\n"
        << "  pinned host->device             " << in / 1e9 << " GB/s\n"
        << "  pinned device->host             " << out / 1e9 << " GB/s\n"
        << "  both at once                    " << bytes / both / 1e9 << " GB/s each (duplex "
        << duplex << ")\n"
        << "  CPU AdamW (2.1 GB, split)       " << adam / 1e9 << " G params/s\n"
        << "  the same, gradients pulled      " << pulledAdam / 1e9
        << " G params/s (of a pulled gradient, " << 100 * pulledGradientCacheShare(profile)
        << "% read from the CPU's cache)\n"
        << "  the same, copies sent           " << sentAdam / 1e9
        << " G params/s (persistent weights' updates)\n"
        << "  free device memory              " << freeBytes / double(1 << 30) << " GiB\n"
        << "profile written to " << path << "\n";
  return table.str();
}

} // namespace mt::cuda
