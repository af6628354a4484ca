// RUN: mt-opt %s --split-input-file --mt-split-micro-batches=count=2 | FileCheck %s
// RUN: mt-opt %s --split-input-file --mt-split-micro-batches=count=2 --mt-autodiff | FileCheck %s --check-prefix=LOSS

// Tests that every argument and output is repeated per micro-batch with ".m" names, that
// parameter reads are shared, and that each op is followed by its copy for the next
// micro-batch (so a layer's calls end up adjacent); autodiff then averages the two losses.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xi64> {mt.name = "input_ids.0"}, %[[B:.*]]: tensor<2x3xi64> {mt.name = "input_ids.1"})
// CHECK-SAME: -> (tensor<2x3x5xf32>, tensor<2x3x5xf32>)
// CHECK: %[[W:.*]] = mt.param @wte
// CHECK-NOT: mt.param
// CHECK: %[[E0:.*]] = mt.embedding %[[W]], %[[A]]
// CHECK-NEXT: %[[E1:.*]] = mt.embedding %[[W]], %[[B]]
// CHECK-NEXT: %[[L0:.*]] = mt.linear %[[E0]], %[[W]]
// CHECK-NEXT: %[[L1:.*]] = mt.linear %[[E1]], %[[W]]
// CHECK-NEXT: return %[[L0]], %[[L1]]
// LOSS-LABEL: func.func @train_step
// LOSS-SAME: {mt.name = "targets.0"}, %{{.*}}: tensor<2x3xi64> {mt.name = "targets.1"}
// LOSS: %[[C0:.*]] = mt.linear_cross_entropy
// LOSS: %[[C1:.*]] = mt.linear_cross_entropy
// LOSS: %[[S:.*]] = mt.add %[[C0]], %[[C1]]
// LOSS: %[[HALF:.*]] = mt.constant dense<5.000000e-01> : tensor<f32>
// LOSS: mt.mul %[[S]], %[[HALF]]
mt.parameter @wte : tensor<5x4xf32>
func.func @forward(%ids: tensor<2x3xi64> {mt.name = "input_ids"}) -> tensor<2x3x5xf32> {
  %wte = mt.param @wte : tensor<5x4xf32>
  %e = mt.embedding %wte, %ids : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %logits = mt.linear %e, %wte transpose_weight : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %logits : tensor<2x3x5xf32>
}
