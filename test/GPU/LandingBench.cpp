// Benchmark: CPU AdamW's rate by where its gradient and its bf16 copy pass through host
// memory. A step lands each gradient in a pinned ring well before the update reads it, so the
// gradient crosses DRAM twice; pulled from the device a chunk at a time into a small pinned
// ring just before the update, the device's DMA writes may stay in the CPU's last-level cache;
// fp32 masters sent to the device right after their update (without a bf16 copy) may be too.
#include "runtime/AdamW.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaHandles.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/// Pinned host memory, freed at scope exit.
template <typename T> struct Pinned {
  T *data = nullptr;
  explicit Pinned(int64_t count) {
    MT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void **>(&data), (count + 8) * sizeof(T),
                                cudaHostAllocDefault));
    std::fill(data, data + count + 8, T());
  }
  ~Pinned() { cudaFreeHost(data); }
};

/// Where a chunk's gradient comes from and where its bf16 copy goes.
enum class Route {
  Alone,   // no copies: the gradient and the bf16 copy in large arrays (--calibrate's rate)
  Landed,  // as a step: every gradient lands ahead into a large array; bf16 copies streamed
           // to a large array and sent on to the device after each chunk's update
  Pulled,  // each gradient copied into a small ring just before its update; bf16 as Landed
  Through, // Pulled, and each bf16 copy written through the cache to a small ring and sent
  Bare,    // Pulled, no bf16 copy and nothing sent: what Sent's crossings cost is the difference
  Sent,    // Pulled, no bf16 copy: each chunk's fp32 masters sent right after its update
};

const char *nameOf(Route route) {
  switch (route) {
  case Route::Alone:
    return "alone (no copies)";
  case Route::Landed:
    return "landed ahead, as a step";
  case Route::Pulled:
    return "pulled into a ring";
  case Route::Through:
    return "pulled, bf16 through a ring";
  case Route::Bare:
    return "pulled, no bf16 copy";
  case Route::Sent:
    return "pulled, masters sent";
  }
  return "";
}

struct Bench {
  int64_t params, chunk, slots;
  Pinned<float> param; // pinned: the Sent route copies from it
  std::vector<float> m, v;
  Pinned<float> grads, ring;
  Pinned<uint16_t> copies, copyRing;
  mt::cuda::DeviceAllocation deviceGrads, deviceWeights;
  mt::cuda::Stream h2d = mt::cuda::Stream::create(), d2h = mt::cuda::Stream::create();
  std::vector<mt::cuda::Event> landed, sent; // per slot
  mt::plan::AdamW config;

  Bench(int64_t params, int64_t chunk, int64_t slots)
      : params(params), chunk(chunk), slots(slots), param(params), m(params), v(params),
        grads(params), ring(chunk * slots), copies(params), copyRing(chunk * slots),
        deviceGrads(mt::cuda::DeviceAllocation::create(params * 4)),
        deviceWeights(mt::cuda::DeviceAllocation::create(params * 4)) {
    std::fill(param.data, param.data + params, 1.0f);
    for (int64_t s = 0; s < slots; ++s) {
      landed.push_back(mt::cuda::Event::forOrdering());
      sent.push_back(mt::cuda::Event::forOrdering());
    }
    std::vector<float> values(params, 0.01f);
    MT_CUDA_CHECK(cudaMemcpy(deviceGrads.get(), values.data(), params * 4, cudaMemcpyHostToDevice));
    std::fill(grads.data, grads.data + params, 0.01f);
    config.set_beta1(0.9);
    config.set_beta2(0.95);
    config.set_eps(1e-8);
  }

  int64_t countOf(int64_t k) const { return std::min(chunk, params - k * chunk); }

  /// Issues chunk k's gradient copy: into the large array (Landed) or its ring slot.
  void pull(Route route, int64_t k) {
    float *to = route == Route::Landed ? grads.data + k * chunk : ring.data + (k % slots) * chunk;
    MT_CUDA_CHECK(cudaMemcpyAsync(to, reinterpret_cast<float *>(deviceGrads.data()) + k * chunk,
                                  countOf(k) * 4, cudaMemcpyDeviceToHost, d2h));
    if (route != Route::Landed)
      MT_CUDA_CHECK(cudaEventRecord(landed[k % slots], d2h));
  }

