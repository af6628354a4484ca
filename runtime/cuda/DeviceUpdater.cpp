// AdamW on the device: the low halves and moments, resident in device memory or crossing in and
// back a piece at a time (two in flight), updated by the host's operations beside the weight's
// device copy.
#include "runtime/cuda/DeviceUpdater.h"

#include "runtime/AdamW.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/PinnedMemory.h"
#include "runtime/cuda/kernels/DeviceAdamW.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace mt::cuda {

namespace {
int64_t chunksOf(int64_t count) { return (count + kAdamWNormChunk - 1) / kAdamWNormChunk; }
/// Elements as laid out on the device, rounded up to 64 so that each array of a piece's or a
/// resident parameter's state (2- and 4-byte elements) starts 128-byte aligned.
int64_t spanOf(int64_t count) { return (count + 63) / 64 * 64; }
/// Elements a piece: kUpdatePiece, or the largest streamed parameter's count.
int64_t pieceFor(int64_t largest) { return spanOf(std::min(kUpdatePiece, largest)); }
/// The two pieces in flight.
int64_t stagingBytes(int64_t piece) { return 2 * piece * kDeviceUpdateBytes; }
} // namespace

DeviceUpdater::StateParts::StateParts(const ParameterState &parameter, char *base, int64_t span,
                                      int64_t first) {
  auto *low = reinterpret_cast<uint16_t *>(base);
  auto *m = reinterpret_cast<float *>(low + span);
  parts[0] = {low, parameter.masterLow + first, 2};
  parts[1] = {m, parameter.firstMoment + first, 4};
  parts[2] = {m + span, parameter.secondMoment + first, 4};
}

void DeviceUpdater::StateParts::cross(const PinnedMemory &pinned, int64_t n, cudaMemcpyKind kind,
                                      cudaStream_t stream) const {
  for (const Part &part : parts)
    pinned.copy(part.device, part.host, n * part.width, kind, stream);
}

DeviceUpdater::StateParts DeviceUpdater::residentParts(int p) const {
  const ParameterState &parameter = state.parameters[p];
  return StateParts(parameter, residentState[p].data(), spanOf(parameter.count), 0);
}

void DeviceUpdater::FreePinned::operator()(double *host) const { cudaFreeHost(host); }

int64_t DeviceUpdater::deviceBytesFor(const HostState &state, const std::vector<int> &parameters) {
  int64_t chunks = 0, largest = 0;
  for (int p : parameters) {
    chunks += chunksOf(state.parameters.at(p).count);
    largest = std::max(largest, state.parameters[p].count);
  }
  // Per piece in flight: low halves, first and second moments.
  return chunks * static_cast<int64_t>(sizeof(double)) + stagingBytes(pieceFor(largest));
}

DeviceUpdater::DeviceUpdater(const HostState &state, const std::vector<int> &parameters,
                             const PinnedMemory &pinned, int64_t residentBytes)
    : state(state), pinned(pinned), at(state.parameters.size(), -1),
      residentState(state.parameters.size()), loaded(state.parameters.size(), false) {
  int64_t chunks = 0, largest = 0;
  for (int p : parameters) {
    const ParameterState &parameter = state.parameters.at(p);
    if (!parameter.streamCopy || !parameter.masterLow || parameter.held.begin != 0 ||
        parameter.held.size() != parameter.count || parameter.owned.size() != parameter.count)
      throw std::logic_error("the device updates whole split masters only");
    at[p] = chunks;
    chunks += chunksOf(parameter.count);
    const int64_t stateBytes = spanOf(parameter.count) * kDeviceUpdateBytes;
    if (stateBytes <= residentBytes) {
      residentState[p] = DeviceAllocation::create(stateBytes);
      residentBytes -= stateBytes;
      bytes += stateBytes;
      residentCount += parameter.count;
    } else {
      largest = std::max(largest, parameter.count);
    }
  }
  bytes += chunks * static_cast<int64_t>(sizeof(double));
  squaresOnDevice = DeviceAllocation::create(chunks * sizeof(double));
  if (largest > 0) { // a parameter streams
    piece = pieceFor(largest);
    bytes += stagingBytes(piece);
    staging = DeviceAllocation::create(stagingBytes(piece));
  }
  double *host = nullptr;
  MT_CUDA_CHECK(cudaMallocHost(&host, std::max<int64_t>(chunks, 1) * sizeof(double)));
  squaresOnHost.reset(host);
}

DeviceUpdater::~DeviceUpdater() {
  for (Stream &stream : streams)
    cudaStreamSynchronize(stream);
}

void DeviceUpdater::measure(int p, const float *gradient, cudaStream_t stream) {
  const int64_t count = state.parameters.at(p).count;
  double *onDevice = reinterpret_cast<double *>(squaresOnDevice.data()) + at.at(p);
  launchChunkSquares(gradient, count, onDevice, stream);
  MT_CUDA_CHECK(cudaMemcpyAsync(squaresOnHost.get() + at[p], onDevice,
                                chunksOf(count) * sizeof(double), cudaMemcpyDeviceToHost, stream));
}

