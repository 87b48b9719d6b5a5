#!/usr/bin/env bash
# Set up (see setup.sh) and run every check: ruff, mypy --strict, the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh
.venv/bin/ruff check cockpit tests bench
.venv/bin/mypy cockpit
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
