#!/usr/bin/env bash
# The README's second command: set up with the test dependencies, build, run every test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh" --tests
cmake --build "$root/build" --target check-mt
