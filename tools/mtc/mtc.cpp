// mtc: compiles an ONNX model into mt's IR (and, in later stages, a plan).
#include "tools/mtc/Compiler.h"

int main(int argc, char **argv) { return mt::compilerMain(argc, argv); }
