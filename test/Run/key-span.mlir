// RUN: mtc %s -o %t.mtp
// RUN: %python %S/Inputs/write_tokens.py u16 %t.tokens 16
// RUN: mt-run %t.mtp --init random --seed 3 --data %t.tokens --steps 1 --lr 0 --metrics %t.jsonl
// RUN: FileCheck %s < %t.jsonl

// Tests mt.attention's key span against the softmax it stands for: for a left-padded
// sequence (3 padding tokens, then 5 tokens) and one padded on both sides (1, 3 tokens, 4),
// the scores masked where the key is padding (and, when causal, in the future), at -1e9,
// then a softmax; causal rows that see no key (the left padding's) are zero. The loss is the
// squared difference of the two, summed over every row (padding rows too) and scaled by
// 1e6: were the span ignored, it would be of order 1e5. The unfused form reads a constant
// mask, which mt-raise-attention does not take for a key span (only a mask input is).
// mt-run needs a token input: it enters the loss times zero.
// CHECK: "loss":{{ ?}}{{[0-9.]+e-(0[5-9]|[1-9][0-9])|0[,}]}}
mt.parameter @q : tensor<2x2x8x16xf32>
mt.parameter @k : tensor<2x2x8x16xf32>
mt.parameter @v : tensor<2x2x8x16xf32>
func.func @forward(%ids: tensor<2x8xi64> {mt.name = "ids"}) -> tensor<f32> {
  %q = mt.param @q : tensor<2x2x8x16xf32>
  %k = mt.param @k : tensor<2x2x8x16xf32>
  %v = mt.param @v : tensor<2x2x8x16xf32>
  %mask = mt.constant dense<[[0, 0, 0, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0, 0, 0]]> : tensor<2x8xi64>
  %sees = mt.constant dense<[[[[0.0], [0.0], [0.0], [1.0], [1.0], [1.0], [1.0], [1.0]]], [[[0.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0]]]]> : tensor<2x1x8x1xf32>
  %causal = mt.constant dense<[[[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]]]> : tensor<1x1x8x8xi1>
  %false = mt.constant dense<false> : tensor<i1>
  %zero = mt.constant dense<0.0> : tensor<f32>
  %fill = mt.constant dense<-1.0e9> : tensor<f32>
  %scale = mt.constant dense<0.25> : tensor<f32>
  %big = mt.constant dense<1.0e6> : tensor<f32>
  %span = mt.key_span %mask : tensor<2x8xi64> -> tensor<2x2xi64>
  %fused = mt.attention %q, %k, %v key_span %span scale = 0.25 : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2xi64>) -> tensor<2x2x8x16xf32>
  %fusedCausal = mt.attention %q, %k, %v key_span %span scale = 0.25 causal : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2xi64>) -> tensor<2x2x8x16xf32>

  %bits = mt.cast %mask : tensor<2x8xi64> -> tensor<2x8xi1>
  %keys = mt.reshape %bits : tensor<2x8xi1> -> tensor<2x1x1x8xi1>
  %both = mt.where %causal, %keys, %false : (tensor<1x1x8x8xi1>, tensor<2x1x1x8xi1>, tensor<i1>) -> tensor<2x1x8x8xi1>
  %s = mt.matmul %q, %k transpose_rhs : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x8xf32>
  %ss = mt.mul %s, %scale : (tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
  %padded = mt.where %keys, %ss, %fill : (tensor<2x1x1x8xi1>, tensor<2x2x8x8xf32>, tensor<f32>) -> tensor<2x2x8x8xf32>
  %p = mt.softmax %padded axis = 3 : tensor<2x2x8x8xf32>
  %o = mt.matmul %p, %v : (tensor<2x2x8x8xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  %hidden = mt.where %both, %zero, %fill : (tensor<2x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x8x8xf32>
  %sc = mt.add %ss, %hidden : (tensor<2x2x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %pc = mt.softmax %sc axis = 3 : tensor<2x2x8x8xf32>
  %unseen = mt.matmul %pc, %v : (tensor<2x2x8x8xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  %oc = mt.mul %unseen, %sees : (tensor<2x2x8x16xf32>, tensor<2x1x8x1xf32>) -> tensor<2x2x8x16xf32>

  %d = mt.sub %fused, %o : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  %dc = mt.sub %fusedCausal, %oc : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  %d2 = mt.mul %d, %d : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  %dc2 = mt.mul %dc, %dc : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  %sum = mt.add %d2, %dc2 : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
  %total = mt.reduce_sum %sum axes = [0, 1, 2, 3] : tensor<2x2x8x16xf32> -> tensor<f32>
  %scaled = mt.mul %total, %big : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %real = mt.cast %ids : tensor<2x8xi64> -> tensor<2x8xf32>
  %none = mt.mul %real, %zero : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %nothing = mt.reduce_sum %none axes = [0, 1] : tensor<2x8xf32> -> tensor<f32>
  %loss = mt.add %scaled, %nothing : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
