// CPU AdamW with torch.optim.AdamW's semantics: decoupled weight decay, bias correction, eps
// added outside the square root; fp32 master weights and moments.
#ifndef MT_RUNTIME_ADAMW_H
#define MT_RUNTIME_ADAMW_H

#include "plan/plan.pb.h"
#include "runtime/AdamWConstants.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mt {

/// Why `config` is not an AdamW mt can run (a setting out of range, named with the value: as
/// torch.optim.AdamW checks, and eps > 0, every number finite), or "" when it is.
std::string adamwSettingsError(const plan::AdamW &config);

/// How weight decay treats one parameter: its rate, and the point it pulls the parameter
/// toward (0, or the offset of a parameter that holds PyTorch's `weight` plus a constant).
struct WeightDecay {
  double rate = 0;
  float center = 0;
};

/// Each plan parameter's weight decay: `config.weight_decay()`, or none where
/// `config.no_decay` (a regular expression) matches its plan or PyTorch name; toward
/// `centers[p]`.
std::vector<WeightDecay> weightDecays(const plan::Plan &plan, const plan::AdamW &config,
                                      const std::vector<float> &centers);

/// The learning rate of step `step` (from 1): linear warmup over `warmup` steps, then
/// constant or a cosine decay to `min_lr` at `totalSteps`.
double learningRate(const plan::AdamW &config, int64_t step, int64_t totalSteps);

/// The chunks' squares summed in their order: the norm's bits on every unit and core count.
double sumInOrder(const std::vector<double> &partial);

/// The sum of squares of `count` values, on every core, in a fixed order (the same bits on
/// every vector unit and core count).
double squaredNorm(const float *values, int64_t count);
/// The scalar reference of squaredNorm, one thread, for tests of the vector paths.
double squaredNormScalar(const float *values, int64_t count);

/// What torch's clip_grad_norm_ multiplies the gradients by so that their global norm `norm`
/// is at most `maxNorm`: 1 when it is already (or maxNorm <= 0). adamwUpdate applies it. The
/// scale is computed in double from mt's norm; torch's comes from its fp32 norm, so the two
/// can differ in the last bit.
float clipScale(double norm, double maxNorm);

/// Where an update finds the fp32 masters it updates: whole floats (`values`), or split into
/// halves (MasterHalves.h): `high`, the bf16 copy the device streams, and `low`.
struct MasterWeights {
  float *values = nullptr;
  uint16_t *high = nullptr, *low = nullptr;
  MasterWeights(float *values) : values(values) {}
  MasterWeights(uint16_t *high, uint16_t *low) : high(high), low(low) {}
  /// The same masters from element `offset` on.
  MasterWeights operator+(int64_t offset) const {
    return values ? MasterWeights(values + offset) : MasterWeights(high + offset, low + offset);
  }
};

/// The vector unit adamwUpdate uses on this CPU: "avx512", "avx2" or "scalar".
const char *adamwVectorUnit();

/// One update of one parameter in place, on every core: `step` counts from 1. Split masters
/// move 28 bytes a parameter, as whole ones do, and their high half is the bf16 copy the CUDA
/// backend streams for the next forward, current with no bytes of its own. The gradient is
/// taken times `gradScale` (clipScale), the bits of scaling it in place first, without the
/// pass over memory. Every vector unit gives bit-identical results. Returns
/// squaredNorm(grad, count) of the gradient as given, bit for bit, summed while each chunk is
/// in cache. Weight decay pulls the parameter toward `decayCenter`: a parameter that holds
/// PyTorch's `weight` plus a constant (Parameter's source_offset) decays as `weight` decays
/// toward 0. `guarded`: each chunk of 64Ki elements whose gradient holds a value that is not
/// finite keeps its weights and moments (the returned squares are then not finite): no such
/// value reaches the state.
double adamwUpdate(MasterWeights param, float *m, float *v, const float *grad, int64_t count,
                   double lr, double weightDecay, const plan::AdamW &config, int64_t step,
                   float gradScale = 1.0f, float decayCenter = 0.0f, bool guarded = false);
/// The same update from its constants (AdamWConstants of those arguments).
double adamwUpdate(MasterWeights param, float *m, float *v, const float *grad, int64_t count,
                   const AdamWConstants &constants, bool guarded);

/// The scalar reference of adamwUpdate, one thread, for tests of the vector paths.
void adamwUpdateScalar(MasterWeights param, float *m, float *v, const float *grad, int64_t count,
                       double lr, double weightDecay, const plan::AdamW &config, int64_t step,
                       float decayCenter = 0.0f);

} // namespace mt

#endif // MT_RUNTIME_ADAMW_H
