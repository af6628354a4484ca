// Graph-level ops of the mt dialect: what the ONNX frontend produces and the raising
// passes fuse. Shapes are static; verifiers check them so that a bad rewrite fails early.
#ifndef MT_OPS_TD
#define MT_OPS_TD

include "ir/MtDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def MT_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
def MT_IndexTensor : RankedTensorOf<[I32, I64]>;
def MT_BoolTensor : RankedTensorOf<[I1]>;
def MT_Tensor : RankedTensorOf<[F16, BF16, F32, F64, I1, I8, I32, I64]>;

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def MT_ParameterOp : MT_Op<"parameter", [Symbol]> {
  let summary = "a trained parameter, held in host memory, referring to its initial bytes";
  let description = [{
    Declares one trained tensor of the model. The compiler never reads its bytes: it records
    where they are. With `external_file`, the initial value is `length` bytes at `offset` in
    that file (a path relative to the model's folder); without it, the bytes are inline in the
    model file named by the module's `mt.source` attribute, under the initializer of the same
    name. An initializer used by several nodes (tied embeddings) is one parameter.
    `source_name` is the PyTorch parameter it holds where the initializer's own name is not
    (an exporter folded `transpose(weight)` into a new constant), with `source_transposed`
    when it holds that parameter's transpose, and `source_offset` when it holds that
    parameter plus a constant (the exporter folded Gemma's RMSNorm scale `1 + weight`): the
    names, layouts and values of pretrained weights, and the point weight decay pulls toward.
    `tied_names` are the other names of a tied weight (the embedding's, where the exporter kept
    the lm_head's), which pretrained weights may use and saved weights repeat;
    `transposed_copies` the initializers the model holds its transpose in (the legacy
    exporter's untied copy of a tied weight), which a saved model fills from it. `layer` is
    the layer whose weights prefetch first streams it (mt-insert-transfers sets it; -1 for the
    prologue and epilogue): the block of host memory it lives in.

    ```mlir
    mt.parameter @"wte.weight" : tensor<96x32xf32>
    mt.parameter @"h.0.mlp.w" : tensor<32x128xf32> {external_file = "model.onnx.data", length = 16384 : i64, offset = 4096 : i64}
    mt.parameter @val_152 : tensor<64x128xf32> {source_name = "model.layers.0.mlp.up_proj.weight", source_transposed}
    mt.parameter @add_6 : tensor<64xf32> {source_name = "model.layers.0.input_layernorm.weight", source_offset = 1.0 : f64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<MT_FloatTensor>:$type,
                       OptionalAttr<StrAttr>:$external_file, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<I64Attr>:$length, OptionalAttr<StrAttr>:$source_name,
                       UnitAttr:$source_transposed, OptionalAttr<F64Attr>:$source_offset,
                       OptionalAttr<StrArrayAttr>:$tied_names,
                       OptionalAttr<StrArrayAttr>:$transposed_copies,
                       OptionalAttr<I64Attr>:$layer);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def MT_ParamOp : MT_Op<"param",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a parameter declared by mt.parameter";
  let description = [{
    The value of a parameter inside a function. Its type must be the parameter's type.

    ```mlir
    %w = mt.param @"wte.weight" : tensor<96x32xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def MT_ConstantOp : MT_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a small constant tensor (masks, scales, shapes) folded at compile time";
  let description = [{
    ```mlir
    %eps = mt.constant dense<1.0e-05> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class MT_BinaryOp<string mnemonic, list<Trait> traits = []>
    : MT_Op<mnemonic, !listconcat(traits,
          [Pure, ResultsBroadcastableShape, SameOperandsAndResultElementType])> {
  let description = [{
    Elementwise with numpy broadcasting; operands and result share the element type.

    ```mlir
    %0 = mt.}] # mnemonic # [{ %a, %b : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins MT_Tensor:$lhs, MT_Tensor:$rhs);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def MT_AddOp : MT_BinaryOp<"add", [Commutative]> { let summary = "elementwise lhs + rhs"; }
def MT_SubOp : MT_BinaryOp<"sub"> { let summary = "elementwise lhs - rhs"; }
def MT_MulOp : MT_BinaryOp<"mul", [Commutative]> { let summary = "elementwise lhs * rhs"; }
def MT_DivOp : MT_BinaryOp<"div"> { let summary = "elementwise lhs / rhs"; }
def MT_PowOp : MT_BinaryOp<"pow"> { let summary = "elementwise lhs ** rhs"; }

class MT_UnaryOp<string mnemonic, list<Trait> traits = []>
    : MT_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let description = [{
    Elementwise on a float tensor.

    ```mlir
    %0 = mt.}] # mnemonic # [{ %x : tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def MT_NegOp : MT_UnaryOp<"neg"> { let summary = "elementwise -x"; }
def MT_SqrtOp : MT_UnaryOp<"sqrt"> { let summary = "elementwise square root"; }
def MT_RsqrtOp : MT_UnaryOp<"rsqrt"> { let summary = "elementwise 1 / sqrt(x)"; }
def MT_ReciprocalOp : MT_UnaryOp<"reciprocal"> { let summary = "elementwise 1 / x"; }
def MT_ExpOp : MT_UnaryOp<"exp"> { let summary = "elementwise e ** x"; }
def MT_LogOp : MT_UnaryOp<"log"> { let summary = "elementwise natural logarithm"; }
def MT_TanhOp : MT_UnaryOp<"tanh"> { let summary = "elementwise hyperbolic tangent"; }
def MT_ErfOp : MT_UnaryOp<"erf"> { let summary = "elementwise Gauss error function"; }
def MT_SigmoidOp : MT_UnaryOp<"sigmoid"> { let summary = "elementwise 1 / (1 + e ** -x)"; }
def MT_ReluOp : MT_UnaryOp<"relu"> { let summary = "elementwise max(x, 0)"; }
def MT_CosOp : MT_UnaryOp<"cos"> { let summary = "elementwise cosine"; }
def MT_SinOp : MT_UnaryOp<"sin"> { let summary = "elementwise sine"; }
def MT_SiluOp : MT_UnaryOp<"silu"> { let summary = "x * sigmoid(x), the SwiGLU gate"; }

def MT_GeluOp : MT_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit, exact (erf) or tanh-approximated";
  let description = [{
    `approximate = "none"` is x * (1 + erf(x / sqrt 2)) / 2; `"tanh"` is
    x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2.

    ```mlir
    %0 = mt.gelu %x approximate = "tanh" : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$input (`approximate` `=` $approximate^)? attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def MT_GluOp : MT_Op<"glu", [Pure, AllTypesMatch<["gate", "up", "result"]>]> {
  let summary = "gated linear unit: activation(gate) * up (SwiGLU, GeGLU)";
  let description = [{
    `activation` names the gate's function: "silu" (SwiGLU: Llama, Mistral, Qwen), "gelu" or
    "gelu_tanh" (GeGLU: Gemma). One pass over both halves instead of an activation whose
    result is written and read again by a product.

    ```mlir
    %0 = mt.glu "silu" %gate, %up : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$activation, MT_FloatTensor:$gate, MT_FloatTensor:$up);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$activation $gate `,` $up attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MT_WhereOp : MT_Op<"where", [Pure, ResultsBroadcastableShape]> {
  let summary = "elementwise select: condition ? true_value : false_value";
  let description = [{
    ```mlir
    %0 = mt.where %mask, %s, %ninf : (tensor<16x16xi1>, tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins MT_BoolTensor:$condition, MT_Tensor:$true_value, MT_Tensor:$false_value);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class MT_FloatClassOp<string mnemonic> : MT_Op<mnemonic, [Pure, SameOperandsAndResultShape]> {
  let description = [{
    Elementwise test of a float tensor into a boolean one. Exporters guard softmax with it
    (`where(is_nan(p), 0, p)`); no gradient flows through a boolean result.

    ```mlir
    %0 = mt.}] # mnemonic # [{ %p : tensor<2x4x16x16xf32> -> tensor<2x4x16x16xi1>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input);
  let results = (outs MT_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def MT_IsNanOp : MT_FloatClassOp<"is_nan"> { let summary = "true where an element is NaN"; }
def MT_IsInfOp : MT_FloatClassOp<"is_inf"> {
  let summary = "true where an element is an infinity of a sign not ignored";
  let arguments = (ins MT_FloatTensor:$input,
                       UnitAttr:$ignore_negative, UnitAttr:$ignore_positive);
}

def MT_CastOp : MT_Op<"cast", [Pure, SameOperandsAndResultShape]> {
  let summary = "converts each element to the result's element type";
  let description = [{
    ```mlir
    %0 = mt.cast %ids : tensor<2x16xi32> -> tensor<2x16xi64>
    ```
  }];
  let arguments = (ins MT_Tensor:$input);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class MT_ReduceOp<string mnemonic> : MT_Op<mnemonic, [Pure]> {
  let description = [{
    Reduces over `axes` (non-negative, ascending); `keepdims` keeps them as size 1.

    ```mlir
    %0 = mt.}] # mnemonic # [{ %x axes = [2] keepdims : tensor<2x16x32xf32> -> tensor<2x16x1xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, DenseI64ArrayAttr:$axes, UnitAttr:$keepdims);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `axes` `=` $axes (`keepdims` $keepdims^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_ReduceSumOp : MT_ReduceOp<"reduce_sum"> { let summary = "sum over axes"; }
def MT_ReduceMeanOp : MT_ReduceOp<"reduce_mean"> { let summary = "mean over axes"; }
def MT_ReduceMaxOp : MT_ReduceOp<"reduce_max"> { let summary = "maximum over axes"; }

def MT_SoftmaxOp : MT_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one axis";
  let description = [{
    ```mlir
    %0 = mt.softmax %s axis = 3 : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, I64Attr:$axis);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def MT_RmsNormOp : MT_Op<"rms_norm", [Pure]> {
  let summary = "root-mean-square normalization over the last axis, times weight";
  let description = [{
    input * rsqrt(mean(input ** 2, -1) + epsilon) * weight; weight has the last axis' size.

    ```mlir
    %0 = mt.rms_norm %x, %w epsilon = 1.0e-06 : (tensor<2x16x32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$weight, F64Attr:$epsilon);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `epsilon` `=` $epsilon attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MT_LayerNormOp : MT_Op<"layer_norm", [Pure]> {
  let summary = "layer normalization over the last axis, times weight, plus bias";
  let description = [{
    (input - mean) * rsqrt(variance + epsilon) * weight + bias over the last axis; the
    variance is the biased one. weight and bias have the last axis' size; bias is optional.

    ```mlir
    %0 = mt.layer_norm %x, %w, %b epsilon = 1.0e-05 : (tensor<2x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$weight,
                       Optional<MT_FloatTensor>:$bias, F64Attr:$epsilon);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `epsilon` `=` $epsilon attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Transformer blocks
//===----------------------------------------------------------------------===//

def MT_MatmulOp : MT_Op<"matmul", [Pure]> {
  let summary = "batched matrix product with optional transposes of the last two axes";
  let description = [{
    op(lhs) @ op(rhs) where op transposes the last two axes when its flag is set; leading
    (batch) axes broadcast. Both operands have rank 2 or more. An `addend` of the result's
    type is added in the product's epilogue: mt-accumulate-gradients sums a gradient into
    place this way (on the device the result takes the addend's buffer when it can).

    ```mlir
    %0 = mt.matmul %q, %k transpose_rhs : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
    %1 = mt.matmul %dy, %x, %acc transpose_lhs : (tensor<32x96xf32>, tensor<32x32xf32>, tensor<96x32xf32>) -> tensor<96x32xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$lhs, MT_FloatTensor:$rhs,
                       Optional<MT_FloatTensor>:$addend,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`,` $addend^)? (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;  let hasCanonicalizer = 1;
}

def MT_LinearOp : MT_Op<"linear", [Pure]> {
  let summary = "input @ weight (+ bias): a projection by a parameter";
  let description = [{
    input [..., K]; weight [K, N], or [N, K] with `transpose_weight` (torch's nn.Linear and
    Gemm's transB); bias [N], optional. Result [..., N].

    ```mlir
    %0 = mt.linear %x, %w, %b transpose_weight : (tensor<2x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>) -> tensor<2x16x96xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$weight,
                       Optional<MT_FloatTensor>:$bias, UnitAttr:$transpose_weight);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`transpose_weight` $transpose_weight^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MT_EmbeddingOp : MT_Op<"embedding", [Pure]> {
  let summary = "rows of a table selected by integer ids";
  let description = [{
    table [V, D], ids [...] -> [..., D].

    ```mlir
    %0 = mt.embedding %wte, %ids : (tensor<96x32xf32>, tensor<2x16xi64>) -> tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$table, MT_IndexTensor:$indices);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$table `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MT_RopeOp : MT_Op<"rope", [Pure]> {
  let summary = "rotary position embedding in the rotate-half form";
  let description = [{
    input * cos + rotate_half(input) * sin, where rotate_half(x) = concat(-x[..., D/2:],
    x[..., :D/2]) on the last axis (size D, even). cos and sin broadcast to the input.

    ```mlir
    %0 = mt.rope %q, %cos, %sin : (tensor<2x4x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$cos, MT_FloatTensor:$sin);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MT_AttentionOp : MT_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention with grouped-query heads";
  let description = [{
    softmax(scale * query @ key^T + mask) @ value, where the mask hides future positions
    when `causal` is set. query [B, Hq, T, D], key [B, Hkv, S, D], value [B, Hkv, S, Dv]:
    Hkv divides Hq and query head h reads key/value head h / (Hq / Hkv). Result [B, Hq, T, Dv].
    With `key_span` [B, 2] (integers), sequence b attends to its keys
    key_span[b, 0] <= j < key_span[b, 1] only: the keys before and after them are padding
    (left and right). A row that sees no key (a left-padded query under causal) is zero.
    `window` W (causal only) is a sliding window: query i sees keys i - W < j <= i, as
    Mistral's and the Gemma 2/3 local layers' masks do. `softcap` c caps the logits before
    the mask, s -> c * tanh(s / c) (Gemma 2).

    `sequence_major`: query, key, value and the result are [B, T, H, D] instead, the layout
    the projections write their rows in, so no transpose copies a layer's heads into place
    (passes/FoldAttentionLayout).

    With a second result `lse` [B, Hq, T] (in either layout; the query's element type, kept in
    fp32 on the device), each query row's log-sum-exp of its visible logits (0 for a row that
    sees no key): what mt.attention_grad reads instead of recomputing it. Autodiff asks for it.

    ```mlir
    %0 = mt.attention %q, %k, %v scale = 0.35355339059327373 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x16x8xf32>
    %3:2 = mt.attention %q, %k, %v scale = 0.35355339059327373 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
    %1 = mt.attention %q, %k, %v key_span %n scale = 0.35355339059327373 causal : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2xi64>) -> tensor<2x4x16x8xf32>
    %2 = mt.attention %q, %k, %v scale = 0.25 causal window = 4096 softcap = 50.0 : (tensor<2x4x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$query, MT_FloatTensor:$key, MT_FloatTensor:$value,
                       Optional<MT_IndexTensor>:$key_span, F64Attr:$scale,
                       UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap, UnitAttr:$sequence_major);
  let results = (outs MT_FloatTensor:$result, Optional<MT_FloatTensor>:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`key_span` $key_span^)? `scale` `=` $scale
    (`causal` $causal^)? (`window` `=` $window^)? (`softcap` `=` $softcap^)?
    (`sequence_major` $sequence_major^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MT_KeySpanOp : MT_Op<"key_span", [Pure]> {
  let summary = "where the tokens of each row of a padding mask begin and end";
  let description = [{
    mask [B, S] (integers or booleans, nonzero where a key is a token) -> [B, 2] i64: each
    row's first nonzero entry and one past its last ([0, 0] for a row of zeros). For a mask
    whose tokens are one run (left padding, tokens, right padding) that span is the mask,
    which mt.attention's `key_span` takes.

    ```mlir
    %0 = mt.key_span %mask : tensor<2x16xi64> -> tensor<2x2xi64>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I1, I8, I32, I64]>:$mask);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$mask attr-dict `:` type($mask) `->` type($result)";
  let hasVerifier = 1;
}

def MT_CrossEntropyOp : MT_Op<"cross_entropy", [Pure]> {
  let summary = "mean softmax cross-entropy of logits against integer targets";
  let description = [{
    logits [..., V], targets [...] -> a scalar: the mean over the positions of
    logsumexp(logits) - logits[target], leaving out those whose target is -100 (PyTorch's
    ignore_index: padding).

    ```mlir
    %0 = mt.cross_entropy %logits, %targets : (tensor<2x16x96xf32>, tensor<2x16xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$logits, MT_IndexTensor:$targets);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MT_LinearCrossEntropyOp : MT_Op<"linear_cross_entropy", [Pure]> {
  let summary = "mt.cross_entropy of the logits mt.linear makes, a chunk of rows at a time";
  let description = [{
    input [..., K], weight [K, V] ([V, K] with `transpose_weight`), targets [...] -> a
    scalar: mt.cross_entropy(mt.linear(input, weight), targets), with the logits made and
    consumed `chunk` rows at a time, so that at most chunk x V of them exist at once (the
    language-model head's logits over a long sequence are the largest tensor of a step).

    ```mlir
    %0 = mt.linear_cross_entropy %x, %w, %t transpose_weight chunk = 512 : (tensor<2x16x64xf32>, tensor<96x64xf32>, tensor<2x16xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins MT_FloatTensor:$input, MT_FloatTensor:$weight, MT_IndexTensor:$targets,
                       UnitAttr:$transpose_weight, I64Attr:$chunk);
  let results = (outs MT_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $targets (`transpose_weight` $transpose_weight^)? `chunk` `=` $chunk
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Views and data movement
//===----------------------------------------------------------------------===//

def MT_ReshapeOp : MT_Op<"reshape", [Pure]> {
  let summary = "the same elements in a new static shape";
  let description = [{
    ```mlir
    %0 = mt.reshape %x : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
    ```
  }];
  let arguments = (ins MT_Tensor:$input);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MT_TransposeOp : MT_Op<"transpose", [Pure]> {
  let summary = "permutes axes: result axis i is input axis permutation[i]";
  let description = [{
    ```mlir
    %0 = mt.transpose %x permutation = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins MT_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `permutation` `=` $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_SliceOp : MT_Op<"slice", [Pure]> {
  let summary = "a strided window: per axis, elements starts[i], starts[i] + strides[i], ... < limits[i]";
  let description = [{
    One entry per axis, all normalized (0 <= start <= limit <= size, stride >= 1).

    ```mlir
    %0 = mt.slice %x starts = [0, 0, 0, 4] limits = [2, 4, 16, 8] strides = [1, 1, 1, 1] : tensor<2x4x16x8xf32> -> tensor<2x4x16x4xf32>
    ```
  }];
  let arguments = (ins MT_Tensor:$input, DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$limits,
                       DenseI64ArrayAttr:$strides);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `starts` `=` $starts `limits` `=` $limits `strides` `=` $strides attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_ConcatOp : MT_Op<"concat", [Pure]> {
  let summary = "joins tensors along one axis";
  let description = [{
    ```mlir
    %0 = mt.concat %a, %b axis = 3 : (tensor<2x4x16x4xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins Variadic<MT_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$inputs `axis` `=` $axis attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MT_ExpandOp : MT_Op<"expand", [Pure]> {
  let summary = "broadcasts a tensor to the result's shape (numpy rules)";
  let description = [{
    ```mlir
    %0 = mt.expand %k : tensor<2x2x1x16x8xf32> -> tensor<2x2x2x16x8xf32>
    ```
  }];
  let arguments = (ins MT_Tensor:$input);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def MT_GatherOp : MT_Op<"gather", [Pure]> {
  let summary = "selects slices along one axis by integer indices (ONNX Gather)";
  let description = [{
    Result shape: input[:axis] + indices + input[axis + 1:].

    ```mlir
    %0 = mt.gather %x, %i axis = 1 : (tensor<2x16x32xf32>, tensor<4xi64>) -> tensor<2x4x32xf32>
    ```
  }];
  let arguments = (ins MT_Tensor:$input, MT_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs MT_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `axis` `=` $axis attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

include "ir/MtGradOps.td"
include "ir/MtScheduleOps.td"

#endif // MT_OPS_TD
