// How a plan lays values out in device memory, for the compiler that sizes the arena and the
// reserve beside it and the backend that allocates them: both must count alike.
#ifndef MT_PLAN_DEVICELAYOUT_H
#define MT_PLAN_DEVICELAYOUT_H

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mt {

/// Every device buffer starts on this boundary and takes a whole number of it.
constexpr int64_t kDeviceAlignment = 256;
inline int64_t alignToDevice(int64_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

/// Token ids are int64 on the device, whatever the plan's input type.
constexpr int64_t kTokenBytes = 8;

/// The most partial results per output a device reduction splits its reduced extent into:
/// what the kernels use and what the compiler reserves scratch for (passes/DeviceReserve).
constexpr int64_t kMaxChunks = 256;

/// The fewest layers' gradients the ring holds (a layer's land while the two before
/// it are updated), and what a plan without a depth of its own gets.
constexpr int64_t kLeastGradientRingLayers = 3;

/// Pulled gradients (a plan's pull_gradients) cross in chunks of up to 4Mi elements (16 MB)
/// through four pinned host slots: on the H200 machine's host, chunks that small stayed in the
/// last-level cache from the DMA's write to the update's read, where 64 MB chunks no longer
/// did (mt-gpu-landing-bench; docs/PERFORMANCE.md). How much stays is the host's
/// (pulledGradientCacheShare).
constexpr int64_t kPullChunk = int64_t{1} << 22;
constexpr int kPullSlots = 4;
/// Persistent weights' updates cross a piece of this many elements at a time as the update
/// writes them (runtime/cuda/WeightSender; the cost model pipelines the two alike): large
/// enough that a copy's issue costs nothing beside its update (about a millisecond of AdamW),
/// small enough that the last piece's crossing adds little.
constexpr int64_t kSendPiece = int64_t{1} << 22;
/// Device memory the pulled gradients' ring leaves free beside the plan's: cuDNN's own
/// workspace, for engines asking more than the plan's scratch, comes from it (mt-fit-step
/// leaves it out of the ring's room too).
constexpr int64_t kPullMargin = int64_t{1} << 30;
/// The device memory the device's updates leave free when they keep their state resident:
/// cuDNN's margin, and as much again for what CUDA's libraries allocate once steps run.
constexpr int64_t kResidentMargin = 2 * kPullMargin;

/// Updates on the device (mt-run --device-updates): the elements of a parameter's state that
/// cross at once, two pieces in flight, and the bytes an element that cross each way: its
/// low half and moments (its high half is the weight's device copy).
constexpr int64_t kUpdatePiece = int64_t{1} << 22;
constexpr int64_t kDeviceUpdateBytes = 10;
/// Whether a plan updating `count` of its `layers` layer blocks on the device updates the
/// block at place `layer` of the step's read order there: the count spread evenly over the
/// blocks, the last block among them. Spread, the device's updates start with the backward's
/// first landings and run beside the host's; the first blocks alone (whose gradients land
/// last) left the device idle until late and then kept the next forward waiting for it (a
/// 265 ms wait in a 1.18 s step of the 3.82B model, 12 blocks of 32 on the device).
inline bool updatesLayerOnDevice(int64_t layer, int64_t layers, int64_t count) {
  return layers > 0 && (layer + 1) * count / layers > layer * count / layers;
}
/// Each update's first chunk: 1Mi elements (4 MB), the next ones twice the one before. AdamW
/// splits an update into 64Ki-element pieces over its threads: a first chunk smaller would
/// leave a 16-core host's threads idle, one larger keep the update waiting longer.
constexpr int64_t kFirstPull = int64_t{1} << 20;

/// The bytes of a gradient ring `depth` layers deep, its unit the largest layer's
/// gradients (`unitBytes`, the prologue and epilogue's together counting as one layer): at
/// most every gradient (`totalBytes`), each then in a slot of its own.
inline int64_t gradientRingBytes(int64_t depth, int64_t unitBytes, int64_t totalBytes) {
  if (depth <= 0 || unitBytes <= 0)
    return 0;
  return depth >= (totalBytes + unitBytes - 1) / unitBytes ? totalBytes : depth * unitBytes;
}

/// Where a step's gradients land in a ring of `capacity` bytes, given their bytes in landing
/// order: each after the one before, back at the start where it would pass the end. Per
/// gradient, [begin, end). A gradient may land only once the updates of those whose bytes it
/// overlaps have run: the earlier ones of its step, the later ones of the step before. The
/// runtime places each parameter's gradient, the compiler's cost model each layer's together.
inline std::vector<std::pair<int64_t, int64_t>> placeInRing(const std::vector<int64_t> &bytes,
                                                            int64_t capacity) {
  std::vector<std::pair<int64_t, int64_t>> places;
  int64_t at = 0;
  for (int64_t size : bytes) {
    if (at + size > capacity)
      at = 0;
    places.push_back({at, at + size});
    at += size;
  }
  return places;
}

/// Where each chunk a pulled gradient of `count` >= 0 elements crosses in begins, through
/// slots of `slotElements` > 0 (begins.back() == count): the first kFirstPull elements (or a
/// slot's, or all of a smaller gradient), each next twice the one before up to a slot's. An
/// update starts once its first chunk has crossed, and PCIe, over twice AdamW's rate, stays
/// ahead of it from there.
inline std::vector<int64_t> pullChunks(int64_t count, int64_t slotElements) {
  std::vector<int64_t> begins{0};
  if (count > 0 && slotElements <= 0)
    throw std::invalid_argument("pullChunks: no slot to pull " + std::to_string(count) +
                                " elements through");
  for (int64_t size = std::min(kFirstPull, slotElements); begins.back() < count;
       size = std::min(size * 2, slotElements))
    begins.push_back(std::min(count, begins.back() + size));
  return begins;
}

/// Why `dims` cannot be a tensor's: a negative dimension, or more elements than bytes can
/// count (at 8 bytes an element); "" when they can. What the importer, the compiler's
/// --input-shape and the plan loader all refuse.
template <typename Dims> std::string dimensionsError(const Dims &dims) {
  constexpr int64_t kMostElements = std::numeric_limits<int64_t>::max() / 8;
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return "has a negative dimension (" + std::to_string(d) + ")";
    if (d > 0 && elements > kMostElements / d)
      return "has more elements than sizes can count";
    elements *= d;
  }
  return "";
}

/// A constant's element on the device: reals in fp32, integers at their width.
inline int64_t constantElementBytes(bool real, int64_t bitWidth) {
  return real ? 4 : std::max<int64_t>(1, bitWidth / 8);
}

} // namespace mt

#endif // MT_PLAN_DEVICELAYOUT_H
