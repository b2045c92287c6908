# The two commands a new user needs: `make lab` and `make test`.
# Both create .venv on first use and reinstall only when pyproject.toml or TORCH_SPEC changes.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
# The exact torch that `make` installs (pinned: a plain `torch` takes whatever is newest).
# On Linux, PyPI's wheel is the CUDA build (about 3 GB with its NVIDIA libraries); choose
# the build with an index, e.g. on a machine without a GPU
#   make lab TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
# or on a GPU box
#   make lab TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
# pytest-xdist workers for the notebook tests.
JOBS ?= 2
NBVAL := --dist loadscope --nbval-current-env --nbval-cell-timeout=600 -p no:cacheprovider

.PHONY: lab test test-unit test-notebooks test-matrix test-cpu-checks test-browser venv labs \
	check-format gpu-check gpu-session doctor clean FORCE

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Rewritten only when TORCH_SPEC differs from the last run's, so that a new spec reinstalls.
$(VENV)/.torch-spec: FORCE | $(PY)
	@echo '$(TORCH_SPEC)' | cmp -s - $@ || echo '$(TORCH_SPEC)' > $@

FORCE:

$(VENV)/.installed-lab: pyproject.toml $(VENV)/.torch-spec | $(PY)
	$(PIP) install -q $(TORCH_SPEC)
	$(PIP) install -q -e ".[lab]"
	touch $@

# Tests also install the grading extra (nbgrader, about 15 s) so that nbgrader's way is tested,
# and Triton (chapter 7's Triton rung runs in its interpreter): about 1 GB, 20 s.
$(VENV)/.installed-dev: pyproject.toml $(VENV)/.torch-spec | $(PY)
	$(PIP) install -q $(TORCH_SPEC)
	$(PIP) install -q -e ".[dev,lab,grading,triton]"
	touch $@

venv: $(VENV)/.installed-dev

# Jupyter refuses root unless told; containers often run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS ?=

# JupyterLab asks whether to fetch news in a popup that covers the end of check messages:
# answered "no" once for this environment (overrides.json: defaults a user may still change).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

lab: $(VENV)/.installed-lab
	$(PY) -c "import json, pathlib; p = pathlib.Path('$(LAB_OVERRIDES)'); \
	  o = json.loads(p.read_text()) if p.exists() else {}; \
	  o.setdefault('@jupyterlab/apputils-extension:notification', {}).update(fetchNews='false', checkForUpdates=False); \
	  p.parent.mkdir(parents=True, exist_ok=True); p.write_text(json.dumps(o, indent=2))"
	@# The emulator's runtime and hooks, compiled once per machine (about 2 s; then cached),
	@# so that a lab's first kernel check takes as long as the others.
	-$(PY) -m gpucourse prepare
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=. $(ALLOW_ROOT) \
		--LabApp.news_url=None $(LAB_ARGS) notebooks/00_start_here.ipynb

# Unit tests, then every notebook executed: chapters (notebooks/) run top to bottom,
# solutions (solutions/) are compared output by output.
test: test-unit test-notebooks

test-unit: $(VENV)/.installed-dev
	$(PY) -m pytest -q -n $(JOBS) tests

test-notebooks: $(VENV)/.installed-dev
	$(PY) -m pytest -q -n $(JOBS) --nbval-lax $(NBVAL) notebooks
	$(PY) -m pytest -q -n $(JOBS) --nbval $(NBVAL) solutions

# The CPU matrix: {AVX2 cap, default ISA} x {pinned to one core, all cores}, each cell with every
# notebook, every solution and the unit tests an ISA cap or a core count can change (the
# emulator's own tests, the tools' tests and the smoke tests of GPU-only code, which neither
# reaches, are `make test`'s): see
# tools/test_matrix.sh. The two pinned cells run side by side on two cores. Narrow it with
# MATRIX_ISAS, MATRIX_CORES, MATRIX_UNIT (pytest paths), MATRIX_MARK and MATRIX_NOTEBOOKS /
# MATRIX_SOLUTIONS (empty: skip):
#   make test-matrix MATRIX_UNIT=tests/test_tolerances.py MATRIX_NOTEBOOKS= MATRIX_SOLUTIONS=
MATRIX_ISAS      ?= AVX2 default
MATRIX_CORES     ?= one all
MATRIX_UNIT      ?= tests
MATRIX_NOTEBOOKS ?= notebooks
MATRIX_SOLUTIONS ?= solutions

test-matrix: $(VENV)/.installed-dev
	PY="$(PY)" JOBS="$(JOBS)" NBVAL="$(NBVAL)" MATRIX_ISAS="$(MATRIX_ISAS)" MATRIX_CORES="$(MATRIX_CORES)" \
	  MATRIX_UNIT="$(MATRIX_UNIT)" MATRIX_NOTEBOOKS="$(MATRIX_NOTEBOOKS)" MATRIX_SOLUTIONS="$(MATRIX_SOLUTIONS)" \
	  bash tools/test_matrix.sh

test-cpu-checks: $(VENV)/.installed-dev
	@if command -v taskset >/dev/null 2>&1; then pin="taskset -c 0"; else pin=""; \
	  echo "test-cpu-checks: this system has no taskset (macOS has none): running on all cores"; fi; \
	ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 $$pin $(PY) -m pytest -q -p no:cacheprovider -m cpu_check tests || \
	  { echo "test-cpu-checks: FAILED with ONEDNN_MAX_CPU_ISA=AVX2 on one core" >&2; exit 1; }

# Every chapter in JupyterLab in headless Chromium (installs Debian's chromium if missing).
test-browser: $(VENV)/.installed-dev
	$(PY) tools/browser_test.py --out results/browser

# Regenerate labs/ from solutions/ (never overwrites a lab a learner has edited).
labs:
	$(PYTHON) tools/make_labs.py

check-format:
	$(PYTHON) tools/check_notebooks.py

doctor: $(VENV)/.installed-dev
	$(PY) -m gpucourse doctor

# On a machine with a GPU: uses the Python it finds (installs nothing), puts src/ on the path.
gpu-check:
	PYTHONPATH=src $(PYTHON) tools/gpu_check.py

# On a GPU machine: tests, each chapter's GPU check, the kernel timings (and Nsight Compute where
# installed), every notebook and the browser test, each a step under 8 minutes with its own log
# in results/gpu-session/ (STEPS="ch5 notebooks" runs some).
gpu-session:
	PYTHON="$(PYTHON)" bash tools/gpu_session.sh $(STEPS)

clean:
	rm -rf $(VENV) .pytest_cache
