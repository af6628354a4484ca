// RUN: mt-opt %s --split-input-file --mt-raise-rms-norm | FileCheck %s

// Tests that pow(x, 2), a keepdims mean over the last axis, a scalar epsilon, rsqrt and a
// weight product on the right become mt.rms_norm.
// CHECK-LABEL: func.func @rsqrt_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>, %[[W:.*]]: tensor<32xf32>)
// CHECK: %[[Y:.*]] = mt.rms_norm %[[X]], %[[W]] epsilon = 9.99999997{{[0-9]*}}E-7
// CHECK-NOT: mt.rsqrt
// CHECK-NOT: mt.reduce_mean
// CHECK: return %[[Y]]
func.func @rsqrt_form(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %r = mt.rsqrt %v : tensor<2x16x1xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that x * x for the square, epsilon on the left of the sum, reciprocal(sqrt) with the
// factor first and the weight on the left are raised too.
// CHECK-LABEL: func.func @reciprocal_sqrt_form
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>, %[[W:.*]]: tensor<64xf32>)
// CHECK: mt.rms_norm %[[X]], %[[W]] epsilon = 9.999999{{[0-9]*}}E-6
// CHECK-NOT: mt.sqrt
// CHECK-NOT: mt.reciprocal
func.func @reciprocal_sqrt_form(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %p = mt.mul %x, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %m = mt.reduce_mean %p axes = [1] keepdims : tensor<4x64xf32> -> tensor<4x1xf32>
  %v = mt.add %eps, %m : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = mt.sqrt %v : tensor<4x1xf32>
  %r = mt.reciprocal %s : tensor<4x1xf32>
  %n = mt.mul %r, %x : (tensor<4x1xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = mt.mul %w, %n : (tensor<64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that div(1, sqrt) multiplied into x (the form of the pass's header comment) is raised.
// CHECK-LABEL: func.func @one_over_sqrt_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>, %[[W:.*]]: tensor<32xf32>)
// CHECK: mt.rms_norm %[[X]], %[[W]] epsilon
// CHECK-NOT: mt.div
// CHECK-NOT: mt.sqrt
func.func @one_over_sqrt_form(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = mt.sqrt %v : tensor<2x16x1xf32>
  %r = mt.div %one, %s : (tensor<f32>, tensor<2x16x1xf32>) -> tensor<2x16x1xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %w, %n : (tensor<32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that div(x, sqrt) is raised, with a weight read from a parameter.
mt.parameter @norm : tensor<32xf32>
// CHECK-LABEL: func.func @x_over_sqrt_form
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>)
// CHECK: %[[W:.*]] = mt.param @norm
// CHECK: mt.rms_norm %[[X]], %[[W]] epsilon
// CHECK-NOT: mt.div
func.func @x_over_sqrt_form(%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %w = mt.param @norm : tensor<32xf32>
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = mt.sqrt %v : tensor<2x16x1xf32>
  %n = mt.div %x, %s : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that an epsilon that is not a single value (a per-channel vector) is not raised.
// CHECK-LABEL: func.func @non_scalar_epsilon
// CHECK-NOT: mt.rms_norm
// CHECK: mt.rsqrt
func.func @non_scalar_epsilon(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<[[1.0e-06], [2.0e-06]]> : tensor<2x1xf32>
  %p = mt.pow %x, %two : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %m = mt.reduce_mean %p axes = [1] keepdims : tensor<2x4xf32> -> tensor<2x1xf32>
  %v = mt.add %m, %eps : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  %r = mt.rsqrt %v : tensor<2x1xf32>
  %n = mt.mul %x, %r : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %y = mt.mul %n, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Tests that an epsilon that is not a constant is not raised.
// CHECK-LABEL: func.func @variable_epsilon
// CHECK-NOT: mt.rms_norm
// CHECK: mt.rsqrt
func.func @variable_epsilon(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>, %eps: tensor<f32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %r = mt.rsqrt %v : tensor<2x16x1xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that a mean over a non-last axis is not raised (and does not crash the pass).
// CHECK-LABEL: func.func @mean_over_other_axis
// CHECK-NOT: mt.rms_norm
// CHECK: mt.reduce_mean %{{.*}} axes = [1] keepdims
func.func @mean_over_other_axis(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [1] keepdims : tensor<2x16x32xf32> -> tensor<2x1x32xf32>
  %v = mt.add %m, %eps : (tensor<2x1x32xf32>, tensor<f32>) -> tensor<2x1x32xf32>
  %r = mt.rsqrt %v : tensor<2x1x32xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x1x32xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that a mean without keepdims is not raised.
// CHECK-LABEL: func.func @mean_without_keepdims
// CHECK-NOT: mt.rms_norm
// CHECK: mt.rsqrt
func.func @mean_without_keepdims(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  %m = mt.reduce_mean %p axes = [1] : tensor<4x64xf32> -> tensor<4xf32>
  %v = mt.add %m, %eps : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %r = mt.rsqrt %v : tensor<4xf32>
  %rr = mt.reshape %r : tensor<4xf32> -> tensor<4x1xf32>
  %n = mt.mul %x, %rr : (tensor<4x64xf32>, tensor<4x1xf32>) -> tensor<4x64xf32>
  %y = mt.mul %n, %w : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that a normalization without a weight product stays as it is.
// CHECK-LABEL: func.func @no_weight
// CHECK-NOT: mt.rms_norm
// CHECK: mt.rsqrt
func.func @no_weight(%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %r = mt.rsqrt %v : tensor<2x16x1xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  return %n : tensor<2x16x32xf32>
}

// -----

// Tests that the mean of a different tensor's square (y^2 normalizing x) is not raised.
// CHECK-LABEL: func.func @square_of_other_value
// CHECK-NOT: mt.rms_norm
// CHECK: mt.rsqrt
func.func @square_of_other_value(%x: tensor<2x16x32xf32>, %z: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %z, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %r = mt.rsqrt %v : tensor<2x16x1xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that pow(x, 3) is not mistaken for the square.
// CHECK-LABEL: func.func @cube_not_square
// CHECK-NOT: mt.rms_norm
// CHECK: mt.pow
func.func @cube_not_square(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %three = mt.constant dense<3.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %p = mt.pow %x, %three : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %r = mt.rsqrt %v : tensor<2x16x1xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that a negative epsilon, which mt.rms_norm cannot hold, leaves the chain unraised
// (rather than producing an op that fails verification).
// CHECK-LABEL: func.func @negative_epsilon
// CHECK-NOT: mt.rms_norm
// CHECK: mt.rsqrt
func.func @negative_epsilon(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<-1.0e-06> : tensor<f32>
  %p = mt.pow %x, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %m = mt.reduce_mean %p axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %v = mt.add %m, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %r = mt.rsqrt %v : tensor<2x16x1xf32>
  %n = mt.mul %x, %r : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %y = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}
