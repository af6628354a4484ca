// The mt-run driver: loads the plan and the host state, streams batches from the token file,
// runs the step on the chosen backend, applies AdamW, and reports each step.
#include "tools/mt-run/Runner.h"

#include "tools/mt-run/Options.h"

#include "runtime/AdamW.h"
#include "runtime/Calibration.h"
#include "runtime/GradientCheck.h"
#include "runtime/HostState.h"
#include "runtime/OverlappedUpdates.h"
#include "runtime/PlanLoader.h"
#include "runtime/PretrainedWeights.h"
#include "runtime/Safetensors.h"
#include "runtime/TrainedOnnx.h"
#include "runtime/host/Executor.h"
#include "runtime/parallel/DataParallel.h"
#include "runtime/parallel/Rendezvous.h"
#include "runtime/parallel/ThreadGroup.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/StepInputs.h"
#include "runtime/train/TokenData.h"
#include "runtime/train/TrainingLog.h"
#ifdef MT_HAS_CUDA
#include "runtime/cuda/Calibration.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/NcclCommunicator.h"
#include "tools/mt-run/DeviceSteps.h"
#include "tools/mt-run/Launcher.h"
#endif

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>

namespace mt {

namespace {

/// Refuses, before any training, an output the run could not write at its end (a folder
/// that is missing or not writable) or one that would overwrite the plan or its initial
/// weights.
void checkOutput(const std::string &flag, const std::string &path, const plan::Plan &plan,
                 const std::string &planPath, const std::string &planDir) {
  if (path.empty())
    return;
  size_t slash = path.rfind('/');
  std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (access(folder.c_str(), W_OK) != 0)
    throw std::runtime_error(flag + " " + path + ": the folder " + folder +
                             " does not exist or is not writable");
  char *resolved = realpath(folder.c_str(), nullptr);
  std::string target = std::string(resolved ? resolved : folder);
  std::free(resolved);
  target += (target.back() == '/' ? "" : "/") + path.substr(slash + 1);
  auto is = [&](const std::string &file) {
    char *existing = realpath(file.c_str(), nullptr);
    bool same = existing && target == std::string(existing);
    std::free(existing);
    return same;
  };
  if (is(planPath))
    throw std::runtime_error(flag + " " + path + " is the plan itself");
  for (const plan::Parameter &parameter : plan.parameters())
    if (!parameter.file().empty() &&
        is(parameter.file().front() == '/' ? parameter.file() : planDir + "/" + parameter.file()))
      throw std::runtime_error(flag + " " + path + " is the plan's own weights file (" +
                               parameter.name() + " starts from it)");
}

/// The signal (SIGINT or SIGTERM) that asked the run to stop, or 0: the step running finishes,
/// a checkpoint is written, and the run exits nonzero. A second signal ends it at once.
volatile std::sig_atomic_t stopSignal = 0;

void stopAfterStep(int signal) { stopSignal = signal; }

void catchStopSignals() {
  struct sigaction action = {};
  action.sa_handler = stopAfterStep;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

/// The profile of the machine the chosen backend runs on: the GPU's when there is one (auto)
/// or when asked for (cuda), else the host backend's.
std::string calibrate(const Options &options) {
#ifdef MT_HAS_CUDA
  if (options.backend != "host" && cuda::deviceAvailable())
    return cuda::calibrateDevice(options.calibrate);
#endif
  if (options.backend == "cuda")
    throw std::runtime_error("--backend=cuda: no CUDA device (or this mt-run was built "
                             "without the CUDA backend)");
  return calibrateHost(options.calibrate);
}

int train(const Options &options) {
  // A process a launcher started (torchrun's or OpenMPI's variables) is one rank of a run
  // over GPUs of one or more hosts: it meets the others at MASTER_ADDR:MASTER_PORT.
  LaunchEnvironment launched = launchEnvironment();
  if ((options.checkAgainstHost || options.checkKernels) &&
      (options.processes > 0 || options.ranks > 1 || launched.worldSize > 1))
    throw std::runtime_error("--check-against-host and --check-kernels check one GPU's step; "
                             "they do not run over ranks");
  if (launched.worldSize > 1 && options.processes == 0 && options.processRank < 0) {
#ifdef MT_HAS_CUDA
    std::vector<char> id(sizeof(ncclUniqueId));
    if (launched.rank == 0) {
      ncclUniqueId made = cuda::newNcclGroup();
      std::memcpy(id.data(), &made, sizeof made);
    }
    id = shareFromRankZero(launched, id);
    ncclUniqueId group;
    std::memcpy(&group, id.data(), sizeof group);
    MT_CUDA_CHECK(cudaSetDevice(launched.localRank));
    Options own = options;
    own.processes = launched.worldSize;
    own.processRank = launched.rank;
    own.group = &group;
    own.backend = "cuda";
    if (launched.rank > 0 && !std::freopen("/dev/null", "w", stdout))
      throw std::runtime_error("cannot quiet rank " + std::to_string(launched.rank));
    return train(own);
#else
    throw std::runtime_error("this process is rank " + std::to_string(launched.rank) + " of " +
                             std::to_string(launched.worldSize) +
                             " (WORLD_SIZE), which needs an mt-run built with the CUDA toolkit");
#endif
  }
  if (options.processes > 0 && options.processRank < 0) {
#ifdef MT_HAS_CUDA
    // Rank 0 reports; the others keep only their errors.
    return launchRanks(options.processes, [&](int rank, const ncclUniqueId &group) {
      Options own = options;
      own.processRank = rank;
      own.group = &group;
      own.backend = "cuda";
      if (rank > 0 && !std::freopen("/dev/null", "w", stdout))
        throw std::runtime_error("cannot quiet rank " + std::to_string(rank));
      return train(own);
    });
#else
    throw std::runtime_error("--nproc-per-node needs an mt-run built with the CUDA toolkit");
#endif
  }
  if (!options.calibrate.empty()) {
    std::fputs(calibrate(options).c_str(), stdout);
    return 0;
  }
  plan::Plan plan = loadPlan(options.plan);
  if (options.dump) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(plan, &text);
    std::cout << text;
    return 0;
  }
  if (options.checkGradients) {
    GradientCheckResult check = checkGradients(plan, options.seed, /*samples=*/16);
    std::printf("gradient check: %lld elements, worst error %.3g at %s\n",
                static_cast<long long>(check.checked), check.worstError,
                check.worstElement.c_str());
    return check.worstError <= (options.checkTolerance < 0 ? 1e-5 : options.checkTolerance) ? 0
                                                                                          : 1;
  }
  if (options.checkSchedule && plan.step().commands_size() > 0 &&
      plan.step().commands(0).stream().empty())
    throw std::runtime_error("--check-schedule needs a scheduled plan (mtc -o PLAN.mtp)");
  if (options.backend != "auto" && options.backend != "host" && options.backend != "cuda")
    throw std::runtime_error("--backend must be auto, host or cuda, got " + options.backend);
  // --check-schedule checks the plan on the host backend, whatever the machine has.
  bool onDevice = false;
  bool deviceCheck = options.checkAgainstHost || options.checkKernels;
#ifdef MT_HAS_CUDA
  onDevice = options.backend == "cuda" || deviceCheck ||
             (options.backend == "auto" && !options.checkSchedule && cuda::deviceAvailable());
  if (onDevice && !cuda::deviceAvailable())
    throw std::runtime_error("--backend=cuda: no CUDA device answers");
#endif
  if (!onDevice && (options.backend == "cuda" || deviceCheck))
    throw std::runtime_error("--backend=cuda needs an mt-run built with the CUDA toolkit");
  if (onDevice && options.checkSchedule)
    throw std::runtime_error("--check-schedule runs on the host backend; add --backend=host");
  // A plan without token inputs (a test graph of parameters only) can be checked without data.
  bool needsData = plan.step().inputs_size() > 0 || !deviceCheck;
  if (options.data.empty() && needsData)
    throw std::runtime_error("--data FILE is needed to train");
  for (const auto &[flag, value] : options.optimizer)
    flag(*plan.mutable_optimizer(), value);
  const plan::AdamW &adamw = plan.optimizer();
  if (std::string error = adamwSettingsError(adamw); !error.empty())
    throw std::runtime_error("AdamW of the plan with the flags given: " + error);

  std::string planDir = options.plan.find('/') == std::string::npos
                            ? "."
                            : options.plan.substr(0, options.plan.rfind('/'));
  for (auto [flag, path] : {std::pair{"--save-weights", options.saveWeights},
                            {"--save-onnx", options.saveOnnx},
                            {"--save-onnx", options.saveOnnx.empty() ? "" : options.saveOnnx + ".data"},
                            {"--metrics", options.metrics}})
    checkOutput(flag, path, plan, options.plan, planDir);
  // The source model is read and checked now, so that a run never fails over it at its end.
  std::unique_ptr<TrainedOnnx> trainedOnnx;
  if (!options.saveOnnx.empty() && options.processRank <= 0)
    trainedOnnx = std::make_unique<TrainedOnnx>(plan, planDir);
  // Pretrained weights are matched to the plan before any memory is taken for it.
  WeightsMap weightsMap;
  if (!options.weightsMap.empty())
    weightsMap = WeightsMap::read(options.weightsMap);
  // Each parameter's PyTorch source: where its weights come from and go, and the point its
  // weight decay pulls toward (a parameter that holds `1 + weight` decays toward 1).
  const std::vector<WeightsMap::Source> sources = pytorchSources(plan, weightsMap);
  std::vector<float> decayCenters;
  for (const WeightsMap::Source &source : sources)
    decayCenters.push_back(static_cast<float>(source.offset));
  const std::vector<WeightDecay> decays = weightDecays(plan, adamw, decayCenters);
  // Checkpoints name the plan by its bytes' hash; their folder is checked before any work.
  std::string planHash;
  if (!options.checkpointDir.empty() || !options.resume.empty())
    planHash = fileHash(options.plan);
  std::unique_ptr<CheckpointWriter> checkpoints;
  if (!options.checkpointDir.empty())
    checkpoints =
        std::make_unique<CheckpointWriter>(options.checkpointDir, options.keepCheckpoints);
  std::string resumeFrom = options.resume.empty() ? "" : findCheckpoint(options.resume);
  std::unique_ptr<SafetensorsArchive> pretrained;
  std::vector<WeightsMap::Source> pretrainedSources;
  if (!options.weights.empty()) {
    pretrained = std::make_unique<SafetensorsArchive>(options.weights);
    pretrainedSources = matchPretrainedWeights(plan, *pretrained, weightsMap);
  }
  // The host backend reads fp32 masters directly; only a GPU needs the bf16 streaming copy.
  // A rank over NCCL holds its shards alone: the device gathers the rest of the weights.
  HostState state(plan, /*streamCopy=*/onDevice, std::max(0, options.processRank),
                  std::max(1, options.processes), HostState::Masters::Sharded);
  CheckpointInfo resumed;
  double resumeSeconds = 0;
  if (!resumeFrom.empty()) {
    auto begin = std::chrono::steady_clock::now();
    resumed = readCheckpoint(resumeFrom, state, planHash);
    resumeSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (resumed.step >= options.steps)
      throw std::runtime_error("--resume " + resumeFrom + " is at step " +
                               std::to_string(resumed.step) + "; --steps " +
                               std::to_string(options.steps) +
                               " (counted from the start of training) leaves nothing to run");
  } else if (pretrained) {
    loadPretrainedWeights(state, *pretrained, pretrainedSources);
    pretrained.reset();
  } else if (options.init == "random") {
    state.initializeRandomly(options.seed);
  } else {
    state.loadInitialWeights(planDir);
  }
  state.refreshStreamCopies();
#ifdef MT_HAS_CUDA
  auto checkDevice = [&](const TokenInputs &inputs) {
    if (options.checkKernels) {
      double tolerance = options.checkTolerance < 0 ? 1e-2 : options.checkTolerance;
      return checkKernels(plan, state, inputs, tolerance) <= tolerance ? 0 : 1;
    }
    double worst = checkAgainstHost(plan, state, inputs);
    return worst <= (options.checkTolerance < 0 ? 3e-2 : options.checkTolerance) ? 0 : 1;
  };
  if (deviceCheck && !needsData)
    return checkDevice({});
#endif
  TokenData data(options.data, options.dataDtype);
  StepInputs stepInputs(plan, options.padTokenId);
  stepInputs.checkData(data);
  if (!resumeFrom.empty()) {
    if (resumed.dataTokens != data.size())
      throw std::runtime_error("--resume " + resumeFrom + " was written reading " +
                               std::to_string(resumed.dataTokens) + " tokens; " + options.data +
                               " holds " + std::to_string(data.size()));
    data.seek(resumed.dataPosition);
    std::printf("resumed | %s | step %lld | data position %lld | %.1f MiB read and checked in "
                "%.2f s\n",
                resumeFrom.c_str(), static_cast<long long>(resumed.step),
                static_cast<long long>(resumed.dataPosition), checkpointBytes(state) / 1048576.0,
                resumeSeconds);
  }
  int64_t batch = stepInputs.batch(), length = stepInputs.length();
  host::Executor<float> executor(plan);

  int64_t parameters = 0;
  std::vector<int64_t> counts;
  for (const ParameterState &p : state.parameters) {
    parameters += p.count;
    counts.push_back(p.count);
  }
  std::printf("mt-run | %s | %lld parameters | batch %lld x %lld x %lld micro-batches | %s "
              "backend | data %s (%lld tokens, %s)\n",
              options.plan.c_str(), static_cast<long long>(parameters),
              static_cast<long long>(batch), static_cast<long long>(length),
              static_cast<long long>(std::max<int64_t>(1, plan.micro_batches())),
              onDevice ? "cuda" : "host", options.data.c_str(),
              static_cast<long long>(data.size()), data.format().c_str());
  std::printf("host state | %.1f MiB in %zu layer blocks | %.1f bytes per parameter | AdamW "
              "on %s\n",
              state.bytes() / 1048576.0, state.blocks.size(),
              parameters ? static_cast<double>(state.bytes()) / parameters : 0.0,
              adamwVectorUnit());
  TrainingLog log(options.processRank <= 0 ? options.metrics : "", options.steps,
                  isatty(fileno(stdout)), resumed.step);

  int64_t micro = std::max<int64_t>(1, plan.micro_batches());
  bool layerMajor = stepInputs.layerMajor();
  std::vector<const float *> weights;
  for (const ParameterState &p : state.parameters)
    weights.push_back(p.master);
  std::unique_ptr<OverlappedUpdates> updates;
#ifdef MT_HAS_CUDA
  if (deviceCheck)
    return checkDevice(stepInputs.next(data));
  // Over NCCL the executor averages each gradient on the device before offloading this
  // rank's shard, and gathers each weight on the device after uploading this rank's shard.
  std::unique_ptr<cuda::NcclCommunicator> nccl;
  if (options.processes > 0)
    nccl = std::make_unique<cuda::NcclCommunicator>(
        *static_cast<const ncclUniqueId *>(options.group), options.processRank, options.processes);
  std::unique_ptr<DeviceSteps> device;
  if (onDevice) {
    device = std::make_unique<DeviceSteps>(plan, state, options.serialize, nccl.get());
    device->printStartup(parameters);
  }
#endif
  // The step's AdamW, one parameter at a time on the update worker (OverlappedUpdates). On the
  // device the updates overlap it, unless several sample-major runs need every gradient
  // first; otherwise the step's gradients are handed over once it has run.
  std::atomic<int64_t> currentStep{0};
  std::vector<float *> gradients(plan.parameters_size());
  bool overlapped = onDevice && (layerMajor || micro == 1);
  OverlappedUpdates::Optimizer optimizer;
  // The non-finite guard: exact (every gradient measured before any update) where the
  // updates cannot overlap the backward anyway, when clipping, and over NCCL (the ranks'
  // shared norm decides); otherwise gated, so that the updates keep overlapping it.
  bool gated = overlapped && adamw.grad_clip() <= 0 && options.processes == 0;
  optimizer.update = [&](int p, int64_t step, float clip) {
    const ParameterState &parameter = state.parameters[p];
    return adamwUpdate(parameter.master, parameter.firstMoment, parameter.secondMoment,
                       gradients[p], parameter.count, learningRate(adamw, step, options.steps),
                       decays[p].rate, adamw, step, parameter.streamCopy, clip, decays[p].center,
                       /*guarded=*/gated);
  };
  optimizer.measure = [&](int p) { return squaredNorm(gradients[p], counts[p]); };
  optimizer.norm = [](double squares) { return std::sqrt(squares); };
  // Each run's gradients: the host backend's vectors or the device's pinned buffers; with
  // several sample-major runs, their sum in `accumulated`.
  std::vector<std::vector<float>> hostGradients, accumulated;
  std::string deviceReport;
  StepMeasureList deviceMeasures;
  // Data parallel over ranks as threads: each rank takes its batches in rank order from the
  // stream, so N ranks see what one rank with N times the batch sees.
  if (options.ranks > 1 && (onDevice || (!layerMajor && micro > 1) || options.checkSchedule))
    throw std::runtime_error("--ranks runs on the host backend, without --check-schedule or "
                             "sample-major micro-batches");
  if (options.processes > 0 && !layerMajor && micro > 1)
    throw std::runtime_error("--nproc-per-node takes layer-major micro-batches only");
  int worldSize = options.processes > 0 ? options.processes : options.ranks;
  ThreadGroup group(options.ranks);
  std::vector<std::unique_ptr<DataParallelRank>> ranks;
  // Each thread rank's own host state (the moments of its shards) and last gradients, as a
  // process would hold them.
  std::vector<std::unique_ptr<HostState>> rankStates;
  std::vector<std::vector<std::vector<float>>> rankGradients(options.ranks);
  if (options.ranks > 1) {
    for (int r = 0; r < options.ranks; ++r) {
      rankStates.push_back(std::make_unique<HostState>(plan, false, r, options.ranks));
      for (int p = 0; p < plan.parameters_size(); ++p)
        std::copy(weights[p], weights[p] + counts[p], rankStates[r]->parameters[p].master);
      auto backward = [&, r](const DataParallelRank::Inputs &inputs,
                             std::vector<float *> &gradients) {
        std::vector<const float *> current;
        for (const ParameterState &parameter : rankStates[r]->parameters)
          current.push_back(parameter.master);
        host::StepResult<float> result = executor.run(current, inputs);
        rankGradients[r] = std::move(result.gradients);
        for (size_t p = 0; p < gradients.size(); ++p)
          gradients[p] = rankGradients[r][p].data();
        return result.loss;
      };
      ranks.push_back(
          std::make_unique<DataParallelRank>(*rankStates[r], group.member(r), backward));
    }
    std::printf("data parallel | %d ranks | host state %.2f MiB on rank 0 (%.2f MiB on one "
                "rank)\n",
                options.ranks, rankStates[0]->bytes() / 1048576.0, state.bytes() / 1048576.0);
  }
#ifdef MT_HAS_CUDA
  // Over NCCL this rank updates its shards, from gradients the device averaged, as the
  // updates overlap the device (the only way it runs: the ranks take layer-major or single
  // micro-batches); the loss and the norm over the ranks are the host's only collectives.
  std::unique_ptr<DataParallelRank> ncclRank;
  double rankLoss[2] = {0, 0}; // this rank's, then the mean over the ranks
  if (nccl) {
    ncclRank = std::make_unique<DataParallelRank>(state, *nccl, DataParallelRank::Backward{},
                                                  DataParallelRank::Collectives::OnDevice);
    std::printf("data parallel | %d GPUs over NCCL | host state %.1f MiB on rank 0 (its "
                "shards) | gradients averaged and weights gathered on the device, a "
                "shard of each over PCIe | shard updates %s | NCCL holds %.1f MiB of device "
                "memory beside the plan's\n",
                options.processes, state.bytes() / 1048576.0,
                adamw.grad_clip() > 0 ? "once every gradient is measured (clipping)"
                                      : "as gradients land",
                nccl->deviceBytes() / 1048576.0);
  }
  if (ncclRank) {
    if (!overlapped) // the step's loss would be this rank's alone
      throw std::logic_error("a rank over NCCL updates as the device goes on");
    int deviceId = 0;
    MT_CUDA_CHECK(cudaGetDevice(&deviceId));
    // NCCL runs on the update worker, which must use the rank's GPU.
    auto bound = [deviceId] {
      thread_local int boundDevice = -1;
      if (boundDevice != deviceId)
        MT_CUDA_CHECK(cudaSetDevice(deviceId));
      boundDevice = deviceId;
    };
    optimizer = ncclRank->overlappedOptimizer(
        [&](int p) { return gradients[p]; },
        [&](int64_t step) { return learningRate(adamw, step, options.steps); },
        [&](int p) { return decays[p]; }, rankLoss);
    optimizer.norm = [bound, norm = std::move(optimizer.norm)](double squares) {
      bound();
      return norm(squares);
    };
    optimizer.finish = [bound, finish = std::move(optimizer.finish)](int64_t step) {
      bound();
      finish(step);
    };
  }
#endif
  // One rank's updates (thread ranks update in their DataParallelRank::step), in the order a
  // step reads the parameters.
  if (options.ranks <= 1) {
    std::vector<int> readOrder(plan.parameters_size());
    std::iota(readOrder.begin(), readOrder.end(), 0);
#ifdef MT_HAS_CUDA
    if (device)
      readOrder = device->readOrder();
#endif
    updates = std::make_unique<OverlappedUpdates>(
        std::move(optimizer), readOrder, adamw.grad_clip(),
        gated ? OverlappedUpdates::Guard::Gated : OverlappedUpdates::Guard::Whole,
        /*halt=*/options.onNonFinite == "stop");
  }
#ifdef MT_HAS_CUDA
  if (overlapped) {
    for (int p = 0; p < plan.parameters_size(); ++p)
      gradients[p] = device->gradient(p);
    device->onGradient([&](int p) { updates->landed(p, currentStep); });
    device->awaitParameter([&](int p) { updates->waitFor(p); });
  }
#endif
  // A step's line and metrics. Its time runs to the next step's start: with overlapped
  // updates a step ends when the next one has waited for what it reads.
  struct StepRecord {
    int64_t step;
    double loss, gradNorm, lr;
    std::chrono::steady_clock::time_point start;
    std::string deviceReport;
    StepMeasureList deviceMeasures;
    bool skipped = false;
    int64_t skippedSteps = 0;
  };
  auto report = [&](const StepRecord &record, std::chrono::steady_clock::time_point end) {
    double ms = std::chrono::duration<double, std::milli>(end - record.start).count();
    log.write({record.step, record.loss, record.gradNorm, record.lr, ms,
               worldSize * micro * batch * length / (ms / 1000.0), record.deviceReport,
               record.skipped, record.skippedSteps, record.deviceMeasures});
  };
  // The overlapped step whose updates may still run, and its record once they all have.
  StepRecord last{};
  // Steps whose updates the guard kept out (not finite), and why the run stops for one
  // (--on-nonfinite=stop).
  int64_t skippedSteps = resumed.skippedSteps;
  std::string nonFinite;
  auto judge = [&](StepRecord &record, const OverlappedUpdates::Outcome &outcome) {
    record.skipped = outcome.skipped;
    skippedSteps += outcome.skipped;
    record.skippedSteps = skippedSteps;
    if (options.onNonFinite != "stop" || !nonFinite.empty() ||
        (!outcome.skipped && std::isfinite(record.loss)))
      return;
    int p = outcome.firstNonFinite;
    nonFinite =
        "step " + std::to_string(record.step) + ": " +
        (!std::isfinite(record.loss)
             ? std::string("the loss is ") + (std::isnan(record.loss) ? "NaN" : "infinite")
         : p >= 0 ? "the gradient of " + plan.parameters(p).name() + " is not finite"
                  : "the gradient norm is not finite") +
        (outcome.applied > 0 ? "; the updates of the " + std::to_string(outcome.applied) +
                                   " parameters whose gradients landed before it were applied"
                             : "; its update was not applied");
  };
  auto finishUpdates = [&](int64_t step) {
    last.gradNorm = updates->finished(step);
#ifdef MT_HAS_CUDA
    if (ncclRank)
      last.loss = rankLoss[step & 1];
#endif
    judge(last, updates->outcome(step));
    return last;
  };
  // A checkpoint after `step`, whose updates are all done.
  auto writeCheckpoint = [&](int64_t step) {
    auto begin = std::chrono::steady_clock::now();
    std::string path =
        checkpoints->write(state, {step, data.position(), data.size(), planHash, skippedSteps});
    std::printf("checkpoint | step %lld | %s | %.1f MiB in %.2f s\n", static_cast<long long>(step),
                path.c_str(), checkpointBytes(state) / 1048576.0,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    std::fflush(stdout);
  };
  catchStopSignals();
  // The last step reported (overlapped, a step's record waits for the next step), and the
  // last step run.
  int64_t reportedThrough = resumed.step, ranThrough = resumed.step;
  // A failed step may leave gradient callbacks queued on the device and updates running
  // (see the catch below).
  try {
    for (int64_t step = resumed.step + 1; step <= options.steps && !stopSignal; ++step) {
      auto start = std::chrono::steady_clock::now();
      currentStep = step;
      double lr = learningRate(adamw, step, options.steps);
      // Gradient accumulation: the step's loss and gradients are the means over its
      // micro-batches, consecutive batches of the token stream. A layer-major plan takes them
      // all at once ("input_ids.m", "targets.m"); otherwise the step runs once per micro-batch.
      double loss = 0, gradNorm = 0;
      bool rankSkipped = false;
      int64_t runs = ranks.empty() ? (layerMajor ? 1 : micro) : 0;
      if (!ranks.empty()) {
        std::vector<StepInputValues> inputs;
        for (int r = 0; r < worldSize; ++r)
          inputs.push_back(stepInputs.next(data));
        std::vector<DataParallelRank::Result> results(ranks.size());
        std::vector<std::exception_ptr> errors(ranks.size());
        std::atomic<int> failed{-1};
        std::vector<std::thread> threads;
        for (size_t r = 0; r < ranks.size(); ++r)
          threads.emplace_back([&, r] {
            try {
              results[r] = ranks[r]->step(inputs[r], step, lr, decays, /*guarded=*/true);
            } catch (...) {
              // The first rank to fail is the one to report; it stops the others' waits.
              errors[r] = std::current_exception();
              int none = -1;
              failed.compare_exchange_strong(none, static_cast<int>(r));
              group.abort();
            }
          });
        for (std::thread &thread : threads)
          thread.join();
        if (failed >= 0)
          std::rethrow_exception(errors[failed]);
        loss = results[0].loss;
        gradNorm = results[0].gradNorm;
        rankSkipped = results[0].skipped;
      }
      for (int64_t m = 0; m < runs; ++m) {
        // A rank over NCCL takes its own batch of the world's, in rank order.
        StepInputValues inputs;
        for (int r = 0; r < std::max(1, options.processes); ++r) {
          StepInputValues next = stepInputs.next(data);
          if (options.processes == 0 || r == options.processRank)
            inputs = std::move(next);
        }
  #ifdef MT_HAS_CUDA
        if (device) {
          loss += device->run(inputs) / runs;
          rankLoss[step & 1] = loss;
          if (!overlapped) // the overlapped updates read these pointers, set once before
            for (int p = 0; p < plan.parameters_size(); ++p)
              gradients[p] = device->gradient(p);
        }
  #endif
        if (!onDevice) {
          host::StepResult<float> part =
              options.checkSchedule
                  ? executor.runInterleaved(weights, inputs, options.seed * 7919 + step * 31 + m,
                                            options.ignoredEvent)
                  : executor.run(weights, inputs);
          loss += part.loss / runs;
          hostGradients = std::move(part.gradients);
          for (int p = 0; p < plan.parameters_size(); ++p)
            gradients[p] = hostGradients[p].data();
        }
        if (runs == 1)
          continue;
        if (m == 0)
          accumulated.assign(counts.size(), {});
        for (size_t p = 0; p < counts.size(); ++p) {
          accumulated[p].resize(counts[p], 0.0f);
          for (int64_t i = 0; i < counts[p]; ++i)
            accumulated[p][i] = (m == 0 ? 0.0f : accumulated[p][i]) + gradients[p][i];
        }
      }
      if (runs > 1 && ranks.empty())
        for (size_t p = 0; p < counts.size(); ++p) {
          for (float &g : accumulated[p])
            g /= static_cast<float>(runs);
          gradients[p] = accumulated[p].data();
        }
  #ifdef MT_HAS_CUDA
      if (device) {
        deviceReport = device->report();
        deviceMeasures = device->measures();
        if (!options.trace.empty() && step == options.steps)
          device->writeTrace(options.trace);
      }
  #endif
      StepRecord record{step, loss, 0.0, lr, start, deviceReport, deviceMeasures};
      ranThrough = step;
      // A step settles (its updates done) for a checkpoint, or when the run stops over a
      // step that was not finite.
      auto settles = [&] {
        return !nonFinite.empty() ||
               (checkpoints &&
                (step == options.steps || stopSignal ||
                 (options.checkpointEvery > 0 && step % options.checkpointEvery == 0)));
      };
      if (!ranks.empty()) {
        record.gradNorm = gradNorm; // the ranks updated their shards and gathered the weights
        judge(record, {rankSkipped, -1, 0});
      } else {
        if (!overlapped) // every gradient is in host memory now
          for (int p = 0; p < plan.parameters_size(); ++p)
            updates->landed(p, step);
        // Over NCCL the ranks decide by the norm alone, which they share: a rank's own loss
        // could part them.
        updates->backwardDone(step, options.processes > 0 ? 0.0 : loss);
        if (overlapped) {
          // The updates of this step are still running; the last step's are done or nearly.
          if (reportedThrough < step - 1)
            report(finishUpdates(step - 1), start);
          last = record;
          reportedThrough = step - 1;
          if (!settles())
            continue;
          record = finishUpdates(step);
        } else {
          record.gradNorm = updates->finished(step);
          judge(record, updates->outcome(step));
        }
      }
      report(record, std::chrono::steady_clock::now());
      reportedThrough = step;
      if (checkpoints && settles())
        writeCheckpoint(step);
      if (!nonFinite.empty())
        break;
    }
    if (overlapped && reportedThrough < ranThrough)
      report(finishUpdates(ranThrough), std::chrono::steady_clock::now());
    updates.reset(); // its worker reads what is declared after it
  } catch (...) {
    // The device's gradient callbacks end first, then the updates, which read the device's
    // pinned gradients; the device goes last. Over NCCL the device's collectives and the
    // updates' may wait for a peer that is gone: aborting them first lets both end.
#ifdef MT_HAS_CUDA
    if (nccl)
      nccl->abort();
    if (device)
      device->drain();
#endif
    updates.reset();
#ifdef MT_HAS_CUDA
    device.reset();
#endif
    throw;
  }
  if (!nonFinite.empty()) {
    std::fprintf(stderr, "mt-run: %s%s\n", nonFinite.c_str(),
                 checkpoints ? "; the last checkpoint holds the state it left" : "");
    return 3;
  }
  if (stopSignal && ranThrough < options.steps) {
    std::fprintf(stderr, "mt-run: stopped by %s after step %lld%s\n",
                 stopSignal == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(ranThrough),
                 checkpoints ? ", checkpoint written" : " (no --checkpoint-dir: nothing kept)");
    return 128 + stopSignal;
  }
  if (options.ranks > 1) // every rank holds the same gathered weights
    for (int p = 0; p < plan.parameters_size(); ++p)
      std::copy(rankStates[0]->parameters[p].master,
                rankStates[0]->parameters[p].master + counts[p], state.parameters[p].master);
  if (options.saveWeights.empty() && options.saveOnnx.empty())
    return 0;
  std::vector<const float *> finalWeights;
  for (const ParameterState &parameter : state.parameters)
    finalWeights.push_back(parameter.master);
  std::vector<std::vector<float>> gathered;
#ifdef MT_HAS_CUDA
  // A rank over NCCL holds its shards of the masters: every rank gathers each parameter
  // (collectives) and rank 0 keeps them, after the device is freed, so that the gathers'
  // staging fits beside nothing of the plan's.
  if (ncclRank) {
    device.reset();
    gathered.reserve(plan.parameters_size());
    try {
      for (int p = 0; p < plan.parameters_size(); ++p) {
        std::vector<float> weights = ncclRank->gathered(p);
        if (options.processRank == 0) {
          gathered.push_back(std::move(weights));
          finalWeights[p] = gathered.back().data();
        }
      }
    } catch (...) {
      nccl->abort(); // the peers wait in the gathers
      throw;
    }
  }
#endif
  if (options.processRank <= 0) {
    if (!options.saveWeights.empty()) {
      std::vector<std::vector<float>> converted;
      writeSafetensors(options.saveWeights, pytorchWeights(plan, sources, finalWeights, converted));
    }
    if (trainedOnnx)
      trainedOnnx->write(options.saveOnnx, finalWeights);
  }
  return 0;
}

} // namespace

int runnerMain(int argc, char **argv) {
  try {
    return train(parseOptions(argc, argv));
  } catch (const UsageError &error) {
    if (*error.what())
      std::fprintf(stderr, "mt-run: %s\n", error.what());
    std::fputs(kUsage, *error.what() ? stderr : stdout);
    return *error.what() ? 2 : 0;
  } catch (const std::exception &error) {
    std::fprintf(stderr, "mt-run: %s\n", error.what());
    return 1;
  }
}

} // namespace mt
