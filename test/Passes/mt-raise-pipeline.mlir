// RUN: mt-opt %s --split-input-file --pass-pipeline='builtin.module(mt-raise)' | FileCheck %s

// Tests that a Llama-style block (token embedding, RMSNorm, q/k/v projections by transposed
// weights, rotary embedding of q and k, grouped-query causal attention, output projection,
// RMSNorm and a SwiGLU MLP) written in primitive ops is raised to the fused ops.
mt.parameter @embed : tensor<32x16xf32>
mt.parameter @attn_norm : tensor<16xf32>
mt.parameter @wq : tensor<16x16xf32>
mt.parameter @wk : tensor<8x16xf32>
mt.parameter @wv : tensor<8x16xf32>
mt.parameter @wo : tensor<16x16xf32>
mt.parameter @ffn_norm : tensor<16xf32>
mt.parameter @w_gate : tensor<16x32xf32>
mt.parameter @w_up : tensor<16x32xf32>
mt.parameter @w_down : tensor<32x16xf32>
// CHECK-LABEL: func.func @llama_block
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x4xi64>, %[[COS:.*]]: tensor<4x4xf32>, %[[SIN:.*]]: tensor<4x4xf32>)
// CHECK: %[[H:.*]] = mt.embedding %{{.*}}, %[[IDS]] : (tensor<32x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
// CHECK: %[[XN:.*]] = mt.rms_norm %[[H]], %{{.*}} epsilon = 9.99999{{[0-9]*}}E-7
// CHECK-DAG: %[[Q:.*]] = mt.linear %[[XN]], %{{.*}} transpose_weight : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
// CHECK-DAG: %[[K:.*]] = mt.linear %[[XN]], %{{.*}} transpose_weight : (tensor<1x4x16xf32>, tensor<8x16xf32>) -> tensor<1x4x8xf32>
// The heads stay in the projections' layout [B, T, H, D]: the rope's tables as [1, T, 1, D].
// CHECK-DAG: %[[COSV:.*]] = mt.reshape %[[COS]] : tensor<4x4xf32> -> tensor<1x4x1x4xf32>
// CHECK-DAG: %[[SINV:.*]] = mt.reshape %[[SIN]] : tensor<4x4xf32> -> tensor<1x4x1x4xf32>
// CHECK-DAG: %[[QR:.*]] = mt.rope %{{.*}}, %[[COSV]], %[[SINV]] : (tensor<1x4x4x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK-DAG: %[[KR:.*]] = mt.rope %{{.*}}, %[[COSV]], %[[SINV]] : (tensor<1x4x2x4xf32>, tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x2x4xf32>
// CHECK: %[[A:.*]] = mt.attention %[[QR]], %[[KR]], %{{.*}} scale = 5.000000e-01 causal sequence_major : (tensor<1x4x4x4xf32>, tensor<1x4x2x4xf32>, tensor<1x4x2x4xf32>) -> tensor<1x4x4x4xf32>
// CHECK: mt.linear %{{.*}}, %{{.*}} transpose_weight : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
// CHECK: %[[H2:.*]] = mt.add
// CHECK: %[[XN2:.*]] = mt.rms_norm %[[H2]], %{{.*}} epsilon
// CHECK-DAG: %[[G:.*]] = mt.linear %[[XN2]], %{{.*}} : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
// CHECK-DAG: %[[U:.*]] = mt.linear %[[XN2]], %{{.*}} : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
// CHECK: %[[GU:.*]] = mt.glu "silu" %[[G]], %[[U]]
// CHECK: mt.linear %[[GU]], %{{.*}} : (tensor<1x4x32xf32>, tensor<32x16xf32>) -> tensor<1x4x16xf32>
// CHECK-NOT: mt.gather
// CHECK-NOT: mt.matmul
// CHECK-NOT: mt.softmax
// CHECK-NOT: mt.rsqrt
// CHECK-NOT: mt.silu
// CHECK-NOT: mt.concat
// CHECK-NOT: mt.expand
// CHECK-NOT: mt.sigmoid
// CHECK-NOT: mt.transpose
// CHECK: return
func.func @llama_block(%ids: tensor<1x4xi64>, %cos: tensor<4x4xf32>, %sin: tensor<4x4xf32>) -> tensor<1x4x16xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-06> : tensor<f32>
  %scale = mt.constant dense<0.5> : tensor<f32>
  %mask = mt.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %embed = mt.param @embed : tensor<32x16xf32>
  %h = mt.gather %embed, %ids axis = 0 : (tensor<32x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  // RMSNorm before attention.
  %an = mt.param @attn_norm : tensor<16xf32>
  %p1 = mt.pow %h, %two : (tensor<1x4x16xf32>, tensor<f32>) -> tensor<1x4x16xf32>
  %m1 = mt.reduce_mean %p1 axes = [2] keepdims : tensor<1x4x16xf32> -> tensor<1x4x1xf32>
  %v1 = mt.add %m1, %eps : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %r1 = mt.rsqrt %v1 : tensor<1x4x1xf32>
  %n1 = mt.mul %h, %r1 : (tensor<1x4x16xf32>, tensor<1x4x1xf32>) -> tensor<1x4x16xf32>
  %xn = mt.mul %an, %n1 : (tensor<16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  // Projections x @ W^T, split into heads [B, H, T, D].
  %wq = mt.param @wq : tensor<16x16xf32>
  %wqt = mt.transpose %wq permutation = [1, 0] : tensor<16x16xf32> -> tensor<16x16xf32>
  %q0 = mt.matmul %xn, %wqt : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
  %q1 = mt.reshape %q0 : tensor<1x4x16xf32> -> tensor<1x4x4x4xf32>
  %q = mt.transpose %q1 permutation = [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %wk = mt.param @wk : tensor<8x16xf32>
  %wkt = mt.transpose %wk permutation = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %k0 = mt.matmul %xn, %wkt : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %k1 = mt.reshape %k0 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %k = mt.transpose %k1 permutation = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %wv = mt.param @wv : tensor<8x16xf32>
  %wvt = mt.transpose %wv permutation = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %v0 = mt.matmul %xn, %wvt : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %v1r = mt.reshape %v0 : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %v = mt.transpose %v1r permutation = [0, 2, 1, 3] : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  // Rotary embedding of q and k.
  %qlo = mt.slice %q starts = [0, 0, 0, 0] limits = [1, 4, 4, 2] strides = [1, 1, 1, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x2xf32>
  %qhi = mt.slice %q starts = [0, 0, 0, 2] limits = [1, 4, 4, 4] strides = [1, 1, 1, 1] : tensor<1x4x4x4xf32> -> tensor<1x4x4x2xf32>
  %qneg = mt.neg %qhi : tensor<1x4x4x2xf32>
  %qrot = mt.concat %qneg, %qlo axis = 3 : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x4xf32>
  %qc = mt.mul %q, %cos : (tensor<1x4x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x4xf32>
  %qs = mt.mul %qrot, %sin : (tensor<1x4x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x4xf32>
  %qr = mt.add %qc, %qs : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %klo = mt.slice %k starts = [0, 0, 0, 0] limits = [1, 2, 4, 2] strides = [1, 1, 1, 1] : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %khi = mt.slice %k starts = [0, 0, 0, 2] limits = [1, 2, 4, 4] strides = [1, 1, 1, 1] : tensor<1x2x4x4xf32> -> tensor<1x2x4x2xf32>
  %kneg = mt.neg %khi : tensor<1x2x4x2xf32>
  %krot = mt.concat %kneg, %klo axis = 3 : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %kc = mt.mul %k, %cos : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %ks = mt.mul %krot, %sin : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %kr = mt.add %kc, %ks : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  // Repeat the two key/value heads for the four query heads.
  %kx1 = mt.reshape %kr : tensor<1x2x4x4xf32> -> tensor<1x2x1x4x4xf32>
  %kx2 = mt.expand %kx1 : tensor<1x2x1x4x4xf32> -> tensor<1x2x2x4x4xf32>
  %kx = mt.reshape %kx2 : tensor<1x2x2x4x4xf32> -> tensor<1x4x4x4xf32>
  %vx1 = mt.reshape %v : tensor<1x2x4x4xf32> -> tensor<1x2x1x4x4xf32>
  %vx2 = mt.expand %vx1 : tensor<1x2x1x4x4xf32> -> tensor<1x2x2x4x4xf32>
  %vx = mt.reshape %vx2 : tensor<1x2x2x4x4xf32> -> tensor<1x4x4x4xf32>
  // Causal attention.
  %kt = mt.transpose %kx permutation = [0, 1, 3, 2] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %s0 = mt.matmul %qr, %kt : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %s1 = mt.mul %s0, %scale : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %s2 = mt.add %s1, %mask : (tensor<1x4x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4x4xf32>
  %pr = mt.softmax %s2 axis = 3 : tensor<1x4x4x4xf32>
  %o0 = mt.matmul %pr, %vx : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %o1 = mt.transpose %o0 permutation = [0, 2, 1, 3] : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %o2 = mt.reshape %o1 : tensor<1x4x4x4xf32> -> tensor<1x4x16xf32>
  %wo = mt.param @wo : tensor<16x16xf32>
  %wot = mt.transpose %wo permutation = [1, 0] : tensor<16x16xf32> -> tensor<16x16xf32>
  %o3 = mt.matmul %o2, %wot : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
  %h2 = mt.add %h, %o3 : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  // RMSNorm before the MLP, written with x * x and div(1, sqrt).
  %fn = mt.param @ffn_norm : tensor<16xf32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %p2 = mt.mul %h2, %h2 : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %m2 = mt.reduce_mean %p2 axes = [2] keepdims : tensor<1x4x16xf32> -> tensor<1x4x1xf32>
  %e2 = mt.add %m2, %eps : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %sq2 = mt.sqrt %e2 : tensor<1x4x1xf32>
  %r2 = mt.div %one, %sq2 : (tensor<f32>, tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %n2 = mt.mul %h2, %r2 : (tensor<1x4x16xf32>, tensor<1x4x1xf32>) -> tensor<1x4x16xf32>
  %xn2 = mt.mul %n2, %fn : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  // SwiGLU MLP.
  %wg = mt.param @w_gate : tensor<16x32xf32>
  %wu = mt.param @w_up : tensor<16x32xf32>
  %wd = mt.param @w_down : tensor<32x16xf32>
  %g = mt.matmul %xn2, %wg : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
  %u = mt.matmul %xn2, %wu : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
  %gs = mt.sigmoid %g : tensor<1x4x32xf32>
  %ga = mt.mul %g, %gs : (tensor<1x4x32xf32>, tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
  %gu = mt.mul %ga, %u : (tensor<1x4x32xf32>, tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
  %d = mt.matmul %gu, %wd : (tensor<1x4x32xf32>, tensor<32x16xf32>) -> tensor<1x4x16xf32>
  %h3 = mt.add %h2, %d : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return %h3 : tensor<1x4x16xf32>
}

// -----

// Tests that a GPT-2-style block (token and position embeddings, LayerNorm with bias, fused
// qkv projection with bias split by slices, k transposed straight to [B, H, D, T], causal
// attention with a where mask, output projection and a tanh-GELU MLP) is raised.
mt.parameter @wte : tensor<32x16xf32>
mt.parameter @wpe : tensor<8x16xf32>
mt.parameter @ln1_w : tensor<16xf32>
mt.parameter @ln1_b : tensor<16xf32>
mt.parameter @attn_w : tensor<16x48xf32>
mt.parameter @attn_b : tensor<48xf32>
mt.parameter @proj_w : tensor<16x16xf32>
mt.parameter @proj_b : tensor<16xf32>
mt.parameter @ln2_w : tensor<16xf32>
mt.parameter @ln2_b : tensor<16xf32>
mt.parameter @fc_w : tensor<16x64xf32>
mt.parameter @fc_b : tensor<64xf32>
mt.parameter @out_w : tensor<64x16xf32>
mt.parameter @out_b : tensor<16xf32>
// CHECK-LABEL: func.func @gpt2_block
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x4xi64>)
// CHECK-DAG: %[[TOK:.*]] = mt.embedding %{{.*}}, %[[IDS]] : (tensor<32x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
// CHECK-DAG: %[[POS:.*]] = mt.embedding %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<4xi64>) -> tensor<4x16xf32>
// CHECK: %[[H:.*]] = mt.add
// CHECK: %[[X:.*]] = mt.layer_norm %[[H]], %{{.*}}, %{{.*}} epsilon = 9.99999{{[0-9]*}}E-6
// CHECK: %[[QKV:.*]] = mt.linear %[[X]], %{{.*}}, %{{.*}} : (tensor<1x4x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<1x4x48xf32>
// CHECK: mt.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 0.3535{{[0-9]*}} causal sequence_major : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
// CHECK: mt.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
// CHECK: %[[H2:.*]] = mt.add
// CHECK: %[[X2:.*]] = mt.layer_norm %[[H2]], %{{.*}}, %{{.*}} epsilon
// CHECK: %[[FC:.*]] = mt.linear %[[X2]], %{{.*}}, %{{.*}} : (tensor<1x4x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<1x4x64xf32>
// CHECK: %[[G:.*]] = mt.gelu %[[FC]] approximate = "tanh" : tensor<1x4x64xf32>
// CHECK: mt.linear %[[G]], %{{.*}}, %{{.*}} : (tensor<1x4x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
// CHECK-NOT: mt.gather
// CHECK-NOT: mt.matmul
// CHECK-NOT: mt.softmax
// CHECK-NOT: mt.where
// CHECK-NOT: mt.sqrt
// CHECK-NOT: mt.tanh
// CHECK: return
func.func @gpt2_block(%ids: tensor<1x4xi64>) -> tensor<1x4x16xf32> {
  %two = mt.constant dense<2.0> : tensor<f32>
  %three = mt.constant dense<3.0> : tensor<f32>
  %eps = mt.constant dense<1.0e-05> : tensor<f32>
  %half = mt.constant dense<0.5> : tensor<f32>
  %one = mt.constant dense<1.0> : tensor<f32>
  %kappa = mt.constant dense<0.044715> : tensor<f32>
  %beta = mt.constant dense<0.797884583> : tensor<f32>
  %sqrtd = mt.constant dense<2.82842708> : tensor<f32>
  %keep = mt.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %fill = mt.constant dense<-3.40282347E+38> : tensor<f32>
  %positions = mt.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %wte = mt.param @wte : tensor<32x16xf32>
  %wpe = mt.param @wpe : tensor<8x16xf32>
  %tok = mt.gather %wte, %ids axis = 0 : (tensor<32x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  %pos = mt.gather %wpe, %positions axis = 0 : (tensor<8x16xf32>, tensor<4xi64>) -> tensor<4x16xf32>
  %h = mt.add %tok, %pos : (tensor<1x4x16xf32>, tensor<4x16xf32>) -> tensor<1x4x16xf32>
  // LayerNorm 1.
  %l1w = mt.param @ln1_w : tensor<16xf32>
  %l1b = mt.param @ln1_b : tensor<16xf32>
  %mu1 = mt.reduce_mean %h axes = [2] keepdims : tensor<1x4x16xf32> -> tensor<1x4x1xf32>
  %d1 = mt.sub %h, %mu1 : (tensor<1x4x16xf32>, tensor<1x4x1xf32>) -> tensor<1x4x16xf32>
  %sq1 = mt.pow %d1, %two : (tensor<1x4x16xf32>, tensor<f32>) -> tensor<1x4x16xf32>
  %var1 = mt.reduce_mean %sq1 axes = [2] keepdims : tensor<1x4x16xf32> -> tensor<1x4x1xf32>
  %ve1 = mt.add %var1, %eps : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %sd1 = mt.sqrt %ve1 : tensor<1x4x1xf32>
  %n1 = mt.div %d1, %sd1 : (tensor<1x4x16xf32>, tensor<1x4x1xf32>) -> tensor<1x4x16xf32>
  %nw1 = mt.mul %n1, %l1w : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %x = mt.add %nw1, %l1b : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  // Fused qkv projection (Conv1D: x @ W + b) and head split.
  %aw = mt.param @attn_w : tensor<16x48xf32>
  %ab = mt.param @attn_b : tensor<48xf32>
  %qkv0 = mt.matmul %x, %aw : (tensor<1x4x16xf32>, tensor<16x48xf32>) -> tensor<1x4x48xf32>
  %qkv = mt.add %qkv0, %ab : (tensor<1x4x48xf32>, tensor<48xf32>) -> tensor<1x4x48xf32>
  %q0 = mt.slice %qkv starts = [0, 0, 0] limits = [1, 4, 16] strides = [1, 1, 1] : tensor<1x4x48xf32> -> tensor<1x4x16xf32>
  %k0 = mt.slice %qkv starts = [0, 0, 16] limits = [1, 4, 32] strides = [1, 1, 1] : tensor<1x4x48xf32> -> tensor<1x4x16xf32>
  %v0 = mt.slice %qkv starts = [0, 0, 32] limits = [1, 4, 48] strides = [1, 1, 1] : tensor<1x4x48xf32> -> tensor<1x4x16xf32>
  %q1 = mt.reshape %q0 : tensor<1x4x16xf32> -> tensor<1x4x2x8xf32>
  %q = mt.transpose %q1 permutation = [0, 2, 1, 3] : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %k1 = mt.reshape %k0 : tensor<1x4x16xf32> -> tensor<1x4x2x8xf32>
  %kt = mt.transpose %k1 permutation = [0, 2, 3, 1] : tensor<1x4x2x8xf32> -> tensor<1x2x8x4xf32>
  %v1 = mt.reshape %v0 : tensor<1x4x16xf32> -> tensor<1x4x2x8xf32>
  %v = mt.transpose %v1 permutation = [0, 2, 1, 3] : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  // Causal attention: div by sqrt(D), where-mask.
  %s0 = mt.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %s1 = mt.div %s0, %sqrtd : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %s2 = mt.where %keep, %s1, %fill : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %pr = mt.softmax %s2 axis = 3 : tensor<1x2x4x4xf32>
  %o0 = mt.matmul %pr, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %o1 = mt.transpose %o0 permutation = [0, 2, 1, 3] : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  %o2 = mt.reshape %o1 : tensor<1x4x2x8xf32> -> tensor<1x4x16xf32>
  %pw = mt.param @proj_w : tensor<16x16xf32>
  %pb = mt.param @proj_b : tensor<16xf32>
  %o3 = mt.matmul %o2, %pw : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
  %o4 = mt.add %pb, %o3 : (tensor<16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %h2 = mt.add %h, %o4 : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  // LayerNorm 2.
  %l2w = mt.param @ln2_w : tensor<16xf32>
  %l2b = mt.param @ln2_b : tensor<16xf32>
  %mu2 = mt.reduce_mean %h2 axes = [2] keepdims : tensor<1x4x16xf32> -> tensor<1x4x1xf32>
  %d2 = mt.sub %h2, %mu2 : (tensor<1x4x16xf32>, tensor<1x4x1xf32>) -> tensor<1x4x16xf32>
  %sq2 = mt.pow %d2, %two : (tensor<1x4x16xf32>, tensor<f32>) -> tensor<1x4x16xf32>
  %var2 = mt.reduce_mean %sq2 axes = [2] keepdims : tensor<1x4x16xf32> -> tensor<1x4x1xf32>
  %ve2 = mt.add %var2, %eps : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %sd2 = mt.sqrt %ve2 : tensor<1x4x1xf32>
  %n2 = mt.div %d2, %sd2 : (tensor<1x4x16xf32>, tensor<1x4x1xf32>) -> tensor<1x4x16xf32>
  %nw2 = mt.mul %n2, %l2w : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %x2 = mt.add %nw2, %l2b : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  // MLP with tanh GELU.
  %fw = mt.param @fc_w : tensor<16x64xf32>
  %fb = mt.param @fc_b : tensor<64xf32>
  %f0 = mt.matmul %x2, %fw : (tensor<1x4x16xf32>, tensor<16x64xf32>) -> tensor<1x4x64xf32>
  %f = mt.add %f0, %fb : (tensor<1x4x64xf32>, tensor<64xf32>) -> tensor<1x4x64xf32>
  %c3 = mt.pow %f, %three : (tensor<1x4x64xf32>, tensor<f32>) -> tensor<1x4x64xf32>
  %kc = mt.mul %kappa, %c3 : (tensor<f32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32>
  %in = mt.add %f, %kc : (tensor<1x4x64xf32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32>
  %bi = mt.mul %beta, %in : (tensor<f32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32>
  %th = mt.tanh %bi : tensor<1x4x64xf32>
  %tp = mt.add %one, %th : (tensor<f32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32>
  %hf = mt.mul %half, %f : (tensor<f32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32>
  %gl = mt.mul %hf, %tp : (tensor<1x4x64xf32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32>
  %ow = mt.param @out_w : tensor<64x16xf32>
  %ob = mt.param @out_b : tensor<16xf32>
  %m0 = mt.matmul %gl, %ow : (tensor<1x4x64xf32>, tensor<64x16xf32>) -> tensor<1x4x16xf32>
  %m1 = mt.add %m0, %ob : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
  %h3 = mt.add %h2, %m1 : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return %h3 : tensor<1x4x16xf32>
}
