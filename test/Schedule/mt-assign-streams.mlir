// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-schedule, mt-test-print-buffers)' -o /dev/null | FileCheck %s
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-schedule)' | FileCheck %s --check-prefix=IR

// Tests streams and events: prefetches on h2d, offloads on d2h, the rest on compute; the
// table's prefetch comes first on h2d, and the embedding waits for it alone; each of the
// first two layers' calls waits for its own weights' prefetch after it; a checkpoint offload
// waits for what it copies; the third layer's weights wait for layer 0's call to release the
// slot; and later layers' calls wait for the offloads that read the buffers they overwrite.
// CHECK: op#[[TABLE:[0-9]+]] mt.prefetch on h2d records [[E0:[0-9]+]]
// CHECK-NEXT: mt.prefetch on h2d records [[W0:[0-9]+]]
// CHECK-NEXT: mt.prefetch on h2d records [[W1:[0-9]+]]
// CHECK-NEXT: mt.embedding on compute waits [[E0]] records [[E1:[0-9]+]]
// CHECK-NEXT: mt.offload on d2h waits [[E1]] records [[E2:[0-9]+]]
// CHECK-NEXT: func.call on compute waits [[W0]] records [[E3:[0-9]+]]
// CHECK-NEXT: mt.prefetch on h2d waits [[E3]]
// CHECK-NEXT: mt.offload on d2h waits [[E3]]
// CHECK-NEXT: func.call on compute waits [[W1]] [[E2]]
// CHECK: events {{[0-9]+}}

// IR: func.func @train_step{{.*}} attributes {mt.arena_bytes = {{[0-9]+}} : i64, mt.events = {{[0-9]+}} : i64}
// IR: mt.prefetch {{.*}} {kind = "weights", layer = 0 : i64, {{.*}}mt.stream = "h2d"}
// IR: mt.embedding {{.*}} {{{.*}}mt.stream = "compute", mt.wait = array<i64: 0>}
