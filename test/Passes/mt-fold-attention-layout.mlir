// RUN: mt-opt %s --split-input-file --mt-fold-attention-layout --cse | FileCheck %s

// Tests that attention over heads transposed out of the projections' rows [B, T, H, D], its
// result transposed back, reads and writes the rows (sequence_major), keeping its attributes
// and log-sum-exp; and that a fold that would add as many copies as it saves does not happen.

// CHECK-LABEL: func.func @rows_in_and_out
// CHECK-SAME: (%[[Q:.*]]: tensor<2x16x4x8xf32>, %[[K:.*]]: tensor<2x16x2x8xf32>, %[[V:.*]]: tensor<2x16x2x8xf32>, %[[S:.*]]: tensor<2x2xi64>)
// CHECK-NOT: mt.transpose
// CHECK: %[[O:.*]], %[[L:.*]] = mt.attention %[[Q]], %[[K]], %[[V]] key_span %[[S]] scale = 2.500000e-01 causal window = 4 softcap = 3.000000e+01 sequence_major : (tensor<2x16x4x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>, tensor<2x2xi64>) -> (tensor<2x16x4x8xf32>, tensor<2x4x16xf32>)
// CHECK-NOT: mt.transpose
// CHECK: return %[[O]], %[[L]]
func.func @rows_in_and_out(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x2x8xf32>, %v: tensor<2x16x2x8xf32>, %span: tensor<2x2xi64>) -> (tensor<2x16x4x8xf32>, tensor<2x4x16xf32>) {
  %qh = mt.transpose %q permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %kh = mt.transpose %k permutation = [0, 2, 1, 3] : tensor<2x16x2x8xf32> -> tensor<2x2x16x8xf32>
  %vh = mt.transpose %v permutation = [0, 2, 1, 3] : tensor<2x16x2x8xf32> -> tensor<2x2x16x8xf32>
  %o, %lse = mt.attention %qh, %kh, %vh key_span %span scale = 0.25 causal window = 4 softcap = 30.0 : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2xi64>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %r = mt.transpose %o permutation = [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  return %r, %lse : tensor<2x16x4x8xf32>, tensor<2x4x16xf32>
}

// -----

// A rope between the transpose and attention runs on the rows; its tables [B, 1, T, D]
// (per-sequence positions) become views [B, T, 1, D].
// CHECK-LABEL: func.func @through_rope
// CHECK-SAME: (%[[Q:.*]]: tensor<2x16x4x8xf32>, %[[K:.*]]: tensor<2x16x4x8xf32>, %[[V:.*]]: tensor<2x16x4x8xf32>, %[[COS:.*]]: tensor<2x1x16x8xf32>, %[[SIN:.*]]: tensor<2x1x16x8xf32>)
// CHECK-DAG: %[[C:.*]] = mt.reshape %[[COS]] : tensor<2x1x16x8xf32> -> tensor<2x16x1x8xf32>
// CHECK-DAG: %[[S:.*]] = mt.reshape %[[SIN]] : tensor<2x1x16x8xf32> -> tensor<2x16x1x8xf32>
// CHECK-DAG: %[[QR:.*]] = mt.rope %[[Q]], %[[C]], %[[S]] : (tensor<2x16x4x8xf32>, tensor<2x16x1x8xf32>, tensor<2x16x1x8xf32>) -> tensor<2x16x4x8xf32>
// CHECK-DAG: %[[KR:.*]] = mt.rope %[[K]], %[[C]], %[[S]] : (tensor<2x16x4x8xf32>, tensor<2x16x1x8xf32>, tensor<2x16x1x8xf32>) -> tensor<2x16x4x8xf32>
// CHECK: %[[O:.*]] = mt.attention %[[QR]], %[[KR]], %[[V]] scale = 0.35{{[0-9]*}} causal sequence_major
// CHECK-NOT: mt.transpose
// CHECK: return %[[O]]
func.func @through_rope(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x4x8xf32>, %v: tensor<2x16x4x8xf32>, %cos: tensor<2x1x16x8xf32>, %sin: tensor<2x1x16x8xf32>) -> tensor<2x16x4x8xf32> {
  %qh = mt.transpose %q permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %kh = mt.transpose %k permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %vh = mt.transpose %v permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %qr = mt.rope %qh, %cos, %sin : (tensor<2x4x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  %kr = mt.rope %kh, %cos, %sin : (tensor<2x4x16x8xf32>, tensor<2x1x16x8xf32>, tensor<2x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  %o = mt.attention %qr, %kr, %vh scale = 0.35355339059327373 causal : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %r = mt.transpose %o permutation = [0, 2, 1, 3] : tensor<2x4x16x8xf32> -> tensor<2x16x4x8xf32>
  return %r : tensor<2x16x4x8xf32>
}

// -----

// Only the query comes from rows: folding would swap key and value in and the result back,
// as many copies as it saves. Nothing changes.
// CHECK-LABEL: func.func @not_worth_it
// CHECK: mt.transpose
// CHECK: mt.attention
// CHECK-NOT: sequence_major
// CHECK: mt.transpose
func.func @not_worth_it(%q: tensor<1x16x2x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>) -> tensor<1x16x2x8xf32> {
  %qh = mt.transpose %q permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %o = mt.attention %qh, %k, %v scale = 0.35355339059327373 causal : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  %r = mt.transpose %o permutation = [0, 2, 1, 3] : tensor<1x2x16x8xf32> -> tensor<1x16x2x8xf32>
  return %r : tensor<1x16x2x8xf32>
}

// -----

// Three operands from rows, a result read in heads as well: the fold pays one transpose
// back for the reader that wants heads.
// CHECK-LABEL: func.func @heads_read_too
// CHECK: %[[O:.*]] = mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = {{.*}} sequence_major
// CHECK: %[[H:.*]] = mt.transpose %[[O]] permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
// CHECK: mt.add %[[H]], %[[H]]
func.func @heads_read_too(%q: tensor<1x16x2x8xf32>, %k: tensor<1x16x2x8xf32>, %v: tensor<1x16x2x8xf32>) -> tensor<1x2x16x8xf32> {
  %qh = mt.transpose %q permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %kh = mt.transpose %k permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %vh = mt.transpose %v permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %o = mt.attention %qh, %kh, %vh scale = 0.35355339059327373 : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  %s = mt.add %o, %o : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return %s : tensor<1x2x16x8xf32>
}

// -----

// A norm of each head (Gemma 3's q/k norm) and partial rotary (GPT-NeoX: one transpose of a
// fused q/k/v, sliced along the depth, rope on part of it, joined again) are row-wise: they
// run on the rows, and no transpose is left.
// CHECK-LABEL: func.func @row_wise_chains
// CHECK-SAME: (%[[QKV:.*]]: tensor<1x16x2x24xf32>, %[[W:.*]]: tensor<8xf32>, %[[COS:.*]]: tensor<1x1x16x4xf32>, %[[SIN:.*]]: tensor<1x1x16x4xf32>)
// CHECK-NOT: mt.transpose
// CHECK-DAG: %[[Q:.*]] = mt.slice %[[QKV]] starts = [0, 0, 0, 0] limits = [1, 16, 2, 8] strides = [1, 1, 1, 1] : tensor<1x16x2x24xf32> -> tensor<1x16x2x8xf32>
// CHECK-DAG: %[[QN:.*]] = mt.rms_norm %[[Q]], %[[W]]
// CHECK-DAG: %[[QA:.*]] = mt.slice %[[QN]] starts = [0, 0, 0, 0] limits = [1, 16, 2, 4]
// CHECK-DAG: %[[QB:.*]] = mt.slice %[[QN]] starts = [0, 0, 0, 4] limits = [1, 16, 2, 8]
// CHECK-DAG: %[[C:.*]] = mt.reshape %[[COS]] : tensor<1x1x16x4xf32> -> tensor<1x16x1x4xf32>
// CHECK-DAG: %[[QR:.*]] = mt.rope %[[QA]], %[[C]], %{{.*}} : (tensor<1x16x2x4xf32>, tensor<1x16x1x4xf32>, tensor<1x16x1x4xf32>) -> tensor<1x16x2x4xf32>
// CHECK-DAG: %[[QJ:.*]] = mt.concat %[[QR]], %[[QB]] axis = 3 : (tensor<1x16x2x4xf32>, tensor<1x16x2x4xf32>) -> tensor<1x16x2x8xf32>
// CHECK-DAG: %[[K:.*]] = mt.slice %[[QKV]] starts = [0, 0, 0, 8] limits = [1, 16, 2, 16]
// CHECK-DAG: %[[V:.*]] = mt.slice %[[QKV]] starts = [0, 0, 0, 16] limits = [1, 16, 2, 24]
// CHECK: mt.attention %[[QJ]], %[[K]], %[[V]] scale = {{.*}} causal sequence_major
// CHECK-NOT: mt.transpose
// CHECK: return
func.func @row_wise_chains(%qkv: tensor<1x16x2x24xf32>, %w: tensor<8xf32>, %cos: tensor<1x1x16x4xf32>, %sin: tensor<1x1x16x4xf32>) -> tensor<1x16x2x8xf32> {
  %h = mt.transpose %qkv permutation = [0, 2, 1, 3] : tensor<1x16x2x24xf32> -> tensor<1x2x16x24xf32>
  %q = mt.slice %h starts = [0, 0, 0, 0] limits = [1, 2, 16, 8] strides = [1, 1, 1, 1] : tensor<1x2x16x24xf32> -> tensor<1x2x16x8xf32>
  %k = mt.slice %h starts = [0, 0, 0, 8] limits = [1, 2, 16, 16] strides = [1, 1, 1, 1] : tensor<1x2x16x24xf32> -> tensor<1x2x16x8xf32>
  %v = mt.slice %h starts = [0, 0, 0, 16] limits = [1, 2, 16, 24] strides = [1, 1, 1, 1] : tensor<1x2x16x24xf32> -> tensor<1x2x16x8xf32>
  %qn = mt.rms_norm %q, %w epsilon = 1.0e-06 : (tensor<1x2x16x8xf32>, tensor<8xf32>) -> tensor<1x2x16x8xf32>
  %qa = mt.slice %qn starts = [0, 0, 0, 0] limits = [1, 2, 16, 4] strides = [1, 1, 1, 1] : tensor<1x2x16x8xf32> -> tensor<1x2x16x4xf32>
  %qb = mt.slice %qn starts = [0, 0, 0, 4] limits = [1, 2, 16, 8] strides = [1, 1, 1, 1] : tensor<1x2x16x8xf32> -> tensor<1x2x16x4xf32>
  %qr = mt.rope %qa, %cos, %sin : (tensor<1x2x16x4xf32>, tensor<1x1x16x4xf32>, tensor<1x1x16x4xf32>) -> tensor<1x2x16x4xf32>
  %qj = mt.concat %qr, %qb axis = 3 : (tensor<1x2x16x4xf32>, tensor<1x2x16x4xf32>) -> tensor<1x2x16x8xf32>
  %o = mt.attention %qj, %k, %v scale = 0.35355339059327373 causal : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  %r = mt.transpose %o permutation = [0, 2, 1, 3] : tensor<1x2x16x8xf32> -> tensor<1x16x2x8xf32>
  return %r : tensor<1x16x2x8xf32>
}

// -----

// The heads that attention reads are read by something else too: they stay, and so does
// the attention's layout.
// CHECK-LABEL: func.func @heads_shared
// CHECK: mt.attention
// CHECK-NOT: sequence_major
// CHECK-SAME: -> tensor<1x2x16x8xf32>
func.func @heads_shared(%q: tensor<1x16x2x8xf32>, %k: tensor<1x16x2x8xf32>, %v: tensor<1x16x2x8xf32>) -> (tensor<1x16x2x8xf32>, tensor<1x2x16x8xf32>) {
  %qh = mt.transpose %q permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %kh = mt.transpose %k permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %vh = mt.transpose %v permutation = [0, 2, 1, 3] : tensor<1x16x2x8xf32> -> tensor<1x2x16x8xf32>
  %o = mt.attention %qh, %kh, %vh scale = 0.35355339059327373 causal : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  %r = mt.transpose %o permutation = [0, 2, 1, 3] : tensor<1x2x16x8xf32> -> tensor<1x16x2x8xf32>
  return %r, %qh : tensor<1x16x2x8xf32>, tensor<1x2x16x8xf32>
}
