# Two entry points: `make accept` (the acceptance run) and `make test` (what every change needs; `make full`
# adds the rest of the exhaustive matrices, see docs/testing.md).
# Each installs what it needs: a virtualenv with the project (editable) and its `test` extra
# (which holds the `suite` and `accept` extras), the pinned Codex CLI and MCP clients from package-lock.json,
# Debian's Chromium, in which the tests open report.html, and Debian's tmux, which runs the
# agents' Codex TUIs in the attached_tui mode.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.package-lock.json
# Twice the usable cores (2 to 8): most of the suite waits on process start-ups, turns and the waits a rule
# states, so on 2 cores four workers take about two thirds of the wall time of two (docs/testing.md); tests that
# start a whole run's processes still go at most two at a time (tests/heavy.py). Each worker is handed one test at a
# time, longest first by tests/durations.json (tests/order.py); `make test PYTEST_ARGS="-n 4 --store-durations"`
# records them again.
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(min(8, max(2, 2 * len(os.sched_getaffinity(0)))))')
PYTEST_ARGS ?= -n $(WORKERS) --maxschedchunk 1
# A run starts dozens of Python processes (apps, MCP servers, workers), the suite hundreds: each would
# compile the project again were its bytecode never written (PYTHONDONTWRITEBYTECODE set), so set-up compiles
# it and these targets write it (into the git-ignored __pycache__/ folders).
WRITES_BYTECODE := test full personas accept contract
$(WRITES_BYTECODE): export PYTHONDONTWRITEBYTECODE :=
# Sharded runs (CI): `make accept SHARD=2/4 REPORT_DIR=out`, `make contract SHARD=2/4 REPORT_DIR=out`,
# then `make merge SHARDS=out-of-every-shard OUT=merged`.
SHARD ?=
REPORT_DIR ?=
SHARDS ?= shards
OUT ?= reports/merged

.PHONY: setup bytecode chromium tmux lint test full personas accept accept-pairs contract merge matrix bench drift wheel clean

setup: $(PY_STAMP) $(NODE_STAMP) chromium tmux bytecode

# Up to date in a fraction of a second: only what changed since is compiled again.
bytecode: $(PY_STAMP)
	@$(PY) -m compileall -q peerwire peerwire_lab harness runner.py >/dev/null

# setup.py maps the data folders (contracts/, scenarios/, fixtures/, .ci/) into the package: a change to
# either file means a new editable install.
$(PY_STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

# Idempotent: installs Debian's chromium only where none is on PATH (needs root, as on CI).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }

# Idempotent: installs Debian's tmux only where none is on PATH (needs root, as on CI).
tmux:
	@command -v tmux >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq tmux; }

# The linters, configured in pyproject.toml: ruff over the whole tree, mypy over the core, the interface
# another core's provisioner implements, and the acceptance driver interface with the lab that calls it.
# Seconds; make test runs them first.
lint: setup
	$(PY) -m ruff check --quiet .
	$(PY) -m mypy

# What every change needs: the linters, every fault class once, the exhaustive matrices as their covering designs.
test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS) -m "not full"

# Everything: make test plus the rest of every exhaustive matrix (tests marked full).
full: setup
	$(PY) -m pytest $(PYTEST_ARGS)

# The whole persona matrix (67 runs of real Codex agents); see docs/acceptance.md "Personas".
personas: setup
	$(PY) -m pytest $(PYTEST_ARGS) -m personas

# Every scenario with two Codex agents, plus one mixed pair (Codex asks OpenCode, the cheapest scenario that
# crosses kinds); `make accept-pairs` runs every scenario that makes sense for them as each other pair.
ACCEPT_AGENTS := --agents codex,codex --agents codex,opencode@task-reply-auto
PAIRS_AGENTS := --agents codex,opencode --agents opencode,codex --agents opencode,opencode

accept: setup
	$(PY) runner.py $(ACCEPT_AGENTS) $(if $(SHARD),--shard $(SHARD)) \
		$(if $(REPORT_DIR),--report-dir $(REPORT_DIR)/acceptance --junit $(REPORT_DIR)/acceptance-junit.xml)

# The mixed pairs' tier (docs/acceptance.md "Agent kinds and pairs"): Codex→OpenCode, OpenCode→Codex and
# OpenCode→OpenCode of every scenario that declares both kinds; its own report, beside make accept's.
accept-pairs: setup
	$(PY) runner.py $(PAIRS_AGENTS) $(if $(SHARD),--shard $(SHARD)) \
		$(if $(REPORT_DIR),--report-dir $(REPORT_DIR)/pairs --junit $(REPORT_DIR)/pairs-junit.xml)

