// Passes of the mt compiler. Raising passes turn the primitive chains that ONNX exporters
// emit into the fused ops whose kernels and gradient rules mt knows.
#ifndef MT_PASSES_TD
#define MT_PASSES_TD

include "mlir/Pass/PassBase.td"

def RaiseEmbeddingPass : Pass<"mt-raise-embedding", "mlir::ModuleOp"> {
  let summary = "Gather rows of a parameter by token ids -> mt.embedding";
  let description = [{
    Before: `mt.gather %table, %ids axis = 0` where %table is an `mt.param` of rank 2 and %ids
    are integers. After: `mt.embedding %table, %ids`, whose backward is a scatter-add into the
    table. Gathers of computed values or along other axes stay as they are.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseLinearPass : Pass<"mt-raise-linear", "mlir::ModuleOp"> {
  let summary = "Matmul by a parameter (plus a bias parameter) -> mt.linear";
  let description = [{
    Before: `mt.matmul %x, %w` (or with `transpose_rhs`, as canonicalization leaves
    `x @ transpose(W)`) where %w is a rank-2 `mt.param`, optionally followed by `mt.add` of a
    rank-1 `mt.param` bias of the output width (either operand order, as Gemm and torch's
    exporter write it). After: `mt.linear %x, %w[, %b] [transpose_weight]`. Matmuls of two
    activations (attention scores) stay matmuls.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseRmsNormPass : Pass<"mt-raise-rms-norm", "mlir::ModuleOp"> {
  let summary = "x * rsqrt(mean(x^2) + eps) * w -> mt.rms_norm";
  let description = [{
    Before: the chain `pow(x, 2)` (or `x * x`), `reduce_mean` over the last axis with
    keepdims, `add` of a scalar epsilon, then one of `rsqrt`, `reciprocal(sqrt)`,
    `div(1, sqrt)` multiplied into x, or `div(x, sqrt)`, and finally a product with a weight
    of the last axis' size. After: `mt.rms_norm %x, %w epsilon = eps`. A chain that reduces
    another axis, has no scalar epsilon or no weight is left alone.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseLayerNormPass : Pass<"mt-raise-layer-norm", "mlir::ModuleOp"> {
  let summary = "(x - mean) / sqrt(var + eps) * w + b -> mt.layer_norm";
  let description = [{
    Before: `d = x - reduce_mean(x)` over the last axis, `var = reduce_mean(d^2)`, the
    normalization `d / sqrt(var + eps)` (or times rsqrt/reciprocal), a product with a weight
    and an optional sum with a bias, both of the last axis' size. After:
    `mt.layer_norm %x, %w[, %b] epsilon = eps`. ONNX LayerNormalization is imported as
    mt.layer_norm directly.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseGeluPass : Pass<"mt-raise-gelu", "mlir::ModuleOp"> {
  let summary = "the erf and tanh forms of GELU -> mt.gelu";
  let description = [{
    Before: a product of x, 0.5 and `1 + erf(x / sqrt 2)` (division by sqrt 2 or product by
    its reciprocal) in any association, or of x, 0.5 and
    `1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))`. After: `mt.gelu %x` with
    `approximate = "none"` or `"tanh"`. Constants that differ from these are not raised.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseSiluPass : Pass<"mt-raise-silu", "mlir::ModuleOp"> {
  let summary = "x * sigmoid(x) -> mt.silu";
  let description = [{
    Before: `mt.mul %x, (mt.sigmoid %x)` in either operand order. After: `mt.silu %x`; the
    SwiGLU product `silu(gate) * up` is mt-raise-glu's.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseGluPass : Pass<"mt-raise-glu", "mlir::ModuleOp"> {
  let summary = "activation(gate) * up -> mt.glu";
  let description = [{
    Before: `mt.mul (mt.silu %gate), %up` (or `mt.gelu`, either operand order) where the
    activation feeds only that product and the three types match. After:
    `mt.glu "silu" %gate, %up`, whose kernels read both halves once and never write the
    activation.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseRopePass : Pass<"mt-raise-rope", "mlir::ModuleOp"> {
  let summary = "x * cos + rotate_half(x) * sin -> mt.rope";
  let description = [{
    Before: `add(mul(x, cos), mul(concat(neg(x[..., D/2:]), x[..., :D/2]), sin))` in any
    operand order, the halves taken by `mt.slice` of the last axis. After:
    `mt.rope %x, %cos, %sin`. Rotations of other splits (interleaved pairs) stay as they are.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def RaiseAttentionPass : Pass<"mt-raise-attention", "mlir::ModuleOp"> {
  let summary = "softmax(q k^T * scale + causal mask) v -> mt.attention";
  let description = [{
    Before: `mt.matmul %q, %k transpose_rhs`, an optional scale (`mul` or `div` by a scalar
    constant), an optional causal mask (`add` of a constant with 0 on and below the diagonal
    and a large negative value above it, or `where` of a constant lower-triangular condition
    with a large negative fill), `softmax` over the last axis and a `matmul` by %v. Keys and
    values repeated for grouped-query heads (`reshape`, `expand`, `reshape`) are traced back
    to their unrepeated heads. After: `mt.attention %q, %k, %v scale = s [causal]`. A mask
    that is not causal keeps the chain as it is.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def FoldAttentionLayoutPass : Pass<"mt-fold-attention-layout", "mlir::ModuleOp"> {
  let summary = "attention in the projections' layout: no transposes into heads and back";
  let description = [{
    Before: mt.attention over operands that are `transpose [0, 2, 1, 3]` of [B, T, H, D] rows
    (directly, or through an mt.rope only attention reads), its result transposed back. After:
    the same attention `sequence_major` over the rows, its result the rows' layout; a rope on
    the way runs on the rows against its cos/sin tables with the same axes swapped (a view,
    the tables being broadcast over heads). Each transpose is a copy of a layer's activations
    on the device and again in the backward, so an attention folds only where more of them go
    than come (an operand not from a transpose gets one).
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def SegmentLayersPass : Pass<"mt-segment-layers", "mlir::ModuleOp"> {
  let summary = "Cuts the forward at the residual stream into layers that share templates";
  let description = [{
    Before: one function @forward over graph-level ops. The residual stream is the chain of
    `mt.add`s whose one operand is computed from the other (x + f(x)); each add closes a
    sub-block (attention, MLP). The shortest period of the sub-blocks' kinds (with attention
    or without) makes the layers: an attention block and what follows it, two sub-blocks per
    layer in pre-norm transformers. After: every layer is a
    `func.call` of a stateless template, `func.func private @layer_N(%x, side inputs...,
    weights...) -> x'`, whose weights are arguments in the order the layer first reads them
    and whose constants (masks, position tables) are its own; layers of one structure call
    one template, layers of different structure (another MLP) get their own. What precedes the stream (embedding) is the prologue, what follows it
    (final norm, head) the epilogue; both stay in @forward. A model without a residual chain
    is left as it is. Each call carries `mt.layer = i`.
  }];
  let dependentDialects = ["mt::MTDialect", "mlir::func::FuncDialect"];
}

def SplitMicroBatchesPass : Pass<"mt-split-micro-batches", "mlir::ModuleOp"> {
  let summary = "Layer-major micro-batches: each layer runs every micro-batch while resident";
  let description = [{
    Before: @forward over one batch. After, with `count` M: @forward takes every argument
    once per micro-batch ("input_ids.0", ..., "input_ids.M-1") and returns one output per
    micro-batch; parameter reads and constants are shared, every other op is repeated for
    each micro-batch right after itself, so the M calls of a layer are adjacent (layer-major:
    the layer's weights cross PCIe once per step) and autodiff sums each parameter's
    gradients over the micro-batches on the device. mt-autodiff then takes the mean of the
    micro-batches' losses. M = 1 changes nothing.
  }];
  let dependentDialects = ["mt::MTDialect", "mlir::func::FuncDialect"];
  let options = [
    Option<"count", "count", "int64_t", "1", "Micro-batches per step (M)">,
  ];
}

def AutodiffPass : Pass<"mt-autodiff", "mlir::ModuleOp"> {
  let summary = "Appends the loss and the backward of every op: @forward -> @train_step";
  let description = [{
    Before: `func.func @forward(%ids) -> logits` (or -> a scalar loss) over graph-level ops.
    After: `func.func @train_step(%ids, %targets) -> (loss, grads...)`: when the model ends
    in logits [..., V] whose leading shape is the token input's, the mean softmax
    cross-entropy against a new `targets` argument of the token input's type is appended;
    a model that returns a scalar is used as its own loss. Every op's gradient rule is then
    applied in reverse order; the gradients of a value used several times (tied embeddings)
    are summed. The function returns the loss followed by one gradient per `mt.parameter`,
    in declaration order, each result tagged `mt.gradient_of = @name`. Ops without a gradient
    rule on the path to the loss are errors that name them.

    A layer call's backward is a template that recomputes the layer from its input. With
    `saved-layers` N, the last N layers (by `mt.layer`) keep their activations instead: each
    calls `@T_saving`, which also returns the results of its products and attentions that
    the backward reads, and its backward `@T_saving_bwd` takes them after `dy` and recomputes
    only the cheap ops between them (norms, rope, activations): no product runs twice, for
    those results' device memory from the forward to the backward.
  }];
  let dependentDialects = ["mt::MTDialect", "mlir::func::FuncDialect"];
  let options = [
    Option<"functionName", "function", "std::string", "\"forward\"",
           "The function holding the model's forward computation">,
    Option<"savedLayers", "saved-layers", "int64_t", "0",
           "The last layers that keep their activations for the backward (0: none)">,
  ];
}

def AccumulateGradientsPass : Pass<"mt-accumulate-gradients", "mlir::ModuleOp"> {
  let summary = "Sums gradients into place: in the product or the call that makes the last part";
  let description = [{
    Before: @train_step (after mt-train), where a parameter's gradient over layer-major
    micro-batches is an mt.add of the gradients that each micro-batch's backward call
    returned, and a gradient used twice an mt.add of two products. After: a call whose result
    is added to an earlier value (that nothing else reads) calls a copy of its template,
    `@T.accumulate.R...`, that takes those values as trailing arguments and returns the sums
    (the copy's `mt.accumulators` lists the results R); and in every function an add of a
    value and a product read by nothing else becomes the product with that value as its
    `addend` (cuBLASLt's beta = 1); in a backward template (`mt.backward_of`) an
    `mt.linear` without a bias counts as such a product (becoming the `mt.matmul` of its
    input and weight): the parts of an input's gradient, and the recomputed residuals. mt-assign-buffers then places such a result in its
    accumulator's buffer when the accumulator dies there: one buffer per gradient instead of
    one per part, and no pass of adds.
  }];
  let dependentDialects = ["mt::MTDialect", "mlir::func::FuncDialect"];
}

def DevicePrecisionPass : Pass<"mt-device-precision", "mlir::ModuleOp"> {
  let summary = "Records how the device stores floats, which device buffer sizes read";
  let description = [{
    With `float-bytes` 4 (`mtc --device-precision=fp32`), the module's
    `mt.device_float_bytes` says that every float lives on the device in fp32; with 2, the
    default (bf16 storage, fp32 accumulation), the module is left as it is.
  }];
  let options = [
    Option<"floatBytes", "float-bytes", "int64_t", "2", "Bytes of a float on the device: 2 or 4">,
  ];
}

def RecomputePass : Pass<"mt-recompute", "mlir::ModuleOp"> {
  let summary = "Checkpoints every K layers; the backward recomputes each block's inputs";
  let description = [{
    Before: @train_step (after mt-train), where the backward of layer j reads layer j's input
    as the forward computed it, so every layer input waits for the backward (a checkpoint per
    layer). After, with `interval` K: layers form blocks of K; only a block's first input is
    a checkpoint. Right before the backward of a block's last layer, the forward calls of the
    block's other layers run again from the checkpoint (`mt.recompute`), and the backward of
    each layer reads the recomputed input, so the forward's inner-block values die as soon as
    the next layer has read them. K = 1 changes nothing.
  }];
  let dependentDialects = ["mt::MTDialect"];
  let options = [
    Option<"interval", "interval", "int64_t", "1", "Layers per checkpoint (K)">,
  ];
}

def InsertTransfersPass : Pass<"mt-insert-transfers", "mlir::ModuleOp"> {
  let summary = "Makes host-device copies explicit: weight prefetches, checkpoint and gradient offloads";
  let description = [{
    Before: @train_step (after mt-train) reads parameters with `mt.param` and passes them to
    layer calls. After: every call reads its weights from an `mt.prefetch` placed right after
    the call `lookahead` calls earlier (so with lookahead 2 two layers' weights are on the
    device at once: double buffering); each layer's input goes to host memory with an
    `mt.offload` as soon as it is computed and comes back when the weights of the layer's
    backward do (unless checkpoints stay on the device); consecutive calls that read the same
    parameters (a layer's micro-batches, the last layer's forward and backward where no
    recomputation comes between them) share one prefetch; with `resident-layers` N, the last
    N layers' weights stay on the device from their forward's prefetch to their backward (one
    crossing a step instead of two or three: fewer bytes over PCIe and through host memory,
    for N layers' weights of device memory); with `persistent-layers` N, the last N layers'
    weights (every parameter's, where N is at least the layer count) stay on the device
    across steps, prefetched once where the step first reads them and marked `persistent`
    (their buffers live for the whole step): the runtime fills them on the first step and
    then sends each update's bf16 copy straight to them, so they cross in no step (a
    parameter they share with streamed weights is refused); every parameter gradient the
    step returns leaves with an `mt.offload` right after it is computed; prologue and epilogue parameters are
    prefetched just before their first use, ahead of the layers' prefetches placed there
    (copies cross in the order the step reads them). Each copy yields a token, and its values
    are read through an `mt.await` of that token placed before their first reader: the calls
    read awaited weights and checkpoints, a checkpoint's prefetch its awaited offload, the
    step's return the awaited gradients.
  }];
  let dependentDialects = ["mt::MTDialect"];
  let options = [
    Option<"lookahead", "lookahead", "int64_t", "2",
           "How many calls ahead a layer's weights are prefetched (2: double buffering)">,
    Option<"checkpointsOnDevice", "checkpoints-on-device", "bool", "false",
           "Keep layer inputs on the device instead of offloading them">,
    Option<"residentLayers", "resident-layers", "int64_t", "0",
           "The last layers whose weights stay on the device from forward to backward">,
    Option<"persistentLayers", "persistent-layers", "int64_t", "0",
           "The last layers whose weights stay on the device across steps (at least the layer "
           "count: every parameter's)">,
  ];
}

def AssignBuffersPass : Pass<"mt-assign-buffers", "mlir::ModuleOp"> {
  let summary = "Places every device tensor of the step at a byte offset in one arena";
  let description = [{
    Before: @train_step with explicit copies (mt-insert-transfers). After: every op whose
    results live on the device (all but parameter reads, constants, offloads and awaits,
    whose results are their copy's bytes, alive to the last reader of either) carries
    `mt.offsets` and `mt.sizes`, one byte offset and size per result in one device arena (-1
    and 0 for host results); a
    layer call also carries `mt.workspace = [offset, bytes]` for its template's intermediates
    (their liveness peak); the function carries `mt.arena_bytes`, the plan's peak device
    memory. A tensor is live from its op to its last use in program order; offsets are chosen
    first-fit, 256-byte aligned, in program order, so a freed buffer is reused by the next
    tensor that fits. mt-assign-streams then orders each reuse after the last use.

    With `overlap-offloads` (the default), a tensor whose last reader is an offload stays
    until the next offload is issued: its copy to the host then overlaps the compute between
    the two, where the next tensor to take its bytes would otherwise wait for the copy (a
    layer's backward for the previous layer's gradients), at the cost of one more such tensor
    alive at a time.
  }];
  let dependentDialects = ["mt::MTDialect"];
  let options = [
    Option<"overlapOffloads", "overlap-offloads", "bool", "true",
           "Keep a tensor an offload reads until the next offload, so the copy overlaps compute">,
  ];
}

def AssignStreamsPass : Pass<"mt-assign-streams", "mlir::ModuleOp"> {
  let summary = "Puts every command of the step on h2d, compute or d2h and orders them with events";
  let description = [{
    Before: @train_step after mt-assign-buffers. After: each command has `mt.stream`
    (prefetches on "h2d", offloads on "d2h", the rest on "compute"; an await runs nothing),
    and the fewest events that order every producer before its consumers on other streams (a
    reader of awaited values waits for the copy of the token) and every buffer's last
    use before the next tensor placed over it: a producer that others wait for has
    `mt.record = id`, a consumer `mt.wait = [ids]`. A dependency already implied by an
    earlier wait (vector clocks over the streams' orders) gets no event of its own. The
    function carries `mt.events`, their number.
  }];
  let dependentDialects = ["mt::MTDialect"];
}

def FitStepPass : Pass<"mt-fit-step", "mlir::ModuleOp"> {
  let summary = "Builds the training step and its schedule within the device memory budget";
  let description = [{
    The compile policy. Before: the raised graph (after mt-raise and mt-device-precision).
    After: the training step (mt-train), scheduled (mt-schedule) unless `schedule` is off,
    built with the first accumulation and recompute interval whose plan fits `device-memory`
    bytes (0: the target's memory), where the plan's peak is its arena and the reserve
    beside it. Accumulation `auto` tries layer-major micro-batches first (they cross PCIe
    once a step) and then sample-major ones (the runtime runs a one-micro-batch step once
    each), whose plan keeps one micro-batch's activations; recompute interval 0 tries K = 1
    with checkpoints on the host (the interval does not change their device memory), and
    K = 1, 2, 4, ... up to the layer count with checkpoints on the device. Each try runs on a
    copy nested in the module, which the chosen one replaces. The module then records what
    was chosen and what the cost model predicts for `target` (`mt.micro_batches`,
    `mt.accumulation`, `mt.recompute_interval`, `mt.gradient_ring_layers`,
    `mt.resident_layers`, `mt.device_memory_budget` (0: not scheduled),
    `mt.model_flops`, `mt.predicted_step_seconds`), which the plan carries. When no plan
    fits, the error gives the smallest plan's bytes and what its largest phase holds.

    `weight-stream` says where prefetch streams the weights from: `bf16`, the high halves of
    the host's split fp32 masters, which are their bf16 copies; `fp32`, the masters
    themselves, cast to the bf16 slots on the device (twice the PCIe bytes), where the
    staging buffer fits; `auto`, bf16 (the host holds 12 bytes a parameter either way). With
    fp32 device floats the slots read the masters anyway. The module records the choice
    (`mt.stream_masters`) and why (`mt.weight_stream`). `resident-layers` and
    `persistent-layers` go to mt-insert-transfers as they are (`mt.persistent_layers`
    records the latter): the device memory they take counts against the budget. Persistent
    weights need bf16 device floats and the host's bf16 copies (each update's high halves are
    what the device receives).

    `gradient-ring` says where the ring of gradients is, where each update starts as its
    gradient lands (one run a step): `host`, pinned host memory each gradient lands in;
    `device`, device memory beside the plan's peak (within the budget), each update pulling
    its gradient through small pinned slots just before it runs, so that AdamW reads from the
    CPU's cache the share of it the profile measures there (pulledGradientCacheShare); `auto`
    the device where the cost model predicts a step at least 2% faster and the ring fits.
    Asked for, the device ring has room: the plan's arena and placement fit the budget less
    the least ring and the runtime's margin. `host` is the default: on its first GPU host,
    pulling paid on two rows of three. The module records the choice (`mt.pull_gradients`)
    and why (`mt.gradient_ring`).

    `saved-layers` N goes to mt-autodiff (the last N layers keep their activations for their
    backward); `fit-saved-layers` chooses N instead: every layer's saved activations over the
    step's peak without them give how many fit (within 95% of the budget: the cost model's
    peak is the schedule's within a few percent), taken where the cost model predicts a step
    at least 3% faster. The choice comes before lighten-host's placement, which gets the room
    left. The module records it and its numbers (`mt.saved_layers_choice`).

    `device-updates` N: the AdamW of N layers spread over the step and of the prologue's
    parameters runs on the device (mt-run --device-updates, which the plan's count sets by
    default): their low halves and moments stay in device memory where the room beside the
    plan's peak and the ring holds them, else cross in and back, 20 bytes a parameter through
    the host's memory where the host's update moves 34, and the host updates the rest
    meanwhile. It needs every
    weight persistent (persistent-layers at least the layer count) and the gradients in a
    device ring (gradient-ring=device); `auto` takes the count the cost model predicts the
    fastest step for, where that is at least 2% faster than none (none where the step cannot
    update on the device). The module records the count (`mt.device_update_layers`) and why
    (`mt.device_updates`).
  }];
  let dependentDialects = ["mt::MTDialect", "mlir::func::FuncDialect"];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", "1", "Micro-batches accumulated a step">,
    Option<"accumulation", "accumulation", "std::string", "\"auto\"",
           "auto, layer-major or sample-major">,
    Option<"segmentLayers", "segment-layers", "bool", "true",
           "Cut the model into layer templates">,
    Option<"schedule", "schedule", "bool", "true",
           "Schedule the step (copies, buffers, streams); off: the training step alone">,
    Option<"recomputeInterval", "recompute-interval", "int64_t", "0",
           "Layers per checkpoint, K (0: the smallest that fits)">,
    Option<"checkpointsOnDevice", "checkpoints-on-device", "bool", "false",
           "Keep layer inputs on the device instead of offloading them">,
    Option<"deviceMemory", "device-memory", "int64_t", "0",
           "Bytes of device memory the plan may use (0: the target's)">,
    Option<"target", "target", "std::string", "\"h200\"",
           "The device profile: h200, h100, or a JSON profile from mt-run --calibrate">,
    Option<"weightStream", "weight-stream", "std::string", "\"auto\"",
           "Where streamed weights come from: auto, bf16 (the masters' high halves) or fp32 (the masters)">,
    Option<"residentLayers", "resident-layers", "int64_t", "0",
           "The last layers whose weights stay on the device from forward to backward">,
    Option<"savedLayers", "saved-layers", "int64_t", "0",
           "The last layers that keep their activations for the backward (mt-autodiff)">,
    Option<"fitSavedLayers", "fit-saved-layers", "bool", "false",
           "Instead of saved-layers, as many last layers keep their activations as the device "
           "memory leaves room for, where the cost model predicts a step at least 3% faster">,
    Option<"persistentLayers", "persistent-layers", "int64_t", "0",
           "The last layers whose weights stay on the device across steps (at least the layer "
           "count: every parameter's)">,
    Option<"gradientRing", "gradient-ring", "std::string", "\"host\"",
           "Where the gradients' ring is: host (each gradient lands there), device (each "
           "update pulls its gradient from there into the CPU's cache) or auto">,
    Option<"deviceUpdates", "device-updates", "std::string", "\"0\"",
           "Layers spread over the step (and the prologue) whose AdamW runs on the device: a count, or "
           "auto (the cost model's fastest count, where it predicts a step at least 2% faster); "
           "needs every weight persistent and gradient-ring=device">,
    Option<"lightenHost", "lighten-host", "bool", "false",
           "Where fewer bytes through the host's memory predict a step at least 3% faster, "
           "keep checkpoints and layers' weights on the device as its memory allows "
           "(instead of checkpoints-on-device and resident-layers)">,
  ];
}

def TestPrintBuffersPass : Pass<"mt-test-print-buffers", "mlir::ModuleOp"> {
  let summary = "Prints the arena placement and events of @train_step, for tests";
  let description = [{
    After mt-assign-buffers (and optionally mt-assign-streams), prints one line per device
    tensor, "op#index result: offset O bytes B live [first, last] stream S waits [...] records
    E", then the arena size. The IR is not changed.
  }];
}

def PrintSchedulePass : Pass<"mt-print-schedule", "mlir::ModuleOp"> {
  let summary = "Prints the predicted step as a per-stream timeline a person can read";
  let description = [{
    Reads @train_step (after mt-train), runs the step cost model on the device profile and
    prints, to stdout, the step's totals (layers, templates, peak device bytes and what makes
    them, bytes over PCIe, model FLOPs, predicted time) and then every command of each stream
    (h2d, compute, d2h, cpu) with its predicted start and end. The IR is not changed.
  }];
  let dependentDialects = ["mt::MTDialect"];
  let options = [
    Option<"target", "target", "std::string", "\"h200\"",
           "Device profile: h200 or a JSON profile">,
    Option<"microBatches", "micro-batches", "int64_t", "1", "Micro-batches per step">,
  ];
}

#endif // MT_PASSES_TD
