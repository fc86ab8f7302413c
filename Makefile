# One way in: `make test` (set up + run the suite), `make demo` (set up + run the main job).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test demo plan-reference preview clean

setup: $(STAMP)

# torch goes in alone and first (pinned CPU build), so kokoro after it cannot pull a CUDA torch.
$(STAMP): pyproject.toml container/requirements.txt container/requirements-nodeps.txt container/requirements-torch.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$$(grep -m1 '^torch==' container/requirements-torch.txt)"
	$(PY) -m pip install -q -r container/requirements-torch.txt
	$(PY) -m pip install -q -e '.[pulumi,container,dev]' -r container/requirements.txt
	$(PY) -m pip install -q --no-deps -r container/requirements-nodeps.txt
	touch $(STAMP)

test: setup
	$(PY) -m ruff check .
	$(PY) -m mypy speech
	$(PY) -m pytest -q

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
