# Two commands do everything on a fresh machine:
#   make book   set up, execute every chapter at the default `cpu` profile, build the book
#   make test   set up, then unit tests (every chapter at `smoke` included), the artifact tier's
#               checksums, nbval of the committed book against the tier, book build
# For maintainers: `make artifacts` retrains what the cache lacks (the tier is not used), executes
# the book and refills artifacts/ with the models it used.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
export RAPTOR_CACHE ?= $(CURDIR)/.cache/raptor

.PHONY: setup book test unit smoke verify nbval build artifacts clean

$(VENV)/.installed: pyproject.toml
	@if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist) || echo "note: could not install dataset-fashion-mnist"; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

book: setup
	$(PY) -m raptor run --profile $(PROFILE)

test: setup unit verify nbval build

unit: setup
	$(PY) -m pytest -q

smoke: setup
	$(PY) -m pytest -q tests/test_smoke_chapters.py

verify: setup
	$(PY) -m raptor artifacts verify

nbval: setup
	$(PY) -m pytest -q --nbval-lax --nbval-current-env book/chapters book/claims.ipynb

build: setup
	$(PY) -m raptor build

artifacts: setup
	rm -f $(RAPTOR_CACHE)/used.log
	RAPTOR_ARTIFACTS= RAPTOR_CACHE_LOG=$(RAPTOR_CACHE)/used.log $(PY) -m raptor run --profile cpu
	$(PY) -m raptor artifacts export --log $(RAPTOR_CACHE)/used.log

clean:
	rm -rf book/_build .cache runs/smoke runs/paper
