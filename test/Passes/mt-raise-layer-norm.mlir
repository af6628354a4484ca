// RUN: mt-opt %s --split-input-file --mt-raise-layer-norm | FileCheck %s

// Tests that the opset < 17 chain, division by sqrt(var + eps), weight and bias, becomes one
// mt.layer_norm with the bias.
// CHECK-LABEL: func.func @div_sqrt_with_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>, %[[W:.*]]: tensor<32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK: %[[Y:.*]] = mt.layer_norm %[[X]], %[[W]], %[[B]] epsilon = 9.999999{{[0-9]*}}E-6
// CHECK-NOT: mt.reduce_mean
// CHECK-NOT: mt.sqrt
// CHECK: return %[[Y]]
func.func @div_sqrt_with_bias(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<2x16x32xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %m = mt.reduce_mean %x axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %d = mt.sub %x, %m : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %q = mt.pow %d, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %v = mt.reduce_mean %q axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %ve = mt.add %v, %eps : (tensor<2x16x1xf32>, tensor<f32>) -> tensor<2x16x1xf32>
  %s = mt.sqrt %ve : tensor<2x16x1xf32>
  %n = mt.div %d, %s : (tensor<2x16x32xf32>, tensor<2x16x1xf32>) -> tensor<2x16x32xf32>
  %nw = mt.mul %n, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %y = mt.add %nw, %b : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that rsqrt, d * d, the weight on the left and the bias on the left are raised.
// CHECK-LABEL: func.func @rsqrt_bias_first
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK: mt.layer_norm %[[X]], %[[W]], %[[B]] epsilon
// CHECK-NOT: mt.rsqrt
func.func @rsqrt_bias_first(%x: tensor<8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<8x64xf32> {
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %m = mt.reduce_mean %x axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %d = mt.sub %x, %m : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %q = mt.mul %d, %d : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %v = mt.reduce_mean %q axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %ve = mt.add %eps, %v : (tensor<f32>, tensor<8x1xf32>) -> tensor<8x1xf32>
  %r = mt.rsqrt %ve : tensor<8x1xf32>
  %n = mt.mul %d, %r : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %nw = mt.mul %w, %n : (tensor<64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = mt.add %b, %nw : (tensor<64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// Tests that reciprocal(sqrt) without a bias becomes a layer_norm without one.
// CHECK-LABEL: func.func @reciprocal_no_bias
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<64xf32>)
// CHECK: mt.layer_norm %[[X]], %[[W]] epsilon
// CHECK-NOT: mt.reciprocal
func.func @reciprocal_no_bias(%x: tensor<8x64xf32>, %w: tensor<64xf32>) -> tensor<8x64xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %m = mt.reduce_mean %x axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %d = mt.sub %x, %m : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %q = mt.pow %d, %two : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %v = mt.reduce_mean %q axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %ve = mt.add %v, %eps : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %s = mt.sqrt %ve : tensor<8x1xf32>
  %r = mt.reciprocal %s : tensor<8x1xf32>
  %n = mt.mul %r, %d : (tensor<8x1xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = mt.mul %n, %w : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// Tests that a bias is not folded into a layer_norm whose result has another use.
// CHECK-LABEL: func.func @bias_with_shared_norm
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK: %[[N:.*]] = mt.layer_norm %[[X]], %[[W]] epsilon
// CHECK: mt.add %[[N]], %[[B]]
func.func @bias_with_shared_norm(%x: tensor<8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %m = mt.reduce_mean %x axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %d = mt.sub %x, %m : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %q = mt.pow %d, %two : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %v = mt.reduce_mean %q axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %ve = mt.add %v, %eps : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %s = mt.sqrt %ve : tensor<8x1xf32>
  %n = mt.div %d, %s : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %nw = mt.mul %n, %w : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %y = mt.add %nw, %b : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y, %nw : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Tests that a variance over a non-last axis is not raised (and does not crash the pass).
// CHECK-LABEL: func.func @variance_over_other_axis
// CHECK-NOT: mt.layer_norm
// CHECK: mt.sqrt
func.func @variance_over_other_axis(%x: tensor<8x64xf32>, %w: tensor<64xf32>) -> tensor<8x64xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %m = mt.reduce_mean %x axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %d = mt.sub %x, %m : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %q = mt.pow %d, %two : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %v = mt.reduce_mean %q axes = [0] keepdims : tensor<8x64xf32> -> tensor<1x64xf32>
  %ve = mt.add %v, %eps : (tensor<1x64xf32>, tensor<f32>) -> tensor<1x64xf32>
  %s = mt.sqrt %ve : tensor<1x64xf32>
  %n = mt.div %d, %s : (tensor<8x64xf32>, tensor<1x64xf32>) -> tensor<8x64xf32>
  %y = mt.mul %n, %w : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// Tests that centering by the mean over a non-last axis is not raised.
// CHECK-LABEL: func.func @centering_over_other_axis
// CHECK-NOT: mt.layer_norm
// CHECK: mt.sqrt
func.func @centering_over_other_axis(%x: tensor<8x64xf32>, %w: tensor<64xf32>) -> tensor<8x64xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %m = mt.reduce_mean %x axes = [0] keepdims : tensor<8x64xf32> -> tensor<1x64xf32>
  %d = mt.sub %x, %m : (tensor<8x64xf32>, tensor<1x64xf32>) -> tensor<8x64xf32>
  %q = mt.pow %d, %two : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %v = mt.reduce_mean %q axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %ve = mt.add %v, %eps : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %s = mt.sqrt %ve : tensor<8x1xf32>
  %n = mt.div %d, %s : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %y = mt.mul %n, %w : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// Tests that an uncentered input (the RMSNorm chain) is not raised as a layer norm.
// CHECK-LABEL: func.func @not_centered
// CHECK-NOT: mt.layer_norm
// CHECK: mt.sqrt
func.func @not_centered(%x: tensor<8x64xf32>, %w: tensor<64xf32>) -> tensor<8x64xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %q = mt.pow %x, %two : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %v = mt.reduce_mean %q axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %ve = mt.add %v, %eps : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %s = mt.sqrt %ve : tensor<8x1xf32>
  %n = mt.div %x, %s : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %y = mt.mul %n, %w : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// Tests that a weight that is not of the last axis' size (a per-row scale) is not raised.
// CHECK-LABEL: func.func @weight_not_channel_vector
// CHECK-NOT: mt.layer_norm
// CHECK: mt.sqrt
func.func @weight_not_channel_vector(%x: tensor<8x64xf32>, %w: tensor<8x1xf32>) -> tensor<8x64xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %m = mt.reduce_mean %x axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %d = mt.sub %x, %m : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %q = mt.pow %d, %two : (tensor<8x64xf32>, tensor<f32>) -> tensor<8x64xf32>
  %v = mt.reduce_mean %q axes = [1] keepdims : tensor<8x64xf32> -> tensor<8x1xf32>
  %ve = mt.add %v, %eps : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %s = mt.sqrt %ve : tensor<8x1xf32>
  %n = mt.div %d, %s : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %y = mt.mul %n, %w : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
