// RUN: mt-opt %s --split-input-file --mt-raise-rope | FileCheck %s

// Tests that x * cos + concat(-x[..., D/2:], x[..., :D/2]) * sin becomes mt.rope.
// CHECK-LABEL: func.func @rotate_half
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x16x8xf32>, %[[COS:.*]]: tensor<1x1x16x8xf32>, %[[SIN:.*]]: tensor<1x1x16x8xf32>)
// CHECK: %[[Y:.*]] = mt.rope %[[X]], %[[COS]], %[[SIN]] : (tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32>
// CHECK-NOT: mt.concat
// CHECK: return %[[Y]]
func.func @rotate_half(%x: tensor<2x4x16x8xf32>, %cos: tensor<1x1x16x8xf32>, %sin: tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32> {
  %lo = mt.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 16, 4] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %hi = mt.slice %x starts = [0, 0, 0, 4] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %nh = mt.neg %hi : tensor<2x4x16x4xf32>
  %r = mt.concat %nh, %lo axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
  %a = mt.mul %x, %cos : (tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  %b = mt.mul %r, %sin : (tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = mt.add %a, %b : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests that every operand order (sin term first in the sum, cos and sin on the left of their
// products) and rank-2 tables are raised.
// CHECK-LABEL: func.func @operands_swapped
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x16x8xf32>, %[[COS:.*]]: tensor<16x8xf32>, %[[SIN:.*]]: tensor<16x8xf32>)
// CHECK: mt.rope %[[X]], %[[COS]], %[[SIN]]
// CHECK-NOT: mt.neg
func.func @operands_swapped(%x: tensor<2x4x16x8xf32>, %cos: tensor<16x8xf32>, %sin: tensor<16x8xf32>) -> tensor<2x4x16x8xf32> {
  %hi = mt.slice %x starts = [0, 0, 0, 4] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %lo = mt.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 16, 4] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %nh = mt.neg %hi : tensor<2x4x16x4xf32>
  %r = mt.concat %nh, %lo axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
  %b = mt.mul %sin, %r : (tensor<16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %a = mt.mul %cos, %x : (tensor<16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = mt.add %b, %a : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests that the halves in the wrong places, concat(-x[..., :D/2], x[..., D/2:]), stay as
// they are.
// CHECK-LABEL: func.func @halves_swapped
// CHECK-NOT: mt.rope
// CHECK: mt.concat
func.func @halves_swapped(%x: tensor<2x4x16x8xf32>, %cos: tensor<16x8xf32>, %sin: tensor<16x8xf32>) -> tensor<2x4x16x8xf32> {
  %lo = mt.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 16, 4] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %hi = mt.slice %x starts = [0, 0, 0, 4] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %nl = mt.neg %lo : tensor<2x4x16x4xf32>
  %r = mt.concat %nl, %hi axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
  %a = mt.mul %x, %cos : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %b = mt.mul %r, %sin : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = mt.add %a, %b : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests that slices that do not split at D/2 (quarters) stay as they are.
// CHECK-LABEL: func.func @wrong_split_point
// CHECK-NOT: mt.rope
// CHECK: mt.concat
func.func @wrong_split_point(%x: tensor<2x4x16x8xf32>, %cos: tensor<16x8xf32>, %sin: tensor<16x8xf32>) -> tensor<2x4x16x8xf32> {
  %lo = mt.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 16, 2] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x2xf32>
  %hi = mt.slice %x starts = [0, 0, 0, 2] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x6xf32>
  %nh = mt.neg %hi : tensor<2x4x16x6xf32>
  %r = mt.concat %nh, %lo axis = 3 : (tensor<2x4x16x6xf32>, tensor<2x4x16x2xf32>) -> tensor<2x4x16x8xf32>
  %a = mt.mul %x, %cos : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %b = mt.mul %r, %sin : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = mt.add %a, %b : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests that interleaved pairs (stride-2 slices) stay as they are.
// CHECK-LABEL: func.func @interleaved
// CHECK-NOT: mt.rope
// CHECK: mt.concat
func.func @interleaved(%x: tensor<2x4x16x8xf32>, %cos: tensor<16x8xf32>, %sin: tensor<16x8xf32>) -> tensor<2x4x16x8xf32> {
  %ev = mt.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 16, 8] strides = [1, 1, 1, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %od = mt.slice %x starts = [0, 0, 0, 1] limits = [2, 4, 16, 8] strides = [1, 1, 1, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %no = mt.neg %od : tensor<2x4x16x4xf32>
  %r = mt.concat %no, %ev axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
  %a = mt.mul %x, %cos : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %b = mt.mul %r, %sin : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = mt.add %a, %b : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests that a rotation of another tensor's halves (x * cos + rotate_half(z) * sin) stays.
// CHECK-LABEL: func.func @rotation_of_other_value
// CHECK-NOT: mt.rope
// CHECK: mt.concat
func.func @rotation_of_other_value(%x: tensor<2x4x16x8xf32>, %z: tensor<2x4x16x8xf32>, %cos: tensor<16x8xf32>, %sin: tensor<16x8xf32>) -> tensor<2x4x16x8xf32> {
  %lo = mt.slice %z starts = [0, 0, 0, 0] limits = [2, 4, 16, 4] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %hi = mt.slice %z starts = [0, 0, 0, 4] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %nh = mt.neg %hi : tensor<2x4x16x4xf32>
  %r = mt.concat %nh, %lo axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
  %a = mt.mul %x, %cos : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %b = mt.mul %r, %sin : (tensor<2x4x16x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16x8xf32>
  %y = mt.add %a, %b : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests that an odd last axis (7: halves of 4 and 3) stays as it is: mt.rope needs an even one.
// CHECK-LABEL: func.func @odd_last_axis
// CHECK-NOT: mt.rope
// CHECK: mt.concat
func.func @odd_last_axis(%x: tensor<2x4x16x7xf32>, %cos: tensor<16x7xf32>, %sin: tensor<16x7xf32>) -> tensor<2x4x16x7xf32> {
  %lo = mt.slice %x starts = [0, 0, 0, 0] limits = [2, 4, 16, 3] strides = [1, 1, 1, 1] : tensor<2x4x16x7xf32> -> tensor<2x4x16x3xf32>
  %hi = mt.slice %x starts = [0, 0, 0, 3] limits = [2, 4, 16, 7] strides = [1, 1, 1, 1] : tensor<2x4x16x7xf32> -> tensor<2x4x16x4xf32>
  %nh = mt.neg %hi : tensor<2x4x16x4xf32>
  %r = mt.concat %nh, %lo axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x3xf32>) -> tensor<2x4x16x7xf32>
  %a = mt.mul %x, %cos : (tensor<2x4x16x7xf32>, tensor<16x7xf32>) -> tensor<2x4x16x7xf32>
  %b = mt.mul %r, %sin : (tensor<2x4x16x7xf32>, tensor<16x7xf32>) -> tensor<2x4x16x7xf32>
  %y = mt.add %a, %b : (tensor<2x4x16x7xf32>, tensor<2x4x16x7xf32>) -> tensor<2x4x16x7xf32>
  return %y : tensor<2x4x16x7xf32>
}
