# One-command set-up on a fresh Debian machine: `make demo` and `make test` install what they need.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Python keeps the bytecode of what it imports in .venv: uv installs without it, and an environment that sets
# PYTHONDONTWRITEBYTECODE (some CI images do) made every process compile TensorFlow and Keras again, 15 s
# of CPU per import instead of 6, in each of the demo, the test workers and the commands the tests start.
unexport PYTHONDONTWRITEBYTECODE
# Debian packages the tests and demo use (installed only when running as root and missing); iproute2:
# the pod rehearsal's network namespaces (tests/train/pod_rehearsal.py).
APT_PACKAGES := postgresql postgresql-contrib postgresql-plpython3-15 python3-numpy dataset-fashion-mnist chromium chromium-driver wrk iproute2 openjdk-17-jre-headless

.PHONY: setup demo test test-fast lint format bench clean supported ort115 docs wheel

# The Python packages and the Debian ones are independent: `make -j2` (.ci/run) installs them at once.
setup: $(STAMP) apt

apt:
	@bash .ci/apt-install.sh $(APT_PACKAGES)

# The locked packages, then this checkout as the editable `nnsql` package (the command in .venv/bin).
# uv (pinned in requirements-dev.txt) installs the lock: it downloads in parallel and skips compiling
# every module to bytecode, a tenth of pip's time for TensorFlow's tree on a fresh machine.
$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$$(grep '^uv==' requirements-dev.txt)"
	$(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

demo: setup
	@$(PY) -m nnsql.demo

# onnxruntime 1.15.1 (Oracle 23ai/26ai's) in its own venv under build/, for the Oracle ONNX route's tests.
ort115: setup
	@$(PY) -m tests.onnxruntime115

# pytest's worker processes (pytest-xdist): one more than the cores by default, since many tests wait on
# servers, training workers and databases they start (2 cores, idle: 1,356 s with 2 workers, 1,122 s
# with 3, same CPU); TEST_WORKERS=0 runs in this process.
# A test file is the unit a worker takes, so its module-scoped fixtures (an export, a server) are made once.
# The files go out in the order tests/conftest.py gives them (longest first), not by their number of tests.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# ruff, ruff-format and mypy as .pre-commit-config.yaml lists them, with the .venv's tools first on PATH.
LINT := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/pre-commit run --all-files --show-diff-on-failure

# tests.components stops the run, in one line, on a component the suite needs that is missing or does not
# start (PostgreSQL, plpython3u, Chromium, Fashion-MNIST), so that its tests cannot skip.
test: setup ort115
	$(PY) -m tests.components
	$(LINT)
	$(PYTEST) --durations=20

test-fast: setup
	$(PYTEST) -m "not slow"

lint: setup
	$(LINT)

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: setup
	$(PY) -m nnsql.bench.scoring
	$(PY) -m nnsql.bench.cnn_scoring
	$(PY) -m nnsql.bench.serve_http
	$(PY) -m nnsql.bench.train_spawn
	$(PY) -m nnsql.bench.export_time

supported: setup
	$(PY) -m nnsql.export --supported
	$(PY) -m nnsql.export --write-table docs/layers.md

docs: setup
	$(PY) -m mkdocs build --strict --site-dir build/site

wheel: setup
	$(PY) -m pip wheel --no-deps --no-build-isolation --wheel-dir build/dist .

clean:
	rm -rf build bench/results .pytest_cache .ruff_cache .mypy_cache
