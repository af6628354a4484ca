// The training loop over a backend's steps.
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>

namespace mt {

Trainer::Trainer(const plan::Plan &plan, HostState &state, StepBackend *backend, ThreadRanks *ranks,
                 TokenData &data, StepInputs &inputs, const std::vector<WeightDecay> &decays,
                 TrainingLog &log, TrainerSettings settings)
    : plan(plan), state(state), backend(backend), ranks(ranks), data(data), inputs(inputs),
      decays(decays), log(log), settings(std::move(settings)) {
  if (!backend == !ranks)
    throw std::logic_error("a trainer runs on a backend or on thread ranks");
  if (!this->settings.trace.empty() && (!backend || !backend->measuresStreams()))
    throw std::runtime_error("--trace " + this->settings.trace +
                             ": this backend measures no streams (the cuda backend does)");
  if (this->settings.profile && !backend)
    throw std::runtime_error("--profile times a backend's kernels; thread ranks (--ranks) have "
                             "none to time");
  if (ranks && !inputs.layerMajor() && plan.micro_batches() > 1)
    throw std::runtime_error("thread ranks (--ranks) take layer-major micro-batches only");
  if (this->settings.clipByMeasuringPass) {
    const char *why = plan.optimizer().grad_clip() <= 0 ? "it clips nothing without --grad-clip"
                      : ranks || this->settings.processes > 0
                          ? "data-parallel ranks share each gradient as it lands"
                      : !inputs.layerMajor() && plan.micro_batches() > 1
                          ? "sample-major micro-batches sum every gradient on the host"
                          : nullptr;
    if (why)
      throw std::runtime_error(std::string("--grad-clip-memory=recompute: ") + why);
  }
}

Trainer::Outcome Trainer::run(const volatile std::sig_atomic_t &stop) {
  const plan::AdamW &adamw = plan.optimizer();
  const int parameterCount = plan.parameters_size();
  const int64_t steps = settings.steps;
  std::vector<int64_t> counts;
  for (const ParameterState &p : state.parameters)
    counts.push_back(p.count);
  const int64_t micro = std::max<int64_t>(1, plan.micro_batches());
  const bool layerMajor = inputs.layerMajor();
  const int worldSize = ranks ? ranks->size() : std::max(1, settings.processes);
  const int64_t tokensPerStep = worldSize * micro * inputs.batch() * inputs.length();
  auto lrAt = [&](int64_t step) { return learningRate(adamw, step, steps); };

  // The step's AdamW, one parameter at a time on the update worker (OverlappedUpdates). The
  // updates overlap the backend's step where gradients land during it, unless several
  // sample-major runs need every gradient first; otherwise the step's gradients are handed
  // over once it has run.
  std::atomic<int64_t> currentStep{0};
  std::vector<float *> gradients(parameterCount);
  const bool overlapped = backend && backend->overlapsUpdates() && (layerMajor || micro == 1);
  const bool shared = backend && backend->sharesUpdates();
  if (shared && !overlapped) // the step's loss would be this rank's alone
    throw std::logic_error("ranks that share the update update as the backend goes on");
  // The non-finite guard: exact (every gradient measured before any update) where the
  // updates cannot overlap the backward anyway, when clipping, and when ranks share the
  // update (their shared norm decides); otherwise gated, so that the updates keep
  // overlapping the backward.
  const bool gated = overlapped && adamw.grad_clip() <= 0 && !shared;
  const bool measuringPass = settings.clipByMeasuringPass;
  // A backend that lands later gradients over earlier ones needs each update queued as its
  // gradient lands: measured first (clipping, the exact guard) they would be overwritten.
  if (backend && backend->reusesGradientMemory() && !(gated || measuringPass))
    throw std::logic_error("the backend lands gradients in a ring, which needs each update to "
                           "start as its gradient lands (no clipping, one run a step, one "
                           "process, or --grad-clip-memory=recompute)");
  // What p's update and measure read: where the updates overlap the backend's step, the
  // gradient through the backend (which may pull it from the device a chunk at a time);
  // else the host buffers the trainer holds (the backend's, or their sum over the runs).
  auto readGradient = [&](int p, const StepBackend::GradientVisitor &visit) {
    if (overlapped)
      backend->readGradient(p, counts[p], visit);
    else
      visit(gradients[p], 0, counts[p]);
  };
  OverlappedUpdates::Optimizer optimizer;
  // A measured step's updating run is not the measured one (cuDNN's atomic dq differs in its
  // last bits): what is not finite stays out.
  const bool guarded = gated || measuringPass;
  // Per parameter, whether the backend updates it on the device (and measured it there).
  std::vector<char> onDevice(parameterCount, 0);
  for (int p = 0; overlapped && p < parameterCount; ++p)
    onDevice[p] = backend->updatesOnDevice(p);
  optimizer.update = [&](int p, int64_t step, float clip) {
    if (onDevice[p])
      return backend->updateOnDevice(
          p, AdamWConstants(adamw, lrAt(step), decays[p].rate, step, clip, decays[p].center),
          guarded);
    const ParameterState &parameter = state.parameters[p];
    double squares = 0;
    auto update = [&](const float *grad, int64_t first, int64_t count) {
      squares += adamwUpdate(parameter.weightsAt(first), parameter.firstMoment + first,
                             parameter.secondMoment + first, grad, count, lrAt(step),
                             decays[p].rate, adamw, step, clip, decays[p].center, guarded);
    };
    if (backend)
      backend->updateParameter(p, counts[p], overlapped ? nullptr : gradients[p], update);
    else
      update(gradients[p], 0, counts[p]);
    return squares;
  };
  optimizer.measure = [&](int p) {
    // A gradient the device updates was measured there as it landed: it need not cross.
    if (onDevice[p])
      return backend->gradientSquares(p);
    double squares = 0;
    readGradient(
        p, [&](const float *grad, int64_t, int64_t count) { squares += squaredNorm(grad, count); });
    return squares;
  };
  optimizer.norm = [](double squares) { return std::sqrt(squares); };
  if (shared)
    optimizer =
        backend->sharedUpdates(std::move(optimizer), {[&](int p) { return gradients[p]; }, lrAt,
                                                      [&](int p) { return decays[p]; }});
  // --profile: the CPU time of each step's updates (the worker runs one at a time) and the
  // host-memory bytes AdamW reads and writes; the records of two steps may be open at once. The
  // same timing gives --trace its updates.
  std::atomic<int64_t> updateNanos[2] = {0, 0};
  double updateBytes = 0, updatedParameters = 0;
  int64_t updatedTensors = 0;
  bool updatesPulled = false;
  for (size_t p = 0; p < state.parameters.size(); ++p) {
    const ParameterState &parameter = state.parameters[p];
    if (onDevice[p])
      continue; // the device's, through PCIe
    // A pulled gradient counted as read from the cache it is pulled into just before.
    bool pulled = overlapped && backend->pullsGradient(static_cast<int>(p));
    updatesPulled = updatesPulled || pulled;
    updateBytes += adamwBytes(static_cast<double>(parameter.count), pulled ? 1.0 : 0.0);
    updatedParameters += static_cast<double>(parameter.count);
    ++updatedTensors;
  }
  // --trace: the updates that run from the last step's start on, beside its streams (the
  // worker alone appends; the trace is written once it has finished).
  std::vector<UpdateSpan> tracedUpdates;
  const bool traced = !settings.trace.empty();
  if (settings.profile || traced)
    optimizer.update = [&, update = std::move(optimizer.update)](int p, int64_t step, float clip) {
      auto begin = std::chrono::steady_clock::now();
      double squares = update(p, step, clip);
      auto end = std::chrono::steady_clock::now();
      updateNanos[step & 1] +=
          std::chrono::duration_cast<std::chrono::nanoseconds>(end - begin).count();
      if (traced && step >= steps - 1)
        tracedUpdates.push_back({p, step, begin, end});
      return squares;
    };
  // A checkpoint written while the next steps run: an update first waits for its
  // parameter's part of it to be written or copied.
  if (CheckpointWriter *checkpoints = settings.checkpoints)
    optimizer.update = [checkpoints, update = std::move(optimizer.update)](int p, int64_t step,
                                                                           float clip) {
      checkpoints->release(p);
      return update(p, step, clip);
    };
  // The order the updates reach the parameters: as the gradients land where the updates start
  // then, else (all queued at once) as the next forward reads them.
  std::vector<int> updateOrder;
  if (backend) {
    updateOrder = backend->readOrder(parameterCount);
    if (gated)
      std::reverse(updateOrder.begin(), updateOrder.end());
  }
  // With several sample-major runs a step, the sum of their gradients.
  std::vector<std::vector<float>> accumulated;
  // Thread ranks update in their own step.
  std::unique_ptr<OverlappedUpdates> updates;
  if (backend)
    updates = std::make_unique<OverlappedUpdates>(
        std::move(optimizer), backend->readOrder(parameterCount), adamw.grad_clip(),
        gated ? OverlappedUpdates::Guard::Gated : OverlappedUpdates::Guard::Whole,
        /*halt=*/settings.stopOnNonFinite, measuringPass);
  if (overlapped) {
    for (int p = 0; shared && p < parameterCount; ++p) // the ranks' own updates read them
      gradients[p] = backend->gradient(p);
    backend->onGradient([&](int p) { updates->landed(p, currentStep); });
    backend->awaitParameter([&](int p) { updates->waitFor(p); });
  }

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
    StepProfile profile; // --profile: the backend's kernels; AdamW once the updates ran
  };
  StepProfile lastProfile;
  auto report = [&](StepRecord record, std::chrono::steady_clock::time_point end) {
    double ms = std::chrono::duration<double, std::milli>(end - record.start).count();
    if (settings.profile) {
      record.profile.add(OpFamily::AdamW, updateNanos[record.step & 1] / 1e6, updateBytes,
                         updatedTensors, updatedParameters);
      if (!overlapped)
        record.profile.updatesRanAlone();
      if (updatesPulled)
        record.profile.updatesPulled();
      StepMeasureList families = record.profile.measures();
      record.deviceMeasures.insert(record.deviceMeasures.end(), families.begin(), families.end());
      lastProfile = record.profile;
    }
    log.write({record.step, record.loss, record.gradNorm, record.lr, ms,
               tokensPerStep / (ms / 1000.0), record.deviceReport, record.skipped,
               record.skippedSteps, record.deviceMeasures});
  };
  // The overlapped step whose updates may still run, and its record once they all have.
  StepRecord last{};
  // Steps whose updates the guard kept out (not finite), and why the run stops for one.
  int64_t skippedSteps = settings.resumed.skippedSteps;
  Outcome outcome;
  auto judge = [&](StepRecord &record, const OverlappedUpdates::Outcome &result) {
    record.skipped = result.skipped;
    skippedSteps += result.skipped;
    record.skippedSteps = skippedSteps;
    if (!settings.stopOnNonFinite || !outcome.nonFinite.empty() ||
        (!result.skipped && std::isfinite(record.loss)))
      return;
    int p = result.firstNonFinite;
    outcome.nonFinite =
        "step " + std::to_string(record.step) + ": " +
        (!std::isfinite(record.loss)
             ? std::string("the loss is ") + (std::isnan(record.loss) ? "NaN" : "infinite")
         : p >= 0 ? "the gradient of " + plan.parameters(p).name() + " is not finite"
                  : "the gradient norm is not finite") +
        (result.applied > 0 ? "; the updates of the " + std::to_string(result.applied) +
                                  " parameters whose gradients landed before it were applied"
                            : "; its update was not applied");
  };
  auto finishUpdates = [&](int64_t step) {
    last.gradNorm = updates->finished(step);
    last.loss = backend->stepLoss(step, last.loss);
    judge(last, updates->outcome(step));
    return last;
  };
  // Checkpoints: each begins after its step's updates are all done and is written while
  // the next steps run; its line comes once it is complete.
  auto reportCheckpoint = [&](const std::optional<CheckpointWriter::Written> &written) {
    if (!written)
      return;
    std::printf("checkpoint | step %lld | %s | %.1f MiB in %.2f s | updates held %.2f s\n",
                static_cast<long long>(written->step), written->path.c_str(),
                written->bytes / 1048576.0, written->seconds, written->heldSeconds);
    std::fflush(stdout);
  };
  auto writeCheckpoint = [&](int64_t step) {
    reportCheckpoint(settings.checkpoints->finish());
    // The device's updates reach the state once the last checkpoint has read it: settling
    // brings high halves from the device into the state, which no update of theirs waits for.
    if (backend)
      backend->settleUpdates();
    if (ranks) // one rank's whole state, whatever the ranks that resume it
      ranks->gatherInto(state);
    settings.checkpoints->begin(
        state, {step, data.position(), data.size(), settings.planHash, skippedSteps}, updateOrder,
        settings.checkpointMemory >= 0 ? settings.checkpointMemory
                                       : CheckpointWriter::spareHostBytes());
  };
  // The last step reported (overlapped, a step's record waits for the next step).
  int64_t reportedThrough = settings.resumed.step;
  outcome.ranThrough = settings.resumed.step;
  try {
    for (int64_t step = settings.resumed.step + 1; step <= steps && !stop; ++step) {
      auto start = std::chrono::steady_clock::now();
      currentStep = step;
      // A checkpoint written beside the steps is reported (or its failure thrown) by the first
      // step that starts after it ended.
      if (settings.checkpoints)
        reportCheckpoint(settings.checkpoints->poll());
      double lr = lrAt(step);
      // Gradient accumulation: the step's loss and gradients are the means over its
      // micro-batches, consecutive batches of the token stream. A layer-major plan takes them
      // all at once ("input_ids.m", "targets.m"); otherwise the step runs once per micro-batch.
      double loss = 0;
      bool queued = false; // a measuring pass found the step not finite: it queued its end
      StepRecord record{step, 0.0, 0.0, lr, start, {}, {}};
      updateNanos[step & 1] = 0; // step - 2, which shared it, has finished
      if (ranks) {
        std::vector<StepInputValues> rankInputs;
        for (int r = 0; r < worldSize; ++r)
          rankInputs.push_back(inputs.next(data));
        DataParallelRank::Result result = ranks->step(rankInputs, step, lr, decays);
        record.loss = result.loss;
        record.gradNorm = result.gradNorm; // the ranks updated their shards, gathered weights
        judge(record, {result.skipped, -1, 0});
      } else {
        int64_t runs = layerMajor ? 1 : micro;
        // A rank over processes takes its own batch of the world's, in rank order.
        std::vector<StepInputValues> batches(runs);
        for (StepInputValues &own : batches)
          for (int r = 0; r < worldSize; ++r) {
            StepInputValues next = inputs.next(data);
            if (settings.processes == 0 || r == settings.processRank)
              own = std::move(next);
          }
        auto runBatches = [&] {
          double mean = 0;
          for (int64_t m = 0; m < runs; ++m) {
            mean += backend->run(batches[m], step, m) / runs;
            if (!overlapped) // the overlapped updates read the buffers, set once before
              for (int p = 0; p < parameterCount; ++p)
                gradients[p] = backend->gradient(p);
            if (runs == 1)
              continue;
            accumulated.resize(counts.size());
            for (size_t p = 0; p < counts.size(); ++p) {
              accumulated[p].resize(counts[p], 0.0f);
              for (int64_t i = 0; i < counts[p]; ++i)
                accumulated[p][i] = (m == 0 ? 0.0f : accumulated[p][i]) + gradients[p][i];
            }
          }
          if (runs > 1)
            for (size_t p = 0; p < counts.size(); ++p) {
              for (float &g : accumulated[p])
                g /= static_cast<float>(runs);
              gradients[p] = accumulated[p].data();
            }
          return mean;
        };
        // Clipping by a measuring pass: the step's gradients are measured as they land, then
        // the step runs again for its updates, unless the first run was not finite.
        if (measuringPass) {
          updates->beginMeasuring(step);
          loss = runBatches();
          if (!overlapped)
            for (int p = 0; p < parameterCount; ++p)
              updates->landed(p, step);
          queued = !updates->backwardDone(step, loss);
        }
        if (!queued)
          loss = runBatches();
        record.loss = loss;
        record.deviceReport = backend->report();
        record.deviceMeasures = backend->measures();
        if (measuringPass) // the device figures above are the last run's
          record.deviceMeasures.push_back({"step_runs", queued ? 1.0 : 2.0});
        record.profile = backend->profile();
      }
      outcome.ranThrough = step;
      // A step settles (its updates done) for a checkpoint, or when the run stops over a
      // step that was not finite.
      auto settles = [&] {
        return !outcome.nonFinite.empty() ||
               (settings.checkpoints &&
                (step == steps || stop ||
                 (settings.checkpointEvery > 0 && step % settings.checkpointEvery == 0)));
      };
      if (backend) {
        if (!overlapped && !queued) // every gradient is in host memory now
          for (int p = 0; p < parameterCount; ++p)
            updates->landed(p, step);
        // Ranks that share the update decide by the norm alone, which they share: a rank's
        // own loss could part them.
        if (!queued)
          updates->backwardDone(step, shared ? 0.0 : loss);
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
      if (settings.checkpoints && settles())
        writeCheckpoint(step);
      if (!outcome.nonFinite.empty())
        break;
    }
    if (overlapped && reportedThrough < outcome.ranThrough)
      report(finishUpdates(outcome.ranThrough), std::chrono::steady_clock::now());
    if (backend && !ranks && !settings.trace.empty() && outcome.ranThrough == steps &&
        steps > settings.resumed.step)
      backend->writeTrace(settings.trace, tracedUpdates);
    updates.reset(); // its worker reads what is declared after it
    // A checkpoint in flight reads the state to its end before the device's last updates
    // reach it.
    if (settings.checkpoints)
      reportCheckpoint(settings.checkpoints->finish());
    if (backend)
      backend->settleUpdates();
  } catch (...) {
    // The backend's pending work ends first (gradient callbacks, collectives that may wait
    // for a peer that is gone), then the updates, which read its gradients, then a
    // checkpoint in flight, which nothing changes any more: it completes.
    if (backend)
      backend->abandon();
    updates.reset();
    if (settings.checkpoints)
      try {
        reportCheckpoint(settings.checkpoints->finish());
      } catch (const std::exception &failure) { // the error being thrown is the one to report
        std::fprintf(stderr, "mt-run: %s\n", failure.what());
      }
    // Device updates the worker enqueued after the backend drained: settled before teardown,
    // after the checkpoint in flight has read the state.
    if (backend)
      try {
        backend->settleUpdates();
      } catch (const std::exception &) { // the error being thrown is the one to report
      }
    // The error names the step it stopped (the last checkpoint is that of an earlier one).
    try {
      throw;
    } catch (const std::exception &error) {
      throw std::runtime_error("step " + std::to_string(currentStep.load()) + ": " + error.what());
    }
  }
  if (ranks) // every rank holds the same gathered weights
    ranks->copyMasters(state);
  if (settings.profile && !lastProfile.empty())
    std::printf("profile of step %lld, by op family:\n%s",
                static_cast<long long>(outcome.ranThrough), lastProfile.table().c_str());
  outcome.profile = lastProfile;
  return outcome;
}

} // namespace mt
