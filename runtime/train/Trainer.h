// The training loop: batches from the token stream, each step's forward and backward on a
// backend (or on thread ranks), AdamW overlapping the backward where the backend allows,
// the non-finite guard, metrics, checkpoints, and a stop asked for between steps.
#ifndef MT_RUNTIME_TRAIN_TRAINER_H
#define MT_RUNTIME_TRAIN_TRAINER_H

#include "runtime/AdamW.h"
#include "runtime/HostState.h"
#include "runtime/parallel/ThreadRanks.h"
#include "runtime/train/CheckpointWriter.h"
#include "runtime/train/StepBackend.h"
#include "runtime/train/StepInputs.h"
#include "runtime/train/TokenData.h"
#include "runtime/train/TrainingLog.h"

#include <csignal>
#include <string>
#include <vector>

namespace mt {

struct TrainerSettings {
  /// The last step, counted from the start of training (a resumed run goes on from its
  /// checkpoint's step).
  int64_t steps = 1;
  /// A step whose loss or gradient is not finite applies no update; true: the run then
  /// stops (a checkpoint written), false: it is counted and the run goes on.
  bool stopOnNonFinite = true;
  /// Steps between checkpoints (0: at the end and when stopped only), where checkpoints go.
  int64_t checkpointEvery = 0;
  CheckpointWriter *checkpoints = nullptr;
  /// Host memory a checkpoint may copy parameters into, so that the next steps' updates need
  /// not wait for the disk (-1: CheckpointWriter::spareHostBytes() when it begins).
  int64_t checkpointMemory = -1;
  /// The plan's hash, which checkpoints record (see fileHash).
  std::string planHash;
  /// The checkpoint the state was read from (step 0: none): where the data, the step count
  /// and the skipped steps go on from.
  CheckpointInfo resumed;
  /// The last step's streams as a Chrome trace, where the backend measures them.
  std::string trace;
  /// Each step's time by op family in its metrics, and the last step's as a table at the
  /// end (the backend was made with BackendSettings::profile).
  bool profile = false;
  /// Data parallel over processes: this process takes the processRank-th of each
  /// `processes` consecutive batches.
  int processes = 0, processRank = -1;
  /// Clipping without holding gradients: each step runs twice on the same batches, the
  /// first only measuring the gradients' norm as they land, the second updating as they
  /// land (one backend, layer-major or one micro-batch; the backend made with
  /// BackendSettings::gradientsConsumedOnLanding).
  bool clipByMeasuringPass = false;
};

class Trainer {
public:
  /// Steps run on `backend`, or, with `ranks`, on thread ranks (which update their own
  /// shards; the state's masters take their weights at the end). `decays` is
  /// weightDecays() of the plan.
  Trainer(const plan::Plan &plan, HostState &state, StepBackend *backend, ThreadRanks *ranks,
          TokenData &data, StepInputs &inputs, const std::vector<WeightDecay> &decays,
          TrainingLog &log, TrainerSettings settings);

  struct Outcome {
    int64_t ranThrough = 0; // the last step run
    /// Why the run stopped over a step that was not finite (stopOnNonFinite), or empty.
    std::string nonFinite;
    /// With TrainerSettings::profile, the last step's.
    StepProfile profile;
  };
  /// Runs steps until `steps`, a non-finite step (stopOnNonFinite), or `stop` set (by a
  /// signal handler): the step running finishes and a checkpoint is written. A failure
  /// ends the backend's pending work and the updates before it is thrown.
  Outcome run(const volatile std::sig_atomic_t &stop);

private:
  const plan::Plan &plan;
  HostState &state;
  StepBackend *backend;
  ThreadRanks *ranks;
  TokenData &data;
  StepInputs &inputs;
  const std::vector<WeightDecay> &decays;
  TrainingLog &log;
  TrainerSettings settings;
};

} // namespace mt

#endif // MT_RUNTIME_TRAIN_TRAINER_H
