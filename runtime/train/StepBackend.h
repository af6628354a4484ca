// What the trainer asks of a backend: one batch's forward and backward from the host state,
// and the registry through which each backend (host, cuda) makes itself known.
#ifndef MT_RUNTIME_TRAIN_STEPBACKEND_H
#define MT_RUNTIME_TRAIN_STEPBACKEND_H

#include "runtime/AdamW.h"
#include "runtime/HostState.h"
#include "runtime/OverlappedUpdates.h"
#include "runtime/train/StepProfile.h"
#include "runtime/train/TrainingLog.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mt {

using TokenInputs = std::map<std::string, std::vector<int64_t>>;

/// What a run asks of its backend beyond the plan and the host state.
/// Fused attention on the device: Cudnn (the default), cuDNN's engines for the forward and
/// the backward where cuDNN loads and serves the shape (bf16; no padding span, window or
/// cap), the backward summing dq with atomics (runs differ in the last bits), mt's kernels
/// for the rest; CudnnDeterministic, that with dq from one product (the same bits every run,
/// and a larger workspace); CudnnForward, cuDNN's forward only; Own, mt's kernels only.
enum class AttentionKernels { Cudnn, CudnnDeterministic, CudnnForward, Own };

struct BackendSettings {
  /// cuda: every command on one stream (for debugging and measuring the overlap).
  bool serialize = false;
  /// host: each step in a random order the schedule allows (--check-schedule), from `seed`,
  /// with the event `ignoredEvent` (>= 0) left out to prove the check fails without it.
  bool interleave = false;
  uint64_t seed = 0;
  int ignoredEvent = -1;
  /// Data parallel over processes: this one's rank of `processes` and the group its launcher
  /// made (BackendKind::launch); 0 processes: a run of one.
  int processes = 0, processRank = -1;
  const void *group = nullptr;
  /// cuda: each gradient's update starts as it lands and nothing reads it after (no clipping,
  /// one run a step, no ranks: the Trainer's gated guard), so a backend may land later
  /// gradients in the host memory of earlier ones once their updates have run.
  bool gradientsConsumedOnLanding = false;
  /// Time every kernel of a step (mt-run --profile): profile() then tells the last step's
  /// time by op family. It costs a little of the overlap (a timing event pair a kernel).
  bool profile = false;
  /// cuda: which kernels run fused attention (mt-run --attention).
  AttentionKernels attention = AttentionKernels::Cudnn;
  /// cuda: AdamW of the weights the plan keeps on the device across steps runs on the device,
  /// from gradients that wait there (mt-run --device-updates): their low halves and moments
  /// stay in device memory, or cross in and back, 20 bytes a parameter through the host's
  /// memory instead of the host's 34 (residentUpdateState; the high halves are the device's
  /// copy, brought back when settled). Those of
  /// `deviceUpdateLayers` layers spread over the step, and the parameters it reads before any
  /// layer (0: none).
  int deviceUpdateLayers = 0;
  /// cuda: those updates keep their low halves and moments in device memory where it holds
  /// them, crossing nothing until settled (mt-run --device-update-state=resident), or cross
  /// in and back every step (streamed).
  bool residentUpdateState = true;
};

/// One update the trainer's worker ran, on the host's steady clock: a trace shows it beside
/// the device's streams.
struct UpdateSpan {
  int parameter;
  int64_t step;
  std::chrono::steady_clock::time_point begin, end;
};

/// The step's inputs to AdamW, for a backend whose ranks share the update.
struct UpdateSources {
  std::function<float *(int p)> gradient;
  std::function<double(int64_t step)> learningRate;
  std::function<WeightDecay(int p)> decay;
};

class StepBackend {
public:
  virtual ~StepBackend() = default;

  /// Forward and backward of one batch from the state's masters (or its streaming copies);
  /// returns the loss. gradient(p) holds p's gradient until the next run.
  virtual double run(const TokenInputs &inputs, int64_t step, int64_t microBatch) = 0;
  virtual float *gradient(int p) = 0;
  /// Hands `visit` p's gradient (its `count` elements) in host memory: gradient(p) whole, or
  /// where a backend keeps it on the device (cuda, a plan's pull_gradients), a chunk at a
  /// time (`first`, `count`), each pulled just before. From the update worker, after p's
  /// gradient has landed.
  using GradientVisitor = std::function<void(const float *chunk, int64_t first, int64_t count)>;
  virtual void readGradient(int p, int64_t count, const GradientVisitor &visit) {
    visit(gradient(p), 0, count);
  }
  /// p's update, handed to `update` a piece at a time: each piece's gradient in host memory
  /// (from `gradient`, where the trainer holds it, else as readGradient hands it over), where
  /// its elements begin and how many. The update writes the state's bf16 copy of each piece,
  /// which the backend may send on as it goes (a weight a plan keeps on the device across
  /// steps).
  virtual void updateParameter(int p, int64_t count, const float *gradient,
                               const GradientVisitor &update) {
    if (gradient)
      update(gradient, 0, count);
    else
      readGradient(p, count, update);
  }
  /// Whether p's update runs on the device (BackendSettings::deviceUpdateLayers, where p's gradient
  /// and weight stay there): updateOnDevice then replaces the host's AdamW of p.
  virtual bool updatesOnDevice(int) const { return false; }
  /// Enqueues p's AdamW on the device with `constants` (`guarded` as adamwUpdate takes it) and
  /// returns, without waiting for it, the squares of p's gradient as adamwUpdate returns them.
  /// The next step's readers of p wait for it on the device; settleUpdates on the host.
  virtual double updateOnDevice(int p, const AdamWConstants &constants, bool guarded);
  /// The squares of p's gradient as it landed, measured on the device (where p updates
  /// there): squaredNorm of it, summed as adamwUpdate sums them.
  virtual double gradientSquares(int p);
  /// Blocks until every update enqueued on the device has reached the host state (the
  /// device's high halves brought over): before the state is read (a checkpoint, the run's
  /// end), and only once no checkpoint is reading it and no update runs.
  virtual void settleUpdates() {}
  /// Whether readGradient pulls p's gradient from the device just before its update (where
  /// the host's I/O writes land in the CPU's cache, AdamW reads it from there).
  virtual bool pullsGradient(int) const { return false; }

