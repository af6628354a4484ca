// Storage and conversions of host-evaluated tensors.
#include "frontend/HostTensor.h"

#include "tensor/Shapes.h"

#include <cmath>
#include <limits>

namespace mt {

namespace {
// ONNX TensorProto::DataType values; the onnx headers are not needed for these few.
constexpr int32_t kFloat = 1, kBool = 9, kFloat16 = 10, kDouble = 11, kBFloat16 = 16;
} // namespace

bool HostTensor::isFloatType(int32_t dataType) {
  return dataType == kFloat || dataType == kFloat16 || dataType == kDouble ||
         dataType == kBFloat16;
}

HostTensor HostTensor::zeros(int32_t dataType, Shape shape) {
  HostTensor t;
  t.dataType = dataType;
  t.shape = std::move(shape);
  if (t.isFloat())
    t.reals.assign(t.size(), 0.0);
  else
    t.integers.assign(t.size(), 0);
  return t;
}

HostTensor HostTensor::fromIntegers(llvm::ArrayRef<int64_t> values) {
  HostTensor t = zeros(/*INT64=*/7, Shape{static_cast<int64_t>(values.size())});
  t.integers.assign(values.begin(), values.end());
  return t;
}

void HostTensor::set(int64_t i, double value) {
  if (isFloat())
    reals[i] = value;
  else if (dataType == kBool)
    integers[i] = value != 0.0;
  else
    integers[i] = toInteger(value);
}

int64_t HostTensor::toInteger(double value) {
  if (std::isnan(value))
    return 0;
  if (value >= 0x1p63)
    return std::numeric_limits<int64_t>::max();
  if (value < -0x1p63)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

void HostTensor::setInteger(int64_t i, int64_t value) {
  if (isFloat())
    reals[i] = static_cast<double>(value);
  else
    integers[i] = dataType == kBool ? value != 0 : value;
}

HostTensor HostTensor::castTo(int32_t toType) const {
  HostTensor result = zeros(toType, shape);
  for (int64_t i = 0, e = size(); i < e; ++i) {
    if (isFloat())
      result.set(i, reals[i]);
    else
      result.setInteger(i, integers[i]);
  }
  if (toType == kFloat)
    for (double &r : result.reals)
      r = static_cast<float>(r);
  return result;
}

Shape stridesOf(llvm::ArrayRef<int64_t> shape) {
  shapes::Dims strides = shapes::strides(shape);
  return Shape(strides.begin(), strides.end());
}

} // namespace mt
