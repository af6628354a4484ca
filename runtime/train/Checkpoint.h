// Checkpoints of a training run: the host state (fp32 masters and AdamW moments), the step and
// the data position, with a manifest of checksums; found and read back here (CheckpointWriter
// writes them), so that a run killed at any moment resumes from its last complete one bitwise.
#ifndef MT_RUNTIME_TRAIN_CHECKPOINT_H
#define MT_RUNTIME_TRAIN_CHECKPOINT_H

#include <cstdint>
#include <string>
#include <vector>

namespace mt {

class HostState;

/// What a checkpoint says besides the state: where the run stands and what it ran.
struct CheckpointInfo {
  int64_t step = 0;         // optimizer steps done
  int64_t dataPosition = 0; // the token stream's cursor after them
  int64_t dataTokens = 0;   // the token file's length, which the cursor indexes
  std::string planHash;     // of the plan file's bytes: a resume must run the same plan
  int64_t skippedSteps = 0; // steps whose update was skipped (not finite)
};

/// The bytes of `state`'s checkpoint: every master and both moments, 12 a parameter (the
/// bf16 copies are not kept: they are the masters rounded).
int64_t checkpointBytes(const HostState &state);

/// The hash of a file's bytes (hex): what CheckpointInfo.planHash holds.
std::string fileHash(const std::string &path);

/// The checkpoint `path` names: itself when it holds a manifest, else the newest complete
/// checkpoint in it. Throws when there is none.
std::string findCheckpoint(const std::string &path);

/// Reads checkpoint `path` into `state` (which must hold every parameter whole) and returns
/// its info, after checking it: the manifest's format, the plan's hash against `planHash`,
/// every parameter's size, and the state file's size and checksum. Throws with the reason.
CheckpointInfo readCheckpoint(const std::string &path, HostState &state,
                              const std::string &planHash);

} // namespace mt

#endif // MT_RUNTIME_TRAIN_CHECKPOINT_H
