// Benchmark: CPU AdamW's rate by where its gradient and its masters' bf16 halves pass through
// host memory. A step lands each gradient in a pinned ring well before the update reads it, so
// the gradient crosses DRAM twice; pulled from the device a chunk at a time into a small
// pinned ring just before the update, the device's DMA writes may stay in the CPU's cache.
#include "runtime/AdamW.h"
#include "runtime/MasterHalves.h"
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

/// Where a chunk's gradient comes from and where its masters' bf16 halves go.
enum class Route {
  Alone,  // no copies: the gradient and split masters in large arrays (--calibrate's rate)
  Landed, // as a step: every gradient lands ahead into a large array; each chunk's bf16
          // halves sent to the device after its update
  Pulled, // each gradient copied into a small ring just before its update; bf16 as Landed
  Whole,  // Pulled, whole fp32 masters and nothing sent: what the halves' crossings cost
};

const char *nameOf(Route route) {
  switch (route) {
  case Route::Alone:
    return "alone (no copies)";
  case Route::Landed:
    return "landed ahead, as a step";
  case Route::Pulled:
    return "pulled into a ring";
  case Route::Whole:
    return "pulled, whole masters";
  }
  return "";
}

struct Bench {
  int64_t params, chunk, slots;
  std::vector<float> param; // whole masters (Whole)
  std::vector<uint16_t> low;
  Pinned<uint16_t> high; // split masters' high halves, which cross
  std::vector<float> m, v;
  Pinned<float> grads, ring;
  mt::cuda::DeviceAllocation deviceGrads, deviceWeights;
  mt::cuda::Stream h2d = mt::cuda::Stream::create(), d2h = mt::cuda::Stream::create();
  std::vector<mt::cuda::Event> landed; // per slot
  mt::plan::AdamW config;

  Bench(int64_t params, int64_t chunk, int64_t slots)
      : params(params), chunk(chunk), slots(slots), param(params, 1.0f), low(params), high(params),
        m(params), v(params), grads(params), ring(chunk * slots),
        deviceGrads(mt::cuda::DeviceAllocation::create(params * 4)),
        deviceWeights(mt::cuda::DeviceAllocation::create(params * 2)) {
    for (int64_t i = 0; i < params; ++i)
      mt::splitMaster(1.0f, high.data[i], low[i]);
    for (int64_t s = 0; s < slots; ++s)
      landed.push_back(mt::cuda::Event::forOrdering());
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
      if (route == Route::Landed)
        MT_CUDA_CHECK(cudaEventSynchronize(each[k]));
      if (route == Route::Pulled || route == Route::Whole) {
        MT_CUDA_CHECK(cudaEventSynchronize(landed[k % slots]));
        grad = ring.data + (k % slots) * chunk;
      }
      mt::MasterWeights masters = route == Route::Whole
                                      ? mt::MasterWeights(param.data() + first)
                                      : mt::MasterWeights(high.data + first, low.data() + first);
      mt::adamwUpdate(masters, m.data() + first, v.data() + first, grad, count, 1e-4, 0.1, config,
                      step);
      if (route == Route::Landed || route == Route::Pulled)
        MT_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<uint16_t *>(deviceWeights.data()) + first,
                                      high.data + first, count * 2, cudaMemcpyHostToDevice, h2d));
      if (route != Route::Alone && route != Route::Landed && k + slots < chunks)
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
  // 2^27 parameters: 2.1 GB of AdamW state, far beyond any L3 here.
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
  const Route routes[] = {Route::Alone, Route::Landed, Route::Pulled, Route::Whole};
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
