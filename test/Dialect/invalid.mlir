// RUN: mt-opt %s --split-input-file --verify-diagnostics

// Tests that elementwise operands whose shapes do not broadcast are rejected.
func.func @bad_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{operands don't have broadcast-compatible shapes}}
  %0 = mt.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that where's values must share the result's element type.
func.func @where_element_type(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{operand element type 'f16' differs from result's 'f32'}}
  %0 = mt.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a matmul whose contraction sizes differ is rejected.
func.func @matmul_contraction(%a: tensor<2x16x32xf32>, %b: tensor<16x96xf32>) -> tensor<2x16x96xf32> {
  // expected-error @+1 {{matmul contraction sizes differ: [2, 16, 32] @ [16, 96]}}
  %0 = mt.matmul %a, %b : (tensor<2x16x32xf32>, tensor<16x96xf32>) -> tensor<2x16x96xf32>
  return %0 : tensor<2x16x96xf32>
}

// -----

// Tests that the transpose flags are taken into account in the contraction check.
func.func @matmul_contraction_transposed(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{matmul contraction sizes differ: [4, 8] @ [8, 4]^T}}
  %0 = mt.matmul %a, %b transpose_rhs : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that matmul operands of rank 1 are rejected.
func.func @matmul_rank1(%a: tensor<8xf32>, %b: tensor<8x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{matmul operands need rank 2 or more}}
  %0 = mt.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a matmul result of the wrong shape is rejected.
func.func @matmul_result(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{result shape [4, 3] should be [4, 2]}}
  %0 = mt.matmul %a, %b : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Tests that reduction axes out of order are rejected.
func.func @reduce_axes_order(%x: tensor<2x16x32xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{reduction axes [2, 1] must be ascending, unique and within rank 3}}
  %0 = mt.reduce_sum %x axes = [2, 1] : tensor<2x16x32xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that a reduction axis beyond the rank is rejected.
func.func @reduce_axis_range(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{reduction axes [2] must be ascending, unique and within rank 2}}
  %0 = mt.reduce_max %x axes = [2] : tensor<2x16xf32> -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// Tests that a reduction result that drops a kept axis is rejected.
func.func @reduce_keepdims_result(%x: tensor<2x16x32xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{result shape [2, 16] should be [2, 16, 1]}}
  %0 = mt.reduce_mean %x axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// Tests that a softmax axis out of range is rejected.
func.func @softmax_axis(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = mt.softmax %x axis = 2 : tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// Tests that a reshape that changes the element count is rejected.
func.func @reshape_count(%x: tensor<2x16x32xf32>) -> tensor<2x16x4x4xf32> {
  // expected-error @+1 {{cannot reshape [2, 16, 32] into [2, 16, 4, 4]}}
  %0 = mt.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x4xf32>
  return %0 : tensor<2x16x4x4xf32>
}

// -----

// Tests that a permutation with a repeated axis is rejected.
func.func @transpose_repeated_axis(%x: tensor<2x16x32xf32>) -> tensor<2x2x32xf32> {
  // expected-error @+1 {{permutation [0, 0, 2] is not a permutation of 3 axes}}
  %0 = mt.transpose %x permutation = [0, 0, 2] : tensor<2x16x32xf32> -> tensor<2x2x32xf32>
  return %0 : tensor<2x2x32xf32>
}

// -----

// Tests that a permutation of the wrong length is rejected.
func.func @transpose_short_perm(%x: tensor<2x16x32xf32>) -> tensor<16x2xf32> {
  // expected-error @+1 {{permutation [1, 0] is not a permutation of 3 axes}}
  %0 = mt.transpose %x permutation = [1, 0] : tensor<2x16x32xf32> -> tensor<16x2xf32>
  return %0 : tensor<16x2xf32>
}

// -----

// Tests that a transpose result of the wrong shape is rejected.
func.func @transpose_result(%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{result shape [2, 16, 32] should be [2, 32, 16]}}
  %0 = mt.transpose %x permutation = [0, 2, 1] : tensor<2x16x32xf32> -> tensor<2x16x32xf32>
  return %0 : tensor<2x16x32xf32>
}

// -----

// Tests that a slice past the end of an axis is rejected.
func.func @slice_out_of_range(%x: tensor<2x8xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{slice of axis 1 (size 8) from 4 to 10 by 1 is out of range}}
  %0 = mt.slice %x starts = [0, 4] limits = [2, 10] strides = [1, 1] : tensor<2x8xf32> -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

// Tests that a slice with a zero stride is rejected.
func.func @slice_zero_stride(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{slice of axis 0 (size 2) from 0 to 2 by 0 is out of range}}
  %0 = mt.slice %x starts = [0, 0] limits = [2, 8] strides = [0, 1] : tensor<2x8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that a slice without one entry per axis is rejected.
func.func @slice_entries(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{slice needs one start, limit and stride per axis of [2, 8]}}
  %0 = mt.slice %x starts = [0] limits = [2] strides = [1] : tensor<2x8xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that a strided slice result of the wrong size is rejected.
func.func @slice_result(%x: tensor<2x8xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{result shape [2, 3] should be [2, 4]}}
  %0 = mt.slice %x starts = [0, 0] limits = [2, 8] strides = [1, 2] : tensor<2x8xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that concat inputs that differ off the concatenated axis are rejected.
func.func @concat_mismatch(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{concat inputs [2, 4] and [3, 4] differ off axis 1}}
  %0 = mt.concat %a, %b axis = 1 : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that a concat axis out of range is rejected.
func.func @concat_axis(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{concat axis 2 is out of range for rank 2}}
  %0 = mt.concat %a, %b axis = 2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that concat inputs of different element types are rejected.
func.func @concat_element_type(%a: tensor<2x4xf32>, %b: tensor<2x4xf16>) -> tensor<2x8xf32> {
  // expected-error @+1 {{operand element type 'f16' differs from result's 'f32'}}
  %0 = mt.concat %a, %b axis = 1 : (tensor<2x4xf32>, tensor<2x4xf16>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// Tests that an expand to a shape the input does not broadcast to is rejected.
func.func @expand_not_broadcastable(%x: tensor<2x3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{cannot broadcast [2, 3] to [2, 4]}}
  %0 = mt.expand %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Tests that an expand to a lower rank is rejected.
func.func @expand_lower_rank(%x: tensor<1x2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{cannot broadcast [1, 2, 3] to [2, 3]}}
  %0 = mt.expand %x : tensor<1x2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Tests that a gather axis out of range is rejected.
func.func @gather_axis(%x: tensor<2x16xf32>, %i: tensor<4xi64>) -> tensor<2x16xf32> {
  // expected-error @+1 {{gather axis 2 is out of range for rank 2}}
  %0 = mt.gather %x, %i axis = 2 : (tensor<2x16xf32>, tensor<4xi64>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// Tests that a gather result of the wrong shape is rejected.
func.func @gather_result(%x: tensor<2x16xf32>, %i: tensor<4xi64>) -> tensor<4x16xf32> {
  // expected-error @+1 {{result shape [4, 16] should be [2, 4]}}
  %0 = mt.gather %x, %i axis = 1 : (tensor<2x16xf32>, tensor<4xi64>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Tests that key/value heads that do not divide the query heads are rejected.
func.func @attention_heads(%q: tensor<2x3x16x8xf32>, %k: tensor<2x2x16x8xf32>) -> tensor<2x3x16x8xf32> {
  // expected-error @+1 {{disagree (key/value heads must divide query heads)}}
  %0 = mt.attention %q, %k, %k scale = 0.35355339059327373 : (tensor<2x3x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x3x16x8xf32>
  return %0 : tensor<2x3x16x8xf32>
}

// -----

// Tests that a key head size that differs from the query's is rejected.
func.func @attention_head_size(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x4xf32>) -> tensor<2x4x16x4xf32> {
  // expected-error @+1 {{disagree (key/value heads must divide query heads)}}
  %0 = mt.attention %q, %k, %k scale = 0.5 : (tensor<2x4x16x8xf32>, tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x4xf32>
  return %0 : tensor<2x4x16x4xf32>
}

// -----

// Tests that causal attention with fewer queries than keys is rejected.
func.func @causal_t_ne_s(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32> {
  // expected-error @+1 {{causal attention needs as many queries as keys, got 8 and 16}}
  %0 = mt.attention %q, %k, %k scale = 0.5 causal : (tensor<2x4x8x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// -----

// Tests that a log-sum-exp that is not one per query row is rejected.
func.func @attention_lse_shape(%q: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{attention lse [2, 4, 8] should be one per query row, [2, 4, 16]}}
  %0:2 = mt.attention %q, %q, %q scale = 0.5 causal : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x8xf32>)
  return %0#0 : tensor<2x4x16x8xf32>
}

// -----

// Tests that an attention gradient whose forward output or log-sum-exp does not fit is
// rejected.
func.func @attention_grad_output(%q: tensor<2x4x16x8xf32>, %o: tensor<2x4x16x8xf64>, %l: tensor<2x4x16xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{output 'tensor<2x4x16x8xf64>' should have the grad's type 'tensor<2x4x16x8xf32>'}}
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %q output %o lse %l scale = 0.5 causal : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf64>, tensor<2x4x16xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  return %dq : tensor<2x4x16x8xf32>
}

// -----

func.func @attention_grad_lse(%q: tensor<2x4x16x8xf32>, %l: tensor<2x4x16xf64>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{lse element type 'f64' differs from the query's 'f32'}}
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %q output %q lse %l scale = 0.5 causal : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16xf64>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
  return %dq : tensor<2x4x16x8xf32>
}

// -----

// Tests that a gate activation mt.glu has no kernels for is rejected.
func.func @glu_activation(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{unknown gate activation "relu" (silu, gelu or gelu_tanh)}}
  %0 = mt.glu "relu" %x, %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests that a sliding window without causality is rejected.
func.func @window_not_causal(%q: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{window must be at least 1 and needs causal, got 4}}
  %0 = mt.attention %q, %q, %q scale = 0.5 window = 4 : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %0 : tensor<2x4x16x8xf32>
}

// -----

// Tests that a soft cap that is not positive is rejected.
func.func @softcap_zero(%q: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{softcap must be positive, got 0}}
  %0 = mt.attention %q, %q, %q scale = 0.5 causal softcap = 0.0 : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %0 : tensor<2x4x16x8xf32>
}

// -----

// Tests that attention operands that are not 4-D are rejected.
func.func @attention_rank(%q: tensor<4x16x8xf32>) -> tensor<4x16x8xf32> {
  // expected-error @+1 {{attention operands must be [batch, heads, sequence, head size]}}
  %0 = mt.attention %q, %q, %q scale = 0.5 : (tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  return %0 : tensor<4x16x8xf32>
}

// -----

// Tests that a key span is a [first, end) pair per sequence of the batch.
func.func @attention_key_span(%q: tensor<2x4x16x8xf32>, %n: tensor<2xi64>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{key_span [2] should be a [first, end) pair per sequence, [2, 2]}}
  %0 = mt.attention %q, %q, %q key_span %n scale = 0.5 : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2xi64>) -> tensor<2x4x16x8xf32>
  return %0 : tensor<2x4x16x8xf32>
}

// -----

// Tests that mt.key_span reads a mask [batch, keys] into a span per sequence.
func.func @key_span_rank(%m: tensor<2x4x16xi64>) -> tensor<2x2xi64> {
  // expected-error @+1 {{mask must be [batch, keys], got [2, 4, 16]}}
  %0 = mt.key_span %m : tensor<2x4x16xi64> -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// Tests that mt.key_span gives a pair per sequence.
func.func @key_span_result(%m: tensor<2x16xi64>) -> tensor<2xi64> {
  // expected-error @+1 {{result shape [2] should be [2, 2]}}
  %0 = mt.key_span %m : tensor<2x16xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// Tests that cross_entropy targets must be the logits' shape without the vocabulary axis.
func.func @cross_entropy_targets(%l: tensor<2x16x96xf32>, %t: tensor<2x96xi64>) -> tensor<f32> {
  // expected-error @+1 {{targets [2, 96] must be the logits' shape [2, 16, 96] without its last (vocabulary) axis}}
  %0 = mt.cross_entropy %l, %t : (tensor<2x16x96xf32>, tensor<2x96xi64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a non-scalar cross_entropy result is rejected.
func.func @cross_entropy_result(%l: tensor<2x16x96xf32>, %t: tensor<2x16xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{result shape [2] should be []}}
  %0 = mt.cross_entropy %l, %t : (tensor<2x16x96xf32>, tensor<2x16xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Tests that an rms_norm weight not of the last axis' size is rejected.
func.func @rms_norm_weight(%x: tensor<2x16x32xf32>, %w: tensor<16xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{weight/bias [16] must be [32]}}
  %0 = mt.rms_norm %x, %w epsilon = 1.0e-06 : (tensor<2x16x32xf32>, tensor<16xf32>) -> tensor<2x16x32xf32>
  return %0 : tensor<2x16x32xf32>
}

// -----

// Tests that a negative epsilon is rejected.
func.func @rms_norm_negative_epsilon(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{epsilon must not be negative}}
  %0 = mt.rms_norm %x, %w epsilon = -1.0e-06 : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
  return %0 : tensor<2x16x32xf32>
}

// -----

// Tests that a layer_norm bias not of the last axis' size is rejected.
func.func @layer_norm_bias(%x: tensor<2x16x32xf32>, %w: tensor<32xf32>, %b: tensor<1x32xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{weight/bias [1, 32] must be [32]}}
  %0 = mt.layer_norm %x, %w, %b epsilon = 1.0e-05 : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<1x32xf32>) -> tensor<2x16x32xf32>
  return %0 : tensor<2x16x32xf32>
}

// -----

// Tests that a norm of a scalar is rejected.
func.func @layer_norm_scalar(%x: tensor<f32>, %w: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{normalizes the last axis, so its input needs rank 1 or more}}
  %0 = mt.layer_norm %x, %w epsilon = 1.0e-05 : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that gelu's approximate must be "none" or "tanh".
func.func @gelu_approximate(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{approximate must be "none" or "tanh", got "erf"}}
  %0 = mt.gelu %x approximate = "erf" : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that rope of an odd last axis is rejected.
func.func @rope_odd(%x: tensor<2x4x16x7xf32>, %c: tensor<16x7xf32>) -> tensor<2x4x16x7xf32> {
  // expected-error @+1 {{rotates halves of the last axis, which must be even, got [2, 4, 16, 7]}}
  %0 = mt.rope %x, %c, %c : (tensor<2x4x16x7xf32>, tensor<16x7xf32>, tensor<16x7xf32>) -> tensor<2x4x16x7xf32>
  return %0 : tensor<2x4x16x7xf32>
}

// -----

// Tests that cos/sin tables that do not broadcast to the input are rejected.
func.func @rope_tables(%x: tensor<2x4x16x8xf32>, %c: tensor<8x8xf32>) -> tensor<2x4x16x8xf32> {
  // expected-error @+1 {{cos/sin [8, 8] do not broadcast to the input [2, 4, 16, 8]}}
  %0 = mt.rope %x, %c, %c : (tensor<2x4x16x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x16x8xf32>
  return %0 : tensor<2x4x16x8xf32>
}

// -----

// Tests that a linear weight that does not match the input is rejected.
func.func @linear_weight(%x: tensor<2x16x32xf32>, %w: tensor<96x32xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{linear input [2, 16, 32] does not match weight [96, 32]}}
  %0 = mt.linear %x, %w : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x32xf32>
  return %0 : tensor<2x16x32xf32>
}

// -----

// Tests that a linear bias of the wrong width is rejected.
func.func @linear_bias(%x: tensor<2x16x32xf32>, %w: tensor<96x32xf32>, %b: tensor<32xf32>) -> tensor<2x16x96xf32> {
  // expected-error @+1 {{linear bias [32] must be [96]}}
  %0 = mt.linear %x, %w, %b transpose_weight : (tensor<2x16x32xf32>, tensor<96x32xf32>, tensor<32xf32>) -> tensor<2x16x96xf32>
  return %0 : tensor<2x16x96xf32>
}

// -----

// Tests that an embedding table that is not [vocabulary, width] is rejected.
func.func @embedding_table_rank(%t: tensor<96x4x8xf32>, %ids: tensor<2x16xi64>) -> tensor<2x16x8xf32> {
  // expected-error @+1 {{table must be [vocabulary, width], got [96, 4, 8]}}
  %0 = mt.embedding %t, %ids : (tensor<96x4x8xf32>, tensor<2x16xi64>) -> tensor<2x16x8xf32>
  return %0 : tensor<2x16x8xf32>
}

// -----

// Tests that an embedding result of the wrong shape is rejected.
func.func @embedding_result(%t: tensor<96x32xf32>, %ids: tensor<2x16xi64>) -> tensor<2x16x96xf32> {
  // expected-error @+1 {{result shape [2, 16, 96] should be [2, 16, 32]}}
  %0 = mt.embedding %t, %ids : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x96xf32>
  return %0 : tensor<2x16x96xf32>
}

// -----

// Tests that reading a parameter with another type than its declaration is rejected.
mt.parameter @w : tensor<32x32xf32>
func.func @param_type() -> tensor<32x16xf32> {
  // expected-error @+1 {{type 'tensor<32x16xf32>' differs from parameter's 'tensor<32x32xf32>'}}
  %w = mt.param @w : tensor<32x16xf32>
  return %w : tensor<32x16xf32>
}

// -----

// Tests that reading a symbol that is not an mt.parameter is rejected.
func.func @param_of_function() -> tensor<4xf32> {
  // expected-error @+1 {{reads @param_of_function, which is not an mt.parameter}}
  %w = mt.param @param_of_function : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// Tests that reading an undeclared parameter is rejected.
func.func @param_undeclared() -> tensor<4xf32> {
  // expected-error @+1 {{reads @missing, which is not an mt.parameter}}
  %w = mt.param @missing : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// Tests that external data whose length does not hold the parameter's type is rejected.
// expected-error @+1 {{external data of 64 bytes at offset 0 does not hold 'tensor<32xf32>' (128 bytes)}}
mt.parameter @ext : tensor<32xf32> {external_file = "m.data", offset = 0 : i64, length = 64 : i64}

// -----

// Tests that the byte count follows the element type (bf16: 2 bytes each).
// expected-error @+1 {{external data of 64 bytes at offset 0 does not hold 'tensor<16xbf16>' (32 bytes)}}
mt.parameter @ext : tensor<16xbf16> {external_file = "m.data", offset = 0 : i64, length = 64 : i64}

// -----

// Tests that a negative external offset is rejected.
// expected-error @+1 {{external data of 16 bytes at offset -4 does not hold}}
mt.parameter @ext : tensor<4xf32> {external_file = "m.data", offset = -4 : i64, length = 16 : i64}

// -----

// Tests that external_file without offset and length is rejected.
// expected-error @+1 {{external_file, offset and length come together}}
mt.parameter @ext : tensor<4xf32> {external_file = "m.data"}

// -----

// Tests that an offset with no PyTorch parameter to offset is rejected.
// expected-error @+1 {{source_offset needs the source_name it offsets}}
mt.parameter @add_6 : tensor<4xf32> {source_offset = 1.0 : f64}

// -----

// Tests that a non-finite offset is rejected.
// expected-error @+1 {{source_offset must be finite}}
mt.parameter @add_7 : tensor<4xf32> {source_name = "norm.weight", source_offset = 0x7FF0000000000000 : f64}

// -----

// Tests that a parameter of an integer type is rejected.
// expected-error @+1 {{attribute 'type' failed to satisfy constraint}}
mt.parameter @ids : tensor<4xi64>

// -----

// Tests that the schedule's attributes are checked: a stream is h2d, compute or d2h.
func.func @unknown_stream(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'mt.stream' must be "h2d", "compute" or "d2h", got "gpu"}}
  %0 = mt.neg %x {mt.stream = "gpu"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that the schedule's arena offsets are an array of integers.
func.func @offsets_kind(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'mt.offsets' has the wrong kind of value: 3 : i64}}
  %0 = mt.neg %x {mt.offsets = 3} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that only weights persist on the device across steps.
func.func @persistent_checkpoint(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{keeps only weights persistent, not checkpoint}}
  %d, %t = mt.prefetch %a {kind = "checkpoint", layer = 0 : i64, persistent} : (tensor<8xf32>) -> (tensor<8xf32>, !mt.token)
  return %a : tensor<8xf32>
}

// -----

// Tests that an await names values of the copy that made its token.
func.func @await_other_values(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %d, %t = mt.prefetch %a {kind = "weights", layer = 0 : i64} : (tensor<8xf32>) -> (tensor<8xf32>, !mt.token)
  // expected-error @+1 {{value 0 is not a result of the copy that made its token}}
  %r = mt.await %b after %t : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Tests that an await's token comes from a copy.
func.func @await_argument(%a: tensor<8xf32>, %t: !mt.token) -> tensor<8xf32> {
  // expected-error @+1 {{awaits a token that no mt.prefetch or mt.offload made}}
  %r = mt.await %a after %t : tensor<8xf32>
  return %r : tensor<8xf32>
}
