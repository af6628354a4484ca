// Where a step's time goes (mt-run --profile): each kernel's measured time summed by op
// family, rated against the work the plan counts for it (TFLOP/s or GB/s).
#ifndef MT_RUNTIME_TRAIN_STEPPROFILE_H
#define MT_RUNTIME_TRAIN_STEPPROFILE_H

#include "plan/DeviceProfile.h"
#include "plan/plan.pb.h"
#include "runtime/train/TrainingLog.h"

#include <cstdint>
#include <map>
#include <string>

namespace mt {

/// The families a step's time is told in. Products to Loss run on the compute stream, and
/// Waits is what is left of it (the compute stream idle, waiting for weights or for the
/// host); Copies (the h2d and d2h streams) and AdamW (the CPU) run beside it.
enum class OpFamily { Products, Attention, Norms, Rope, Elementwise, Loss, Waits, Copies, AdamW };
constexpr int kOpFamilies = 9;

const char *familyName(OpFamily family);
/// The family of a plan command's op ("mt.linear" is a product, "mt.reshape" elementwise).
OpFamily familyOf(const std::string &op);

struct FamilyTime {
  double ms = 0;
  double flops = 0, bytes = 0; // the work counted for the kernels timed
  int64_t kernels = 0;
  /// Of `ms`, the kernels counted in FLOPs (the rest are counted in bytes, as the cost model
  /// charges them: a loss without its head, the key lengths of attention).
  double flopMs = 0;
  /// AdamW: the parameters its updates took.
  double parameters = 0;
};

class StepProfile {
public:
  /// A kernel of `command` that took `ms`, with the work the plan counts for it.
  void addKernel(const plan::Command &command, double ms);
  /// Time of a family that is not a plan kernel (copies, AdamW), with its bytes (and for
  /// AdamW the parameters it updated).
  void add(OpFamily family, double ms, double bytes, int64_t kernels, double parameters = 0);
  /// The step's span on the device: Waits become what the compute families leave of it.
  void setStepMs(double ms);

  bool empty() const { return stepMs == 0; }
  const FamilyTime &operator[](OpFamily family) const { return families[static_cast<int>(family)]; }
  /// The time of the ops whose kernels ran, by op name ("mt.attention_grad").
  const std::map<std::string, FamilyTime> &byOp() const { return ops; }
  /// A table a family a line: time, share of the step, kernels, and the rate achieved; then
  /// the `heaviest` ops that took the most time, one a line, the same columns.
  std::string table(int heaviest = 8) const;
  /// "profile_products_ms", "profile_products_share", "profile_products_tflops" (or
  /// "_gbps" for families measured in bytes) for each family that ran, and AdamW's
  /// "profile_adamw_gparams" (G parameters a second).
  StepMeasureList measures() const;
  /// Sets `profile`'s kernel rates to what this step's kernels achieved, in the cost model's
  /// units, for each kind that ran with work: the products and the fused loss (the GEMM
  /// rate), attention, every kernel counted in bytes (the memory rate), and the CPU's AdamW
  /// rate alone (where it ran beside the step's copies, their share of the host's memory
  /// given back: adamwSlowdown; not where the updates pulled their gradients). Returns what
  /// it set, as a line.
  std::string calibrate(DeviceProfile &profile) const;
  /// The step's updates ran after its copies (several runs a step), not beside them.
  void updatesRanAlone() { updatesBesideCopies = false; }
  /// The step's updates pulled their gradients from device memory.
  void updatesPulled() { pulled = true; }

private:
  FamilyTime families[kOpFamilies];
  std::map<std::string, FamilyTime> ops;
  double stepMs = 0;
  bool updatesBesideCopies = true;
  bool pulled = false;
};

} // namespace mt

#endif // MT_RUNTIME_TRAIN_STEPPROFILE_H
