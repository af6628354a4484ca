// RUN: mt-opt %s --split-input-file --mt-raise-embedding | FileCheck %s

// Tests that a gather of rows (axis 0) of a rank-2 parameter becomes mt.embedding.
mt.parameter @wte : tensor<96x32xf32>
// CHECK-LABEL: func.func @rows_of_parameter
// CHECK-SAME: (%[[IDS:.*]]: tensor<2x16xi64>)
// CHECK: %[[T:.*]] = mt.param @wte
// CHECK: %[[E:.*]] = mt.embedding %[[T]], %[[IDS]] : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
// CHECK-NOT: mt.gather
// CHECK: return %[[E]]
func.func @rows_of_parameter(%ids: tensor<2x16xi64>) -> tensor<2x16x32xf32> {
  %t = mt.param @wte : tensor<96x32xf32>
  %e = mt.gather %t, %ids axis = 0 : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
  return %e : tensor<2x16x32xf32>
}

// -----

// Tests that i32 ids and constant position ids are raised too.
mt.parameter @wpe : tensor<64x32xf32>
// CHECK-LABEL: func.func @constant_positions
// CHECK: %[[P:.*]] = mt.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
// CHECK: mt.embedding %{{.*}}, %[[P]] : (tensor<64x32xf32>, tensor<4xi32>) -> tensor<4x32xf32>
// CHECK-NOT: mt.gather
func.func @constant_positions() -> tensor<4x32xf32> {
  %t = mt.param @wpe : tensor<64x32xf32>
  %pos = mt.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %e = mt.gather %t, %pos axis = 0 : (tensor<64x32xf32>, tensor<4xi32>) -> tensor<4x32xf32>
  return %e : tensor<4x32xf32>
}

// -----

// Tests that a gather of columns (axis 1) of a parameter stays a gather.
mt.parameter @wte : tensor<96x32xf32>
// CHECK-LABEL: func.func @gather_axis1
// CHECK-NOT: mt.embedding
// CHECK: mt.gather %{{.*}}, %{{.*}} axis = 1
func.func @gather_axis1(%ids: tensor<4xi64>) -> tensor<96x4xf32> {
  %t = mt.param @wte : tensor<96x32xf32>
  %e = mt.gather %t, %ids axis = 1 : (tensor<96x32xf32>, tensor<4xi64>) -> tensor<96x4xf32>
  return %e : tensor<96x4xf32>
}

// -----

// Tests that a gather of rows of a computed value stays a gather.
// CHECK-LABEL: func.func @gather_of_activation
// CHECK-NOT: mt.embedding
// CHECK: mt.gather
func.func @gather_of_activation(%x: tensor<96x32xf32>, %ids: tensor<2x16xi64>) -> tensor<2x16x32xf32> {
  %e = mt.gather %x, %ids axis = 0 : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
  return %e : tensor<2x16x32xf32>
}

// -----

// Tests that a gather along axis 0 of a rank-3 parameter stays a gather.
mt.parameter @t : tensor<8x4x32xf32>
// CHECK-LABEL: func.func @rank3_table
// CHECK-NOT: mt.embedding
// CHECK: mt.gather
func.func @rank3_table(%ids: tensor<2xi64>) -> tensor<2x4x32xf32> {
  %t = mt.param @t : tensor<8x4x32xf32>
  %e = mt.gather %t, %ids axis = 0 : (tensor<8x4x32xf32>, tensor<2xi64>) -> tensor<2x4x32xf32>
  return %e : tensor<2x4x32xf32>
}
