// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.rms_norm_grad and mt.layer_norm_grad (with and without bias), and the reductions'
// rules (reduce_mean with keepdims, reduce_max without, reduce_sum).
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @x : tensor<2x3x8xf32>
mt.parameter @g1 : tensor<8xf32>
mt.parameter @g2 : tensor<8xf32>
mt.parameter @b2 : tensor<8xf32>
mt.parameter @g3 : tensor<8xf32>
mt.parameter @w : tensor<2x3x8xf32>
func.func @forward() -> tensor<f32> {
  %x = mt.param @x : tensor<2x3x8xf32>
  %g1 = mt.param @g1 : tensor<8xf32>
  %g2 = mt.param @g2 : tensor<8xf32>
  %b2 = mt.param @b2 : tensor<8xf32>
  %g3 = mt.param @g3 : tensor<8xf32>
  %w = mt.param @w : tensor<2x3x8xf32>
  %r = mt.rms_norm %x, %g1 epsilon = 1.0e-05 : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %l = mt.layer_norm %r, %g2, %b2 epsilon = 1.0e-05 : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %n = mt.layer_norm %l, %g3 epsilon = 1.0e-05 : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %m = mt.reduce_mean %n axes = [1] keepdims : tensor<2x3x8xf32> -> tensor<2x1x8xf32>
  %d = mt.sub %n, %m : (tensor<2x3x8xf32>, tensor<2x1x8xf32>) -> tensor<2x3x8xf32>
  %mx = mt.reduce_max %n axes = [2] : tensor<2x3x8xf32> -> tensor<2x3xf32>
  %mxb = mt.reshape %mx : tensor<2x3xf32> -> tensor<2x3x1xf32>
  %dm = mt.mul %d, %mxb : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %k = mt.mul %dm, %w : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %loss = mt.reduce_sum %k axes = [0, 1, 2] : tensor<2x3x8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
