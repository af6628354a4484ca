// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers, mt-assign-buffers, mt-test-print-buffers)' -o /dev/null | FileCheck %s
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers, mt-assign-buffers)' | FileCheck %s --check-prefix=IR

// Tests the arena: the two weight slots (prefetches of layers 0 and 1) take distinct bytes,
// the third layer's weights reuse the first slot once layer 0 is done, a call's template
// workspace lives only during the call, and the step's arena is the peak.
// CHECK: mt.prefetch#[[P0:[0-9]+]] result 0: offset [[SLOTA:[0-9]+]] bytes 16 live
// CHECK: mt.prefetch#{{[0-9]+}} result 0: offset [[SLOTB:[0-9]+]] bytes 16 live
// CHECK: func.call#[[C0:[0-9]+]] workspace: offset {{[0-9]+}} bytes 320 live [[[C0]], [[C0]]]
// CHECK: mt.prefetch#{{[0-9]+}} result 0: offset [[SLOTA]] bytes 16 live
// CHECK: arena {{[0-9]+}} bytes

// IR: func.func @train_step{{.*}} attributes {mt.arena_bytes = {{[0-9]+}} : i64}
// IR: mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64, mt.offsets = array<i64: 0, 256, 512, 768, 1024, 1280, -1>, mt.sizes = array<i64: 16, 128, 128, 16, 256, 256, 0>}
// IR: call @layer_0({{.*}}) {mt.layer = 0 : i64, mt.offsets = array<i64: {{[0-9]+}}>, mt.sizes = array<i64: 64>, mt.workspace = array<i64: {{[0-9]+}}, 320>}
