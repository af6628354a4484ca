// A small tensor evaluated on the host while importing: shapes, masks, position tables and
// other subgraphs whose inputs are all known, which fold to constants instead of ops.
#ifndef MT_FRONTEND_HOSTTENSOR_H
#define MT_FRONTEND_HOSTTENSOR_H

#include "ir/ShapeRules.h"

#include <cstdint>
#include <vector>

namespace mt {

/// Element kinds follow ONNX's TensorProto::DataType numbering (FLOAT = 1, INT64 = 7, ...).
struct HostTensor {
  int32_t dataType = 0;
  Shape shape;
  /// Exactly one holds the elements, in row-major order: `reals` for floating-point types,
  /// `integers` for integer and boolean types (so int64 bounds such as INT64_MAX stay exact).
  std::vector<double> reals;
  std::vector<int64_t> integers;

  static bool isFloatType(int32_t dataType);
  bool isFloat() const { return isFloatType(dataType); }
  int64_t size() const { return numElements(shape); }
  double real(int64_t i) const { return isFloat() ? reals[i] : double(integers[i]); }
  int64_t integer(int64_t i) const { return isFloat() ? toInteger(reals[i]) : integers[i]; }
  /// A real as an int64: truncated, NaN as 0, values past int64 clamped (C++ and ONNX's Cast
  /// leave those undefined; fuzzing found a -inf cast and a NaN read as an integer).
  static int64_t toInteger(double value);

  static HostTensor zeros(int32_t dataType, Shape shape);
  /// A rank-1 int64 tensor, the form ONNX uses for shapes, axes and slice bounds.
  static HostTensor fromIntegers(llvm::ArrayRef<int64_t> values);
  /// Sets element i from a double, rounding into integer kinds.
  void set(int64_t i, double value);
  void setInteger(int64_t i, int64_t value);
  /// Converts to another element kind (ONNX Cast semantics; booleans become 0 or 1).
  HostTensor castTo(int32_t toType) const;
};

/// Row-major strides of a shape.
Shape stridesOf(llvm::ArrayRef<int64_t> shape);

} // namespace mt

#endif // MT_FRONTEND_HOSTTENSOR_H
