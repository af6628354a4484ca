// RUN: mt-opt %s --split-input-file --mt-raise-attention | FileCheck %s

// Tests that softmax(q @ k^T * scale + causal mask) @ v, the mask an additive constant with
// 0 on and below the diagonal and -1e9 above it, becomes a causal mt.attention.
// CHECK-LABEL: func.func @mul_scale_additive_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK: %[[O:.*]] = mt.attention %[[Q]], %[[K]], %[[V]] scale = 0.3535{{[0-9]*}} causal : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NOT: mt.softmax
// CHECK-NOT: mt.matmul
// CHECK: return %[[O]]
func.func @mul_scale_additive_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = mt.constant dense<0.353553385> : tensor<f32>
  %mask = mt.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %t = mt.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %u = mt.add %t, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a -inf mask of shape [1, 1, T, T] on the left of the sum and the scale on the
// left of its product are raised.
// CHECK-LABEL: func.func @inf_mask_operands_swapped
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK: mt.attention %[[Q]], %[[K]], %[[V]] scale = 0.3535{{[0-9]*}} causal
// CHECK-NOT: mt.softmax
func.func @inf_mask_operands_swapped(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = mt.constant dense<0.353553385> : tensor<f32>
  %mask = mt.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %t = mt.mul %scale, %s : (tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.add %mask, %t : (tensor<1x1x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that division by sqrt(D) and a where of a lower-triangular condition with a large
// negative fill become a causal mt.attention with scale 1 / 2.
// CHECK-LABEL: func.func @div_scale_where_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x4xf32>, %[[K:.*]]: tensor<1x2x4x4xf32>, %[[V:.*]]: tensor<1x2x4x4xf32>)
// CHECK: mt.attention %[[Q]], %[[K]], %[[V]] scale = 5.000000e-01 causal
// CHECK-NOT: mt.where
// CHECK-NOT: mt.softmax
func.func @div_scale_where_mask(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %d = mt.constant dense<2.0> : tensor<f32>
  %keep = mt.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = mt.constant dense<-3.40282347E+38> : tensor<f32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %t = mt.div %s, %d : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %u = mt.where %keep, %t, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// Tests that the mirrored where, fill where an upper-triangular condition holds, is causal too.
// CHECK-LABEL: func.func @where_mask_mirrored
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal
// CHECK-NOT: mt.where
func.func @where_mask_mirrored(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %hide = mt.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %fill = mt.constant dense<-1.0e+04> : tensor<f32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.where %hide, %fill, %s : (tensor<4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// Tests that attention without a mask, over more keys than queries, is raised without causal.
// CHECK-LABEL: func.func @no_mask_cross
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x3x8xf32>, %[[K:.*]]: tensor<2x4x5x8xf32>, %[[V:.*]]: tensor<2x4x5x16xf32>)
// CHECK: mt.attention %[[Q]], %[[K]], %[[V]] scale = 1.250000e-01 :
// CHECK-NOT: causal
// CHECK-NOT: mt.softmax
func.func @no_mask_cross(%q: tensor<2x4x3x8xf32>, %k: tensor<2x4x5x8xf32>, %v: tensor<2x4x5x16xf32>) -> tensor<2x4x3x16xf32> {
  %scale = mt.constant dense<0.125> : tensor<f32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<2x4x3x8xf32>, tensor<2x4x5x8xf32>) -> tensor<2x4x3x5xf32>
  %t = mt.mul %s, %scale : (tensor<2x4x3x5xf32>, tensor<f32>) -> tensor<2x4x3x5xf32>
  %p = mt.softmax %t axis = 3 : tensor<2x4x3x5xf32>
  %o = mt.matmul %p, %v : (tensor<2x4x3x5xf32>, tensor<2x4x5x16xf32>) -> tensor<2x4x3x16xf32>
  return %o : tensor<2x4x3x16xf32>
}

// -----

// Tests that keys and values repeated for grouped-query heads (reshape, expand, reshape) are
// traced back to their two key/value heads.
// CHECK-LABEL: func.func @grouped_query
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK: %[[O:.*]] = mt.attention %[[Q]], %[[K]], %[[V]] scale = 0.3535{{[0-9]*}} causal : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32>
// CHECK: return %[[O]]
func.func @grouped_query(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %scale = mt.constant dense<0.353553385> : tensor<f32>
  %mask = mt.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %k1 = mt.reshape %k : tensor<1x2x4x8xf32> -> tensor<1x2x1x4x8xf32>
  %k2 = mt.expand %k1 : tensor<1x2x1x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %kr = mt.reshape %k2 : tensor<1x2x2x4x8xf32> -> tensor<1x4x4x8xf32>
  %v1 = mt.reshape %v : tensor<1x2x4x8xf32> -> tensor<1x2x1x4x8xf32>
  %v2 = mt.expand %v1 : tensor<1x2x1x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %vr = mt.reshape %v2 : tensor<1x2x2x4x8xf32> -> tensor<1x4x4x8xf32>
  %s = mt.matmul %q, %kr transpose_rhs : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x4xf32>
  %t = mt.mul %s, %scale : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %u = mt.add %t, %mask : (tensor<1x4x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x4x4x4xf32>
  %o = mt.matmul %p, %vr : (tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// Tests that heads tiled rather than repeated (expand of a new axis 1: query head h would read
// key head h % 2, not h / 2) are not traced back: the repeated keys are used as they are.
// CHECK-LABEL: func.func @tiled_heads
// CHECK: %[[KR:.*]] = mt.reshape %{{.*}} : tensor<1x2x2x4x8xf32> -> tensor<1x4x4x8xf32>
// CHECK: mt.attention %{{.*}}, %[[KR]], %{{.*}} scale = 1.000000e+00 :
func.func @tiled_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %k1 = mt.reshape %k : tensor<1x2x4x8xf32> -> tensor<1x1x2x4x8xf32>
  %k2 = mt.expand %k1 : tensor<1x1x2x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %kr = mt.reshape %k2 : tensor<1x2x2x4x8xf32> -> tensor<1x4x4x8xf32>
  %s = mt.matmul %q, %kr transpose_rhs : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x4xf32>
  %p = mt.softmax %s axis = 3 : tensor<1x4x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// Tests that an all-zero mask, which is not causal, keeps the chain as it is.
// CHECK-LABEL: func.func @zero_mask
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @zero_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %mask = mt.constant dense<0.0> : tensor<4x4xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a reversed triangle (past positions hidden, future ones kept) keeps the chain.
// CHECK-LABEL: func.func @reversed_triangle_mask
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @reversed_triangle_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %mask = mt.constant dense<[[0.0, 0.0, 0.0, 0.0], [-1.0e+09, 0.0, 0.0, 0.0], [-1.0e+09, -1.0e+09, 0.0, 0.0], [-1.0e+09, -1.0e+09, -1.0e+09, 0.0]]> : tensor<4x4xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a where mask whose condition is upper-triangular with the scores kept where it
// holds (future kept) keeps the chain.
// CHECK-LABEL: func.func @where_mask_wrong_side
// CHECK-NOT: mt.attention
// CHECK: mt.where
func.func @where_mask_wrong_side(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %cond = mt.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %fill = mt.constant dense<-1.0e+09> : tensor<f32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.where %cond, %s, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// Tests that a where fill that is not large and negative (-1) keeps the chain.
// CHECK-LABEL: func.func @where_small_fill
// CHECK-NOT: mt.attention
// CHECK: mt.where
func.func @where_small_fill(%q: tensor<1x2x4x4xf32>, %k: tensor<1x2x4x4xf32>, %v: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %keep = mt.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = mt.constant dense<-1.0> : tensor<f32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.where %keep, %s, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %o : tensor<1x2x4x4xf32>
}

// -----

// Tests that a scale that is not a constant keeps the chain.
// CHECK-LABEL: func.func @variable_scale
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @variable_scale(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %c: tensor<f32>) -> tensor<1x2x4x8xf32> {
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %t = mt.mul %s, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %t axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a softmax over the query axis (not the last) keeps the chain.
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-NOT: mt.attention
// CHECK: mt.softmax %{{.*}} axis = 2
func.func @softmax_over_queries(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %s axis = 2 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that scores q @ k without the transpose of k keep the chain.
// CHECK-LABEL: func.func @scores_without_transpose
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @scores_without_transpose(%q: tensor<1x2x4x8xf32>, %kt: tensor<1x2x8x4xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %s = mt.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %s axis = 3 : tensor<1x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests torch's scaled_dot_product_attention export (dynamo exporter): the scale split as
// sqrt(scale) on q and on k^T, k^T transposed as [B*H, S, D] between reshapes of the
// grouped-query repeat, and softmax's NaN guard. The keys keep their one head.
// CHECK-LABEL: func.func @sdpa_export
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x1x4x8xf32>, %[[V:.*]]: tensor<1x1x4x8xf32>)
// CHECK: %[[O:.*]] = mt.attention %[[Q]], %[[K]], %[[V]] scale = 0.3535{{[0-9]*}} causal : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NOT: mt.is_nan
// CHECK-NOT: mt.where
// CHECK-NOT: mt.softmax
// CHECK: return %[[O]]
func.func @sdpa_export(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %root = mt.constant dense<0.594603539> : tensor<f32>
  %zero = mt.constant dense<0.0> : tensor<f32>
  %mask = mt.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %qs = mt.mul %q, %root : (tensor<1x2x4x8xf32>, tensor<f32>) -> tensor<1x2x4x8xf32>
  %k5 = mt.reshape %k : tensor<1x1x4x8xf32> -> tensor<1x1x1x4x8xf32>
  %ke = mt.expand %k5 : tensor<1x1x1x4x8xf32> -> tensor<1x1x2x4x8xf32>
  %k3 = mt.reshape %ke : tensor<1x1x2x4x8xf32> -> tensor<2x4x8xf32>
  %kt3 = mt.transpose %k3 permutation = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %kt = mt.reshape %kt3 : tensor<2x8x4xf32> -> tensor<1x2x8x4xf32>
  %kts = mt.mul %kt, %root : (tensor<1x2x8x4xf32>, tensor<f32>) -> tensor<1x2x8x4xf32>
  %s = mt.matmul %qs, %kts : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %nan = mt.is_nan %p : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xi1>
  %g = mt.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %v5 = mt.reshape %v : tensor<1x1x4x8xf32> -> tensor<1x1x1x4x8xf32>
  %ve = mt.expand %v5 : tensor<1x1x1x4x8xf32> -> tensor<1x1x2x4x8xf32>
  %vr = mt.reshape %ve : tensor<1x1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %o = mt.matmul %g, %vr : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a guard on something other than the softmax it feeds (where(is_nan(x), 0, p)
// with x not p) is not mistaken for softmax's NaN guard: nothing is raised.
// CHECK-LABEL: func.func @foreign_nan_guard
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @foreign_nan_guard(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32> {
  %zero = mt.constant dense<0.0> : tensor<f32>
  %mask = mt.constant dense<[[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %u = mt.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x4x4xf32>
  %nan = mt.is_nan %x : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xi1>
  %g = mt.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = mt.matmul %g, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that an mt.attention imported from opset 23's Attention node, reading keys and
// values repeated for grouped-query heads, reads their one head instead.
// CHECK-LABEL: func.func @imported_repeated_heads
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x1x4x8xf32>, %[[V:.*]]: tensor<1x1x4x8xf32>)
// CHECK: mt.attention %[[Q]], %[[K]], %[[V]] scale = 5.000000e-01 causal : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
func.func @imported_repeated_heads(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %k5 = mt.reshape %k : tensor<1x1x4x8xf32> -> tensor<1x1x1x4x8xf32>
  %ke = mt.expand %k5 : tensor<1x1x1x4x8xf32> -> tensor<1x1x2x4x8xf32>
  %kr = mt.reshape %ke : tensor<1x1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %v5 = mt.reshape %v : tensor<1x1x4x8xf32> -> tensor<1x1x1x4x8xf32>
  %ve = mt.expand %v5 : tensor<1x1x1x4x8xf32> -> tensor<1x1x2x4x8xf32>
  %vr = mt.reshape %ve : tensor<1x1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %o = mt.attention %q, %kr, %vr scale = 5.000000e-01 causal : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests attention under a padding mask built from an attention_mask input, as both torch
// exporters write it: causal AND the input read as booleans [B, 1, 1, S], filled with the
// float minimum where false, added to the scores, softmax's NaN guard after. It becomes
// mt.attention with the input's key span, computed once for both attentions; the input is
// marked token_span, the contract under which a span stands for the mask.
// CHECK-LABEL: func.func @padding_mask
// CHECK-SAME: %[[M:[^:]*]]: tensor<2x4xi64> {mt.name = "attention_mask", mt.token_span}
// CHECK: %[[N:.*]] = mt.key_span %[[M]] : tensor<2x4xi64> -> tensor<2x2xi64>
// CHECK: %[[O:.*]] = mt.attention %{{.*}}, %{{.*}}, %{{.*}} key_span %[[N]] scale = 0.3535{{[0-9]*}} causal
// CHECK: mt.attention %[[O]], %{{.*}}, %{{.*}} key_span %[[N]] scale = 0.3535{{[0-9]*}} causal
// CHECK-NOT: mt.key_span
// CHECK-NOT: mt.softmax
func.func @padding_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %mask: tensor<2x4xi64> {mt.name = "attention_mask"}) -> tensor<2x2x4x8xf32> {
  %zero = mt.constant dense<0.0> : tensor<f32>
  %min = mt.constant dense<-3.40282347E+38> : tensor<f32>
  %false = mt.constant dense<false> : tensor<i1>
  %scale = mt.constant dense<0.353553385> : tensor<f32>
  %causal = mt.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %bits = mt.cast %mask : tensor<2x4xi64> -> tensor<2x4xi1>
  %keys = mt.reshape %bits : tensor<2x4xi1> -> tensor<2x1x1x4xi1>
  %keep = mt.where %causal, %keys, %false : (tensor<1x1x4x4xi1>, tensor<2x1x1x4xi1>, tensor<i1>) -> tensor<2x1x4x4xi1>
  %add = mt.where %keep, %zero, %min : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss = mt.mul %s, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %u = mt.add %ss, %add : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<2x2x4x4xf32>
  %nan = mt.is_nan %p : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xi1>
  %g = mt.where %nan, %zero, %p : (tensor<2x2x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = mt.matmul %g, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %s2 = mt.matmul %o, %k transpose_rhs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss2 = mt.mul %s2, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %u2 = mt.add %add, %ss2 : (tensor<2x1x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p2 = mt.softmax %u2 axis = 3 : tensor<2x2x4x4xf32>
  %o2 = mt.matmul %p2, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o2 : tensor<2x2x4x8xf32>
}

// -----

// Tests a padding mask alone (no causal triangle), kept by where(keys, scores, fill): a
// non-causal mt.attention with key lengths.
// CHECK-LABEL: func.func @padding_only
// CHECK: %[[N:.*]] = mt.key_span
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} key_span %[[N]] scale = 1.000000e+00 :
func.func @padding_only(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %mask: tensor<2x4xi32>) -> tensor<2x2x4x8xf32> {
  %min = mt.constant dense<-1.0e9> : tensor<f32>
  %bits = mt.cast %mask : tensor<2x4xi32> -> tensor<2x4xi1>
  %keys = mt.reshape %bits : tensor<2x4xi1> -> tensor<2x1x1x4xi1>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %u = mt.where %keys, %s, %min : (tensor<2x1x1x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<2x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests masks that a key span cannot stand for, which stay unfused: one computed in the
// graph (not an input the runtime can hold to one span of tokens a row), and one over queries
// ([B, 1, S, 1]) instead of keys.
// CHECK-LABEL: func.func @computed_mask
// CHECK-NOT: mt.attention
// CHECK-NOT: mt.token_span
// CHECK: mt.softmax
func.func @computed_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %x: tensor<2x4xf32>) -> tensor<2x2x4x8xf32> {
  %min = mt.constant dense<-1.0e9> : tensor<f32>
  %bits = mt.cast %x : tensor<2x4xf32> -> tensor<2x4xi1>
  %keys = mt.reshape %bits : tensor<2x4xi1> -> tensor<2x1x1x4xi1>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %u = mt.where %keys, %s, %min : (tensor<2x1x1x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<2x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}
// CHECK-LABEL: func.func @query_mask
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @query_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %mask: tensor<2x4xi64>) -> tensor<2x2x4x8xf32> {
  %min = mt.constant dense<-1.0e9> : tensor<f32>
  %bits = mt.cast %mask : tensor<2x4xi64> -> tensor<2x4xi1>
  %rows = mt.reshape %bits : tensor<2x4xi1> -> tensor<2x1x4x1xi1>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %u = mt.where %rows, %s, %min : (tensor<2x1x4x1xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = mt.softmax %u axis = 3 : tensor<2x2x4x4xf32>
  %o = mt.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests that an additive mask keeping a band of 2 keys at and below the diagonal (a sliding
// window: query i sees keys i - 2 < j <= i) becomes a causal mt.attention with that window.
// CHECK-LABEL: func.func @sliding_window_additive_mask
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal window = 2 :
// CHECK-NOT: mt.softmax
func.func @sliding_window_additive_mask(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32> {
  %mask = mt.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09], [-1.0e+09, 0.0, 0.0, -1.0e+09, -1.0e+09], [-1.0e+09, -1.0e+09, 0.0, 0.0, -1.0e+09], [-1.0e+09, -1.0e+09, -1.0e+09, 0.0, 0.0]]> : tensor<5x5xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x5xf32>
  %u = mt.add %s, %mask : (tensor<1x2x5x5xf32>, tensor<5x5xf32>) -> tensor<1x2x5x5xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x5x5xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x5x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// -----

// Tests that a boolean band of 3 keys kept by where(band, scores, -inf) is a window of 3.
// CHECK-LABEL: func.func @sliding_window_where_mask
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.000000e+00 causal window = 3 :
// CHECK-NOT: mt.where
func.func @sliding_window_where_mask(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32> {
  %keep = mt.constant dense<[[true, false, false, false, false], [true, true, false, false, false], [true, true, true, false, false], [false, true, true, true, false], [false, false, true, true, true]]> : tensor<5x5xi1>
  %fill = mt.constant dense<0xFF800000> : tensor<f32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x5xf32>
  %u = mt.where %keep, %s, %fill : (tensor<5x5xi1>, tensor<1x2x5x5xf32>, tensor<f32>) -> tensor<1x2x5x5xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x5x5xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x5x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// -----

// Tests that a band with a gap (query 3 drops key 2 of its window) is no window: the chain
// stays.
// CHECK-LABEL: func.func @band_with_gap
// CHECK-NOT: mt.attention
// CHECK: mt.softmax
func.func @band_with_gap(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32> {
  %mask = mt.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09, -1.0e+09], [-1.0e+09, 0.0, -1.0e+09, 0.0, -1.0e+09], [-1.0e+09, -1.0e+09, 0.0, 0.0, 0.0]]> : tensor<5x5xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x5xf32>
  %u = mt.add %s, %mask : (tensor<1x2x5x5xf32>, tensor<5x5xf32>) -> tensor<1x2x5x5xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x5x5xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x5x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// -----

// Tests that logits soft-capped as Gemma 2 writes them, c * tanh(s * scale / c) before the
// causal mask, become mt.attention's softcap.
// CHECK-LABEL: func.func @softcapped_logits
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 2.500000e-01 causal softcap = 3.000000e+01 :
// CHECK-NOT: mt.tanh
func.func @softcapped_logits(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32> {
  %scale = mt.constant dense<0.25> : tensor<f32>
  %cap = mt.constant dense<30.0> : tensor<f32>
  %mask = mt.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<5x5xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x5xf32>
  %t = mt.mul %s, %scale : (tensor<1x2x5x5xf32>, tensor<f32>) -> tensor<1x2x5x5xf32>
  %d = mt.div %t, %cap : (tensor<1x2x5x5xf32>, tensor<f32>) -> tensor<1x2x5x5xf32>
  %h = mt.tanh %d : tensor<1x2x5x5xf32>
  %c = mt.mul %h, %cap : (tensor<1x2x5x5xf32>, tensor<f32>) -> tensor<1x2x5x5xf32>
  %u = mt.add %c, %mask : (tensor<1x2x5x5xf32>, tensor<5x5xf32>) -> tensor<1x2x5x5xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x5x5xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x5x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}

// -----

// Tests that a tanh whose outer factor is not the inverse of its inner one (20 * tanh(s / 30))
// is no soft cap: the chain stays.
// CHECK-LABEL: func.func @mismatched_cap
// CHECK-NOT: mt.attention
// CHECK: mt.tanh
func.func @mismatched_cap(%q: tensor<1x2x5x8xf32>, %k: tensor<1x2x5x8xf32>, %v: tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32> {
  %cap = mt.constant dense<30.0> : tensor<f32>
  %outer = mt.constant dense<20.0> : tensor<f32>
  %mask = mt.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<5x5xf32>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x5xf32>
  %d = mt.div %s, %cap : (tensor<1x2x5x5xf32>, tensor<f32>) -> tensor<1x2x5x5xf32>
  %h = mt.tanh %d : tensor<1x2x5x5xf32>
  %c = mt.mul %h, %outer : (tensor<1x2x5x5xf32>, tensor<f32>) -> tensor<1x2x5x5xf32>
  %u = mt.add %c, %mask : (tensor<1x2x5x5xf32>, tensor<5x5xf32>) -> tensor<1x2x5x5xf32>
  %p = mt.softmax %u axis = 3 : tensor<1x2x5x5xf32>
  %o = mt.matmul %p, %v : (tensor<1x2x5x5xf32>, tensor<1x2x5x8xf32>) -> tensor<1x2x5x8xf32>
  return %o : tensor<1x2x5x8xf32>
}
