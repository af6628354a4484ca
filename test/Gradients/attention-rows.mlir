// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests sequence-major mt.attention_grad (q, k, v and the result [B, T, H, D], the rows of the
// projections): on the CUDA backend's tensor-core path (depth 64, causal, grouped-query heads
// 4 over 2, 100 positions; depth 128, 2 query heads over 1, 130 positions) and its general
// one (depth 16 under a key span of left and right padding, a sliding window and a soft cap).
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @q64 : tensor<2x100x4x64xf32>
mt.parameter @k64 : tensor<2x100x2x64xf32>
mt.parameter @v64 : tensor<2x100x2x64xf32>
mt.parameter @w64 : tensor<2x100x4x64xf32>
mt.parameter @q128 : tensor<1x130x2x128xf32>
mt.parameter @k128 : tensor<1x130x1x128xf32>
mt.parameter @v128 : tensor<1x130x1x128xf32>
mt.parameter @w128 : tensor<1x130x2x128xf32>
mt.parameter @q16 : tensor<2x16x4x16xf32>
mt.parameter @k16 : tensor<2x16x2x16xf32>
mt.parameter @v16 : tensor<2x16x2x16xf32>
mt.parameter @w16 : tensor<2x16x4x16xf32>
func.func @forward() -> tensor<f32> {
  %q64 = mt.param @q64 : tensor<2x100x4x64xf32>
  %k64 = mt.param @k64 : tensor<2x100x2x64xf32>
  %v64 = mt.param @v64 : tensor<2x100x2x64xf32>
  %w64 = mt.param @w64 : tensor<2x100x4x64xf32>
  %q128 = mt.param @q128 : tensor<1x130x2x128xf32>
  %k128 = mt.param @k128 : tensor<1x130x1x128xf32>
  %v128 = mt.param @v128 : tensor<1x130x1x128xf32>
  %w128 = mt.param @w128 : tensor<1x130x2x128xf32>
  %q16 = mt.param @q16 : tensor<2x16x4x16xf32>
  %k16 = mt.param @k16 : tensor<2x16x2x16xf32>
  %v16 = mt.param @v16 : tensor<2x16x2x16xf32>
  %w16 = mt.param @w16 : tensor<2x16x4x16xf32>
  %a = mt.attention %q64, %k64, %v64 scale = 40.0 causal sequence_major : (tensor<2x100x4x64xf32>, tensor<2x100x2x64xf32>, tensor<2x100x2x64xf32>) -> tensor<2x100x4x64xf32>
  %am = mt.mul %a, %w64 : (tensor<2x100x4x64xf32>, tensor<2x100x4x64xf32>) -> tensor<2x100x4x64xf32>
  %la = mt.reduce_sum %am axes = [0, 1, 2, 3] : tensor<2x100x4x64xf32> -> tensor<f32>
  %b = mt.attention %q128, %k128, %v128 scale = 28.0 causal sequence_major : (tensor<1x130x2x128xf32>, tensor<1x130x1x128xf32>, tensor<1x130x1x128xf32>) -> tensor<1x130x2x128xf32>
  %bm = mt.mul %b, %w128 : (tensor<1x130x2x128xf32>, tensor<1x130x2x128xf32>) -> tensor<1x130x2x128xf32>
  %lb = mt.reduce_sum %bm axes = [0, 1, 2, 3] : tensor<1x130x2x128xf32> -> tensor<f32>
  %m16 = mt.constant dense<[[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]]> : tensor<2x16xi64>
  %n16 = mt.key_span %m16 : tensor<2x16xi64> -> tensor<2x2xi64>
  %c = mt.attention %q16, %k16, %v16 key_span %n16 scale = 2.0 causal window = 5 softcap = 3.0 sequence_major : (tensor<2x16x4x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x2xi64>) -> tensor<2x16x4x16xf32>
  %cm = mt.mul %c, %w16 : (tensor<2x16x4x16xf32>, tensor<2x16x4x16xf32>) -> tensor<2x16x4x16xf32>
  %lc = mt.reduce_sum %cm axes = [0, 1, 2, 3] : tensor<2x16x4x16xf32> -> tensor<f32>
  %lab = mt.add %la, %lb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %loss = mt.add %lab, %lc : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
