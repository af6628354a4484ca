// The part of a parameter one data-parallel rank owns: its optimizer state and its share of
// every collective.
#ifndef MT_RUNTIME_SHARD_H
#define MT_RUNTIME_SHARD_H

#include <algorithm>
#include <cstdint>

namespace mt {

/// Elements [begin, end) of a parameter.
struct Shard {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};

/// The part of `count` elements rank `rank` of `ranks` owns: blocks of ceil(count / ranks),
/// the last shorter (or empty), as NCCL's reduce-scatter and all-gather lay them out.
inline int64_t shardBlock(int64_t count, int ranks) { return (count + ranks - 1) / ranks; }
inline Shard shardOf(int64_t count, int rank, int ranks) {
  int64_t block = shardBlock(count, ranks);
  return {std::min(count, block * rank), std::min(count, block * (rank + 1))};
}

} // namespace mt

#endif // MT_RUNTIME_SHARD_H
