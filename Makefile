# One Makefile: demo, test, lint, bench, soak. Every target creates .venv/ if it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench soak venv clean preflight-wheels web-tools bench-tools image-rootfs image

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,oracle]'
	# Bytecode for the editable package: with PYTHONDONTWRITEBYTECODE set (as here) nothing else
	# writes it, and `tracker estimate CONFIG` then recompiles every module it imports per run.
	$(BIN)/python -m compileall -q tracker
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tracker demo

# Two test workers (pytest-xdist; TEST_WORKERS=0 runs in one process): many tests wait on the
# processes they start, so a second worker uses the idle core. worksteal evens out the tail.
TEST_WORKERS ?= 2
test: $(STAMP) web-tools
	bash .ci/pg-ensure
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal -m "not soak"

# The tests' system tools: Debian's chromium and chromium-driver (never a downloaded browser), Java
# for the Nu Html Checker, Debian's prometheus for promtool (tests/test_alert_rules.py), and
# tests/web's npm packages (axe-core, vnu-jar, @huggingface/gguf) as package-lock.json pins them
# (install scripts off: vnu-jar's would download a Java runtime).
web-tools:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v java >/dev/null \
	  && command -v promtool >/dev/null || { \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    chromium chromium-driver default-jre-headless prometheus; }
	@test tests/web/node_modules/.package-lock.json -nt tests/web/package-lock.json || \
	  npm ci --prefix tests/web --no-audit --no-fund --ignore-scripts

lint: $(STAMP)
	$(BIN)/ruff check tracker tests bench
	$(BIN)/ruff format --check tracker tests bench
	$(BIN)/mypy

bench: $(STAMP) bench-tools
	$(BIN)/python -m bench.run

# The wrk section's tools: Debian's wrk and nginx-light (nginx serves the same bytes beside tracker).
bench-tools:
	@command -v wrk >/dev/null && test -x /usr/sbin/nginx || { \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk nginx-light; }

# transformers wheels (pip download, no install) and their preflight symbol tables, for the versions
# the watchlist's preflight blocks name, into state/cache/preflight (make test fetches its own).
preflight-wheels: $(STAMP)
	$(BIN)/python -m tracker.preflight.wheels $(or $(VERSIONS),--watchlist watchlist.yaml)

# Long fault trials (store kills and concurrent pollers, SQLite and PostgreSQL; transport faults that
# look like content over the whole demo); results in bench/RESULTS.md.
soak: $(STAMP) web-tools
	bash .ci/pg-ensure
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal -m soak
	$(BIN)/python -m bench.run soak contentfaults

# The OCI image's build steps (the Dockerfile RUNs this target): tracker and its dependencies in
# a venv at IMAGE_PREFIX (the path it runs from: a venv's scripts name it), byte-compiled, with the
# default watchlist beside it, and `tracker --help` run from it. IMAGE_PIP_ARGS adds pip options;
# IMAGE_DEPS_FROM, when set, is a site-packages whose packages the venv sees (a .pth) instead of
# installing them (tests/ops/test_image.py, which has no container engine: then `--no-deps`).
IMAGE_PREFIX ?= /opt/tracker
IMAGE_PIP_ARGS ?=
IMAGE_DEPS_FROM ?=
image-rootfs:
	rm -rf $(IMAGE_PREFIX)/.venv
	$(PY) -m venv $(IMAGE_PREFIX)/.venv
	$(if $(IMAGE_DEPS_FROM),echo '$(IMAGE_DEPS_FROM)' > $$(ls -d $(IMAGE_PREFIX)/.venv/lib/python3*/site-packages)/_image_deps.pth)
	$(IMAGE_PREFIX)/.venv/bin/python -m pip install -q --no-cache-dir $(IMAGE_PIP_ARGS) .
	$(IMAGE_PREFIX)/.venv/bin/python -m compileall -q $$(ls -d $(IMAGE_PREFIX)/.venv/lib/python3*/site-packages/tracker)
	install -m 0644 watchlist.yaml $(IMAGE_PREFIX)/watchlist.yaml
	$(IMAGE_PREFIX)/.venv/bin/tracker --help >/dev/null

# The image itself, where a container engine exists (docker or podman).
image:
	$$(command -v docker || command -v podman) build -t tracker:latest .

clean:
	rm -rf $(VENV)
