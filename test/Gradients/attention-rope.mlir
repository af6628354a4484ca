// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests mt.attention_grad (causal, grouped-query heads: 4 query heads over 2 key/value heads,
// and non-causal) and mt.rope_grad with cos/sin that differ between the two halves.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @q : tensor<1x4x5x4xf32>
mt.parameter @k : tensor<1x2x5x4xf32>
mt.parameter @v : tensor<1x2x5x4xf32>
mt.parameter @cos : tensor<1x1x5x4xf32>
mt.parameter @sin : tensor<1x1x5x4xf32>
mt.parameter @w : tensor<1x4x5x4xf32>
func.func @forward() -> tensor<f32> {
  %q = mt.param @q : tensor<1x4x5x4xf32>
  %k = mt.param @k : tensor<1x2x5x4xf32>
  %v = mt.param @v : tensor<1x2x5x4xf32>
  %cos = mt.param @cos : tensor<1x1x5x4xf32>
  %sin = mt.param @sin : tensor<1x1x5x4xf32>
  %w = mt.param @w : tensor<1x4x5x4xf32>
  %qr = mt.rope %q, %cos, %sin : (tensor<1x4x5x4xf32>, tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<1x4x5x4xf32>
  %kr = mt.rope %k, %cos, %sin : (tensor<1x2x5x4xf32>, tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<1x2x5x4xf32>
  %a = mt.attention %qr, %kr, %v scale = 0.5 causal : (tensor<1x4x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x4x5x4xf32>
  %b = mt.attention %a, %kr, %v scale = 0.3 : (tensor<1x4x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x4x5x4xf32>
  %m = mt.mul %b, %w : (tensor<1x4x5x4xf32>, tensor<1x4x5x4xf32>) -> tensor<1x4x5x4xf32>
  %loss = mt.reduce_sum %m axes = [0, 1, 2, 3] : tensor<1x4x5x4xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