  /// Whether gradients land while run() goes on (onGradient), and the next run waits for
  /// each parameter's update (awaitParameter): the trainer's updates overlap the step, and
  /// gradient(p) is the same buffer every step.
  virtual bool overlapsUpdates() const { return false; }
  /// Whether later gradients land in the host memory of earlier ones once their updates have
  /// run (BackendSettings::gradientsConsumedOnLanding): each update must start as its gradient
  /// lands, not wait for every gradient first.
  virtual bool reusesGradientMemory() const { return false; }
  virtual void onGradient(std::function<void(int p)>) {}
  virtual void awaitParameter(std::function<void(int p)>) {}
  /// The order in which a step reads the parameters: the order the updates go in.
  virtual std::vector<int> readOrder(int parameters) const;

  /// Whether this process's rank shares the update with others (each updates its shards; the
  /// loss and the norm are the ranks'). Then sharedUpdates replaces the trainer's own AdamW,
  /// and stepLoss gives the step's loss over the ranks once its updates have finished.
  virtual bool sharesUpdates() const { return false; }
  virtual OverlappedUpdates::Optimizer sharedUpdates(OverlappedUpdates::Optimizer own,
                                                     const UpdateSources &) {
    return own;
  }
  virtual double stepLoss(int64_t, double own) const { return own; }

  /// The start-up lines (memory, schedule); whether it measures its streams; the last
  /// step's measures as a line's tail and as metrics; its streams as a Chrome trace, with
  /// the updates that ran from its start on (`updates`) on a track of the CPU's.
  virtual void printStartup(int64_t) const {}
  virtual bool measuresStreams() const { return false; }
  virtual std::string report() const { return {}; }
  virtual StepMeasureList measures() const { return {}; }
  virtual void writeTrace(const std::string &path, const std::vector<UpdateSpan> &updates) const;
  /// With BackendSettings::profile, the last run's kernels by op family (the trainer adds
  /// AdamW); empty otherwise.
  virtual StepProfile profile() const { return {}; }

  /// After a failure: ends what may wait on a peer that is gone (collectives) and on the
  /// updates (queued gradient callbacks), so that the updates can be torn down next.
  virtual void abandon() {}
  /// When the state holds only this rank's shards of the masters: every parameter gathered
  /// (a collective on every rank), kept on rank 0 only; empty when the state's masters are
  /// whole. The backend's device memory is released first.
  virtual std::vector<std::vector<float>> gatherMasters() { return {}; }
};

/// Which check of a device's step against the host backend (mt-run --check-*).
enum class DeviceCheck { AgainstHost, Kernels };

/// A rank's body in a data-parallel run: its rank of `processes`, the group to join; returns
/// the exit code.
using RankBody = std::function<int(int rank, int processes, const void *group)>;

/// A backend as the registry holds it.
struct BackendKind {
  std::string name;
  /// `auto` takes the available backend that prefers itself most.
  int preference = 0;
  std::function<bool()> available;
  /// Why it is not available, for the error of a run that names it.
  std::string unavailable;
  /// Whether the host state keeps bf16 streaming copies of the masters for it.
  bool streamCopies = false;
  /// Optional: refuses, before any memory is taken for it, a plan this machine cannot run
  /// (the CUDA backend: the plan's peak device memory against what the device has free),
  /// with the numbers.
  std::function<void(const plan::Plan &)> admit;
  std::function<std::unique_ptr<StepBackend>(const plan::Plan &, HostState &,
                                             const BackendSettings &)>
      make;
  /// Measures the machine and writes its profile for mtc to a file; returns a table of it.
  std::function<std::string(const std::string &path)> calibrate;
  /// Optional: one step against the host backend; returns the worst error. The settings'
  /// kernel choices (attention) hold for the checked step.
  std::function<double(const plan::Plan &, HostState &, const TokenInputs &, DeviceCheck,
                       double tolerance, const BackendSettings &)>
      check;
  /// Optional, data parallel over processes: `processes` children of this one, one a device
  /// (--nproc-per-node), or this process as one rank of a launcher's (processes 0: the
  /// launcher's variables say which); returns the exit code (the worst rank's).
  std::function<int(int processes, const RankBody &)> launch;
};

/// Adds a backend (at static initialization: see BackendRegistration).
void registerBackend(BackendKind kind);
/// The backend named, or for "auto" the available one that prefers itself most; throws
/// naming what is missing.
const BackendKind &findBackend(const std::string &name);
/// The backend that runs over processes (BackendKind::launch), available or not (each rank
/// fails at its own device), or null.
const BackendKind *findLauncher();
/// The names of the registered backends, for messages.
std::string backendNames();

/// A backend's source file registers it with a static object of this type; the object
/// library holding it is linked whole (CMake OBJECT libraries), so that it is not dropped.
struct BackendRegistration {
  explicit BackendRegistration(BackendKind kind) { registerBackend(std::move(kind)); }
};

} // namespace mt

#endif // MT_RUNTIME_TRAIN_STEPBACKEND_H