contract: setup
	$(PY) runner.py contract $(if $(SHARD),--shard $(SHARD)) $(if $(REPORT_DIR),--report-dir $(REPORT_DIR)/contract)

merge: setup
	$(PY) runner.py report merge $(SHARDS) --out $(OUT)

# The results matrix in docs/contract-suite.md (docs/mailbox-profile.md): the protocol profile of the reference
# beside two official MCP servers, the messaging profile of the reference beside the app-less core in
# tests/contract/appless and the core on the official MCP Python SDK (tests/contract/sdk_server.py, with its baseline of
# the SDK's own JSON-RPC findings), and the mailbox profile of the reference beside mcp-agent-mail (in a virtualenv of its own:
# it pins another major version of the MCP SDK) and the documented example binding. A run's own verdict is not this
# target's (a server failing a requirement is what the matrix shows): only the matrix's own exit status counts.
MATRIX_RUNS ?= reports/matrix-runs
MATRIX_OUT ?= reports/matrix
AGENT_MAIL_VENV ?= $(HOME)/.cache/peerwire/mcp-agent-mail-0.1.0
EVERYTHING_SERVER := node node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio

$(AGENT_MAIL_VENV)/.installed:
	$(PYTHON) -m venv --clear $(AGENT_MAIL_VENV)
	$(AGENT_MAIL_VENV)/bin/python -m pip install --quiet mcp-agent-mail==0.1.0
	touch $@

matrix: setup $(AGENT_MAIL_VENV)/.installed
	rm -rf $(MATRIX_RUNS)
	-$(PY) runner.py contract --report-dir $(MATRIX_RUNS)/reference
	-$(PY) runner.py contract --server-cmd "$(EVERYTHING_SERVER)" --tool-call 'echo {"message": "hello"}' \
		--report-dir $(MATRIX_RUNS)/server-everything
	-$(PY) runner.py contract --server-cmd "$(VENV)/bin/mcp-server-time" --tool-call 'get_current_time {"timezone": "UTC"}' \
		--report-dir $(MATRIX_RUNS)/mcp-server-time
	-PYTHONPATH=tests/contract $(PY) runner.py contract --profiles messaging --server-cmd "$(PY) tests/contract/appless/server.py" \
		--provisioner appless.provisioner:AppLessProvisioner --report-dir $(MATRIX_RUNS)/appless
	-PYTHONPATH=tests/contract $(PY) runner.py contract --profiles protocol,messaging --server-cmd "$(PY) tests/contract/sdk_server.py" \
		--provisioner appless.provisioner:AppLessProvisioner --baseline tests/contract/sdk-baseline.txt --call-timeout 10 \
		--report-dir $(MATRIX_RUNS)/sdk-server
	-$(PY) runner.py mailbox --report-dir $(MATRIX_RUNS)/mailbox-reference
	-PEERWIRE_AGENT_MAIL_PYTHON=$(AGENT_MAIL_VENV)/bin/python $(PY) runner.py mailbox \
		--binding harness.contract.mailbox.agent_mail:AgentMailBinding --report-dir $(MATRIX_RUNS)/mcp-agent-mail
	$(PY) runner.py report matrix reference=$(MATRIX_RUNS)/reference reference=$(MATRIX_RUNS)/mailbox-reference \
		server-everything=$(MATRIX_RUNS)/server-everything mcp-server-time=$(MATRIX_RUNS)/mcp-server-time \
		appless=$(MATRIX_RUNS)/appless sdk-server=$(MATRIX_RUNS)/sdk-server mcp-agent-mail=$(MATRIX_RUNS)/mcp-agent-mail \
		--out $(MATRIX_OUT)

bench: setup
	$(PY) -m pip install --quiet -e '.[test,bench]'
	$(PY) -m peerwire_lab.bench $(BENCH_ARGS)

# What would change on another Codex release: make drift V=0.160.1
drift: setup
	@test -n "$(V)" || { echo "usage: make drift V=<codex version>, e.g. make drift V=0.160.1" >&2; exit 2; }
	$(PY) runner.py drift --codex-version $(V)

# The wheel another project installs (docs/adopting.md): `make wheel`, then e.g.
# `pipx run --spec "$$(ls dist/peerwire-*.whl)[suite]" peerwire-harness contract ...`.
wheel: $(PY_STAMP)
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .

clean:
	rm -rf $(VENV) node_modules .pytest_cache .hypothesis build dist
