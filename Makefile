# ContextLab: `make run` starts everything locally, `make test` runs the whole suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PORT

.PHONY: run test quick lint fmt venv

# The virtualenv is (re)built when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -c 'import sys; sys.exit("Python 3.11+ is required") if sys.version_info < (3, 11) else None'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# bytecode now, as a non-editable install would: where PYTHONDONTWRITEBYTECODE is set every
	@# start would compile every module again
	$(BIN)/python -m compileall -q contextlab > /dev/null
	@touch $@

venv: $(VENV)/.installed

run: venv
	$(BIN)/python -m contextlab.devserver --port $(PORT)

# pytest exits 5 when it collected no tests: not a failure of the suite.
test: venv
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

# The inner loop: unit tests only (no integration, browser or slow ones), on every core.
quick: venv
	$(BIN)/python -m pytest -n auto -m "not integration and not browser and not slow" $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy contextlab
	$(BIN)/lint-imports
	$(BIN)/vulture

fmt: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
