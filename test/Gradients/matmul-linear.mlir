// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests the matmul rule for all four transpose combinations with a broadcast batch axis, and
// mt.linear with and without transpose_weight and bias.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @a : tensor<2x3x4xf32>
mt.parameter @b : tensor<4x5xf32>
mt.parameter @bt : tensor<5x4xf32>
mt.parameter @at : tensor<2x4x3xf32>
mt.parameter @w : tensor<5x6xf32>
mt.parameter @v : tensor<6x5xf32>
mt.parameter @bias : tensor<6xf32>
mt.parameter @c : tensor<2x3x6xf32>
func.func @forward() -> tensor<f32> {
  %a = mt.param @a : tensor<2x3x4xf32>
  %b = mt.param @b : tensor<4x5xf32>
  %bt = mt.param @bt : tensor<5x4xf32>
  %at = mt.param @at : tensor<2x4x3xf32>
  %w = mt.param @w : tensor<5x6xf32>
  %v = mt.param @v : tensor<6x5xf32>
  %bias = mt.param @bias : tensor<6xf32>
  %c = mt.param @c : tensor<2x3x6xf32>
  %m0 = mt.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %m1 = mt.matmul %a, %bt transpose_rhs : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %m2 = mt.matmul %at, %b transpose_lhs : (tensor<2x4x3xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  %m3 = mt.matmul %at, %bt transpose_lhs transpose_rhs : (tensor<2x4x3xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %s0 = mt.add %m0, %m1 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %s1 = mt.mul %s0, %m2 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %s2 = mt.add %s1, %m3 : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %l0 = mt.linear %s2, %w, %bias : (tensor<2x3x5xf32>, tensor<5x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  %l1 = mt.linear %s2, %v transpose_weight : (tensor<2x3x5xf32>, tensor<6x5xf32>) -> tensor<2x3x6xf32>
  %s3 = mt.mul %l0, %l1 : (tensor<2x3x6xf32>, tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  %k = mt.mul %s3, %c : (tensor<2x3x6xf32>, tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
  %loss = mt.reduce_sum %k axes = [0, 1, 2] : tensor<2x3x6xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
