// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.attention_grad at the head depths and lengths of real models, where the CUDA
// backend takes its tensor-core path: depth 64 causal with grouped-query heads (4 over 2) and
// 100 positions (not a multiple of its 64-row tiles), depth 128 with 2 query heads over 1,
// causal and not, 130 positions. Large scales keep the softmax far from uniform.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @q64 : tensor<2x4x100x64xf32>
mt.parameter @k64 : tensor<2x2x100x64xf32>
mt.parameter @v64 : tensor<2x2x100x64xf32>
mt.parameter @w64 : tensor<2x4x100x64xf32>
mt.parameter @q128 : tensor<1x2x130x128xf32>
mt.parameter @k128 : tensor<1x1x130x128xf32>
mt.parameter @v128 : tensor<1x1x130x128xf32>
mt.parameter @w128 : tensor<1x2x130x128xf32>
func.func @forward() -> tensor<f32> {
  %q64 = mt.param @q64 : tensor<2x4x100x64xf32>
  %k64 = mt.param @k64 : tensor<2x2x100x64xf32>
  %v64 = mt.param @v64 : tensor<2x2x100x64xf32>
  %w64 = mt.param @w64 : tensor<2x4x100x64xf32>
  %q128 = mt.param @q128 : tensor<1x2x130x128xf32>
  %k128 = mt.param @k128 : tensor<1x1x130x128xf32>
  %v128 = mt.param @v128 : tensor<1x1x130x128xf32>
  %w128 = mt.param @w128 : tensor<1x2x130x128xf32>
  %a = mt.attention %q64, %k64, %v64 scale = 40.0 causal : (tensor<2x4x100x64xf32>, tensor<2x2x100x64xf32>, tensor<2x2x100x64xf32>) -> tensor<2x4x100x64xf32>
  %am = mt.mul %a, %w64 : (tensor<2x4x100x64xf32>, tensor<2x4x100x64xf32>) -> tensor<2x4x100x64xf32>
  %la = mt.reduce_sum %am axes = [0, 1, 2, 3] : tensor<2x4x100x64xf32> -> tensor<f32>
  %b = mt.attention %q128, %k128, %v128 scale = 28.0 : (tensor<1x2x130x128xf32>, tensor<1x1x130x128xf32>, tensor<1x1x130x128xf32>) -> tensor<1x2x130x128xf32>
  %c = mt.attention %q128, %k128, %v128 scale = 28.0 causal : (tensor<1x2x130x128xf32>, tensor<1x1x130x128xf32>, tensor<1x1x130x128xf32>) -> tensor<1x2x130x128xf32>
  %bc = mt.add %b, %c : (tensor<1x2x130x128xf32>, tensor<1x2x130x128xf32>) -> tensor<1x2x130x128xf32>
  %bm = mt.mul %bc, %w128 : (tensor<1x2x130x128xf32>, tensor<1x2x130x128xf32>) -> tensor<1x2x130x128xf32>
  %lb = mt.reduce_sum %bm axes = [0, 1, 2, 3] : tensor<1x2x130x128xf32> -> tensor<f32>
  %loss = mt.add %la, %lb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
