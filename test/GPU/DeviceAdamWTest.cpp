// GPU test of updates on the device (runtime/cuda/DeviceUpdater, kernels/AdamW.cu): each
// gradient's chunk squares and each update of split masters and moments, over several pieces,
// a partial chunk, a clip scale and a chunk that holds a NaN, give the host's adamwUpdate bits,
// in the weight's two device copies and, once settled, in the host state: streamed, and with
// state resident in device memory across updates that are not settled.
#include "runtime/cuda/DeviceUpdater.h"

#include "runtime/AdamW.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/PinnedMemory.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// Parameters of 5M elements (two pieces, a partial chunk), 70000 (two chunks) and 3, in
/// layer 0, and AdamW with weight decay.
mt::plan::Plan planOf() {
  mt::plan::Plan plan;
  int64_t sizes[] = {5000000, 70000, 3};
  for (int p = 0; p < 3; ++p) {
    mt::plan::Parameter *parameter = plan.add_parameters();
    parameter->set_name("w" + std::to_string(p));
    parameter->set_layer(0);
    parameter->mutable_type()->set_dtype(mt::plan::F32);
    parameter->mutable_type()->add_shape(sizes[p]);
  }
  mt::plan::AdamW *adamw = plan.mutable_optimizer();
  adamw->set_lr(1e-3);
  adamw->set_beta1(0.9);
  adamw->set_beta2(0.95);
  adamw->set_eps(1e-8);
  adamw->set_weight_decay(0.1);
  return plan;
}

