// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests that the gradient rules of the broadcasting binary ops (add, sub, mul, div, pow with a
// constant and with a parameter exponent) and of the unary ops agree with finite differences.
// CHECK: gradient check: {{[0-9]+}} elements, worst error {{[0-9.e-]+}}
mt.parameter @a : tensor<2x3x4xf32>
mt.parameter @b : tensor<4xf32>
mt.parameter @c : tensor<2x1x4xf32>
mt.parameter @w : tensor<2x3x4xf32>
func.func @forward() -> tensor<f32> {
  %a = mt.param @a : tensor<2x3x4xf32>
  %b = mt.param @b : tensor<4xf32>
  %c = mt.param @c : tensor<2x1x4xf32>
  %w = mt.param @w : tensor<2x3x4xf32>
  %two = mt.constant dense<2.0> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %s = mt.add %a, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %d = mt.sub %s, %c : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %m = mt.mul %d, %c : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %sq = mt.pow %b, %two : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %pos = mt.add %sq, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %q = mt.div %m, %pos : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %e = mt.exp %c : tensor<2x1x4xf32>
  %p = mt.pow %e, %b : (tensor<2x1x4xf32>, tensor<4xf32>) -> tensor<2x1x4xf32>
  %n = mt.neg %p : tensor<2x1x4xf32>
  %r = mt.add %q, %n : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
  %t = mt.tanh %r : tensor<2x3x4xf32>
  %g = mt.sigmoid %a : tensor<2x3x4xf32>
  %h = mt.erf %g : tensor<2x3x4xf32>
  %sum = mt.add %t, %h : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %k = mt.mul %sum, %w : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %loss = mt.reduce_sum %k axes = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
