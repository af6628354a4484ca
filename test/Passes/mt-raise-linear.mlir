// RUN: mt-opt %s --split-input-file --mt-raise-linear | FileCheck %s

// Tests that a matmul by a rank-2 parameter becomes mt.linear.
mt.parameter @w : tensor<32x96xf32>
// CHECK-LABEL: func.func @matmul_by_parameter
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>)
// CHECK: %[[W:.*]] = mt.param @w
// CHECK: %[[Y:.*]] = mt.linear %[[X]], %[[W]] : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
// CHECK-NOT: mt.matmul
// CHECK: return %[[Y]]
func.func @matmul_by_parameter(%x: tensor<2x16x32xf32>) -> tensor<2x16x96xf32> {
  %w = mt.param @w : tensor<32x96xf32>
  %y = mt.matmul %x, %w : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
  return %y : tensor<2x16x96xf32>
}

// -----

// Tests that transpose_rhs becomes transpose_weight and a bias parameter added after the
// product joins the linear.
mt.parameter @w : tensor<96x32xf32>
mt.parameter @b : tensor<96xf32>
// CHECK-LABEL: func.func @transposed_weight_with_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>)
// CHECK-DAG: %[[W:.*]] = mt.param @w
// CHECK-DAG: %[[B:.*]] = mt.param @b
// CHECK: %[[Y:.*]] = mt.linear %[[X]], %[[W]], %[[B]] transpose_weight : (tensor<2x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>) -> tensor<2x16x96xf32>
// CHECK-NOT: mt.add
// CHECK: return %[[Y]]
func.func @transposed_weight_with_bias(%x: tensor<2x16x32xf32>) -> tensor<2x16x96xf32> {
  %w = mt.param @w : tensor<96x32xf32>
  %b = mt.param @b : tensor<96xf32>
  %y = mt.matmul %x, %w transpose_rhs : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
  %z = mt.add %y, %b : (tensor<2x16x96xf32>, tensor<96xf32>) -> tensor<2x16x96xf32>
  return %z : tensor<2x16x96xf32>
}

// -----

// Tests that a bias on the left of the sum (as Gemm and torch write it) joins the linear.
mt.parameter @w : tensor<32x96xf32>
mt.parameter @b : tensor<96xf32>
// CHECK-LABEL: func.func @bias_first
// CHECK: mt.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<4x96xf32>
// CHECK-NOT: mt.add
func.func @bias_first(%x: tensor<4x32xf32>) -> tensor<4x96xf32> {
  %w = mt.param @w : tensor<32x96xf32>
  %b = mt.param @b : tensor<96xf32>
  %y = mt.matmul %x, %w : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
  %z = mt.add %b, %y : (tensor<96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
  return %z : tensor<4x96xf32>
}

// -----

// Tests that a matmul of two activations (attention scores) stays a matmul.
// CHECK-LABEL: func.func @matmul_of_activations
// CHECK-NOT: mt.linear
// CHECK: mt.matmul
func.func @matmul_of_activations(%x: tensor<2x16x32xf32>, %w: tensor<32x96xf32>) -> tensor<2x16x96xf32> {
  %y = mt.matmul %x, %w : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
  return %y : tensor<2x16x96xf32>
}

// -----

// Tests that a parameter on the left of a matmul stays a matmul.
mt.parameter @w : tensor<16x2xf32>
// CHECK-LABEL: func.func @parameter_on_left
// CHECK-NOT: mt.linear
// CHECK: mt.matmul
func.func @parameter_on_left(%x: tensor<2x32xf32>) -> tensor<16x32xf32> {
  %w = mt.param @w : tensor<16x2xf32>
  %y = mt.matmul %w, %x : (tensor<16x2xf32>, tensor<2x32xf32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

// Tests that a matmul with a transposed lhs stays a matmul.
mt.parameter @w : tensor<32x96xf32>
// CHECK-LABEL: func.func @transposed_lhs
// CHECK-NOT: mt.linear
// CHECK: mt.matmul %{{.*}}, %{{.*}} transpose_lhs
func.func @transposed_lhs(%x: tensor<32x4xf32>) -> tensor<4x96xf32> {
  %w = mt.param @w : tensor<32x96xf32>
  %y = mt.matmul %x, %w transpose_lhs : (tensor<32x4xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
  return %y : tensor<4x96xf32>
}

// -----

// Tests that a batched (rank-3) parameter stays a matmul.
mt.parameter @w : tensor<2x32x96xf32>
// CHECK-LABEL: func.func @rank3_parameter
// CHECK-NOT: mt.linear
// CHECK: mt.matmul
func.func @rank3_parameter(%x: tensor<2x16x32xf32>) -> tensor<2x16x96xf32> {
  %w = mt.param @w : tensor<2x32x96xf32>
  %y = mt.matmul %x, %w : (tensor<2x16x32xf32>, tensor<2x32x96xf32>) -> tensor<2x16x96xf32>
  return %y : tensor<2x16x96xf32>
}

// -----

// Tests that a bias that is not a parameter (an activation) is not absorbed.
mt.parameter @w : tensor<32x96xf32>
// CHECK-LABEL: func.func @bias_not_parameter
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>, %[[B:.*]]: tensor<96xf32>)
// CHECK: %[[L:.*]] = mt.linear %[[X]], %{{.*}} : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
// CHECK: mt.add %[[L]], %[[B]]
func.func @bias_not_parameter(%x: tensor<4x32xf32>, %b: tensor<96xf32>) -> tensor<4x96xf32> {
  %w = mt.param @w : tensor<32x96xf32>
  %y = mt.matmul %x, %w : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
  %z = mt.add %y, %b : (tensor<4x96xf32>, tensor<96xf32>) -> tensor<4x96xf32>
  return %z : tensor<4x96xf32>
}

// -----

// Tests that a parameter added after a linear whose result has another use is not absorbed.
mt.parameter @w : tensor<32x96xf32>
mt.parameter @b : tensor<96xf32>
// CHECK-LABEL: func.func @linear_with_other_use
// CHECK: %[[L:.*]] = mt.linear %{{.*}}, %{{.*}} : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
// CHECK: mt.add %[[L]], %{{.*}}
// CHECK: return
func.func @linear_with_other_use(%x: tensor<4x32xf32>) -> (tensor<4x96xf32>, tensor<4x96xf32>) {
  %w = mt.param @w : tensor<32x96xf32>
  %b = mt.param @b : tensor<96xf32>
  %y = mt.matmul %x, %w : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
  %z = mt.add %y, %b : (tensor<4x96xf32>, tensor<96xf32>) -> tensor<4x96xf32>
  return %z, %y : tensor<4x96xf32>, tensor<4x96xf32>
}

// -----

// Tests that a full-shape parameter added after a linear (not a bias vector) is not absorbed.
mt.parameter @w : tensor<32x96xf32>
mt.parameter @r : tensor<4x96xf32>
// CHECK-LABEL: func.func @addend_not_vector
// CHECK: %[[L:.*]] = mt.linear %{{.*}}, %{{.*}} : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
// CHECK: mt.add %[[L]], %{{.*}}
func.func @addend_not_vector(%x: tensor<4x32xf32>) -> tensor<4x96xf32> {
  %w = mt.param @w : tensor<32x96xf32>
  %r = mt.param @r : tensor<4x96xf32>
  %y = mt.matmul %x, %w : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
  %z = mt.add %y, %r : (tensor<4x96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
  return %z : tensor<4x96xf32>
}
