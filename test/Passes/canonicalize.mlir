// RUN: mt-opt %s --split-input-file --canonicalize | FileCheck %s

// Tests that x @ transpose(W) becomes a matmul of W with transpose_rhs.
// CHECK-LABEL: func.func @absorb_rhs_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>, %[[W:.*]]: tensor<96x32xf32>)
// CHECK: %[[Y:.*]] = mt.matmul %[[X]], %[[W]] transpose_rhs : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
// CHECK-NOT: mt.transpose
// CHECK: return %[[Y]]
func.func @absorb_rhs_transpose(%x: tensor<2x16x32xf32>, %w: tensor<96x32xf32>) -> tensor<2x16x96xf32> {
  %wt = mt.transpose %w permutation = [1, 0] : tensor<96x32xf32> -> tensor<32x96xf32>
  %y = mt.matmul %x, %wt : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
  return %y : tensor<2x16x96xf32>
}

// -----

// Tests that transpose(a) @ b becomes a matmul with transpose_lhs.
// CHECK-LABEL: func.func @absorb_lhs_transpose
// CHECK-SAME: (%[[A:.*]]: tensor<32x4xf32>, %[[B:.*]]: tensor<32x8xf32>)
// CHECK: mt.matmul %[[A]], %[[B]] transpose_lhs : (tensor<32x4xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: mt.transpose
func.func @absorb_lhs_transpose(%a: tensor<32x4xf32>, %b: tensor<32x8xf32>) -> tensor<4x8xf32> {
  %at = mt.transpose %a permutation = [1, 0] : tensor<32x4xf32> -> tensor<4x32xf32>
  %y = mt.matmul %at, %b : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that both operands' transposes are absorbed at once.
// CHECK-LABEL: func.func @absorb_both
// CHECK-SAME: (%[[A:.*]]: tensor<32x4xf32>, %[[B:.*]]: tensor<8x32xf32>)
// CHECK: mt.matmul %[[A]], %[[B]] transpose_lhs transpose_rhs : (tensor<32x4xf32>, tensor<8x32xf32>) -> tensor<4x8xf32>
// CHECK-NOT: mt.transpose
func.func @absorb_both(%a: tensor<32x4xf32>, %b: tensor<8x32xf32>) -> tensor<4x8xf32> {
  %at = mt.transpose %a permutation = [1, 0] : tensor<32x4xf32> -> tensor<4x32xf32>
  %bt = mt.transpose %b permutation = [1, 0] : tensor<8x32xf32> -> tensor<32x8xf32>
  %y = mt.matmul %at, %bt : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that q @ k^T with k's last two axes swapped in a rank-4 transpose becomes
// transpose_rhs on k.
// CHECK-LABEL: func.func @absorb_batched_swap
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x8xf32>, %[[K:.*]]: tensor<2x4x16x8xf32>)
// CHECK: mt.matmul %[[Q]], %[[K]] transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
// CHECK-NOT: mt.transpose
func.func @absorb_batched_swap(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32> {
  %kt = mt.transpose %k permutation = [0, 1, 3, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x8x16xf32>
  %s = mt.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  return %s : tensor<2x4x16x16xf32>
}

// -----

// Tests that a head transpose composed with k^T ([B, T, H, D] -> [B, H, D, T]) is split into
// the head transpose [0, 2, 1, 3] and transpose_rhs.
// CHECK-LABEL: func.func @absorb_composed_transpose
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x8xf32>, %[[K:.*]]: tensor<2x16x4x8xf32>)
// CHECK: %[[KH:.*]] = mt.transpose %[[K]] permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
// CHECK: mt.matmul %[[Q]], %[[KH]] transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
// CHECK-NOT: permutation = [0, 2, 3, 1]
func.func @absorb_composed_transpose(%q: tensor<2x4x16x8xf32>, %k: tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32> {
  %kt = mt.transpose %k permutation = [0, 2, 3, 1] : tensor<2x16x4x8xf32> -> tensor<2x4x8x16xf32>
  %s = mt.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  return %s : tensor<2x4x16x16xf32>
}

// -----

// Tests that a transpose under a matmul that already transposes that operand cancels the flag.
// CHECK-LABEL: func.func @flag_cancels
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>, %[[W:.*]]: tensor<32x96xf32>)
// CHECK: mt.matmul %[[X]], %[[W]] : (tensor<4x32xf32>, tensor<32x96xf32>) -> tensor<4x96xf32>
// CHECK-NOT: transpose
func.func @flag_cancels(%x: tensor<4x32xf32>, %w: tensor<32x96xf32>) -> tensor<4x96xf32> {
  %wt = mt.transpose %w permutation = [1, 0] : tensor<32x96xf32> -> tensor<96x32xf32>
  %y = mt.matmul %x, %wt transpose_rhs : (tensor<4x32xf32>, tensor<96x32xf32>) -> tensor<4x96xf32>
  return %y : tensor<4x96xf32>
}

// -----

// Tests that a transpose of batch axes only (last two axes in place) is not absorbed.
// CHECK-LABEL: func.func @batch_transpose_kept
// CHECK: %[[T:.*]] = mt.transpose %{{.*}} permutation = [1, 0, 2, 3]
// CHECK: mt.matmul %{{.*}}, %[[T]] : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>)
func.func @batch_transpose_kept(%q: tensor<2x4x16x8xf32>, %k: tensor<4x2x8x16xf32>) -> tensor<2x4x16x16xf32> {
  %kt = mt.transpose %k permutation = [1, 0, 2, 3] : tensor<4x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %s = mt.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  return %s : tensor<2x4x16x16xf32>
}

// -----

// Tests that a reshape to its input's own type folds away.
// CHECK-LABEL: func.func @identity_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>)
// CHECK-NOT: mt.reshape
// CHECK: return %[[X]]
func.func @identity_reshape(%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %y = mt.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
  return %y : tensor<2x16x32xf32>
}

// -----

// Tests that a chain of reshapes becomes one reshape of the first input.
// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>)
// CHECK: %[[Y:.*]] = mt.reshape %[[X]] : tensor<2x16x32xf32> -> tensor<32x32xf32>
// CHECK-NOT: mt.reshape
// CHECK: return %[[Y]]
func.func @reshape_chain(%x: tensor<2x16x32xf32>) -> tensor<32x32xf32> {
  %a = mt.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %b = mt.reshape %a : tensor<2x16x4x8xf32> -> tensor<2x512xf32>
  %c = mt.reshape %b : tensor<2x512xf32> -> tensor<32x32xf32>
  return %c : tensor<32x32xf32>
}

// -----

// Tests that a reshape that returns to the original shape disappears.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>)
// CHECK-NOT: mt.reshape
// CHECK: return %[[X]]
func.func @reshape_round_trip(%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  %a = mt.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %b = mt.reshape %a : tensor<2x16x4x8xf32> -> tensor<2x16x32xf32>
  return %b : tensor<2x16x32xf32>
}

// -----

// Tests that a reshape of a constant folds into a constant of the new shape.
// CHECK-LABEL: func.func @reshape_constant
// CHECK: %[[C:.*]] = mt.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NOT: mt.reshape
// CHECK: return %[[C]]
func.func @reshape_constant() -> tensor<2x2xf32> {
  %c = mt.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %r = mt.reshape %c : tensor<4xf32> -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// -----

// Tests that a reshape of a reshape that has another use still reads the first input, and the
// first reshape stays for its other user.
// CHECK-LABEL: func.func @reshape_chain_shared
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x32xf32>)
// CHECK-DAG: %[[A:.*]] = mt.reshape %[[X]] : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
// CHECK-DAG: %[[B:.*]] = mt.reshape %[[X]] : tensor<2x16x32xf32> -> tensor<32x32xf32>
// CHECK: return %[[B]], %[[A]]
func.func @reshape_chain_shared(%x: tensor<2x16x32xf32>) -> (tensor<32x32xf32>, tensor<2x16x4x8xf32>) {
  %a = mt.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %b = mt.reshape %a : tensor<2x16x4x8xf32> -> tensor<32x32xf32>
  return %b, %a : tensor<32x32xf32>, tensor<2x16x4x8xf32>
}

// -----

// Tests that a gather along axis 0 of indices 0..n-1 in order (the legacy exporter's read of
// a padding mask) becomes a reshape, and that one of other indices stays a gather.
// CHECK-LABEL: func.func @identity_gather
// CHECK-SAME: (%[[X:.*]]: tensor<8x1xi1>)
// CHECK: %[[Y:.*]] = mt.reshape %[[X]] : tensor<8x1xi1> -> tensor<2x1x1x4x1xi1>
// CHECK: mt.gather %[[X]]
func.func @identity_gather(%x: tensor<8x1xi1>) -> (tensor<2x1x1x4x1xi1>, tensor<2x1x1x4x1xi1>) {
  %iota = mt.constant dense<[[[[0, 1, 2, 3]]], [[[4, 5, 6, 7]]]]> : tensor<2x1x1x4xi64>
  %other = mt.constant dense<[[[[0, 1, 2, 3]]], [[[4, 5, 7, 6]]]]> : tensor<2x1x1x4xi64>
  %y = mt.gather %x, %iota axis = 0 : (tensor<8x1xi1>, tensor<2x1x1x4xi64>) -> tensor<2x1x1x4x1xi1>
  %z = mt.gather %x, %other axis = 0 : (tensor<8x1xi1>, tensor<2x1x1x4xi64>) -> tensor<2x1x1x4x1xi1>
  return %y, %z : tensor<2x1x1x4x1xi1>, tensor<2x1x1x4x1xi1>
}
