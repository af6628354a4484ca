// RUN: mtc %s -o %t.mtp && mt-run %t.mtp --check-gradients | FileCheck %s
// Tests the rules of mt.embedding (repeated ids accumulate into one row) and of the appended
// cross-entropy, with the embedding tied to the head as in GPT-2.
// CHECK: gradient check: {{[0-9]+}} elements, worst error
mt.parameter @wte : tensor<5x4xf32>
mt.parameter @g : tensor<4xf32>
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x5xf32> {
  %wte = mt.param @wte : tensor<5x4xf32>
  %g = mt.param @g : tensor<4xf32>
  %e = mt.embedding %wte, %ids : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %n = mt.rms_norm %e, %g epsilon = 1.0e-05 : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %logits = mt.linear %n, %wte transpose_weight : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %logits : tensor<2x3x5xf32>
}
