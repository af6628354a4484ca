// GPU test of chunked pinning: the layer blocks of a host state (12 bytes a parameter, its
// masters split) and a 3 GiB region registered in 1 GiB pieces, copied to the device and
// back intact (through copies split at the pieces) at pinned speed, and a persistent weight's
// pieces sent, and a gradient pulled, through host memory across a piece boundary.
#include "runtime/cuda/PinnedMemory.h"
#include "runtime/HostState.h"
#include "runtime/PlanLoader.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/GradientPuller.h"
#include "runtime/cuda/WeightSender.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

using mt::cuda::PinnedMemory;

namespace {

/// Copies `bytes` at `host` to the device and back on two non-default streams; returns the
/// host-to-device rate in GB/s, or -1 when the round trip changed a byte.
double roundTrip(const PinnedMemory &pinned, char *host, size_t bytes) {
  cudaStream_t h2d, d2h;
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&h2d, cudaStreamNonBlocking));
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&d2h, cudaStreamNonBlocking));
  void *device;
  MT_CUDA_CHECK(cudaMalloc(&device, bytes));
  std::vector<char> original(host, host + bytes);
  auto start = std::chrono::steady_clock::now();
  pinned.copy(device, host, bytes, cudaMemcpyHostToDevice, h2d);
  MT_CUDA_CHECK(cudaStreamSynchronize(h2d));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::memset(host, 0, bytes);
  pinned.copy(device, host, bytes, cudaMemcpyDeviceToHost, d2h);
  MT_CUDA_CHECK(cudaStreamSynchronize(d2h));
  MT_CUDA_CHECK(cudaFree(device));
  MT_CUDA_CHECK(cudaStreamDestroy(h2d));
  MT_CUDA_CHECK(cudaStreamDestroy(d2h));
  return std::memcmp(original.data(), host, bytes) == 0 ? bytes / seconds / 1e9 : -1;
}

} // namespace

int main(int argc, char **argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || argc != 2) {
    std::printf("usage: mt-gpu-pinned-test PLAN.mtp (on a machine with a CUDA device)\n");
    std::fflush(stdout);
    return 2;
  }
  int failures = 0;
  mt::plan::Plan plan = mt::loadPlan(argv[1]);
  mt::HostState state(plan, /*streamCopy=*/true);
  state.initializeRandomly(1);
  std::vector<PinnedMemory::Region> regions;
  for (const mt::LayerBlock &block : state.blocks)
    regions.push_back({block.begin, static_cast<size_t>(block.bytes)});
  int64_t parameters = 0;
  for (const mt::ParameterState &parameter : state.parameters)
    parameters += parameter.count;
  {
    PinnedMemory pinned(regions);
    for (const mt::LayerBlock &block : state.blocks)
      if (roundTrip(pinned, block.begin, block.bytes) < 0) {
        std::printf("FAIL: layer %lld's block changed on its way\n", (long long)block.layer);
        ++failures;
      }
    std::printf("host state: %zu layer blocks pinned in %zu chunks, %.1f bytes per parameter, "
                "each round trip intact\n",
                state.blocks.size(), pinned.chunks(),
                static_cast<double>(state.bytes()) / std::max<int64_t>(1, parameters));
    std::fflush(stdout);
  }

  const size_t bytes = 3ull << 30;
  std::unique_ptr<char[]> big(new char[bytes]);
  for (size_t i = 0; i < bytes; i += 4096)
    big[i] = static_cast<char>(i >> 12);
  PinnedMemory pinned({{big.get(), bytes}});
  double rate = roundTrip(pinned, big.get(), bytes);
  if (rate < 0) {
    std::printf("FAIL: the 3 GiB region changed on its way\n");
    ++failures;
  }
  std::printf("3 GiB registered in %zu chunks: host->device %.1f GB/s\n", pinned.chunks(), rate);

  // A weight whose bf16 copy straddles the first registration's end: each piece is written,
  // then sent, and the device's copy holds every value written.
  {
    auto *copy = reinterpret_cast<uint16_t *>(big.get());
    const int64_t first = (int64_t(1) << 29) - 1000, count = mt::kSendPiece + 3000;
    uint16_t *device;
    MT_CUDA_CHECK(cudaMalloc(&device, (first + count) * sizeof(uint16_t)));
    mt::cuda::WeightSender sender(pinned);
    int pieces = 0;
    sender.send({device}, copy, first, count, [&](int64_t at, int64_t n) {
      for (int64_t i = at; i < at + n; ++i)
        copy[i] = static_cast<uint16_t>(i * 7);
      ++pieces;
    });
    cudaEvent_t crossed;
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&crossed, cudaEventDisableTiming));
    sender.mark(crossed);
    MT_CUDA_CHECK(cudaEventSynchronize(crossed));
    std::vector<uint16_t> back(count);
    MT_CUDA_CHECK(
        cudaMemcpy(back.data(), device + first, count * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    bool intact = true;
    for (int64_t i = 0; i < count; ++i)
      intact = intact && back[i] == static_cast<uint16_t>((first + i) * 7);
    std::printf("a persistent weight across the first chunk's end: %d pieces sent, %s\n", pieces,
                intact ? "intact" : "FAIL: changed on their way");
    failures += intact ? 0 : 1;
    MT_CUDA_CHECK(cudaEventDestroy(crossed));
    MT_CUDA_CHECK(cudaFree(device));
  }
  // A gradient pulled through slots that straddle the first registration's end: every
  // chunk handed over holds the device's values.
  {
    const int64_t slotElements = 1 << 20, count = 5 * slotElements + 123;
    auto *slots = reinterpret_cast<float *>(big.get() + (1ull << 30)) - slotElements * 2 - 7;
    std::vector<float> values(count);
    for (int64_t i = 0; i < count; ++i)
      values[i] = static_cast<float>(i % 1000003);
    float *device;
    MT_CUDA_CHECK(cudaMalloc(&device, count * sizeof(float)));
    MT_CUDA_CHECK(cudaMemcpy(device, values.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    mt::cuda::GradientPuller puller(slots, slotElements, pinned);
    bool intact = true;
    int64_t seen = 0;
    puller.pull(device, count, [&](const float *chunk, int64_t first, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        intact = intact && chunk[i] == values[first + i];
      seen += n;
    });
    intact = intact && seen == count;
    std::printf("a gradient pulled through slots across the first chunk's end: %s\n",
                intact ? "intact" : "FAIL: changed on its way");
    failures += intact ? 0 : 1;
    MT_CUDA_CHECK(cudaFree(device));
  }
  return failures ? 1 : 0;
}
