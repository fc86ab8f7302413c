# One way in: `make test` (set up + run the suite), `make demo` (set up + run the main job).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
UV := $(VENV)/bin/uv
UV_VERSION := 0.13.9
LOCK := requirements.lock

.PHONY: setup test test-fast lint demo lock plan-reference preview clean

# Python writes a module's bytecode beside it on the first import and reads it from then on. Where the
# shell sets PYTHONDONTWRITEBYTECODE (some images and CI runners do), every process would compile
# everything it imports, every time: the suite starts hundreds (the CLI, servers, the pack, Locust
# workers), and `import boto3, pydantic, pulumi` alone took 2.0 s uncompiled and 0.4 s compiled here.
unexport PYTHONDONTWRITEBYTECODE

# The suite's processes (pytest-xdist): one a core by default. --dist loadfile keeps a test file on one
# process, so the module- and session-scoped fixtures (the real model, servers, builds) start once.
JOBS ?= auto

setup: $(STAMP)

# 1. torch alone and first, with pip: the pinned CPU build (pip takes it from the machine's own
#    configuration, where a CUDA build would otherwise be resolved); uv does not read pip's
#    configuration, so it never sees torch. --no-compile: byte-compiling all of torch took 19 of the
#    install's 27 s here; Python compiles what a process imports when it first imports it (and writes
#    it, above). 2. uv (pinned) into the venv; where it cannot be had,
#    pip does the rest. 3. Everything else from the lock with --no-deps: exact pins, no resolution.
# 4. The project (editable) and kokoro-onnx, both --no-deps (see requirements.lock's header).
$(STAMP): pyproject.toml $(LOCK) container/requirements-nodeps.txt container/requirements-torch.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-compile "$$(grep -m1 '^torch==' container/requirements-torch.txt)"
	@if $(PY) -m pip install -q "uv==$(UV_VERSION)" >/dev/null 2>&1 && $(UV) --version >/dev/null 2>&1; then \
	  echo "installing $(LOCK) with uv"; \
	  $(UV) pip install -q --python $(PY) --no-deps -r $(LOCK) && \
	  $(UV) pip install -q --python $(PY) --no-deps -e . -r container/requirements-nodeps.txt; \
	else \
	  echo "uv $(UV_VERSION) could not be installed: installing $(LOCK) with pip"; \
	  $(PY) -m pip install -q --no-deps -r $(LOCK) && \
	  $(PY) -m pip install -q --no-deps -e . -r container/requirements-nodeps.txt; \
	fi
	@problems="$$($(PY) -m pip check 2>&1 | grep -v -E '^kokoro-onnx .* requires phonemizer' | grep -v '^No broken requirements' || true)"; \
	  if [ -n "$$problems" ]; then echo "$$problems"; echo "$(LOCK) is inconsistent with what it installs: run make lock"; exit 1; fi
	touch $(STAMP)

# Re-resolve the lock after changing pyproject.toml or container/requirements*.txt (needs uv: make setup).
lock:
	$(UV) pip compile pyproject.toml --extra pulumi --extra container --extra dev --extra load container/requirements.txt \
	  container/requirements-torch.txt --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --find-links "$$($(PY) -m pip config get global.find-links 2>/dev/null || echo /opt/wheels)" \
	  --no-emit-find-links --no-emit-package torch --no-header -o $(LOCK).new
	{ sed -n '/^# requirements.lock/,/^# resolution at setup time/p' $(LOCK); cat $(LOCK).new; } > $(LOCK).tmp
	rm $(LOCK).new && mv $(LOCK).tmp $(LOCK)

# mypy's incremental cache, outside the clone: mypy checks each cached module against its source by
# content hash (not by path or mtime alone), so a fresh clone or another worktree on this machine
# re-checks only what differs. Empty (a new machine or user), mypy takes about 3 minutes on 2 cores;
# warm, seconds. CI keeps this directory between runs (cache it keyed on requirements.lock).
MYPY_CACHE_DIR ?= $(HOME)/.cache/speech-endpoints/mypy

# Lint: ruff, mypy on every package ([tool.mypy]), the layer contracts (import-linter, [tool.importlinter] in
# pyproject.toml), the docs site (mkdocs.yml: a broken link or anchor fails the build).
lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy --cache-dir "$(MYPY_CACHE_DIR)" speech policy container bench
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mkdocs build --strict --site-dir out/site

# The whole suite: what CI runs.
test: lint
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile

# The inner loop while editing: no model, no servers, no subprocesses (tests/conftest.py enforces it).
test-fast: lint
	SPEECH_TEST_TIER=fast $(PY) -m pytest -q -m "not slow" -p no:cacheprovider -n $(JOBS) --dist loadfile

# The plan on the reference artifacts (public figures of a comparable deployment).
plan-reference: setup
	$(PY) -m bench plan \
	  --qmax artifacts/reference/qmax-kokoro-82m-stream-g5xlarge-8b1b96bc.json \
	  --ttotal artifacts/reference/ttotal-kokoro-82m-forced-desired-g5xlarge-8b1b96bc.json \
	  --slo-ms 3000 --surge-ratio 1.25 --peak-rps 5000 --trough-rps 10 --out out/reference

demo: setup
	$(PY) -m bench demo

clean:
	rm -rf $(VENV) out
