// Weights out as ONNX: the model the plan was compiled from, its parameters' initializers
// replaced by the trained weights as external data beside it, for onnxruntime or any ONNX
// consumer.
#ifndef MT_RUNTIME_TRAINEDONNX_H
#define MT_RUNTIME_TRAINEDONNX_H

#include "plan/plan.pb.h"

#include <string>
#include <vector>

namespace mt {

/// Writes `path` (and `path`.data) from the source model `plan.model()` (as given, else
/// relative to `planDir`), with `weights` (one per plan parameter, in the plan's layout) as
/// the initializers of the same names; other initializers stored outside the source model are
/// inlined. Written through temporary files renamed into place. Throws naming what failed.
void writeTrainedOnnx(const std::string &path, const plan::Plan &plan, const std::string &planDir,
                      const std::vector<const float *> &weights);

} // namespace mt

#endif // MT_RUNTIME_TRAINEDONNX_H
