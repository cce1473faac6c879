# rankscope — two commands matter:
#   make demo   set up everything on a fresh machine, run the main job on the bundled sample data and
#               serve the web app over it (URL printed; PORT=0 picks a free port; to share:
#               HOST=0.0.0.0 with $RANKSCOPE_TOKEN set, see README 'Sharing the server')
#   make test   set up everything, check the plain install serves the web app, run the whole test suite
#               (.ci/run calls this)

PYTHON ?= python3
VENV   ?= .venv
VENV_MS ?= .venv-ms
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
DEMO_STORE ?= .demo/store
PORT   ?= 8050
HOST   ?= 127.0.0.1

.PHONY: setup setup-test check-install demo test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

# torch is not a dependency of rankscope (the training environment brings its own); the tests run
# real training, so they install the CPU wheel: exactly 2.13.0, which this machine has on disk.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q torch==2.13.0
	$(PIP) uninstall -q -y holistictraceanalysis 2>/dev/null || true  # HTA's old name: the same `hta` package
	$(PIP) install -q -e '.[test,hf]'
	touch $@

setup: $(VENV)/.installed

# MindSpore 2.10 (CPU wheel, ~770 MB) for the collector's MindSpore tests, in a venv of its own: it wants
# numpy<2 (the main venv has numpy 2 + torch). Made once; the stamp keeps later runs from reinstalling.
$(VENV_MS)/.installed: tests/requirements-mindspore.txt
	$(PYTHON) -m venv $(VENV_MS)
	$(VENV_MS)/bin/python -m pip install -q --upgrade pip
	$(VENV_MS)/bin/python -m pip install -q -r tests/requirements-mindspore.txt
	touch $@

setup-test: $(VENV)/.installed-test $(VENV_MS)/.installed
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# every scenario folder of sample_data/ is one run (bad_input holds the corrupt files of the tests)
SCENARIOS = $(filter-out sample_data/bad_input,$(patsubst %/,%,$(sort $(dir $(wildcard sample_data/*/*)))))

demo: setup
	rm -rf $(DEMO_STORE)
	$(VENV)/bin/analyze ingest $(SCENARIOS) --store $(DEMO_STORE)
	$(VENV)/bin/analyze runs --store $(DEMO_STORE)
	@for s in $(notdir $(SCENARIOS)); do $(VENV)/bin/analyze summary --run $$s --store $(DEMO_STORE) || exit 1; done
	$(VENV)/bin/analyze serve --store $(DEMO_STORE) --host $(HOST) --port $(PORT)

# `pip install rankscope` (no extra) into a fresh venv, then `analyze serve` answers with the page and its assets
check-install:
	$(PYTHON) tests/plain_install.py

test: setup-test check-install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) $(VENV_MS) .demo .pytest_cache
