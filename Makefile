# Two commands do everything on a fresh machine:
#   make book   set up, execute every chapter at the default `cpu` profile, build the book
#   make test   set up, then unit tests, smoke-run of every chapter, nbval of the committed book, book build
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
export RAPTOR_CACHE ?= $(CURDIR)/.cache/raptor

.PHONY: setup book test unit smoke nbval build clean

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

test: setup unit smoke nbval build

unit: setup
	$(PY) -m pytest -q

smoke: setup
	RAPTOR_CACHE=$(CURDIR)/.cache/smoke $(PY) -m pytest -q tests/smoke_chapters.py

nbval: setup
	$(PY) -m pytest -q --nbval-lax --nbval-current-env book/chapters book/claims.ipynb

build: setup
	$(PY) -m raptor build

clean:
	rm -rf book/_build .cache
