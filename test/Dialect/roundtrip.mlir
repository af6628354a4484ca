// RUN: mt-opt %s | mt-opt | FileCheck %s

// Tests that parameters, their reads and a fused block print and parse back unchanged.
// CHECK-LABEL: mt.parameter @w : tensor<32x96xf32>
// CHECK: mt.parameter @ext : tensor<4xf32> {external_file = "m.data", length = 16 : i64, offset = 64 : i64}
// CHECK-LABEL: func.func @block
// CHECK: mt.param @w : tensor<32x96xf32>
// CHECK: mt.linear %{{.*}}, %{{.*}} transpose_weight
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 0.3535{{[0-9]*}} causal
// CHECK: mt.gelu %{{.*}} approximate = "tanh"
mt.parameter @w : tensor<32x96xf32>
mt.parameter @ext : tensor<4xf32> {external_file = "m.data", offset = 64 : i64, length = 16 : i64}
func.func @block(%x: tensor<2x16x32xf32>, %q: tensor<2x4x16x8xf32>, %k: tensor<2x2x16x8xf32>) -> (tensor<2x16x96xf32>, tensor<2x4x16x8xf32>, tensor<2x16x32xf32>) {
  %w = mt.param @w : tensor<32x96xf32>
  %wt = mt.transpose %w permutation = [1, 0] : tensor<32x96xf32> -> tensor<96x32xf32>
  %y = mt.linear %x, %wt transpose_weight : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
  %a = mt.attention %q, %k, %k scale = 0.35355339059327373 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x16x8xf32>
  %g = mt.gelu %x approximate = "tanh" : tensor<2x16x32xf32>
  return %y, %a, %g : tensor<2x16x96xf32>, tensor<2x4x16x8xf32>, tensor<2x16x32xf32>
}
