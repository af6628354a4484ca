// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests the rules of the views and data movement ops: reshape, transpose, slice (strided),
// concat, expand, gather, where and cast.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @x : tensor<2x6xf32>
mt.parameter @y : tensor<1x6xf32>
mt.parameter @w : tensor<3x4xf32>
func.func @forward() -> tensor<f32> {
  %x = mt.param @x : tensor<2x6xf32>
  %y = mt.param @y : tensor<1x6xf32>
  %w = mt.param @w : tensor<3x4xf32>
  %mask = mt.constant dense<[[true, false, true, false], [false, true, true, true], [true, true, false, false]]> : tensor<3x4xi1>
  %idx = mt.constant dense<[2, 0, 2]> : tensor<3xi64>
  %fill = mt.constant dense<0.5> : tensor<f32>
  %e = mt.expand %y : tensor<1x6xf32> -> tensor<2x6xf32>
  %c = mt.concat %x, %e axis = 0 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<4x6xf32>
  %t = mt.transpose %c permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %s = mt.slice %t starts = [0, 0] limits = [6, 4] strides = [2, 1] : tensor<6x4xf32> -> tensor<3x4xf32>
  %r = mt.reshape %s : tensor<3x4xf32> -> tensor<4x3xf32>
  %g = mt.gather %r, %idx axis = 1 : (tensor<4x3xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  %h = mt.reshape %g : tensor<4x3xf32> -> tensor<3x4xf32>
  %wh = mt.where %mask, %h, %fill : (tensor<3x4xi1>, tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %d = mt.cast %wh : tensor<3x4xf32> -> tensor<3x4xf64>
  %f = mt.cast %d : tensor<3x4xf64> -> tensor<3x4xf32>
  %k = mt.mul %f, %w : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %loss = mt.reduce_sum %k axes = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
