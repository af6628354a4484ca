// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers)' | FileCheck %s
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers{lookahead=1})' | FileCheck %s --check-prefix=AHEAD1
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers{checkpoints-on-device=true})' | FileCheck %s --check-prefix=DEVICE

// Tests that with lookahead 2 the first two layers' weights are prefetched before the step
// computes anything, and layer k's right after the call of layer k - 2 (double buffering);
// that each layer's input leaves as a checkpoint once computed and comes back with the
// weights of its backward; that the last layer keeps its weights for its backward (its
// forward and backward calls read the same parameters back to back, one prefetch); that
// prologue/epilogue parameters arrive before their first use; and that every returned
// gradient leaves with an offload right after it is computed. Each parameter records the
// layer of the first weights prefetch that streams it: its block of host memory.
// CHECK: mt.parameter @wte : tensor<10x8xf32> {layer = -1 : i64}
// CHECK: mt.parameter @g0a : tensor<8xf32> {layer = 0 : i64}
// CHECK: mt.parameter @w22 : tensor<16x8xf32> {layer = 2 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W0:.*]]:6, %{{.*}} = mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64}
// CHECK-NEXT: %[[W1:.*]]:6, %{{.*}} = mt.prefetch {{.*}} {kind = "weights", layer = 1 : i64}
// CHECK-NEXT: %[[TABLE:.*]], %{{.*}} = mt.prefetch %{{.*}} {kind = "weights", layer = -1 : i64}
// CHECK-NEXT: %[[X0:.*]] = mt.embedding %[[TABLE]]
// CHECK-NEXT: %[[C0:.*]], %{{.*}} = mt.offload %[[X0]] {kind = "checkpoint", layer = 0 : i64}
// CHECK-NEXT: %[[X1:.*]] = call @layer_0(%[[X0]], %[[W0]]#0, {{.*}}) {mt.layer = 0 : i64}
// CHECK-NEXT: %[[W2:.*]]:6, %{{.*}} = mt.prefetch {{.*}} {kind = "weights", layer = 2 : i64}
// CHECK: call @layer_0(%[[X1]], %[[W1]]#0, {{.*}}) {mt.layer = 1 : i64}
// CHECK: %[[B2:.*]], %{{.*}} = mt.prefetch %{{.*}} {kind = "checkpoint", layer = 2 : i64}
// CHECK: call @layer_1({{.*}}, %[[W2]]#0, {{.*}}) {mt.layer = 2 : i64}
// CHECK-NOT: {kind = "weights", layer = 2 : i64}
// CHECK: %[[G2:.*]]:7 = call @layer_1_bwd(%[[B2]], %[[W2]]#0, {{.*}}) {mt.layer = 2 : i64}
// CHECK-NEXT: mt.offload %[[G2]]#1, {{.*}} {kind = "gradients", layer = 2 : i64}
// CHECK: %[[B0:.*]], %{{.*}} = mt.prefetch %[[C0]] {kind = "checkpoint", layer = 0 : i64}
// CHECK-NEXT: %[[BW0:.*]]:6, %{{.*}} = mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64}
// CHECK: call @layer_0_bwd(%[[B0]], %[[BW0]]#0,
// CHECK: return {{.*}} : tensor<f32>

// AHEAD1-LABEL: func.func @train_step
// AHEAD1: call @layer_0({{.*}}) {mt.layer = 0 : i64}
// AHEAD1-NEXT: mt.prefetch {{.*}} {kind = "weights", layer = 1 : i64}

// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train{layer-major-micro-batches=2}, mt-insert-transfers)' | FileCheck %s --check-prefix=MICRO

// Tests that layer-major micro-batches share their layer's prefetch: both calls of a layer
// read one copy of its weights, while each micro-batch's checkpoint travels on its own.
// MICRO: %[[W0:.*]]:6, %{{.*}} = mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64}
// MICRO: call @layer_0(%{{.*}}, %[[W0]]#0, {{.*}}) {mt.layer = 0 : i64}
// MICRO-NEXT: mt.offload {{.*}} {kind = "checkpoint", layer = 1 : i64}
// MICRO-NEXT: call @layer_0(%{{.*}}, %[[W0]]#0, {{.*}}) {mt.layer = 0 : i64}

// DEVICE-LABEL: func.func @train_step
// DEVICE-NOT: kind = "checkpoint"
// DEVICE: return
