// Gradient ops of the mt dialect: the backward halves of fused ops, which autodiff emits and
// whose kernels compute the whole derivative in one pass (no chain of primitives).
#ifndef MT_GRAD_OPS_TD
#define MT_GRAD_OPS_TD

class MT_GradOp<string mnemonic, list<Trait> traits = []>
    : MT_Op<mnemonic, !listconcat(traits, [Pure])> {
  let hasVerifier = 1;
}

def MT_RmsNormGradOp : MT_GradOp<"rms_norm_grad"> {
  let summary = "gradients of mt.rms_norm with respect to its input and weight";
  let description = [{
    ```mlir
    %dx, %dw = mt.rms_norm_grad %x, %w, %g epsilon = 1.0e-06 : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$weight, MT_FloatTensor:$grad,
                       F64Attr:$epsilon);
  let results = (outs MT_FloatTensor:$input_grad, MT_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad `epsilon` `=` $epsilon attr-dict `:` functional-type(operands, results)
  }];
}

def MT_LayerNormGradOp : MT_GradOp<"layer_norm_grad"> {
  let summary = "gradients of mt.layer_norm with respect to its input, weight and bias";
  let description = [{
    ```mlir
    %dx, %dw, %db = mt.layer_norm_grad %x, %w, %g epsilon = 1.0e-05 : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$weight, MT_FloatTensor:$grad,
                       F64Attr:$epsilon);
  let results = (outs MT_FloatTensor:$input_grad, MT_FloatTensor:$weight_grad,
                      MT_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad `epsilon` `=` $epsilon attr-dict `:` functional-type(operands, results)
  }];
}

