// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.activation_grad for gelu (erf and tanh forms) and silu, and mt.softmax_grad.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @x : tensor<2x4x6xf32>
mt.parameter @w : tensor<2x4x6xf32>
func.func @forward() -> tensor<f32> {
  %x = mt.param @x : tensor<2x4x6xf32>
  %w = mt.param @w : tensor<2x4x6xf32>
  %g = mt.gelu %x : tensor<2x4x6xf32>
  %t = mt.gelu %g approximate = "tanh" : tensor<2x4x6xf32>
  %s = mt.silu %t : tensor<2x4x6xf32>
  %p = mt.softmax %s axis = 2 : tensor<2x4x6xf32>
  %q = mt.softmax %p axis = 1 : tensor<2x4x6xf32>
  %k = mt.mul %q, %w : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %loss = mt.reduce_sum %k axes = [0, 1, 2] : tensor<2x4x6xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
