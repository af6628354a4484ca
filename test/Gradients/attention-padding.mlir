// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.attention_grad under a key span (left and right padding, from mt.key_span of a
// mask) where the CUDA backend takes its tensor-core path (depth 64, causal, grouped-query
// heads, 100 positions: the first sequence's 30 tokens after 70 padding ones, past a whole
// 64-key tile, the second's 61 between 9 and 30; depth 128, causal and not, 130 positions,
// the second sequence all padding) and its general one (depth 16, 5 tokens between 3 and 8
// padding ones). The padding keys' gradients are zero; rows that see no key are zero.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @q64 : tensor<2x4x100x64xf32>
mt.parameter @k64 : tensor<2x2x100x64xf32>
mt.parameter @v64 : tensor<2x2x100x64xf32>
mt.parameter @w64 : tensor<2x4x100x64xf32>
mt.parameter @q128 : tensor<2x2x130x128xf32>
mt.parameter @k128 : tensor<2x1x130x128xf32>
mt.parameter @v128 : tensor<2x1x130x128xf32>
mt.parameter @w128 : tensor<2x2x130x128xf32>
mt.parameter @q16 : tensor<2x2x16x16xf32>
mt.parameter @k16 : tensor<2x2x16x16xf32>
mt.parameter @v16 : tensor<2x2x16x16xf32>
mt.parameter @w16 : tensor<2x2x16x16xf32>
func.func @forward() -> tensor<f32> {
  %m100 = mt.constant dense<[[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]> : tensor<2x100xi64>
  %m130 = mt.constant dense<[[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]> : tensor<2x130xi64>
  %m16 = mt.constant dense<[[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]]> : tensor<2x16xi64>
  %n100 = mt.key_span %m100 : tensor<2x100xi64> -> tensor<2x2xi64>
  %n130 = mt.key_span %m130 : tensor<2x130xi64> -> tensor<2x2xi64>
  %n16 = mt.key_span %m16 : tensor<2x16xi64> -> tensor<2x2xi64>
  %q64 = mt.param @q64 : tensor<2x4x100x64xf32>
  %k64 = mt.param @k64 : tensor<2x2x100x64xf32>
  %v64 = mt.param @v64 : tensor<2x2x100x64xf32>
  %w64 = mt.param @w64 : tensor<2x4x100x64xf32>
  %q128 = mt.param @q128 : tensor<2x2x130x128xf32>
  %k128 = mt.param @k128 : tensor<2x1x130x128xf32>
  %v128 = mt.param @v128 : tensor<2x1x130x128xf32>
  %w128 = mt.param @w128 : tensor<2x2x130x128xf32>
  %q16 = mt.param @q16 : tensor<2x2x16x16xf32>
  %k16 = mt.param @k16 : tensor<2x2x16x16xf32>
  %v16 = mt.param @v16 : tensor<2x2x16x16xf32>
  %w16 = mt.param @w16 : tensor<2x2x16x16xf32>
  %a = mt.attention %q64, %k64, %v64 key_span %n100 scale = 40.0 causal : (tensor<2x4x100x64xf32>, tensor<2x2x100x64xf32>, tensor<2x2x100x64xf32>, tensor<2x2xi64>) -> tensor<2x4x100x64xf32>
  %am = mt.mul %a, %w64 : (tensor<2x4x100x64xf32>, tensor<2x4x100x64xf32>) -> tensor<2x4x100x64xf32>
  %la = mt.reduce_sum %am axes = [0, 1, 2, 3] : tensor<2x4x100x64xf32> -> tensor<f32>
  %b = mt.attention %q128, %k128, %v128 key_span %n130 scale = 28.0 : (tensor<2x2x130x128xf32>, tensor<2x1x130x128xf32>, tensor<2x1x130x128xf32>, tensor<2x2xi64>) -> tensor<2x2x130x128xf32>
  %c = mt.attention %q128, %k128, %v128 key_span %n130 scale = 28.0 causal : (tensor<2x2x130x128xf32>, tensor<2x1x130x128xf32>, tensor<2x1x130x128xf32>, tensor<2x2xi64>) -> tensor<2x2x130x128xf32>
  %bc = mt.add %b, %c : (tensor<2x2x130x128xf32>, tensor<2x2x130x128xf32>) -> tensor<2x2x130x128xf32>
  %bm = mt.mul %bc, %w128 : (tensor<2x2x130x128xf32>, tensor<2x2x130x128xf32>) -> tensor<2x2x130x128xf32>
  %lb = mt.reduce_sum %bm axes = [0, 1, 2, 3] : tensor<2x2x130x128xf32> -> tensor<f32>
  %d = mt.attention %q16, %k16, %v16 key_span %n16 scale = 4.0 causal : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>, tensor<2x2xi64>) -> tensor<2x2x16x16xf32>
  %dm = mt.mul %d, %w16 : (tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) -> tensor<2x2x16x16xf32>
  %ld = mt.reduce_sum %dm axes = [0, 1, 2, 3] : tensor<2x2x16x16xf32> -> tensor<f32>
  %lab = mt.add %la, %lb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %loss = mt.add %lab, %ld : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
