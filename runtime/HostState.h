// The model state in host memory: fp32 master weights and AdamW's two fp32 moments, 12 bytes a
// parameter, laid out contiguously per layer so that a layer's weights move in one copy and
// its update touches one block; for a device, the masters split so that one half is the bf16
// copy it streams.
#ifndef MT_RUNTIME_HOSTSTATE_H
#define MT_RUNTIME_HOSTSTATE_H

#include "plan/plan.pb.h"
#include "runtime/AdamW.h"
#include "runtime/Shard.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mt {

/// The memory the kernel says a new allocation can take without swapping (MemAvailable), or
/// -1 where it does not say.
int64_t availableHostBytes();
/// The host's physical memory in bytes.
int64_t physicalHostBytes();

/// One parameter's arrays: the masters of the elements `held`, the moments of the elements
/// `owned`. Owned is all `count` elements unless the state is one data-parallel rank's, whose
/// shard it is; held is all of them, or the shard when the rank's masters are sharded. The
/// masters are whole floats (`master`), or split into halves (MasterHalves.h): `streamCopy`,
/// the bf16 copy the device streams, and `masterLow`; then `master` is null.
struct ParameterState {
  float *master = nullptr;                               // element held.begin onwards
  float *firstMoment = nullptr, *secondMoment = nullptr; // element owned.begin onwards
  uint16_t *streamCopy = nullptr, *masterLow = nullptr;  // like master, where split
  int64_t count = 0;
  Shard held, owned;
  int64_t layer = -1; // the layer whose prefetch streams it; -1 for prologue and epilogue

  /// Held masters [first, first + n) (counted from held.begin) as floats into `to`, and
  /// from `from` into the state, whichever way it keeps them.
  void readMasters(int64_t first, int64_t n, float *to) const;
  void writeMasters(int64_t first, int64_t n, const float *from);
  /// Every held master as floats.
  std::vector<float> masters() const;
  /// Where AdamW finds the masters from held element `first` on.
  MasterWeights weightsAt(int64_t first) const;
};

/// `bytes` of host memory to pin for the device, page-aligned and in whole pages; a block of
/// 2 MiB or more asks the kernel for transparent huge pages: a 3.82B model's 51 GB of state is
/// then 25 thousand pages to fault in and to pin instead of 12 million (a hint; where huge
/// pages are off, 4 KiB pages). Null when the memory is not there; freed with std::free.
char *allocateHostBlock(int64_t bytes);

/// One layer's block of host memory: its (held) masters, then its (owned) first and second
/// moments, each contiguous, on pages of its own; split masters' high halves (the bf16 copies)
/// first, then their low halves. The CUDA backend pins blocks in chunks.
struct LayerBlock {
  int64_t layer;
  char *begin;
  int64_t bytes;
};

class HostState {
public:
  /// What a data-parallel rank's state holds besides the moments of its shards: every
  /// master (the host backend computes with them), or its shards' alone (the device gathers
  /// the rest), 12 / ranks bytes a parameter.
  enum class Masters { Replicated, Sharded };

  /// Lays out every plan parameter; with `streamCopy`, its masters split into halves, the
  /// high one the bf16 copy a device streams. As rank `rank` of `ranks` data-parallel
  /// ranks, the state holds the AdamW moments of the rank's shard (shardOf) of each
  /// parameter only, and its masters as `masters` says.
  HostState(const plan::Plan &plan, bool streamCopy, int rank = 0, int ranks = 1,
            Masters masters = Masters::Replicated);

  /// Initial weights from the files the plan names (relative to `planDir`), converted to fp32:
  /// the elements held. Throws naming the parameter and file when bytes are missing.
  void loadInitialWeights(const std::string &planDir);
  /// Weights drawn from N(0, 0.02) for matrices, ones for vectors (norm weights) except
  /// biases (names ending in "bias"), which start at zero: the elements held, the same on
  /// every rank.
  void initializeRandomly(uint64_t seed);
  /// Turns split masters into whole ones in place, a layer block at a time (its halves copied
  /// aside first: the largest block's 4 bytes a parameter beside the state), once no update
  /// runs and no device reads the copies any more: weights saved at the end then need no fp32
  /// copy of every master. The state keeps no bf16 copies after it.
  void joinMasters();

  const plan::Plan &plan;
  std::vector<ParameterState> parameters; // in the plan's parameter order
  std::vector<LayerBlock> blocks;         // in layer order, prologue and epilogue first
  int64_t bytes() const;

private:
  struct Free {
    void operator()(char *block) const;
  };
  /// Page-aligned and page-sized, so that registering one block with the CUDA driver never
  /// touches a page of another.
  std::vector<std::unique_ptr<char, Free>> storage;
};

} // namespace mt

#endif // MT_RUNTIME_HOSTSTATE_H
