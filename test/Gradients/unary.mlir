// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests the gradient rules of sqrt, rsqrt, reciprocal, log, exp, cos, sin and relu on
// positive arguments (x * x + 1), where they are all defined.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @x : tensor<3x5xf32>
mt.parameter @w : tensor<3x5xf32>
func.func @forward() -> tensor<f32> {
  %x = mt.param @x : tensor<3x5xf32>
  %w = mt.param @w : tensor<3x5xf32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %xx = mt.mul %x, %x : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %p = mt.add %xx, %one : (tensor<3x5xf32>, tensor<f32>) -> tensor<3x5xf32>
  %s = mt.sqrt %p : tensor<3x5xf32>
  %r = mt.rsqrt %p : tensor<3x5xf32>
  %i = mt.reciprocal %p : tensor<3x5xf32>
  %l = mt.log %p : tensor<3x5xf32>
  %c = mt.cos %x : tensor<3x5xf32>
  %n = mt.sin %x : tensor<3x5xf32>
  %u = mt.relu %x : tensor<3x5xf32>
  %a1 = mt.add %s, %r : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %a2 = mt.add %a1, %i : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %a3 = mt.add %a2, %l : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %a4 = mt.mul %a3, %c : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %a5 = mt.add %a4, %n : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %a6 = mt.add %a5, %u : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %k = mt.mul %a6, %w : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %loss = mt.reduce_sum %k axes = [0, 1] : tensor<3x5xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
