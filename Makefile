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

.PHONY: lab test test-unit test-notebooks test-browser venv labs check-format gpu-check doctor clean FORCE

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

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.torch-spec | $(PY)
	$(PIP) install -q $(TORCH_SPEC)
	$(PIP) install -q -e ".[dev,lab]"
	touch $@

venv: $(VENV)/.installed-dev

# Jupyter refuses root unless told; containers often run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
LAB_ARGS ?=

lab: $(VENV)/.installed-lab
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=. $(ALLOW_ROOT) $(LAB_ARGS) \
		notebooks/00_start_here.ipynb

# Unit tests, then every notebook executed: chapters (notebooks/) run top to bottom,
# solutions (solutions/) are compared output by output.
test: test-unit test-notebooks

test-unit: $(VENV)/.installed-dev
	$(PY) -m pytest -q -n $(JOBS) tests

test-notebooks: $(VENV)/.installed-dev
	$(PY) -m pytest -q -n $(JOBS) --nbval-lax $(NBVAL) notebooks
	$(PY) -m pytest -q -n $(JOBS) --nbval $(NBVAL) solutions

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

clean:
	rm -rf $(VENV) .pytest_cache
