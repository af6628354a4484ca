// The mtc driver as a library: reads a model (ONNX or graph-level MLIR), runs the phases
// up to the requested stage, and writes the IR or a summary.
#ifndef MT_TOOLS_MTC_COMPILER_H
#define MT_TOOLS_MTC_COMPILER_H

namespace mt {

/// mtc's command line; returns the process exit code.
int compilerMain(int argc, char **argv);

} // namespace mt

#endif // MT_TOOLS_MTC_COMPILER_H