  /// One pass over every parameter; returns parameters a second.
  double run(Route route, int64_t step) {
    const int64_t chunks = (params + chunk - 1) / chunk;
    std::vector<mt::cuda::Event> each; // Landed: per chunk
    auto start = Clock::now();
    if (route == Route::Landed) {
      // Every gradient is issued at once, as the backward offloads them: PCIe runs far ahead
      // of the updates, and each chunk's event says when it landed.
      for (int64_t k = 0; k < chunks; ++k) {
        each.push_back(mt::cuda::Event::forOrdering());
        pull(route, k);
        MT_CUDA_CHECK(cudaEventRecord(each[k], d2h));
      }
    } else if (route != Route::Alone) {
      for (int64_t k = 0; k < std::min(slots, chunks); ++k)
        pull(route, k);
    }
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t first = k * chunk, count = countOf(k);
      const float *grad = grads.data + first;
      // The bf16 ring is offset by one element: unaligned, the update stores through the
      // cache instead of streaming to memory.
      uint16_t *copy = copies.data + first;
      if (route == Route::Landed)
        MT_CUDA_CHECK(cudaEventSynchronize(each[k]));
      if (route == Route::Pulled || route == Route::Through || route == Route::Bare ||
          route == Route::Sent) {
        MT_CUDA_CHECK(cudaEventSynchronize(landed[k % slots]));
        grad = ring.data + (k % slots) * chunk;
      }
      if (route == Route::Through) {
        MT_CUDA_CHECK(cudaEventSynchronize(sent[k % slots]));
        copy = copyRing.data + 1 + (k % slots) * chunk;
      }
      if (route == Route::Bare || route == Route::Sent) {
        mt::adamwUpdate(param.data + first, m.data() + first, v.data() + first, grad, count, 1e-4,
                        0.1, config, step);
        if (route == Route::Sent)
          MT_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<float *>(deviceWeights.data()) + first,
                                        param.data + first, count * 4, cudaMemcpyHostToDevice,
                                        h2d));
        if (k + slots < chunks)
          pull(route, k + slots);
        continue;
      }
      mt::adamwUpdate(param.data + first, m.data() + first, v.data() + first, grad, count, 1e-4,
                      0.1, config, step, copy);
      if (route == Route::Alone)
        continue;
      MT_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<uint16_t *>(deviceWeights.data()) + first,
                                    copy, count * 2, cudaMemcpyHostToDevice, h2d));
      if (route == Route::Through)
        MT_CUDA_CHECK(cudaEventRecord(sent[k % slots], h2d));
      if ((route == Route::Pulled || route == Route::Through) && k + slots < chunks)
        pull(route, k + slots);
    }
    MT_CUDA_CHECK(cudaStreamSynchronize(h2d));
    MT_CUDA_CHECK(cudaStreamSynchronize(d2h));
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return params / seconds;
  }
};

} // namespace

int main(int argc, char **argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  // 2^27 parameters: 2.4 GB of AdamW state, far beyond any L3 here.
  const int64_t params = argc > 1 ? std::atoll(argv[1]) : (int64_t{1} << 27);
  const int64_t slots = 4;
  std::printf("CPU AdamW over %.0fM parameters (%s), best of 3 passes, G parameters a second\n",
              params / 1e6, mt::adamwVectorUnit());
  std::printf("%-30s", "chunk (parameters)");
  std::vector<int64_t> chunks;
  for (int a = 2; a < argc; ++a)
    chunks.push_back(std::atoll(argv[a]) << 10);
  if (chunks.empty())
    chunks = {int64_t{1} << 20, int64_t{1} << 22, int64_t{1} << 24};
  for (int64_t chunk : chunks)
    std::printf("%10lldK", static_cast<long long>(chunk >> 10));
  std::printf("\n");
  const Route routes[] = {Route::Alone,   Route::Landed, Route::Pulled,
                          Route::Through, Route::Bare,   Route::Sent};
  const int kinds = sizeof routes / sizeof routes[0];
  std::vector<std::vector<double>> rates(kinds, std::vector<double>(chunks.size()));
  for (size_t c = 0; c < chunks.size(); ++c) {
    Bench bench(params, chunks[c], slots);
    for (int r = 0; r < kinds; ++r)
      for (int64_t step = 1; step <= 3; ++step)
        rates[r][c] = std::max(rates[r][c], bench.run(routes[r], step));
  }
  for (int r = 0; r < kinds; ++r) {
    std::printf("%-30s", nameOf(routes[r]));
    for (double rate : rates[r])
      std::printf("%11.2f", rate / 1e9);
    std::printf("\n");
  }
  return 0;
}
