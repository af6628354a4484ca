// RUN: mt-opt %s | mt-opt | FileCheck %s

// Tests that parameters, their reads and a fused block (a gated unit and its gradient too)
// print and parse back unchanged.
// CHECK-LABEL: mt.parameter @w : tensor<32x96xf32>
// CHECK: mt.parameter @ext : tensor<4xf32> {external_file = "m.data", length = 16 : i64, offset = 64 : i64}
// CHECK: mt.parameter @add_6 : tensor<4xf32> {source_name = "model.norm.weight", source_offset = 1.000000e+00 : f64}
// CHECK-LABEL: func.func @block
// CHECK: mt.param @w : tensor<32x96xf32>
// CHECK: mt.linear %{{.*}}, %{{.*}} transpose_weight
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 0.3535{{[0-9]*}} causal :
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 0.3535{{[0-9]*}} causal window = 4 softcap = 5.000000e+01 :
// CHECK: mt.gelu %{{.*}} approximate = "tanh"
// CHECK: %[[H:.*]] = mt.glu "silu" %{{.*}}, %{{.*}} : tensor<2x16x32xf32>
// CHECK: mt.glu_grad "silu" %{{.*}}, %{{.*}}, %[[H]] : tensor<2x16x32xf32>
mt.parameter @w : tensor<32x96xf32>
mt.parameter @ext : tensor<4xf32> {external_file = "m.data", offset = 64 : i64, length = 16 : i64}
mt.parameter @add_6 : tensor<4xf32> {source_name = "model.norm.weight", source_offset = 1.0 : f64}
func.func @block(%x: tensor<2x16x32xf32>, %q: tensor<2x4x16x8xf32>, %k: tensor<2x2x16x8xf32>) -> (tensor<2x16x96xf32>, tensor<2x4x16x8xf32>, tensor<2x16x32xf32>) {
  %w = mt.param @w : tensor<32x96xf32>
  %wt = mt.transpose %w permutation = [1, 0] : tensor<32x96xf32> -> tensor<96x32xf32>
  %y = mt.linear %x, %wt transpose_weight : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
  %a = mt.attention %q, %k, %k scale = 0.35355339059327373 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x16x8xf32>
  %aw = mt.attention %q, %k, %k scale = 0.35355339059327373 causal window = 4 softcap = 50.0 : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x16x8xf32>
  %g = mt.gelu %x approximate = "tanh" : tensor<2x16x32xf32>
  %h = mt.glu "silu" %x, %g : tensor<2x16x32xf32>
  %dgate, %dup = mt.glu_grad "silu" %x, %g, %h : tensor<2x16x32xf32>
  return %y, %a, %dgate : tensor<2x16x96xf32>, tensor<2x4x16x8xf32>, tensor<2x16x32xf32>
}

