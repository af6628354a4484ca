// The mt-run driver as a library: options, the training loop on a backend, metrics and
// weights out.
#ifndef MT_TOOLS_MTRUN_RUNNER_H
#define MT_TOOLS_MTRUN_RUNNER_H

namespace mt {

/// mt-run's command line; returns the process exit code.
int runnerMain(int argc, char **argv);

} // namespace mt

#endif // MT_TOOLS_MTRUN_RUNNER_H