template <typename T> bool sameBits(const T *a, const T *b, int64_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

} // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("usage: mt-gpu-device-adamw-test (on a machine with a CUDA device)\n");
    return 2;
  }
  mt::plan::Plan plan = planOf();
  // The device's state and the host's reference, from the same draw.
  mt::HostState state(plan, /*streamCopy=*/true), reference(plan, /*streamCopy=*/true);
  state.initializeRandomly(3);
  reference.initializeRandomly(3);
  std::vector<mt::cuda::PinnedMemory::Region> regions;
  for (const mt::LayerBlock &block : state.blocks)
    regions.push_back({block.begin, static_cast<size_t>(block.bytes)});
  mt::cuda::PinnedMemory pinned(regions);
  std::vector<int> parameters = {0, 1, 2};
  mt::cuda::DeviceUpdater updater(state, parameters, pinned);

  cudaStream_t stream;
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t done;
  MT_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  // Each weight's two device copies, filled from the host's high halves as a step's first
  // prefetch fills a persistent weight; the updates keep them current from there.
  std::vector<std::vector<uint16_t *>> copies(parameters.size());
  for (int p : parameters)
    for (int c = 0; c < 2; ++c) {
      const int64_t bytes = state.parameters[p].count * sizeof(uint16_t);
      uint16_t *copy;
      MT_CUDA_CHECK(cudaMalloc(&copy, bytes));
      MT_CUDA_CHECK(
          cudaMemcpy(copy, state.parameters[p].streamCopy, bytes, cudaMemcpyHostToDevice));
      copies[p].push_back(copy);
    }
  int failures = 0, compared = 0;
  uint64_t draw = 12345;
  // One update of p at `step` by `through`, against the reference's: squares, device copies,
  // the host's high halves (and a resident p's whole state) unchanged until the settle, then
  // every half and moment. Unless `settle`, the update is left unsettled, checked by the next.
  auto check = [&](mt::cuda::DeviceUpdater &through, int p, int64_t step, float clip,
                   bool settle = true) {
    const int64_t count = state.parameters[p].count;
    std::vector<float> gradient(count);
    for (float &g : gradient) {
      draw = draw * 6364136223846793005ull + 1442695040888963407ull;
      g = (static_cast<float>(draw >> 40) / static_cast<float>(1 << 24) - 0.5f) * 0.02f;
    }
    if (step == 2 && p == 0)
      gradient[4200000] = NAN;
    float *onDevice;
    MT_CUDA_CHECK(cudaMalloc(&onDevice, count * sizeof(float)));
    MT_CUDA_CHECK(
        cudaMemcpy(onDevice, gradient.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    through.measure(p, onDevice, stream);
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double lr = 1e-3 / static_cast<double>(step);
    mt::AdamWConstants constants(plan.optimizer(), lr, 0.1, step, clip, 0.0f);
    const double squares = through.squares(p);
    const mt::ParameterState &got = state.parameters[p];
    std::vector<uint16_t> before(got.streamCopy, got.streamCopy + count),
        lowBefore(got.masterLow, got.masterLow + count);
    std::vector<float> mBefore(got.firstMoment, got.firstMoment + count);
    through.update(p, onDevice, constants, /*guarded=*/true, copies[p], done);
    // The host's high halves lag until settled: they still hold the last settle's, and so do a
    // resident parameter's low halves and moments.
    MT_CUDA_CHECK(cudaEventSynchronize(done));
    const bool lagging =
        sameBits(before.data(), got.streamCopy, count) &&
        (!through.resident(p) || (sameBits(lowBefore.data(), got.masterLow, count) &&
                                  sameBits(mBefore.data(), got.firstMoment, count)));
    mt::ParameterState &expected = reference.parameters[p];
    const double expectedSquares =
        mt::adamwUpdate(expected.weightsAt(0), expected.firstMoment, expected.secondMoment,
                        gradient.data(), count, constants, /*guarded=*/true);
    MT_CUDA_CHECK(cudaFree(onDevice));
    ++compared;
    if (!settle) {
      if (!lagging) {
        std::printf("FAIL: step %lld, w%d: the host state changed before settling\n",
                    static_cast<long long>(step), p);
        ++failures;
      }
      return;
    }
    through.settle();
    bool copiesMatch = true;
    for (uint16_t *copy : copies[p]) {
      std::vector<uint16_t> copied(count);
      MT_CUDA_CHECK(
          cudaMemcpy(copied.data(), copy, count * sizeof(uint16_t), cudaMemcpyDeviceToHost));
      copiesMatch = copiesMatch && sameBits(copied.data(), expected.streamCopy, count);
    }
    const bool squaresMatch =
        std::isnan(expectedSquares) ? std::isnan(squares) : sameBits(&squares, &expectedSquares, 1);
    const bool stateMatches = sameBits(got.streamCopy, expected.streamCopy, count) &&
                              sameBits(got.masterLow, expected.masterLow, count) &&
                              sameBits(got.firstMoment, expected.firstMoment, count) &&
                              sameBits(got.secondMoment, expected.secondMoment, count);
    if (!squaresMatch || !stateMatches || !copiesMatch || !lagging) {
      std::printf("FAIL: step %lld, w%d: squares %s (%.17g against %.17g), settled state %s, "
                  "device copies %s, host high halves %s before settling\n",
                  static_cast<long long>(step), p, squaresMatch ? "match" : "differ", squares,
                  expectedSquares, stateMatches ? "matches" : "differs",
                  copiesMatch ? "match" : "differ", lagging ? "unchanged" : "changed");
      ++failures;
    }
  };
  // Step 3 clips (the gradient times 0.5); in step 2 a NaN sits in w0's second piece.
  for (int64_t step = 1; step <= 3; ++step)
    for (int p : parameters)
      check(updater, p, step, step == 3 ? 0.5f : 1.0f);
  // An updater whose largest parameter has an odd count (w2's 3 elements): its pieces are
  // rounded up, so that the moments' staging stays aligned.
  mt::cuda::DeviceUpdater odd(state, {2}, pinned);
  check(odd, 2, 4, 1.0f);
  // The NaN's chunk kept its state: the host's guarded update left it, and so did the device.
  std::printf("%d updates on the device over 4 steps (two pieces, partial chunks, a clip, a "
              "NaN's chunk kept, an odd piece): the host's squares, moments, low halves and two "
              "device copies bit for bit, the host's high halves from the settle%s\n",
              compared, failures ? "" : ", every one");
  std::printf("moved %.1f MB across PCIe\n", updater.bytesMoved() / 1e6);

  // Resident state: room for w1's and w2's (70000 and 3 elements, each rounded up to 64, 10
  // bytes an element) but not w0's, which streams beside them. Each takes two updates between
  // settles, so the second starts from the device's state, not the host's.
  const int64_t room = (70016 + 64) * mt::kDeviceUpdateBytes;
  mt::cuda::DeviceUpdater mixed(state, parameters, pinned, room);
  const bool split = !mixed.resident(0) && mixed.resident(1) && mixed.resident(2) &&
                     mixed.residentElements() == 70003 && mixed.deviceBytes() > room;
  if (!split) {
    std::printf("FAIL: resident w0 %d, w1 %d, w2 %d, %lld elements\n", mixed.resident(0),
                mixed.resident(1), mixed.resident(2),
                static_cast<long long>(mixed.residentElements()));
    ++failures;
  }
  const int before = failures, checkedBefore = compared;
  for (int64_t step = 5; step <= 8; ++step)
    for (int p : parameters)
      check(mixed, p, step, step == 7 ? 0.5f : 1.0f, /*settle=*/step % 2 == 0);
  const int64_t moved = mixed.bytesMoved();
  std::printf("resident: %d updates, w1 and w2 resident, w0 streamed, settled every second "
              "step: the host's bits%s; %.1f MB across PCIe\n",
              compared - checkedBefore, failures == before ? ", every one" : "", moved / 1e6);
  for (auto &weight : copies)
    for (uint16_t *copy : weight)
      MT_CUDA_CHECK(cudaFree(copy));
  MT_CUDA_CHECK(cudaEventDestroy(done));
  MT_CUDA_CHECK(cudaStreamDestroy(stream));
  return failures ? 1 : 0;
}