// Tests that constants, every elementwise op, where and cast print and parse back.
// CHECK-LABEL: func.func @elementwise
// CHECK: mt.constant dense<2.000000e+00> : tensor<f32>
// CHECK: mt.add %{{.*}}, %{{.*}} : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
// CHECK: mt.sub
// CHECK: mt.mul
// CHECK: mt.div
// CHECK: mt.pow %{{.*}}, %{{.*}} : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
// CHECK: mt.neg %{{.*}} : tensor<2x16x32xf32>
// CHECK: mt.sqrt
// CHECK: mt.rsqrt
// CHECK: mt.reciprocal
// CHECK: mt.exp
// CHECK: mt.log
// CHECK: mt.tanh
// CHECK: mt.erf
// CHECK: mt.sigmoid
// CHECK: mt.relu
// CHECK: mt.cos
// CHECK: mt.sin
// CHECK: mt.silu
// CHECK: mt.gelu %{{.*}} : tensor<2x16x32xf32>
// CHECK: mt.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x32xi1>, tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
// CHECK: mt.cast %{{.*}} : tensor<2x16xi32> -> tensor<2x16xi64>
func.func @elementwise(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>, %c: tensor<16x32xi1>, %i: tensor<2x16xi32>) -> (tensor<2x16x32xf32>, tensor<2x16xi64>) {
  %two = mt.constant dense<2.0> : tensor<f32>
  %0 = mt.add %x, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %1 = mt.sub %0, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %2 = mt.mul %1, %x : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %3 = mt.div %2, %w : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %4 = mt.pow %3, %two : (tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %5 = mt.neg %4 : tensor<2x16x32xf32>
  %6 = mt.sqrt %5 : tensor<2x16x32xf32>
  %7 = mt.rsqrt %6 : tensor<2x16x32xf32>
  %8 = mt.reciprocal %7 : tensor<2x16x32xf32>
  %9 = mt.exp %8 : tensor<2x16x32xf32>
  %10 = mt.log %9 : tensor<2x16x32xf32>
  %11 = mt.tanh %10 : tensor<2x16x32xf32>
  %12 = mt.erf %11 : tensor<2x16x32xf32>
  %13 = mt.sigmoid %12 : tensor<2x16x32xf32>
  %14 = mt.relu %13 : tensor<2x16x32xf32>
  %15 = mt.cos %14 : tensor<2x16x32xf32>
  %16 = mt.sin %15 : tensor<2x16x32xf32>
  %17 = mt.silu %16 : tensor<2x16x32xf32>
  %18 = mt.gelu %17 : tensor<2x16x32xf32>
  %19 = mt.where %c, %18, %two : (tensor<16x32xi1>, tensor<2x16x32xf32>, tensor<f32>) -> tensor<2x16x32xf32>
  %20 = mt.cast %i : tensor<2x16xi32> -> tensor<2x16xi64>
  return %19, %20 : tensor<2x16x32xf32>, tensor<2x16xi64>
}

// Tests that reductions (with and without keepdims), softmax and the norms print and parse back.
// CHECK-LABEL: func.func @reductions_and_norms
// CHECK: mt.reduce_sum %{{.*}} axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
// CHECK: mt.reduce_mean %{{.*}} axes = [1, 2] : tensor<2x16x32xf32> -> tensor<2xf32>
// CHECK: mt.reduce_max %{{.*}} axes = [0] : tensor<2x16x32xf32> -> tensor<16x32xf32>
// CHECK: mt.softmax %{{.*}} axis = 2 : tensor<2x16x32xf32>
// CHECK: mt.rms_norm %{{.*}}, %{{.*}} epsilon = 9.9999999999999995E-7 : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
// CHECK: mt.layer_norm %{{.*}}, %{{.*}}, %{{.*}} epsilon = 1.000000e-05 : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
// CHECK: mt.layer_norm %{{.*}}, %{{.*}} epsilon = 1.000000e-05 : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
func.func @reductions_and_norms(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> (tensor<2x16x1xf32>, tensor<2xf32>, tensor<16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) {
  %0 = mt.reduce_sum %x axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
  %1 = mt.reduce_mean %x axes = [1, 2] : tensor<2x16x32xf32> -> tensor<2xf32>
  %2 = mt.reduce_max %x axes = [0] : tensor<2x16x32xf32> -> tensor<16x32xf32>
  %3 = mt.softmax %x axis = 2 : tensor<2x16x32xf32>
  %4 = mt.rms_norm %x, %w epsilon = 1.0e-06 : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %5 = mt.layer_norm %x, %w, %w epsilon = 1.0e-05 : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  %6 = mt.layer_norm %x, %w epsilon = 1.0e-05 : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x16x1xf32>, tensor<2xf32>, tensor<16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
}

// Tests that matmul (all flag combinations), linear without bias, embedding, rope, non-causal
// attention and cross_entropy print and parse back.
// CHECK-LABEL: func.func @transformer_ops
// CHECK: mt.matmul %{{.*}}, %{{.*}} : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
// CHECK: mt.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
// CHECK: mt.matmul %{{.*}}, %{{.*}} transpose_lhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
// CHECK: mt.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
// CHECK: mt.linear %{{.*}}, %{{.*}} : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
// CHECK: mt.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x16x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<2x16x96xf32>
// CHECK: mt.embedding %{{.*}}, %{{.*}} : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
// CHECK: mt.rope %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32>
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 : (tensor<2x4x16x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
// CHECK: mt.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x16x96xf32>, tensor<2x16xi64>) -> tensor<f32>
func.func @transformer_ops(%q: tensor<2x4x16x8xf32>, %kt: tensor<2x4x8x16xf32>, %x: tensor<2x16x32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>, %t: tensor<96x32xf32>, %ids: tensor<2x16xi64>, %cs: tensor<1x1x16x8xf32>, %k8: tensor<2x4x8x8xf32>, %v8: tensor<2x4x8x16xf32>) -> (tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x16x96xf32>, tensor<2x16x96xf32>, tensor<2x16x32xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x16xf32>, tensor<f32>) {
  %0 = mt.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %1 = mt.matmul %q, %q transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %2 = mt.matmul %kt, %kt transpose_lhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %3 = mt.matmul %kt, %q transpose_lhs transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %4 = mt.linear %x, %w : (tensor<2x16x32xf32>, tensor<32x96xf32>) -> tensor<2x16x96xf32>
  %5 = mt.linear %x, %w, %b : (tensor<2x16x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<2x16x96xf32>
  %6 = mt.embedding %t, %ids : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
  %7 = mt.rope %q, %cs, %cs : (tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  %8 = mt.attention %q, %k8, %v8 scale = 0.125 : (tensor<2x4x16x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %9 = mt.cross_entropy %5, %ids : (tensor<2x16x96xf32>, tensor<2x16xi64>) -> tensor<f32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x16x96xf32>, tensor<2x16x96xf32>, tensor<2x16x32xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x16xf32>, tensor<f32>
}

// Tests that the view and data-movement ops print and parse back.
// CHECK-LABEL: func.func @views
// CHECK: mt.reshape %{{.*}} : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
// CHECK: mt.transpose %{{.*}} permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
// CHECK: mt.slice %{{.*}} starts = [0, 0, 0, 4] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
// CHECK: mt.slice %{{.*}} starts = [0, 0, 0, 0] limits = [2, 4, 16, 8] strides = [1, 1, 2, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x8x4xf32>
// CHECK: mt.concat %{{.*}}, %{{.*}} axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
// CHECK: mt.expand %{{.*}} : tensor<2x2x1x16x8xf32> -> tensor<2x2x2x16x8xf32>
// CHECK: mt.gather %{{.*}}, %{{.*}} axis = 1 : (tensor<2x16x32xf32>, tensor<4xi64>) -> tensor<2x4x32xf32>
func.func @views(%x: tensor<2x16x32xf32>, %k: tensor<2x2x1x16x8xf32>, %i: tensor<4xi64>) -> (tensor<2x4x16x8xf32>, tensor<2x4x8x4xf32>, tensor<2x2x2x16x8xf32>, tensor<2x4x32xf32>) {
  %0 = mt.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %1 = mt.transpose %0 permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %2 = mt.slice %1 starts = [0, 0, 0, 4] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
  %3 = mt.slice %1 starts = [0, 0, 0, 0] limits = [2, 4, 16, 8] strides = [1, 1, 2, 2] : tensor<2x4x16x8xf32> -> tensor<2x4x8x4xf32>
  %4 = mt.concat %2, %2 axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
  %5 = mt.expand %k : tensor<2x2x1x16x8xf32> -> tensor<2x2x2x16x8xf32>
  %6 = mt.gather %x, %i axis = 1 : (tensor<2x16x32xf32>, tensor<4xi64>) -> tensor<2x4x32xf32>
  return %4, %3, %5, %6 : tensor<2x4x16x8xf32>, tensor<2x4x8x4xf32>, tensor<2x2x2x16x8xf32>, tensor<2x4x32xf32>
}

// Tests that parameters of the other float types, with external data and with names that
// need quoting, print and parse back.
// CHECK-LABEL: mt.parameter @half : tensor<8xf16> {external_file = "w.bin", length = 16 : i64, offset = 0 : i64}
// CHECK: mt.parameter @h.0.mlp.w : tensor<2x4xbf16>
// CHECK: mt.parameter @"model/wte weight" : tensor<4x2xf64>
mt.parameter @half : tensor<8xf16> {external_file = "w.bin", offset = 0 : i64, length = 16 : i64}
mt.parameter @"h.0.mlp.w" : tensor<2x4xbf16>
mt.parameter @"model/wte weight" : tensor<4x2xf64>

// Tests that attention under key lengths, the lengths of a mask, attention with its
// log-sum-exp and the gradient print and parse back.
// CHECK-LABEL: func.func @key_span
// CHECK: %[[N:.*]] = mt.key_span %{{.*}} : tensor<2x16xi64> -> tensor<2x2xi64>
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} key_span %[[N]] scale = 5.000000e-01 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2xi64>) -> tensor<2x4x16x8xf32>
// CHECK: %[[O:[a-z_0-9]+]], %[[L:[a-z_0-9]+]] = mt.attention %{{.*}}, %{{.*}}, %{{.*}} key_span %[[N]] scale = 5.000000e-01 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2xi64>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
// CHECK: mt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} output %[[O]] lse %[[L]] key_span %[[N]] scale = 5.000000e-01 causal
func.func @key_span(%m: tensor<2x16xi64>, %q: tensor<2x4x16x8xf32>, %k: tensor<2x2x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) {
  %n = mt.key_span %m : tensor<2x16xi64> -> tensor<2x2xi64>
  %a = mt.attention %q, %k, %k key_span %n scale = 0.5 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2xi64>) -> tensor<2x4x16x8xf32>
  %o, %lse = mt.attention %q, %k, %k key_span %n scale = 0.5 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2xi64>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
  %dq, %dk, %dv = mt.attention_grad %q, %k, %k, %a output %o lse %lse key_span %n scale = 0.5 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf32>, tensor<2x2xi64>) -> (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>)
  return %a, %dq : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
}

// Tests that copies and the await of a copy's token print and parse back.
// CHECK-LABEL: func.func @copies
// CHECK: %[[D:.*]]:2, %[[T:.*]] = mt.prefetch %{{.*}}, %{{.*}} {kind = "weights", layer = 3 : i64}
// CHECK: %[[A:.*]]:2 = mt.await %[[D]]#0, %[[D]]#1 after %[[T]] : tensor<8x8xf32>, tensor<8xf32>
// CHECK: %[[H:.*]], %[[U:.*]] = mt.offload %[[A]]#1 {kind = "gradients", layer = 3 : i64}
// CHECK: mt.await %[[H]] after %[[U]] : tensor<8xf32>
func.func @copies(%a: tensor<8x8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %d:2, %t = mt.prefetch %a, %b {kind = "weights", layer = 3 : i64} : (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>, !mt.token)
  %r:2 = mt.await %d#0, %d#1 after %t : tensor<8x8xf32>, tensor<8xf32>
  %h, %u = mt.offload %r#1 {kind = "gradients", layer = 3 : i64} : (tensor<8xf32>) -> (tensor<8xf32>, !mt.token)
  %g = mt.await %h after %u : tensor<8xf32>
  return %g : tensor<8xf32>
}
