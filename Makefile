# Two commands do everything on a fresh machine:
#   make book   set up, execute every chapter at the default `cpu` profile, build the book, write
#               the README's table of what it found from its claims
#   make test   set up, the artifact tier's checksums, then side by side the unit tests (every
#               chapter's compute at `smoke` included) followed by the book build and the built
#               site opened in headless Chromium (`make browser`), and the committed book executed
#               again on the tier under other CPU kernels (`make nbval`); then the wall-clock
#               bounds alone
# For maintainers: `make artifacts` retrains what the cache lacks (the tier is not used), executes
# the book and refills artifacts/ with the models it used. `make reproduce` retrains every model
# of the book (or of CHAPTERS="distillation scaling …") from scratch into runs/reproduce/cache, sets
# each beside the tier's (bit-identical or not, metrics, wall time) and compares the claims.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
export RAPTOR_CACHE ?= $(CURDIR)/.cache/raptor

.PHONY: setup book test test-checks unit-site unit timed smoke test-paper-shape verify nbval nbval-copy \
	nbval-first nbval-rest nbval-claims build browser artifacts reproduce clean

$(VENV)/.installed: pyproject.toml
	@if [ ! -d /usr/share/datasets/fashion-mnist ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist) || echo "note: could not install dataset-fashion-mnist"; fi
	@if [ ! -x /usr/bin/chromedriver ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver) || echo "note: could not install chromium (browser tests will skip)"; fi
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

book: setup
	$(PY) -m raptor run --profile $(PROFILE)
	$(PY) -m raptor findings

test: setup verify
	$(MAKE) --no-print-directory test-checks
	$(MAKE) --no-print-directory timed

# The unit tests, then the built site, beside the check of the stored book (its chapters in two
# streams, then its claims page); OpenMP threads sleep while they wait instead of spinning, which
# would take the core another needs.
test-checks: setup
	OMP_WAIT_POLICY=PASSIVE $(MAKE) --no-print-directory --output-sync=target -j3 \
		unit-site nbval-first nbval-rest UNIT_WORKERS=0
	$(MAKE) --no-print-directory nbval-claims

unit-site: setup
	$(MAKE) --no-print-directory unit build browser

# `make unit` alone runs the tests on every core (pytest-xdist's workers share the smoke models and
# results: tests/conftest.py); beside nbval's streams, in one process.
UNIT_WORKERS ?= auto
unit: setup
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -n $(UNIT_WORKERS) \
		-m "not browser and not timed and not reproduce" --ignore=tests/test_paper_shape.py

# The tests that bound wall-clock time (a bad input refused within a second, a dry run's plan
# within a minute), alone: beside nbval's last stream a dry run's plan took 105 s (EPYC-512,
# 2026-12-06).
timed: setup
	$(PY) -m pytest -q -m timed

smoke: setup
	$(PY) -m pytest -q tests/test_smoke_chapters.py

# The `paper` profile's teachers and students (ViT-B/14, 224 px), two steps of each stage on the CPU.
test-paper-shape: setup
	$(PY) -m pytest -q tests/test_paper_shape.py

verify: setup
	$(PY) -m raptor artifacts verify

# The stored book is what the code produces, on any machine: nbval executes a copy of it (in
# runs/nbval/, so the stored files stay as they are) with other CPU kernels than the ones it was
# executed with, oneDNN's (the linear layers') one instruction set below the machine's best: AVX2
# on an AVX-512 core, SSE4.1 on an AVX2 one (other logits at 1.2–1.3× the default kernels' time;
# scalar ATen with MKL's compatible mode took 2.6×: bench/bench_kernels.py), one thread a stream.
# It checks each chapter's claims cell against the stored notebook (decimals masked:
# tests/nbval_sanitize.cfg), then `raptor compare` checks the claims it wrote against the stored
# ones: verdicts exactly, every number within one unit of its last printed digit
# (raptor/book/compare.py). Functional phases takes half of the book: it in one stream, the other
# chapters in another (575 s against 495 s of the book's run), then the claims page (it reads
# every chapter's claims).
# Functional phases' compute cell, with its positive control, ran past nbval's default 2,000 s a
# cell on one thread beside the unit tests under the slower kernels (EPYC-512, 2026-12-06): a cell
# may take 4,500 s.
NBVAL_ISA := $(shell grep -qw avx512f /proc/cpuinfo && echo AVX2 || echo SSE41)
NBVAL := ONEDNN_MAX_CPU_ISA=$(NBVAL_ISA) OMP_NUM_THREADS=1 $(PY) -m pytest -q -p no:cacheprovider \
	--nbval-lax --nbval-current-env --nbval-cell-timeout=4500 \
	--nbval-sanitize-with tests/nbval_sanitize.cfg
NBVAL_first := functional_phases
NBVAL_rest := $(filter-out $(NBVAL_first),$(basename $(notdir $(wildcard book/chapters/*.ipynb))))

nbval: setup
	OMP_WAIT_POLICY=PASSIVE $(MAKE) --no-print-directory --output-sync=target -j2 nbval-first \
		nbval-rest
	$(MAKE) --no-print-directory nbval-claims

nbval-copy:
	rm -rf runs/nbval && mkdir -p runs/nbval/book/claims
	cp -r book/chapters book/claims.ipynb runs/nbval/book/

nbval-first nbval-rest: nbval-%: setup nbval-copy
	$(NBVAL) $(NBVAL_$*:%=runs/nbval/book/chapters/%.ipynb)

nbval-claims: setup
	$(NBVAL) runs/nbval/book/claims.ipynb
	$(PY) -m raptor compare book/claims runs/nbval/book/claims

build: setup
	$(PY) -m raptor build

# The built site in headless Chromium and read as HTML (after `build`; Chromium's tests skip where it
# is missing).
browser: setup
	$(PY) -m pytest -q -m browser tests/test_browser.py tests/test_site.py

artifacts: setup
	rm -f $(RAPTOR_CACHE)/used.log
	RAPTOR_ARTIFACTS= RAPTOR_CACHE_LOG=$(RAPTOR_CACHE)/used.log $(PY) -m raptor run --profile cpu
	$(PY) -m raptor artifacts export --log $(RAPTOR_CACHE)/used.log

reproduce: setup
	$(PY) -m pytest -q -m reproduce
	rm -rf runs/reproduce
	RAPTOR_ARTIFACTS= RAPTOR_CACHE=$(CURDIR)/runs/reproduce/cache $(PY) -m raptor run --profile cpu \
		--out runs/reproduce --no-build $(foreach c,$(CHAPTERS),--chapter $(c))
	$(PY) -m raptor artifacts compare --cache runs/reproduce/cache
	$(PY) -m raptor compare book/claims runs/reproduce/claims --retrained \
		$(foreach c,$(CHAPTERS),--chapter $(c))

clean:
	rm -rf book/_build .cache runs/smoke runs/paper
