// RUN: mt-opt %s --split-input-file --mt-raise-silu | FileCheck %s

// Tests that x * sigmoid(x) becomes mt.silu.
// CHECK-LABEL: func.func @x_times_sigmoid
// CHECK-SAME: (%[[X:.*]]: tensor<2x16x64xf32>)
// CHECK: %[[Y:.*]] = mt.silu %[[X]] : tensor<2x16x64xf32>
// CHECK-NOT: mt.sigmoid
// CHECK: return %[[Y]]
func.func @x_times_sigmoid(%x: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %s = mt.sigmoid %x : tensor<2x16x64xf32>
  %y = mt.mul %x, %s : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Tests that sigmoid(x) * x, the other operand order, becomes mt.silu.
// CHECK-LABEL: func.func @sigmoid_times_x
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>)
// CHECK: mt.silu %[[X]] : tensor<4x64xf32>
// CHECK-NOT: mt.sigmoid
func.func @sigmoid_times_x(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %s = mt.sigmoid %x : tensor<4x64xf32>
  %y = mt.mul %s, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that in SwiGLU, silu(gate) * up, the gate is raised and the product by up stays a mul.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[G:.*]]: tensor<2x16x64xf32>, %[[U:.*]]: tensor<2x16x64xf32>)
// CHECK: %[[S:.*]] = mt.silu %[[G]]
// CHECK: %[[Y:.*]] = mt.mul %[[S]], %[[U]]
// CHECK-NOT: mt.silu
// CHECK: return %[[Y]]
func.func @swiglu(%g: tensor<2x16x64xf32>, %u: tensor<2x16x64xf32>) -> tensor<2x16x64xf32> {
  %s = mt.sigmoid %g : tensor<2x16x64xf32>
  %a = mt.mul %g, %s : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %y = mt.mul %a, %u : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Tests that x * sigmoid(z) of a different value stays a mul (a GLU, not a SiLU).
// CHECK-LABEL: func.func @sigmoid_of_other_value
// CHECK-NOT: mt.silu
// CHECK: mt.sigmoid
// CHECK: mt.mul
func.func @sigmoid_of_other_value(%x: tensor<4x64xf32>, %z: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %s = mt.sigmoid %z : tensor<4x64xf32>
  %y = mt.mul %x, %s : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Tests that x * tanh(x) (another gate) is not raised.
// CHECK-LABEL: func.func @tanh_gate
// CHECK-NOT: mt.silu
// CHECK: mt.tanh
func.func @tanh_gate(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %s = mt.tanh %x : tensor<4x64xf32>
  %y = mt.mul %x, %s : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}
