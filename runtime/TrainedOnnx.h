// Weights out as ONNX: the model the plan was compiled from, its parameters' initializers
// replaced by the trained weights as external data beside it, for onnxruntime or any ONNX
// consumer.
#ifndef MT_RUNTIME_TRAINEDONNX_H
#define MT_RUNTIME_TRAINEDONNX_H

#include "plan/plan.pb.h"

#include <memory>
#include <string>
#include <vector>

namespace mt {

class TrainedOnnx {
public:
  /// Reads the source model `plan.model()` (as given, else relative to `planDir`) and checks
  /// that it holds every parameter as an fp32 initializer, so that a run never fails over it
  /// at its end. Throws naming what is wrong.
  TrainedOnnx(const plan::Plan &plan, const std::string &planDir);
  ~TrainedOnnx();

  /// Writes `path` and `path`.data: `weights` (one per plan parameter, in the plan's layout)
  /// as the initializers of the same names (and their transposes as the transposed copies);
  /// other initializers stored outside the source model are inlined. Written through
  /// temporary files renamed into place.
  void write(const std::string &path, const std::vector<const float *> &weights) const;

private:
  struct Model;
  std::unique_ptr<Model> model;
  const plan::Plan &plan;
};

} // namespace mt

#endif // MT_RUNTIME_TRAINEDONNX_H
