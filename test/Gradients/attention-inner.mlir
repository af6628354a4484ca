// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.attention_grad where its gradients flow on into other ops (q, k and v are products
// of parameters), so that on the device they stay in bf16 as in a model's layers and cuDNN's
// backward may serve them: depth 128, causal, grouped-query heads 4 over 2, 256 positions,
// in both layouts.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @q : tensor<1x4x256x128xf32>
mt.parameter @k : tensor<1x2x256x128xf32>
mt.parameter @v : tensor<1x2x256x128xf32>
mt.parameter @sq : tensor<1x4x256x128xf32>
mt.parameter @sk : tensor<1x2x256x128xf32>
mt.parameter @sv : tensor<1x2x256x128xf32>
mt.parameter @w : tensor<1x4x256x128xf32>
func.func @forward() -> tensor<f32> {
  %pq = mt.param @q : tensor<1x4x256x128xf32>
  %pk = mt.param @k : tensor<1x2x256x128xf32>
  %pv = mt.param @v : tensor<1x2x256x128xf32>
  %sq = mt.param @sq : tensor<1x4x256x128xf32>
  %sk = mt.param @sk : tensor<1x2x256x128xf32>
  %sv = mt.param @sv : tensor<1x2x256x128xf32>
  %w = mt.param @w : tensor<1x4x256x128xf32>
  %q = mt.mul %pq, %sq : (tensor<1x4x256x128xf32>, tensor<1x4x256x128xf32>) -> tensor<1x4x256x128xf32>
  %k = mt.mul %pk, %sk : (tensor<1x2x256x128xf32>, tensor<1x2x256x128xf32>) -> tensor<1x2x256x128xf32>
  %v = mt.mul %pv, %sv : (tensor<1x2x256x128xf32>, tensor<1x2x256x128xf32>) -> tensor<1x2x256x128xf32>
  %a = mt.attention %q, %k, %v scale = 60.0 causal : (tensor<1x4x256x128xf32>, tensor<1x2x256x128xf32>, tensor<1x2x256x128xf32>) -> tensor<1x4x256x128xf32>
  %am = mt.mul %a, %w : (tensor<1x4x256x128xf32>, tensor<1x4x256x128xf32>) -> tensor<1x4x256x128xf32>
  %la = mt.reduce_sum %am axes = [0, 1, 2, 3] : tensor<1x4x256x128xf32> -> tensor<f32>
  // The same rows read as [B, T, H, D] (the bytes of a [1, 256, 4, 128] tensor).
  %qr = mt.reshape %q : tensor<1x4x256x128xf32> -> tensor<1x256x4x128xf32>
  %kr = mt.reshape %k : tensor<1x2x256x128xf32> -> tensor<1x256x2x128xf32>
  %vr = mt.reshape %v : tensor<1x2x256x128xf32> -> tensor<1x256x2x128xf32>
  %b = mt.attention %qr, %kr, %vr scale = 60.0 causal sequence_major : (tensor<1x256x4x128xf32>, tensor<1x256x2x128xf32>, tensor<1x256x2x128xf32>) -> tensor<1x256x4x128xf32>
  %wr = mt.reshape %w : tensor<1x4x256x128xf32> -> tensor<1x256x4x128xf32>
  %bm = mt.mul %b, %wr : (tensor<1x256x4x128xf32>, tensor<1x256x4x128xf32>) -> tensor<1x256x4x128xf32>
  %lb = mt.reduce_sum %bm axes = [0, 1, 2, 3] : tensor<1x256x4x128xf32> -> tensor<f32>
  %loss = mt.add %la, %lb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
