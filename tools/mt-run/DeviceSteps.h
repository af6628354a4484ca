// mt-run's CUDA side: the device executor with what mt-run reports of it (a start-up table,
// one line per step, a trace of chosen steps) and the check of a device step against the
// host backend's.
#ifndef MT_TOOLS_MT_RUN_DEVICESTEPS_H
#define MT_TOOLS_MT_RUN_DEVICESTEPS_H

#include "runtime/HostState.h"
#include "runtime/cuda/Executor.h"
#include "runtime/train/TrainingLog.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mt {

using TokenInputs = std::map<std::string, std::vector<int64_t>>;

class DeviceSteps {
public:
  /// `collectives`: see cuda::ExecutorOptions (null on one GPU).
  DeviceSteps(const plan::Plan &plan, HostState &state, bool serialize,
              cuda::DeviceCollectives *collectives = nullptr);

  /// The start-up table: model, parameters, memory planned and held, schedule.
  void printStartup(int64_t parameters) const;
  /// Runs one step; its gradients are in gradient(p) until the next.
  double run(const TokenInputs &inputs);
  float *gradient(int p) const { return executor->gradient(p); }
  /// See cuda::Executor::onGradient.
  void onGradient(std::function<void(int parameter)> listener) {
    executor->onGradient(std::move(listener));
  }
  /// See cuda::Executor::drain.
  void drain() { executor->drain(); }
  /// See cuda::Executor::awaitParameter.
  void awaitParameter(std::function<void(int parameter)> await) {
    executor->awaitParameter(std::move(await));
  }
  std::vector<int> readOrder() const { return executor->readOrder(); }
  /// The last step's measures: " | 41.2 TFLOPS | h2d 50.1 GB/s | ...".
  std::string report() const;
  /// The last step's measures for the metrics file: device_ms, tflops, ...
  StepMeasureList measures() const;
  /// Writes the last step's measured streams as Chrome trace events, the format of
  /// mtc --emit=timeline.
  void writeTrace(const std::string &path) const;

private:
  /// The plan's peak device memory: its arena and the reserve beside it.
  int64_t planPeak() const;
  /// What the step's buffers and kernels used: the arena, pools and workspace the executor
  /// holds, and the most scratch one command used.
  int64_t held() const;

  const plan::Plan &plan;
  std::unique_ptr<cuda::Executor> executor;
  cuda::StepMeasures last;
  int64_t baselineFree = 0; // free device memory before the executor allocated anything
  int64_t used = 0;         // device memory the process holds after the last step
};

/// Runs one step from the same state on the host backend (fp32) and on the device (bf16
/// copies), prints the loss of each and the worst relative gradient error per parameter
/// (relative to the gradient's largest element), and returns the worst error.
double checkAgainstHost(const plan::Plan &plan, HostState &state, const TokenInputs &inputs);

/// Runs one step on the device with every buffer kept (serialized), then each step command
/// that is a kernel on the host backend, from the operands the device read (bf16 where the
/// device stores bf16): one kernel's error, not the graph's. Template calls are whole layers
/// and are skipped (compile with --segment-layers=false to check their kernels). Prints the
/// worst relative error (to the result's largest element) per op, and each result above
/// `tolerance`, and returns the worst of all.
double checkKernels(const plan::Plan &plan, HostState &state, const TokenInputs &inputs,
                    double tolerance);

} // namespace mt

#endif // MT_TOOLS_MT_RUN_DEVICESTEPS_H
