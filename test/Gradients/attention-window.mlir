// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.attention_grad under a sliding window and soft-capped logits, where the CUDA
// backend takes its tensor-core path (depth 64, grouped-query heads, 100 positions with the
// second sequence's 61 tokens after 9 padding ones, a window of 37 across the 64-key tiles,
// capped at 3; depth 128, 130 positions, a window of 70 uncapped, and a cap of 2 without
// causality) and its general one (depth 16, a window of 3 and a cap of 1.5 over a sequence
// of 9 tokens after 2 padding ones). Small caps bend the logits well into tanh's curve.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @q64 : tensor<2x4x100x64xf32>
mt.parameter @k64 : tensor<2x2x100x64xf32>
mt.parameter @v64 : tensor<2x2x100x64xf32>
mt.parameter @w64 : tensor<2x4x100x64xf32>
mt.parameter @q128 : tensor<1x2x130x128xf32>
mt.parameter @k128 : tensor<1x1x130x128xf32>
mt.parameter @v128 : tensor<1x1x130x128xf32>
mt.parameter @w128 : tensor<1x2x130x128xf32>
mt.parameter @q16 : tensor<2x2x16x16xf32>
mt.parameter @k16 : tensor<2x2x16x16xf32>
mt.parameter @v16 : tensor<2x2x16x16xf32>
mt.parameter @w16 : tensor<2x2x16x16xf32>
func.func @forward() -> tensor<f32> {
  %m100 = mt.constant dense<[[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]> : tensor<2x100xi64>
  %m16 = mt.constant dense<[[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]]> : tensor<2x16xi64>
  %n100 = mt.key_span %m100 : tensor<2x100xi64> -> tensor<2x2xi64>
  %n16 = mt.key_span %m16 : tensor<2x16xi64> -> tensor<2x2xi64>
  %q64 = mt.param @q64 : tensor<2x4x100x64xf32>
  %k64 = mt.param @k64 : tensor<2x2x100x64xf32>
  %v64 = mt.param @v64 : tensor<2x2x100x64xf32>
  %w64 = mt.param @w64 : tensor<2x4x100x64xf32>
  %q128 = mt.param @q128 : tensor<1x2x130x128xf32>
  %k128 = mt.param @k128 : tensor<1x1x130x128xf32>
  %v128 = mt.param @v128 : tensor<1x1x130x128xf32>
  %w128 = mt.param @w128 : tensor<1x2x130x128xf32>
  %q16 = mt.param @q16 : tensor<2x2x16x16xf32>
  %k16 = mt.param @k16 : tensor<2x2x16x16xf32>
  %v16 = mt.param @v16 : tensor<2x2x16x16xf32>
  %w16 = mt.param @w16 : tensor<2x2x16x16xf32>
  %a = mt.attention %q64, %k64, %v64 key_span %n100 scale = 4.0 causal window = 37 softcap = 3.0 : (tensor<2x4x100x64xf32>, tensor<2x2x100x64xf32>, tensor<2x2x100x64xf32>, tensor<2x2xi64>) -> tensor<2x4x100x64xf32>
  %lam = mt.mul %a, %w64 : (tensor<2x4x100x64xf32>, tensor<2x4x100x64xf32>) -> tensor<2x4x100x64xf32>
  %la = mt.reduce_sum %lam axes = [0, 1, 2, 3] : tensor<2x4x100x64xf32> -> tensor<f32>
  %b = mt.attention %q128, %k128, %v128 scale = 28.0 causal window = 70 : (tensor<1x2x130x128xf32>, tensor<1x1x130x128xf32>, tensor<1x1x130x128xf32>) -> tensor<1x2x130x128xf32>
  %c = mt.attention %q128, %k128, %v128 scale = 2.0 softcap = 2.0 : (tensor<1x2x130x128xf32>, tensor<1x1x130x128xf32>, tensor<1x1x130x128xf32>) -> tensor<1x2x130x128xf32>
  %bc = mt.add %b, %c : (tensor<1x2x130x128xf32>, tensor<1x2x130x128xf32>) -> tensor<1x2x130x128xf32>
  %lbm = mt.mul %bc, %w128 : (tensor<1x2x130x128xf32>, tensor<1x2x130x128xf32>) -> tensor<1x2x130x128xf32>
  %lb = mt.reduce_sum %lbm axes = [0, 1, 2, 3] : tensor<1x2x130x128xf32> -> tensor<f32>
  %d = mt.attention %q16, %k16, %v16 key_span %n16 scale = 4.0 causal window = 3 softcap = 1.5 : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2xi64>) -> tensor<2x2x16x16xf32>
  %ldm = mt.mul %d, %w16 : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32>
  %ld = mt.reduce_sum %ldm axes = [0, 1, 2, 3] : tensor<2x2x16x16xf32> -> tensor<f32>
  %lab = mt.add %la, %lb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %loss = mt.add %lab, %ld : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