double DeviceUpdater::squares(int p) const {
  const double *chunk = squaresOnHost.get() + at.at(p);
  return sumInOrder({chunk, chunk + chunksOf(state.parameters[p].count)});
}

void DeviceUpdater::update(int p, const float *gradient, const AdamWConstants &constants,
                           bool guarded, const std::vector<uint16_t *> &targets, cudaEvent_t done) {
  std::lock_guard<std::mutex> lock(updating);
  const ParameterState &parameter = state.parameters.at(p);
  if (targets.empty())
    throw std::logic_error("a device update needs the weight's device copy");
  const double *squares = reinterpret_cast<const double *>(squaresOnDevice.data()) + at.at(p);
  unsettled[p] = targets.front();
  Span span{p, Event(), Event()};
  if (timed) { // both streams' pieces after the start
    span.start = Event::forTiming();
    MT_CUDA_CHECK(cudaEventRecord(span.start, streams[0]));
    MT_CUDA_CHECK(cudaStreamWaitEvent(streams[1], span.start));
  }
  // Elements [first, first + n) from their state's device arrays, into every device copy.
  auto updateElements = [&](const StateParts &parts, int64_t first, int64_t n,
                            cudaStream_t stream) {
    uint16_t *high = targets.front() + first;
    launchAdamW(constants, high, parts.low(), parts.m(), parts.v(), gradient, squares, first, n,
                guarded, stream);
    for (size_t t = 1; t < targets.size(); ++t)
      MT_CUDA_CHECK(cudaMemcpyAsync(targets[t] + first, high, n * sizeof(uint16_t),
                                    cudaMemcpyDeviceToDevice, stream));
  };
  if (resident(p)) { // the whole parameter at once, on the first stream
    StateParts parts = residentParts(p);
    if (!loaded[p]) { // its state as the host holds it before the first update
      parts.cross(pinned, parameter.count, cudaMemcpyHostToDevice, streams[0]);
      movedBytes += parameter.count * kDeviceUpdateBytes;
      loaded[p] = true;
    }
    updateElements(parts, 0, parameter.count, streams[0]);
  } else {
    int64_t index = 0;
    for (int64_t first = 0; first < parameter.count; first += piece, ++index) {
      const int64_t n = std::min(piece, parameter.count - first);
      cudaStream_t stream = streams[index % 2];
      // This stream's buffer: the piece it carried two pieces ago has crossed back before
      // anything queued after it on the same stream runs.
      StateParts parts(parameter, staging.data() + (index % 2) * piece * kDeviceUpdateBytes, piece,
                       first);
      parts.cross(pinned, n, cudaMemcpyHostToDevice, stream);
      updateElements(parts, first, n, stream);
      parts.cross(pinned, n, cudaMemcpyDeviceToHost, stream);
      movedBytes += 2 * n * kDeviceUpdateBytes;
    }
  }
  // Both streams' pieces are in by `done`.
  MT_CUDA_CHECK(cudaEventRecord(joined, streams[1]));
  MT_CUDA_CHECK(cudaStreamWaitEvent(streams[0], joined));
  MT_CUDA_CHECK(cudaEventRecord(done, streams[0]));
  if (timed) {
    span.end = Event::forTiming();
    MT_CUDA_CHECK(cudaEventRecord(span.end, streams[0]));
    spans.push_back(std::move(span));
  }
}

std::vector<DeviceUpdater::Span> DeviceUpdater::takeSpans() {
  std::lock_guard<std::mutex> lock(updating);
  return std::exchange(spans, {});
}

void DeviceUpdater::settle() {
  std::lock_guard<std::mutex> lock(updating);
  // After every update enqueued on either stream.
  MT_CUDA_CHECK(cudaEventRecord(joined, streams[1]));
  MT_CUDA_CHECK(cudaStreamWaitEvent(streams[0], joined));
  for (auto [p, copy] : unsettled) {
    const ParameterState &parameter = state.parameters[p];
    pinned.copy(const_cast<uint16_t *>(copy), parameter.streamCopy,
                parameter.count * sizeof(uint16_t), cudaMemcpyDeviceToHost, streams[0]);
    movedBytes += parameter.count * static_cast<int64_t>(sizeof(uint16_t));
    if (resident(p)) {
      residentParts(p).cross(pinned, parameter.count, cudaMemcpyDeviceToHost, streams[0]);
      movedBytes += parameter.count * kDeviceUpdateBytes;
    }
  }
  unsettled.clear();
  wait();
}

void DeviceUpdater::wait() {
  for (Stream &stream : streams)
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

} // namespace mt::cuda
