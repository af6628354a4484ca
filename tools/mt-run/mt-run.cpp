// mt-run: trains a model from a plan that mtc wrote.
#include "tools/mt-run/Runner.h"

int main(int argc, char **argv) { return mt::runnerMain(argc, argv); }
