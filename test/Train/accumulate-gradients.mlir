// RUN: mt-opt %S/../Schedule/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train{layer-major-micro-batches=2})' | FileCheck %s
// RUN: mt-opt %S/../Schedule/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train{layer-major-micro-batches=2}, mt-insert-transfers, mt-assign-buffers)' | FileCheck %s --check-prefix=PLACED
// RUN: mt-opt %S/../Schedule/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train)' | FileCheck %s --check-prefix=ONE

// Tests mt-accumulate-gradients: with two layer-major micro-batches, the second backward call
// of each layer sums its weight gradients into the first call's (a copy of the template that
// takes them as trailing arguments, each product's epilogue adding its accumulator), and the
// step adds none of them; the head's weight gradients, one from each micro-batch's fused
// loss, are added.
// CHECK-LABEL: func.func @train_step
// CHECK: %{{.*}}, %[[HEAD1:.*]] = mt.linear_cross_entropy_grad
// CHECK: %{{.*}}, %[[HEAD0:.*]] = mt.linear_cross_entropy_grad
// CHECK: mt.add %[[HEAD1]], %[[HEAD0]] : (tensor<10x8xf32>, tensor<10x8xf32>) -> tensor<10x8xf32>
// CHECK: %[[FIRST:.*]]:7 = call @layer_1_bwd(
// CHECK-NEXT: call @layer_1_bwd.accumulate.1.2.3.4.5.6({{.*}}, %[[FIRST]]#1, %[[FIRST]]#2, %[[FIRST]]#3, %[[FIRST]]#4, %[[FIRST]]#5, %[[FIRST]]#6)
// CHECK-NOT: mt.add %[[FIRST]]
// CHECK: call @layer_0_bwd.accumulate.1.2.3.4.5.6(
// CHECK: call @layer_0_bwd.accumulate.1.2.3.4.5.6(
// CHECK: return
// CHECK-LABEL: func.func private @layer_0_bwd.accumulate.1.2.3.4.5.6(
// CHECK-SAME: %[[ACC5:arg12]]: tensor<8x16xf32>, %[[ACC6:arg13]]: tensor<16x8xf32>)
// CHECK-SAME: mt.accumulators = array<i64: 1, 2, 3, 4, 5, 6>
// CHECK-DAG: mt.matmul %{{.*}}, %{{.*}}, %[[ACC5]] transpose_lhs
// CHECK-DAG: mt.matmul %{{.*}}, %{{.*}}, %[[ACC6]] transpose_lhs
// CHECK: return

// The summed result takes its accumulator's buffer: the second call's weight gradients sit
// where the first call's were.
// PLACED-LABEL: func.func @train_step
// PLACED: call @layer_1_bwd({{.*}} mt.offsets = array<i64: {{[0-9]+}}, [[GRADS:[0-9, ]+]]>
// PLACED-NEXT: mt.await
// PLACED-NEXT: call @layer_1_bwd.accumulate.1.2.3.4.5.6({{.*}} mt.offsets = array<i64: {{[0-9]+}}, [[GRADS]]>

// One micro-batch sums nothing over calls.
// ONE-NOT: accumulate

// RUN: mt-opt %s --mt-accumulate-gradients | FileCheck %s --check-prefix=CASES
// A product is not summed into a value it reads (its result may be written over it), nor
// into a value of another shape (broadcast); an add of a product and a value it does not read
// is.
// CASES-LABEL: func.func @cases
// CASES: %[[SELF:.*]] = mt.matmul %arg0, %arg1 :
// CASES-NEXT: mt.add %arg0, %[[SELF]]
// CASES: %[[ROW:.*]] = mt.matmul %arg0, %arg1 :
// CASES-NEXT: mt.add %arg3, %[[ROW]]
// CASES: mt.matmul %arg0, %arg1, %arg2 :
// CASES-NOT: mt.add
// CASES: return
func.func @cases(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>, %acc: tensor<4x4xf32>, %row: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = mt.matmul %x, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = mt.add %x, %0 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = mt.matmul %x, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = mt.add %row, %2 : (tensor<4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %4 = mt.matmul %x, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %5 = mt.add %acc, %4 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %1, %3, %5 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// RUN: mt-opt %s --mt-accumulate-gradients | FileCheck %s --check-prefix=LINEAR
// In a backward template, an add of a bias-free projection becomes the product of its input
// and weight with the addend (transposed as the weight was); one with a bias stays, and so
// does a forward's, whose projections the cost model counts as the model's work.
// LINEAR-LABEL: func.func private @layer_bwd
// LINEAR: %[[PART:.*]] = mt.matmul %arg0, %arg1, %arg3 transpose_rhs : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
// LINEAR-NEXT: %[[BIASED:.*]] = mt.linear %arg0, %arg1, %arg2 transpose_weight
// LINEAR-NEXT: mt.add %[[PART]], %[[BIASED]]
// LINEAR-LABEL: func.func private @layer(
// LINEAR: mt.linear
// LINEAR-NEXT: mt.add
func.func private @layer_bwd(%x: tensor<2x4x8xf32>, %w: tensor<6x8xf32>, %b: tensor<6xf32>, %acc: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> attributes {mt.backward_of = @layer} {
  %0 = mt.linear %x, %w transpose_weight : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %1 = mt.add %acc, %0 : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %2 = mt.linear %x, %w, %b transpose_weight : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %3 = mt.add %1, %2 : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %3 : tensor<2x4x6xf32>
}
func.func private @layer(%x: tensor<2x4x8xf32>, %w: tensor<6x8xf32>, %acc: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  %0 = mt.linear %x, %w transpose_weight : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %1 = mt.add %acc, %0 : (tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %1 : tensor<2x4x6xf32>
}
