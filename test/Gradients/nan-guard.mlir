// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests that a softmax behind the exporters' NaN guard and an infinity guard (is_nan, is_inf
// and where on run-time tensors, left unfused) trains: the gradient reaches x through the
// selected values and none flows into the boolean conditions.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @x : tensor<3x5xf32>
mt.parameter @w : tensor<3x5xf32>
func.func @forward() -> tensor<f32> {
  %x = mt.param @x : tensor<3x5xf32>
  %w = mt.param @w : tensor<3x5xf32>
  %zero = mt.constant dense<0.0> : tensor<f32>
  %p = mt.softmax %x axis = 1 : tensor<3x5xf32>
  %nan = mt.is_nan %p : tensor<3x5xf32> -> tensor<3x5xi1>
  %g = mt.where %nan, %zero, %p : (tensor<3x5xi1>, tensor<f32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %inf = mt.is_inf %x {ignore_positive} : tensor<3x5xf32> -> tensor<3x5xi1>
  %h = mt.where %inf, %x, %g : (tensor<3x5xi1>, tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %k = mt.mul %h, %w : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %loss = mt.reduce_sum %k axes = [0, 1] : tensor<3x5xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
