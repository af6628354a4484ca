// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers, mt-assign-buffers, mt-test-print-buffers)' -o /dev/null | FileCheck %s --check-prefix=ON
// RUN: mt-opt %S/Inputs/three-layers.mlir --pass-pipeline='builtin.module(mt-train, mt-insert-transfers, mt-assign-buffers{overlap-offloads=false}, mt-test-print-buffers)' -o /dev/null | FileCheck %s --check-prefix=OFF

// Tests mt-assign-buffers' overlap-offloads: a layer's weight gradients, read last by their
// offload to the host, keep their bytes until the next offload is issued, so the next
// layer's backward writes its gradients elsewhere (on the device it need not wait for the
// copy); the layer after that takes them. Without it, the next backward's gradients take
// the bytes at once (and its call waits for the copy).
// ON: func.call#[[B1:[0-9]+]] result 2: offset [[G2:[0-9]+]] bytes 256
// ON-NEXT: func.call#[[B1]] result 3: offset [[G3:[0-9]+]] bytes 256
// ON: func.call#[[B1]] workspace
// ON-NOT: offset [[G2]] bytes
// ON-NOT: offset [[G3]] bytes
// ON: func.call#{{[0-9]+}} workspace
// ON: func.call#{{[0-9]+}} result {{[1-6]}}: offset [[G3]] bytes

// OFF: func.call#[[B1:[0-9]+]] result 2: offset [[G2:[0-9]+]] bytes 256
// OFF: func.call#[[B1]] workspace
// OFF-NOT: workspace
// OFF: func.call#{{[0-9]+}} result {{[1-6]}}: offset [[G2]] bytes
