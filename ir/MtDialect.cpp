// Registers the mt dialect's ops.
#include "ir/MtDialect.h"

#include "ir/MtOps.h"

using namespace mt;

#include "ir/MtDialect.cpp.inc"

void MTDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/MtOps.cpp.inc"
      >();
}
