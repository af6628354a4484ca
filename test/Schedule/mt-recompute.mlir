// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-recompute{interval=2})' | FileCheck %s
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-recompute{interval=3})' | FileCheck %s --check-prefix=K3
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-recompute{interval=1})' | FileCheck %s --check-prefix=K1

// Tests that with K = 2 the layers form blocks [0, 1] and [2]: the last block's backward
// reads its own input; before the backward of layer 1, layer 0's forward runs again from the
// block's input, and layer 1's backward reads that recomputed value instead of the forward's.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[X1:.*]] = call @layer_0(%[[X0:.*]], {{.*}}) {mt.layer = 0 : i64}
// CHECK: %[[X2:.*]] = call @layer_0(%[[X1]], {{.*}}) {mt.layer = 1 : i64}
// CHECK: call @layer_1(%[[X2]], {{.*}}) {mt.layer = 2 : i64}
// CHECK: %[[G2:.*]]:7 = call @layer_1_bwd(%[[X2]], {{.*}}) {mt.layer = 2 : i64}
// CHECK-NEXT: %[[R1:.*]] = call @layer_0(%[[X0]], {{.*}}) {mt.layer = 0 : i64, mt.recompute}
// CHECK-NEXT: %[[G1:.*]]:7 = call @layer_0_bwd(%[[R1]], {{.*}}, %[[G2]]#0) {mt.layer = 1 : i64}
// CHECK-NEXT: call @layer_0_bwd(%[[X0]], {{.*}}, %[[G1]]#0) {mt.layer = 0 : i64}

// With K = 3 one block holds all layers: layers 0 and 1 run again before layer 2's backward,
// which reads the recomputed input too.
// K3: %[[R1:.*]] = call @layer_0(%{{.*}}) {mt.layer = 0 : i64, mt.recompute}
// K3-NEXT: %[[R2:.*]] = call @layer_0(%[[R1]], {{.*}}) {mt.layer = 1 : i64, mt.recompute}
// K3-NEXT: call @layer_1_bwd(%[[R2]], {{.*}}) {mt.layer = 2 : i64}
// K3-NEXT: call @layer_0_bwd(%[[R1]], {{.*}}) {mt.layer = 1 : i64}

// K = 1 recomputes nothing outside the backward templates.
// K1-NOT: mt.recompute
