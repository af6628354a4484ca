// A stop asked for by a signal: SIGINT and SIGTERM let the step running finish, and the
// trainer then writes a checkpoint and ends the run (a second signal ends it at once).
#ifndef MT_RUNTIME_TRAIN_STOPSIGNALS_H
#define MT_RUNTIME_TRAIN_STOPSIGNALS_H

#include <csignal>

namespace mt {

/// Catches SIGINT and SIGTERM from now on; returns the flag the trainer reads: the signal
/// caught, or 0.
const volatile std::sig_atomic_t &catchStopSignals();

} // namespace mt

#endif // MT_RUNTIME_TRAIN_STOPSIGNALS_H
