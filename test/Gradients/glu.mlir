// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.glu_grad for each gate activation (silu, gelu, gelu_tanh), on a shape whose size
// the CUDA kernels take in 16-byte pieces (64 elements) and one they take an element at a
// time (15).
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @gate : tensor<2x4x8xf32>
mt.parameter @up : tensor<2x4x8xf32>
mt.parameter @w : tensor<2x4x8xf32>
mt.parameter @odd : tensor<3x5xf32>
mt.parameter @v : tensor<3x5xf32>
func.func @forward() -> tensor<f32> {
  %gate = mt.param @gate : tensor<2x4x8xf32>
  %up = mt.param @up : tensor<2x4x8xf32>
  %w = mt.param @w : tensor<2x4x8xf32>
  %odd = mt.param @odd : tensor<3x5xf32>
  %v = mt.param @v : tensor<3x5xf32>
  %s = mt.glu "silu" %gate, %up : tensor<2x4x8xf32>
  %g = mt.glu "gelu" %s, %w : tensor<2x4x8xf32>
  %t = mt.glu "gelu_tanh" %g, %gate : tensor<2x4x8xf32>
  %o = mt.glu "silu" %odd, %v : tensor<3x5xf32>
  %a = mt.reduce_sum %t axes = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  %b = mt.reduce_sum %o axes = [0, 1] : tensor<3x5xf32> -> tensor<f32>
  %loss = mt.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
