// SIGINT and SIGTERM as a stop between steps.
#include "runtime/train/StopSignals.h"

namespace mt {

namespace {

volatile std::sig_atomic_t stopSignal = 0;

void stopAfterStep(int signal) { stopSignal = signal; }

} // namespace

const volatile std::sig_atomic_t &catchStopSignals() {
  struct sigaction action = {};
  action.sa_handler = stopAfterStep;
  action.sa_flags = SA_RESETHAND; // the handler goes after the first signal: a second kills
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return stopSignal;
}

} // namespace mt
