// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers, mt-assign-buffers, mt-test-print-buffers)' -o /dev/null | FileCheck %s
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers, mt-assign-buffers)' | FileCheck %s --check-prefix=IR

// Tests the arena: the two weight slots (prefetches of layers 0 and 1) take distinct bytes,
// the third layer's weights reuse the first slot once layer 0 is done, a call's template
// workspace lives only during the call, and the step's arena is the peak. Inside a template
// each intermediate has its offset in the call's workspace (256-byte aligned, reused after
// its last reader), and a backward template's weight gradients, bound for the host, are
// fp32 (4 bytes an element) where activations are bf16. A reshape of an intermediate is a
// view: the bytes of its operand.
// CHECK: mt.prefetch#[[P0:[0-9]+]] result 0: offset [[SLOTA:[0-9]+]] bytes 16 live
// CHECK: mt.prefetch#{{[0-9]+}} result 0: offset [[SLOTB:[0-9]+]] bytes 16 live
// CHECK: func.call#[[C0:[0-9]+]] workspace: offset {{[0-9]+}} bytes 768 live [[[C0]], [[C0]]]
// CHECK: mt.prefetch#{{[0-9]+}} result 0: offset [[SLOTA]] bytes 16 live
// CHECK: arena {{[0-9]+}} bytes

// IR: func.func @train_step{{.*}} attributes {mt.arena_bytes = {{[0-9]+}} : i64}
// IR: mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64, mt.offsets = array<i64: 256, 512, 768, 1024, 1280, 1536, -1>, mt.sizes = array<i64: 16, 128, 128, 16, 256, 256, 0>}
// IR: call @layer_0({{.*}}) {mt.layer = 0 : i64, mt.offsets = array<i64: {{[0-9]+}}>, mt.sizes = array<i64: 64>, mt.workspace = array<i64: {{[0-9]+}}, 768>}
// IR: func.func private @layer_0(
// IR-NEXT: mt.rms_norm {{.*}} {mt.offsets = array<i64: 0>, mt.sizes = array<i64: 64>}
// IR-NEXT: mt.linear {{.*}} {mt.offsets = array<i64: 256>, mt.sizes = array<i64: 64>}
// IR-NEXT: mt.reshape {{.*}} {mt.offsets = array<i64: 256>, mt.sizes = array<i64: 64>}
// IR: func.func private @layer_0_bwd(
// A reshape of an intermediate is a view at its operand's offset, and their buffer lives to
// the last use of either: the silu's result is read through its view by the product after
// its own last read, so the reshape of an argument (a copy) between them takes other bytes.
// IR: %[[SILU:[0-9]+]] = mt.silu {{.*}} {mt.offsets = array<i64: [[S:[0-9]+]]>
// IR: mt.reshape %[[SILU]] {mt.offsets = array<i64: [[S]]>
// IR-NEXT: mt.reshape %arg7 {mt.offsets = array<i64: 2560>
// IR-NEXT: mt.matmul
// IR: mt.matmul {{.*}} transpose_lhs {mt.offsets = array<i64: {{[0-9]+}}>, mt.sizes = array<i64: 512>} : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
