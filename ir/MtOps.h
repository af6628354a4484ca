// The mt dialect's ops (generated from MtOps.td) and what they need to compile.
#ifndef MT_IR_MTOPS_H
#define MT_IR_MTOPS_H

#include "ir/MtDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_TYPEDEF_CLASSES
#include "ir/MtTypes.h.inc"

#define GET_OP_CLASSES
#include "ir/MtOps.h.inc"

#endif // MT_IR_MTOPS_H