def MT_ActivationGradOp : MT_GradOp<"activation_grad",
    [AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "gradient of an elementwise activation: grad * f'(input)";
  let description = [{
    `activation` names f: "gelu", "gelu_tanh", "silu", "relu", "erf", "sigmoid", "tanh".

    ```mlir
    %dx = mt.activation_grad "silu" %x, %g : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$activation, MT_FloatTensor:$input, MT_FloatTensor:$grad);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$activation $input `,` $grad attr-dict `:` type($result)";
}

def MT_GluGradOp : MT_GradOp<"glu_grad",
    [AllTypesMatch<["gate", "up", "grad", "gate_grad", "up_grad"]>]> {
  let summary = "gradients of mt.glu: grad * up * f'(gate) and grad * f(gate)";
  let description = [{
    ```mlir
    %dgate, %dup = mt.glu_grad "silu" %gate, %up, %g : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$activation, MT_FloatTensor:$gate, MT_FloatTensor:$up,
                       MT_FloatTensor:$grad);
  let results = (outs MT_FloatTensor:$gate_grad, MT_FloatTensor:$up_grad);
  let assemblyFormat = "$activation $gate `,` $up `,` $grad attr-dict `:` type($grad)";
}

def MT_RopeGradOp : MT_GradOp<"rope_grad"> {
  let summary = "gradient of mt.rope with respect to its input";
  let description = [{
    grad * cos - rotate_half(grad * sin), the transpose of the rotation.

    ```mlir
    %dx = mt.rope_grad %g, %cos, %sin : (tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$grad, MT_FloatTensor:$cos, MT_FloatTensor:$sin);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
}

def MT_AttentionGradOp : MT_GradOp<"attention_grad"> {
  let summary = "gradients of mt.attention with respect to query, key and value";
  let description = [{
    The probabilities from q, k and the forward's `lse` (its second result), and each row's
    delta = g . output from the forward's `output`, as FlashAttention's backward reads them;
    key and value gradients are summed over the query heads that share them.

    ```mlir
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %g output %o lse %lse scale = 0.35355339059327373 causal : (...) -> (...)
    ```
    With `key_span`, `window`, `softcap` and `sequence_major`, as for mt.attention: the
    padding keys get zero gradients; the capped logits' slope is 1 - (s / c)^2.
  }];
  let arguments = (ins MT_FloatTensor:$query, MT_FloatTensor:$key, MT_FloatTensor:$value,
                       MT_FloatTensor:$grad, MT_FloatTensor:$output, MT_FloatTensor:$lse,
                       Optional<MT_IndexTensor>:$key_span,
                       F64Attr:$scale, UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap, UnitAttr:$sequence_major);
  let results = (outs MT_FloatTensor:$query_grad, MT_FloatTensor:$key_grad,
                      MT_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $grad `output` $output `lse` $lse
    (`key_span` $key_span^)? `scale` `=` $scale
    (`causal` $causal^)? (`window` `=` $window^)? (`softcap` `=` $softcap^)?
    (`sequence_major` $sequence_major^)? attr-dict `:` functional-type(operands, results)
  }];
}

def MT_ReduceMaxGradOp : MT_GradOp<"reduce_max_grad"> {
  let summary = "gradient of mt.reduce_max: grad split evenly among each group's maxima";
  let description = [{
    ```mlir
    %dx = mt.reduce_max_grad %x, %g axes = [1] : (tensor<3x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$grad, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdims);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:` functional-type(operands, results)
  }];
}

def MT_SoftmaxGradOp : MT_GradOp<"softmax_grad",
    [AllTypesMatch<["output", "grad", "result"]>]> {
  let summary = "gradient of mt.softmax from its output: y * (grad - sum(grad * y))";
  let description = [{
    ```mlir
    %dx = mt.softmax_grad %y, %g axis = 3 : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$output, MT_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$output `,` $grad `axis` `=` $axis attr-dict `:` type($result)";
}

def MT_CrossEntropyGradOp : MT_GradOp<"cross_entropy_grad"> {
  let summary = "gradient of mt.cross_entropy: (softmax(logits) - onehot(targets)) * grad / N";
  let description = [{
    ```mlir
    %dl = mt.cross_entropy_grad %logits, %targets, %g : (tensor<2x16x96xf32>, tensor<2x16xi64>, tensor<f32>) -> tensor<2x16x96xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$logits, MT_IndexTensor:$targets, MT_FloatTensor:$grad);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

def MT_LinearCrossEntropyGradOp : MT_GradOp<"linear_cross_entropy_grad"> {
  let summary = "gradients of mt.linear_cross_entropy with respect to input and weight";
  let description = [{
    Remakes each chunk's logits, turns them into (softmax - onehot(targets)) * grad / N, and
    multiplies them back: into the chunk's rows of the input gradient and, summed over the
    chunks, the weight gradient.

    ```mlir
    %dx, %dw = mt.linear_cross_entropy_grad %x, %w, %t, %g transpose_weight chunk = 512 : (...) -> (...)
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$weight, MT_IndexTensor:$targets,
                       MT_FloatTensor:$grad, UnitAttr:$transpose_weight, I64Attr:$chunk);
  let results = (outs MT_FloatTensor:$input_grad, MT_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $targets `,` $grad (`transpose_weight` $transpose_weight^)?
    `chunk` `=` $chunk attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MT_ScatterAddOp : MT_GradOp<"scatter_add"> {
  let summary = "sums slices of grad into zeros of the result's shape at indices along axis";
  let description = [{
    The gradient of mt.gather and mt.embedding (axis 0): result[..., indices[j], ...] +=
    grad[..., j, ...]. Repeated indices accumulate.

    ```mlir
    %dt = mt.scatter_add %ids, %g axis = 0 : (tensor<2x16xi64>, tensor<2x16x32xf32>) -> tensor<96x32xf32>
    ```
  }];
  let arguments = (ins MT_IndexTensor:$indices, MT_FloatTensor:$grad, I64Attr:$axis);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
}

def MT_PadOp : MT_GradOp<"pad"> {
  let summary = "places the input in zeros of the result's shape at a strided window";
  let description = [{
    The gradient of mt.slice: the window (starts, limits, strides) of the result holds the
    input, the rest is zero.

    ```mlir
    %dx = mt.pad %g starts = [0, 4] limits = [16, 8] strides = [1, 1] : tensor<16x4xf32> -> tensor<16x8xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `limits` `=` $limits `strides` `=` $strides attr-dict
    `:` type($input) `->` type($result)
  }];
}

#endif // MT_GRAD_OPS_TD
