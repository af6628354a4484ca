// Runs a scheduled plan's step on one GPU: the plan's three streams and events, its arena
// offsets, weights streamed from the pinned host state, checkpoints and gradients offloaded
// to pinned host buffers. The host backend (runtime/host) is its reference.
#ifndef MT_RUNTIME_CUDA_EXECUTOR_H
#define MT_RUNTIME_CUDA_EXECUTOR_H

#include "plan/plan.pb.h"
#include "runtime/HostState.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaHandles.h"
#include "runtime/cuda/CudnnAttention.h"
#include "runtime/cuda/DeviceCollectives.h"
#include "runtime/cuda/DeviceTensor.h"
#include "runtime/cuda/DeviceUpdater.h"
#include "runtime/cuda/GradientPuller.h"
#include "runtime/cuda/PinnedMemory.h"
#include "runtime/cuda/Scratch.h"
#include "runtime/cuda/WeightSender.h"
#include "runtime/train/StepBackend.h"
#include "runtime/train/StepProfile.h"

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mt::cuda {

struct ExecutorOptions {
  /// Debug: every command on one stream in plan order, and every buffer its own memory (no
  /// reuse), so that a result that differs from the scheduled run points at the schedule.
  bool serialize = false;
  /// Record a CUDA event pair around every command, for per-stream busy time and traces.
  bool timeCommands = false;
  /// Record one around every kernel too, inside templates: the step's time by op family
  /// (StepMeasures::profile). Needs timeCommands, whose copies it counts.
  bool profileKernels = false;
  /// Data parallel: each weight's upload carries only this rank's shard (shardOf) and gathers
  /// the others' on the device, and each gradient is averaged over the ranks on the device
  /// before only this rank's shard is offloaded: the rest of gradient(p) is stale, and the
  /// host copies need only this rank's shard to be current.
  DeviceCollectives *collectives = nullptr;
  /// The fp32 gradients land in a ring of host slots the plan's `gradient_ring_layers` deep
  /// (placeInRing; a slot each where it holds them all): a gradient waits, before its offload,
  /// for the updates of those whose slots it overlaps (awaitParameter), after they landed.
  /// Only where each update starts as its gradient lands and nothing reads it after; off
  /// when serialized (no reuse) and with collectives.
  /// With the ring and a plan that pulls its gradients (pull_gradients), the ring lies in
  /// device memory instead (a device-to-device copy lands each gradient), and each update
  /// pulls its gradient into host memory a chunk at a time just before reading it
  /// (pullGradient, through a GradientPuller): where the host's I/O writes land in the CPU's
  /// last-level cache, the gradient need not cross the host's memory, which AdamW is bound by.
  bool gradientRing = false;
  /// The kernels of fused attention (cuDNN's where they serve, or mt's own).
  AttentionKernels attention = AttentionKernels::Cudnn;
  /// AdamW of each persistent weight whose gradient waits in the device's ring runs on the
  /// device (updateOnDevice, a DeviceUpdater beside the plan's memory): its low halves and
  /// moments stay there or cross in and back (residentUpdateState), its high halves are its
  /// device copies' (the host's brought over by settleUpdates).
  /// Those of `deviceUpdateLayers` layer blocks spread over the step's read order
  /// (updatesLayerOnDevice), and the parameters read before any block (0: none): the device's
  /// updates then run beside the host's from the backward's first landings.
  int deviceUpdateLayers = 0;
  /// Those updates keep their low halves and moments in device memory where it holds them
  /// (in the read order, leaving kResidentMargin free): nothing crosses for them until
  /// settled. Off: every update's state crosses in and back.
  bool residentUpdateState = true;
};

/// One command as it ran: its stream, and start/end in ms from the step's start.
struct CommandTiming {
  int command;
  int stream; // 0 h2d, 1 compute, 2 d2h
  float start, end;
};

/// One update on the device, in ms from the last step's start (where commands are timed).
struct UpdateTiming {
  int parameter;
  float start, end;
};

/// What the device measured of one step.
struct StepMeasures {
  double loss = 0;
  double ms = 0;                     // first command to last, on the device
  // When the host saw the step end (after its synchronization): the host's clock at the
  // device's origin is about this less `ms`.
  std::chrono::steady_clock::time_point hostEnd;
  double busyMs[3] = {0, 0, 0};      // per stream (with timeCommands)
  int64_t copiedBytes[2] = {0, 0};   // host to device, device to host
  std::vector<CommandTiming> commands; // with timeCommands
  StepProfile profile;                 // with profileKernels
};

/// Device memory the executor holds, by use: what the plan counts as its peak.
struct DeviceMemory {
  int64_t arena = 0, scratch = 0, blasWorkspace = 0, constants = 0, inputs = 0, staging = 0;
  int64_t scratchUsed = 0; // the most one command's kernels have used
  int64_t cudnnBeside = 0; // cuDNN's own, for calls the scratch could not hold
  int64_t gradientRing = 0; // pulled gradients' ring (a plan's pull_gradients)
  int64_t updates = 0;      // the device's updates: their state's pieces and squares
  int64_t total() const {
    return arena + scratch + blasWorkspace + constants + inputs + staging + cudnnBeside +
           gradientRing + updates;
  }
};

/// Throws, with the numbers, when `needed` bytes of device memory (of which `arena`, and
/// `reserve` for kernel scratch, the cuBLASLt workspace and the staging buffer) are more than the
/// device has free.
void checkDeviceMemory(int64_t needed, int64_t arena, int64_t reserve);

class Executor {
public:
  /// `state` must outlive the executor, and keep bf16 stream copies (HostState(plan, true))
  /// unless the plan streams its masters.
  /// Throws when the plan is not scheduled, or device memory is short (naming the bytes).
  Executor(const plan::Plan &plan, HostState &state, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Runs one step on the host state's current bf16 copies with the named token inputs
  /// ("input_ids", "targets", their ".m" parts) and waits for it; the gradients are then in
  /// gradient(p).
  StepMeasures run(const std::map<std::string, std::vector<int64_t>> &inputs);

  /// Waits for what the step issued, gradient callbacks included (errors ignored: a failed
  /// step drains too), and detaches the listener: nothing calls it afterwards.
  void drain();
  /// Calls `listener` with each parameter whose gradient has reached host memory during a
  /// step, as soon as it has: from a CUDA driver thread, so it must not call CUDA.
  void onGradient(std::function<void(int parameter)> listener);
  /// Calls `await` with each parameter before the step first reads its host weights or
  /// overwrites its host gradient, on the thread that runs the step: it may block there until
  /// the parameter's last update is done, while the device runs what was issued before.
  void awaitParameter(std::function<void(int parameter)> await);
  /// The parameters in the order a step first reads them from the host, then any it does
  /// not read.
  std::vector<int> readOrder() const;

  /// The step's fp32 gradient of plan parameter `p`, in pinned host memory, or in device
  /// memory where it is pulled (gradientOnDevice).
  float *gradient(int p) const { return gradients.at(p); }
  bool gradientOnDevice(int p) const {
    return !onDeviceRing.empty() && onDeviceRing[plan.step().gradients(p)];
  }
  /// Hands `visit` parameter p's gradient (its `count` elements) from host memory: whole, or
  /// where it waits in device memory, a chunk at a time (`first`, `count`) pulled just before.
  /// From one thread at a time, after p's gradient has landed.
  using GradientVisitor = std::function<void(const float *chunk, int64_t first, int64_t count)>;
  void pullGradient(int p, int64_t count, const GradientVisitor &visit);
  /// Parameter p's update as the trainer's StepBackend::updateParameter: `update` gets each
  /// piece of the gradient (`gradient`, in host memory, or null: pulled or landed as
  /// pullGradient hands it over). For a weight the plan keeps on the device across steps (a
  /// persistent prefetch), each piece's bf16 copy then crosses to the device from the host
  /// state's: the next step's readers wait for it. From one thread at a time.
  void updateParameter(int p, int64_t count, const float *gradient, const GradientVisitor &update);
  /// Whether p's AdamW runs on the device (options.deviceUpdateLayers, where the plan keeps p's
  /// weight on the device and its gradient waits in the device's ring).
  bool updatesOnDevice(int p) const { return updater && updater->updates(p); }
  /// Enqueues p's AdamW on the device after its gradient of this run has landed in the ring,
  /// and returns the gradient's squares (adamwUpdate's, bit for bit). The next run's readers
  /// of p and the ring's next occupant of its slot wait for it on the device. From one
  /// thread at a time.
  double updateOnDevice(int p, const AdamWConstants &constants, bool guarded);
  /// The squares of p's gradient of this run, measured on the device as it landed (where p
  /// updates there): from one thread at a time, before p's next landing.
  double gradientSquares(int p) const {
    if (!updatesOnDevice(p))
      throw std::logic_error("the gradient of " + plan.parameters(p).name() +
                             " is not measured on the device");
    return updater->squares(p);
  }
  /// Blocks until the device's updates have reached the host state, their high halves
  /// brought from the device copies: only while nothing reads the state (no checkpoint in
  /// flight) and no update runs.
  void settleUpdates() {
    if (updater)
      updater->settle();
  }
  /// Why options.deviceUpdateLayers updates nothing on the device in this run; empty otherwise.
  const std::string &updatesOnHost() const { return updatesOnHostWhy; }
  /// The device's updates enqueued since the last step began, with timeCommands (waits for
  /// them to end).
  std::vector<UpdateTiming> deviceUpdateTimings();
  /// How many of the elements the device updates keep their state there between settles.
  int64_t residentUpdateElements() const { return updater ? updater->residentElements() : 0; }
  /// The bytes the device's updates moved across PCIe so far, both ways.
  int64_t updateBytesMoved() const { return updater ? updater->bytesMoved() : 0; }
  /// Whether the plan keeps parameter p's weights on the device across steps.
  bool persistentWeight(int p) const {
    return !persistentTargets.empty() && !persistentTargets.at(p).empty();
  }
  /// The bytes of persistent weights' updates sent to the device so far.
  int64_t weightBytesSent() const { return sender ? sender->bytesSent() : 0; }
  /// The bytes pullGradient has moved across PCIe since the executor began, and the time its
  /// callers (the updates) waited for them.
  int64_t gradientBytesPulled() const { return puller ? puller->bytesPulled() : 0; }
  double gradientPullWaitMs() const { return puller ? puller->waitedMs() : 0; }
  const DeviceMemory &memory() const { return deviceMemory; }
  /// Whether later gradients may land over earlier ones once updated (options.gradientRing).
  bool reusesGradientMemory() const { return options.gradientRing; }
  /// Why a plan that pulls its gradients lands them in host memory in this run; empty where
  /// it pulls them (or does not ask to).
  const std::string &gradientsLanded() const { return gradientsLandedWhy; }
  /// Which kernels run fused attention, in a line: cuDNN's (its version; the calls it ran
  /// and a shape it declined, once steps have run) or mt's own (and why).
  std::string attentionKernels() const;
  /// The attention calls cuDNN ran so far: forwards, backwards.
  std::pair<int64_t, int64_t> cudnnAttentionCalls() const {
    return cudnn ? std::pair{cudnn->forwardCalls(), cudnn->backwardCalls()}
                 : std::pair<int64_t, int64_t>{0, 0};
  }
  /// Step value `id` where the device holds it. After a serialized run every value a step
  /// command made is still there (no buffer is reused).
  const DeviceTensor &stepValue(int id) const;

private:
  struct Program;
  struct Layout;
  /// Checks the plan and the host state against each other, then allocates, binds and pins
  /// in the steps below.
  void build();
  void checkHostState() const;
  /// The constant pool, a serialized run's own offsets and the inputs' bytes.
  Layout layoutOf() const;
  /// Refuses a plan larger than the free device memory, then allocates its parts.
  void allocateDevice(const Layout &layout);
  /// A program's values as device tensors (offloaded results unbound), with their offsets.
  std::unique_ptr<Program> bindProgram(const plan::Program &program, bool isStep,
                                       const Layout &layout) const;
  /// Places every offloaded value (checkpoints, gradients, a ring of them) in the host block.
  void placeOffloads(Layout &layout);
  /// Binds the step's arena values and inputs, and its gradients and their notices.
  void bindStep(const Layout &layout);
  /// Refuses a step that reads a parameter without prefetching it, or (with collectives) a
  /// gradient after its offload.
  void checkStepReads() const;
  /// The device copies of each persistent weight (the results of the step's persistent
  /// prefetches); refuses those the executor cannot keep current: with ranks, not bf16 on the
  /// device, without the host's bf16 copy to fill them from, also prefetched otherwise, or
  /// read after the command that completes their gradient.
  void bindPersistent();
  /// The step command that completes parameter p's gradient (the command count for a
  /// constant, whose update waits for the step's end), by `producer`
  /// (per step value, the command that makes it).
  int completingCommand(int p, const std::vector<int> &producer) const;
  /// Pins the host state and block, and makes the streams and events.
  void start(const Layout &layout);
  /// The device's updates (options.deviceUpdateLayers) of the persistent weights whose gradients
  /// wait in the ring, or why none.
  void startDeviceUpdates();
  /// Places the gradients `order` (step value ids, in landing order) in a ring at `base` of
  /// the host block, sets ringOccupants, and returns the ring's bytes.
  /// `bytes` holds each offloaded value's host bytes.
  /// The ring is the plan's depth, or where that is more than `most` bytes, as deep as fits
  /// in them (at least kLeastGradientRingLayers).
  int64_t placeGradientRing(const std::vector<int> &order, const std::vector<int64_t> &bytes,
                            int64_t base, std::vector<int64_t> &hostOffsets, int64_t most);
  /// Blocks until parameter `p`'s gradient of this run has landed (throws if the step failed).
  void awaitLanding(int p);
  /// A CUDA host function after a gradient's offload (`data`: its GradientNotice): hands it
  /// to the listener and marks it landed.
  static void gradientLanded(void *data);
  /// Enqueues on `stream` the upload of parameter `p`'s elements [shard) into `slot`: from
  /// the master or the bf16 copy as the slot stores them, or from the master through the
  /// staging buffer, cast on the device, into a bf16 slot the host keeps no copy for.
  /// Returns the bytes that cross PCIe.
  int64_t uploadParameter(int p, const DeviceTensor &slot, Shard shard, cudaStream_t stream);
  void runCommand(const plan::Command &command, const std::vector<DeviceTensor> &values,
                  std::vector<DeviceTensor> &results, cudaStream_t stream);
  void runTemplate(int index, const std::vector<DeviceTensor> &arguments, char *workspace,
                   const std::vector<DeviceTensor> &results, cudaStream_t stream);
  cudaStream_t streamOf(const plan::Command &command, int *index) const;

  const plan::Plan &plan;
  HostState &state;
  ExecutorOptions options;
  std::unique_ptr<CublasLt> blas;
  std::unique_ptr<CudnnAttention> cudnn; // null: mt's own attention kernels
  std::string cudnnMissing;              // why cudnn is null, when it was asked for
  std::unique_ptr<Scratch> scratch;
  /// The plan's streams by role; a command names one, index 0, 1 or 2 in that order.
  struct Streams {
    Stream h2d, compute, d2h;
    cudaStream_t operator[](int index) const {
      return index == 0 ? h2d.get() : index == 1 ? compute.get() : d2h.get();
    }
  } streams;
  std::vector<Event> events; // the plan's, ordering its streams
  /// A step's clock: its start (every stream waits for it), each stream's end and, with
  /// timeCommands, each command's start and end.
  struct StepClock {
    Event begin;
    Event streamEnds[3];
    std::vector<Event> commandStarts, commandEnds;
    /// With profileKernels, a pair a kernel run (grown to a step's count) and its command.
    std::vector<Event> kernelStarts, kernelEnds;
    std::vector<const plan::Command *> kernels;
    size_t kernelsRun = 0;
  } clock;
  DeviceAllocation arena, constantPool, inputPool;
  /// Where a streamed master lands, a piece at a time, before the h2d stream casts it into
  /// its bf16 slot (plans that stream masters).
  DeviceAllocation staging;
  struct FreeHostBlock {
    void operator()(char *block) const { std::free(block); }
  };
  // Offloaded values (checkpoints, gradients), page-aligned; pinned through `pinned`, which
  // goes first.
  std::unique_ptr<char, FreeHostBlock> hostPool;
  std::unique_ptr<PinnedMemory> pinned;
  /// Pulled gradients: the ring in device memory (per step value, whether it lies there),
  /// and the puller of its chunks through slots in hostPool (at pullSlotsAt).
  DeviceAllocation deviceRing;
  std::vector<char> onDeviceRing;
  int64_t pullSlotsAt = 0;
  int64_t pullSlotElements = 0; // kPullChunk, or the largest gradient where it is smaller
  std::string gradientsLandedWhy;
  std::unique_ptr<GradientPuller> puller;
  /// The device's updates (options.deviceUpdateLayers), or why there are none.
  std::unique_ptr<DeviceUpdater> updater;
  std::string updatesOnHostWhy;
  std::unique_ptr<Program> step;
  std::vector<std::unique_ptr<Program>> templates;
  std::vector<float *> gradients;
  /// Per step offload (empty for other commands), its results in the order the executor
  /// issues them: the other results first, then the gradients in the order the next forward
  /// reads their parameters (so that the first-needed are updated and uploaded while the rest
  /// still cross).
  std::vector<std::vector<int>> issueOrder;
  /// Per offloaded gradient (by step value id): the notice its landing sends, one parameter's.
  struct GradientNotice {
    Executor *executor;
    int parameter;
  };
  std::vector<GradientNotice> notices;
  /// With the gradient ring: per parameter, those whose host slots its gradient's overlaps
  /// (each lands before it in a step, or after it in the step before).
  struct RingOccupant {
    int parameter;
    bool sameStep; // lands earlier in the same step, not later in the step before
  };
  std::vector<std::vector<RingOccupant>> ringOccupants;
  /// Per parameter, the last run whose gradient of it has landed (set after the listener).
  std::vector<int64_t> landedRun;
  int64_t runs = 0;
  std::mutex landingMutex;
  std::condition_variable landing;
  std::function<void(int)> gradientListener;
  std::function<void(int)> parameterAwait;
  /// Persistent weights: per parameter its device copies (empty: none), the event its last
  /// update's copy has crossed by, and the sender of those copies. The step's first run fills
  /// them from the host's bf16 copies, which the updates keep current.
  std::vector<std::vector<uint16_t *>> persistentTargets;
  std::vector<Event> persistentSent;
  std::unique_ptr<WeightSender> sender;
  bool persistentFilled = false;
  std::vector<int> constantGradients; // parameters whose gradient is a constant zero
  std::vector<int> gradientParameter; // per step value: the parameter it is the gradient of, or -1
  DeviceMemory deviceMemory;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_EXECUTOR_H
