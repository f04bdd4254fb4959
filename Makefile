# The two commands a fresh clone needs: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3

.PHONY: run test lint bench install clean

# Reinstall only when pyproject.toml changes: the full install (with chDB) is ~1 GiB.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/promptrail serve

lint: $(STAMP)
	$(VENV)/bin/ruff check src collector integrations tests benchmarks examples
	$(VENV)/bin/ruff format --check src collector integrations tests benchmarks examples
	$(VENV)/bin/mypy

# Two worker processes, each with its own embedded store: ~40% less wall time on 2 cores.
test: lint
	$(VENV)/bin/pytest -n 2

# Heavy: minutes each on 2 cores. Each script prints its figures; --write-docs records them.
bench: $(STAMP)
	$(PY) benchmarks/prompts.py --prompts 10000
	$(PY) benchmarks/runs.py
	$(PY) benchmarks/request_log.py --records 1000000
	$(PY) benchmarks/sdk_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
