// The checkpoint format's pieces, shared by its reader (Checkpoint.cpp) and its writer
// (CheckpointWriter.cpp): the state file's layout, its checksum, and the folders' names.
#ifndef MT_RUNTIME_TRAIN_CHECKPOINTFILES_H
#define MT_RUNTIME_TRAIN_CHECKPOINTFILES_H

#include <cstdint>
#include <string>
#include <vector>

namespace mt {

class HostState;

namespace checkpoint {

/// Format 1 hashed the state file in 64 MiB chunks of the file; format 2 hashes each
/// parameter's arrays in pieces of at most 64 MiB, so that a piece is hashed as it is written,
/// whichever order the pieces go in. The reader takes both.
constexpr int kFormat = 2;
constexpr int64_t kPieceBytes = 64 << 20;
/// Split masters pass between memory and the file through a buffer of this many bytes per
/// thread (a multiple of 4), not a whole piece: resuming beside a state that fills the host.
constexpr int64_t kJoinedBytes = 1 << 20;
constexpr const char *kStateFile = "state.bin", *kManifestFile = "manifest.json";

/// 4 interleaved lanes of 64-bit FNV-1a over 32-bit words: a word's lane is its index mod 4,
/// so the value does not depend on how the bytes arrive (every piece is whole words).
struct ChunkHash {
  uint64_t lanes[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9ce484222325cbf2ull,
                       0x2325cbf29ce48422ull};
  uint64_t words = 0;
  void add(const char *bytes, int64_t count);
  uint64_t value() const;
};

/// The file's checksum from its pieces' hashes, in file order.
std::string combine(const std::vector<uint64_t> &hashes);

/// A range of the state file and the memory it holds: a parameter's master, first or second
/// moment, or (Piece) a part of one. Split masters (HostState) have no fp32 bytes in memory:
/// `data` is null and `high`, `low` point at the halves of the segment's first master.
struct Segment {
  char *data;
  int64_t bytes, offset;
  int parameter;
  uint16_t *high = nullptr, *low = nullptr;
};

/// `bytes` of `segment` from its byte `at` on (a multiple of 4 in split masters).
Segment partOf(const Segment &segment, int64_t at, int64_t bytes);
/// The segment's bytes as the file holds them, into `to` (split masters joined; `to` and
/// `from` below aligned for floats, as allocations are).
void readSegment(const Segment &segment, char *to);
/// The file's bytes `from` into the segment's memory (split masters split).
void writeSegment(const Segment &segment, const char *from);

/// The state file's arrays in file order: each parameter's master, first and second moment.
/// Throws for a data-parallel rank's state, which holds shards.
std::vector<Segment> segmentsOf(const HostState &state);
int64_t totalBytes(const std::vector<Segment> &segments);

/// The ranges the checksum of `format` hashes, in file order: format 2's pieces of each
/// segment, or format 1's chunks of the file (which may span segments: their `data` is null).
std::vector<Segment> hashedRanges(const std::vector<Segment> &segments, int format);

std::string systemError(const std::string &what, const std::string &path);
bool exists(const std::string &path);
void syncPath(const std::string &path);
/// folder/step-NNNNNNNN.
std::string stepFolder(const std::string &folder, int64_t step);
/// The steps of the complete checkpoints in `folder` (step-N holding a manifest), ascending.
std::vector<int64_t> checkpointSteps(const std::string &folder);
/// Removes a checkpoint folder, its manifest first: a folder left half removed is never
/// taken for a complete checkpoint.
void removeCheckpoint(const std::string &path);

} // namespace checkpoint
} // namespace mt

#endif // MT_RUNTIME_TRAIN_CHECKPOINTFILES_H
