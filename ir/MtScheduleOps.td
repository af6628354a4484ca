// Schedule ops of the mt dialect: the explicit copies between host memory and the device that
// turn a training step into the MegaTrain schedule. Each copy returns a token, which is done
// when the copy is, and its values are read through an await of that token; streams and
// events are assigned to them later.
#ifndef MT_SCHEDULE_OPS_TD
#define MT_SCHEDULE_OPS_TD

def MT_Token : TypeDef<MT_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "completion of an asynchronous copy";
  let description = [{
    A copy's token: `mt.await` consumes it, and what reads the copy's values reads the
    await's results, so that every reader waits for the copy (IREE's timepoints are the
    model).
  }];
}

def MT_PrefetchOp : MT_Op<"prefetch"> {
  let summary = "copies host tensors (a layer's weights, a checkpoint) into device memory";
  let description = [{
    The results are the device copies of the operands, in order, then the token of the copy.
    `layer` names the layer (-1: prologue or epilogue); `kind` says what moves. `persistent`
    weights keep their device copies across steps: the step's first run copies them, and each
    later step finds them as the previous step's updates left them (the runtime sends each
    update's bf16 copy to the device as the update runs), so they cross nowhere in the step.

    ```mlir
    %w:2, %t = mt.prefetch %a, %b {kind = "weights", layer = 3 : i64} : (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>, !mt.token)
    ```
  }];
  let arguments = (ins Variadic<MT_Tensor>:$host_values, StrAttr:$kind, I64Attr:$layer,
                       UnitAttr:$persistent);
  let results = (outs Variadic<MT_Tensor>:$device_values, MT_Token:$token);
  let assemblyFormat = "$host_values attr-dict `:` functional-type($host_values, results)";
  let hasVerifier = 1;
}

def MT_OffloadOp : MT_Op<"offload"> {
  let summary = "copies device tensors (a layer's gradients, a checkpoint) to host memory";
  let description = [{
    The results are the host copies of the operands, in order, then the token of the copy.

    ```mlir
    %g:2, %t = mt.offload %da, %db {kind = "gradients", layer = 3 : i64} : (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>, !mt.token)
    ```
  }];
  let arguments = (ins Variadic<MT_Tensor>:$device_values, StrAttr:$kind, I64Attr:$layer);
  let results = (outs Variadic<MT_Tensor>:$host_values, MT_Token:$token);
  let assemblyFormat = "$device_values attr-dict `:` functional-type($device_values, results)";
  let hasVerifier = 1;
}

def MT_AwaitOp : MT_Op<"await", [DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "a copy's values, once its token says the copy is done";
  let description = [{
    The results are the operands, results of the copy that made `token`, in the same bytes:
    what reads them waits for the copy (its stream waits for the copy's event, which
    mt-assign-streams records). Every use of a copy's values goes through an await, placed
    before the first reader; the await itself runs nothing.

    ```mlir
    %w:2, %t = mt.prefetch %a, %b {kind = "weights", layer = 3 : i64} : (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<8x8xf32>, tensor<8xf32>, !mt.token)
    %r:2 = mt.await %w#0, %w#1 after %t : tensor<8x8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins MT_Token:$token, Variadic<MT_Tensor>:$values);
  let results = (outs Variadic<MT_Tensor>:$results);
  let assemblyFormat = "$values `after` $token attr-dict `:` type($values)";
  let hasVerifier = 1;
}

#endif // MT_SCHEDULE_OPS_TD
