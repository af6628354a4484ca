// RUN: mt-opt %s --split-input-file --mt-raise-glu | FileCheck %s

// Tests that SwiGLU, silu(gate) * up, becomes mt.glu "silu" in either operand order.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[GATE:.*]]: tensor<2x16x64xf32>, %[[UP:.*]]: tensor<2x16x64xf32>)
// CHECK: %[[A:.*]] = mt.glu "silu" %[[GATE]], %[[UP]] : tensor<2x16x64xf32>
// CHECK: %[[B:.*]] = mt.glu "silu" %[[UP]], %[[GATE]] : tensor<2x16x64xf32>
// CHECK-NOT: mt.silu
// CHECK-NOT: mt.mul
func.func @swiglu(%gate: tensor<2x16x64xf32>, %up: tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x64xf32>) {
  %s = mt.silu %gate : tensor<2x16x64xf32>
  %a = mt.mul %s, %up : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %t = mt.silu %up : tensor<2x16x64xf32>
  %b = mt.mul %gate, %t : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  return %a, %b : tensor<2x16x64xf32>, tensor<2x16x64xf32>
}

// -----

// Tests that GeGLU takes the gelu's form: exact, and tanh-approximated.
// CHECK-LABEL: func.func @geglu
// CHECK: mt.glu "gelu" %arg0, %arg1
// CHECK: mt.glu "gelu_tanh" %arg1, %arg0
func.func @geglu(%gate: tensor<4x64xf32>, %up: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %g = mt.gelu %gate : tensor<4x64xf32>
  %a = mt.mul %g, %up : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %h = mt.gelu %up approximate = "tanh" : tensor<4x64xf32>
  %b = mt.mul %h, %gate : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %a, %b : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// Tests that a product stays as it is where the activation has another reader (it is
// computed anyway), where a side broadcasts, or where both sides are the same activation.
// CHECK-LABEL: func.func @not_gated
// CHECK-NOT: mt.glu
// CHECK-COUNT-3: mt.mul
func.func @not_gated(%gate: tensor<4x64xf32>, %up: tensor<4x64xf32>, %row: tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) {
  %s = mt.silu %gate : tensor<4x64xf32>
  %a = mt.mul %s, %up : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %t = mt.silu %gate : tensor<4x64xf32>
  %b = mt.mul %t, %row : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %u = mt.silu %up : tensor<4x64xf32>
  %c = mt.mul %u, %u : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %a, %b, %c, %s : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>
}
