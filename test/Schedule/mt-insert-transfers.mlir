// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers)' | FileCheck %s
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers{lookahead=1})' | FileCheck %s --check-prefix=AHEAD1
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers{checkpoints-on-device=true})' | FileCheck %s --check-prefix=DEVICE

// Tests that with lookahead 2 the first two layers' weights are prefetched before the step
// computes anything, and layer k's right after the call of layer k - 2 (double buffering);
// that each layer's input leaves as a checkpoint once computed and comes back with the
// weights of its backward; that the last layer keeps its weights for its backward (its
// forward and backward calls read the same parameters back to back, one prefetch); that
// prologue/epilogue parameters arrive before their first use, ahead of the layers' weights
// prefetched there (the table first: copies in the order the step reads them); and that
// every returned gradient leaves with an offload right after it is computed. Every copy's
// values are read through an await of its token, placed before the first reader: the calls
// read awaited weights and checkpoints, a checkpoint's prefetch its awaited offload, the
// return the awaited gradients. Each parameter records the layer of the first weights
// prefetch that streams it: its block of host memory.
// CHECK: mt.parameter @wte : tensor<10x8xf32> {layer = -1 : i64}
// CHECK: mt.parameter @g0a : tensor<8xf32> {layer = 0 : i64}
// CHECK: mt.parameter @w22 : tensor<16x8xf32> {layer = 2 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[TABLE:.*]], %[[TT:.*]] = mt.prefetch %{{.*}} {kind = "weights", layer = -1 : i64}
// CHECK-NEXT: %[[W0:.*]]:6, %[[T0:.*]] = mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64}
// CHECK-NEXT: %[[W1:.*]]:6, %[[T1:.*]] = mt.prefetch {{.*}} {kind = "weights", layer = 1 : i64}
// CHECK-NEXT: %[[TABLEA:.*]] = mt.await %[[TABLE]] after %[[TT]]
// CHECK-NEXT: %[[X0:.*]] = mt.embedding %[[TABLEA]]
// CHECK-NEXT: %[[C0:.*]], %[[TC0:.*]] = mt.offload %[[X0]] {kind = "checkpoint", layer = 0 : i64}
// CHECK-NEXT: %[[A0:.*]]:6 = mt.await %[[W0]]#0, {{.*}} after %[[T0]]
// CHECK-NEXT: %[[X1:.*]] = call @layer_0(%[[X0]], %[[A0]]#0, {{.*}}) {mt.layer = 0 : i64}
// CHECK-NEXT: %[[W2:.*]]:6, %[[T2:.*]] = mt.prefetch {{.*}} {kind = "weights", layer = 2 : i64}
// CHECK: %[[A1:.*]]:6 = mt.await %[[W1]]#0, {{.*}} after %[[T1]]
// CHECK-NEXT: call @layer_0(%[[X1]], %[[A1]]#0, {{.*}}) {mt.layer = 1 : i64}
// CHECK: %[[B2:.*]], %[[TB2:.*]] = mt.prefetch %{{.*}} {kind = "checkpoint", layer = 2 : i64}
// CHECK: %[[A2:.*]]:6 = mt.await %[[W2]]#0, {{.*}} after %[[T2]]
// CHECK-NEXT: call @layer_1({{.*}}, %[[A2]]#0, {{.*}}) {mt.layer = 2 : i64}
// CHECK-NOT: {kind = "weights", layer = 2 : i64}
// CHECK: %[[B2A:.*]] = mt.await %[[B2]] after %[[TB2]]
// CHECK-NEXT: %[[G2:.*]]:7 = call @layer_1_bwd(%[[B2A]], %[[A2]]#0, {{.*}}) {mt.layer = 2 : i64}
// CHECK-NEXT: %[[HG2:.*]]:6, %[[TG2:.*]] = mt.offload %[[G2]]#1, {{.*}} {kind = "gradients", layer = 2 : i64}
// CHECK-NEXT: %[[C0A:.*]] = mt.await %[[C0]] after %[[TC0]]
// CHECK-NEXT: %[[B0:.*]], %[[TB0:.*]] = mt.prefetch %[[C0A]] {kind = "checkpoint", layer = 0 : i64}
// CHECK-NEXT: %[[BW0:.*]]:6, %[[TBW0:.*]] = mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64}
// CHECK: %[[B0A:.*]] = mt.await %[[B0]] after %[[TB0]]
// CHECK-NEXT: %[[BW0A:.*]]:6 = mt.await %[[BW0]]#0, {{.*}} after %[[TBW0]]
// CHECK-NEXT: call @layer_0_bwd(%[[B0A]], %[[BW0A]]#0,
// CHECK: %[[HG2A:.*]]:6 = mt.await %[[HG2]]#0, {{.*}} after %[[TG2]]
// CHECK: return {{.*}}%[[HG2A]]#0, {{.*}} : tensor<f32>

// AHEAD1-LABEL: func.func @train_step
// AHEAD1: call @layer_0({{.*}}) {mt.layer = 0 : i64}
// AHEAD1-NEXT: mt.prefetch {{.*}} {kind = "weights", layer = 1 : i64}

// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train{layer-major-micro-batches=2}, mt-insert-transfers)' | FileCheck %s --check-prefix=MICRO

// Tests that layer-major micro-batches share their layer's prefetch: both calls of a layer
// read one copy of its weights, while each micro-batch's checkpoint travels on its own.
// MICRO: %[[W0:.*]]:6, %[[T0:.*]] = mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64}
// MICRO: %[[A0:.*]]:6 = mt.await %[[W0]]#0, {{.*}} after %[[T0]]
// MICRO-NEXT: call @layer_0(%{{.*}}, %[[A0]]#0, {{.*}}) {mt.layer = 0 : i64}
// MICRO-NEXT: mt.offload {{.*}} {kind = "checkpoint", layer = 1 : i64}
// MICRO-NEXT: call @layer_0(%{{.*}}, %[[A0]]#0, {{.*}}) {mt.layer = 0 : i64}

// DEVICE-LABEL: func.func @train_step
// DEVICE-NOT: kind = "checkpoint"
// DEVICE: return

// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers{resident-layers=2})' | FileCheck %s --check-prefix=RESIDENT
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers{resident-layers=2})' | FileCheck %s --check-prefix=LAYER0
// RUN: not mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers{resident-layers=-1})' 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// Tests that with resident-layers 2 the last two layers' backward calls read the weights
// their forward prefetched (one prefetch a step each), while layer 0's come back again.
// RESIDENT-LABEL: func.func @train_step
// RESIDENT: %[[W1:.*]]:6, %{{.*}} = mt.prefetch {{.*}} {kind = "weights", layer = 1 : i64}
// RESIDENT-NOT: {kind = "weights", layer = 1 : i64}
// RESIDENT: %[[A1:.*]]:6 = mt.await %[[W1]]#0,
// RESIDENT-NOT: {kind = "weights", layer = 1 : i64}
// RESIDENT: call @layer_0_bwd({{.*}}, %[[A1]]#0, {{.*}}) {mt.layer = 1 : i64}
// LAYER0-COUNT-2: mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64}
// LAYER0-NOT: {kind = "weights", layer = 0 : i64}
// NEGATIVE: mt-insert-transfers: resident-layers and persistent-layers must be at least 0, got -1 and 0
