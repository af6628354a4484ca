// RUN: mt-opt %s --split-input-file --verify-diagnostics --mt-autodiff | FileCheck %s

// Tests that a model ending in logits gets a `targets` argument shaped like its token input,
// the mean cross-entropy as loss, and one gradient per parameter in declaration order; the
// gradients of a table used twice (embedding and tied head) are summed. The head's logits
// feed only the loss, so the two fuse: mt.linear_cross_entropy over chunks of 1 row (a
// quarter of the 6 logits rows at the least, rounded down), and no logits are made whole.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x3xi64> {mt.name = "input_ids"}, %[[TARGETS:.*]]: tensor<2x3xi64> {mt.name = "targets"})
// CHECK-SAME: -> (tensor<f32>, tensor<5x4xf32> {mt.gradient_of = @wte}, tensor<4xf32> {mt.gradient_of = @g})
// CHECK-NOT: mt.linear
// CHECK: %[[N:.*]] = mt.rms_norm
// CHECK: %[[LOSS:.*]] = mt.linear_cross_entropy %[[N]], %[[WTE:.*]], %[[TARGETS]] transpose_weight chunk = 1
// CHECK: %[[DN:.*]], %[[DHEAD:.*]] = mt.linear_cross_entropy_grad %[[N]], %[[WTE]], %[[TARGETS]], %{{.*}} transpose_weight chunk = 1
// CHECK: mt.rms_norm_grad %{{.*}}, %{{.*}}, %[[DN]]
// CHECK: %[[TABLE:.*]] = mt.scatter_add %[[IDS]]
// CHECK: %[[SUM:.*]] = mt.add %[[DHEAD]], %[[TABLE]]
// CHECK: return %[[LOSS]], %[[SUM]], %{{.*}} : tensor<f32>, tensor<5x4xf32>, tensor<4xf32>
mt.parameter @wte : tensor<5x4xf32>
mt.parameter @g : tensor<4xf32>
func.func @forward(%ids: tensor<2x3xi64> {mt.name = "input_ids"}) -> tensor<2x3x5xf32> {
  %wte = mt.param @wte : tensor<5x4xf32>
  %g = mt.param @g : tensor<4xf32>
  %e = mt.embedding %wte, %ids : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %n = mt.rms_norm %e, %g epsilon = 1.0e-05 : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %logits = mt.linear %n, %wte transpose_weight : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %logits : tensor<2x3x5xf32>
}

// -----

// Tests that a model returning a scalar is its own loss (no targets argument), and that a
// parameter the loss does not depend on gets a zero gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%{{.*}}: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32> {mt.gradient_of = @w}, tensor<2xf32> {mt.gradient_of = @unused})
// CHECK: %[[ZERO:.*]] = mt.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[ZERO]]
mt.parameter @w : tensor<3xf32>
mt.parameter @unused : tensor<2xf32>
func.func @forward(%x: tensor<3xf32>) -> tensor<f32> {
  %w = mt.param @w : tensor<3xf32>
  %m = mt.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = mt.reduce_sum %m axes = [0] : tensor<3xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that attention's gradient reads the forward's output and log-sum-exp: the attention
// is remade with its lse as a second result (one per query row), which takes over its uses.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: mt.attention %{{.*}} -> tensor<2x4x16x8xf32>
// CHECK: %[[OUT:[a-z_0-9]+]], %[[LSE:[a-z_0-9]+]] = mt.attention %[[Q:[a-z_0-9]+]], %[[K:[a-z_0-9]+]], %[[K]] scale = 5.000000e-01 causal window = 4 : {{.*}} -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
// CHECK: mt.reduce_sum %[[OUT]]
// CHECK: mt.attention_grad %[[Q]], %[[K]], %[[K]], %{{.*}} output %[[OUT]] lse %[[LSE]] scale = 5.000000e-01 causal window = 4
mt.parameter @q : tensor<2x4x16x8xf32>
mt.parameter @k : tensor<2x2x16x8xf32>
func.func @forward() -> tensor<f32> {
  %q = mt.param @q : tensor<2x4x16x8xf32>
  %k = mt.param @k : tensor<2x2x16x8xf32>
  %a = mt.attention %q, %k, %k scale = 0.5 causal window = 4 : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x16x8xf32>
  %s = mt.reduce_sum %a axes = [0, 1, 2, 3] : tensor<2x4x16x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that a gated unit's gradient is one mt.glu_grad giving both halves' gradients.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[H:.*]] = mt.glu "gelu_tanh" %[[GATE:[0-9]+]], %[[UP:[0-9]+]] : tensor<4x8xf32>
// CHECK: %[[DG:[a-z_0-9]+]], %[[DU:[a-z_0-9]+]] = mt.glu_grad "gelu_tanh" %[[GATE]], %[[UP]], %{{.*}} : tensor<4x8xf32>
// CHECK: return %{{.*}}, %[[DG]], %[[DU]]
mt.parameter @gate : tensor<4x8xf32>
mt.parameter @up : tensor<4x8xf32>
func.func @forward() -> tensor<f32> {
  %gate = mt.param @gate : tensor<4x8xf32>
  %up = mt.param @up : tensor<4x8xf32>
  %h = mt.glu "gelu_tanh" %gate, %up : tensor<4x8xf32>
  %s = mt.reduce_sum %h axes = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that an op without a gradient rule on the loss's path (here a gradient op, which is
// never differentiated again) is an error naming it.
mt.parameter @w : tensor<3x4xf32>
func.func @forward() -> tensor<f32> {
  %w = mt.param @w : tensor<3x4xf32>
  // expected-error @+1 {{'mt.softmax_grad' op has no gradient rule, but the loss depends on it}}
  %d = mt.softmax_grad %w, %w axis = 1 : tensor<3x4xf32>
  %s = mt.reduce_sum %d axes = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that an output that is neither a scalar nor logits over a token input is an error.
func.func @forward(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{the model output 'tensor<3x4xf32>' is neither a scalar loss nor logits}}
  %y = mt.neg %x : tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
