# gpufleet.llm_server — the two commands a newcomer needs:
#   make deploy   set up the controller virtualenv (first use) and run site.yml on llm-server
#   make test     install/start everything the tests need and run every test
SHELL := /bin/bash
# Empty: scripts/bootstrap-venv.sh picks the distribution's python3 (3.11+), else python3.11/python3 on PATH.
PYTHON ?=
VENV ?= .venv
LIMIT ?= llm-server
ARGS ?=
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: deploy status test test-cold venv venv-test lint sanity unit molecule build clean help

help:
	@echo "make deploy [LIMIT=host|group] [ARGS='--tags sm120-patch --check --diff']"
	@echo "make status [LIMIT=host|group] [ARGS='-e llm_server_status_hashes=true']  (read-only; exit 2 on drift)"
	@echo "make test   (lint, sanity, unit, molecule; installs Docker/images/venv as needed)"
	@echo "make test-cold  (make test from a fresh clone, empty caches and no base images)"

venv:
	@scripts/bootstrap-venv.sh "$(PYTHON)" "$(VENV)" requirements.txt

venv-test:
	@scripts/bootstrap-venv.sh "$(PYTHON)" "$(VENV)" requirements-test.txt

deploy: venv
	ansible-playbook site.yml -l $(LIMIT) $(ARGS)

status: venv
	ansible-playbook playbooks/status.yml -l $(LIMIT) $(ARGS)

test:
	@scripts/test.sh

test-cold:
	@scripts/test-cold.sh

lint: venv-test
	scripts/lint.sh

sanity: venv-test
	scripts/ansible-test-sanity.sh

unit: venv-test
	python tests/support/llama_engine.py && pytest tests/unit tests/integration

molecule: venv-test
	scripts/ensure-docker.sh && scripts/build-base-image.sh && scripts/build-base-image.sh trixie gpufleet/debian13-systemd:latest && python scripts/molecule_scenarios.py --jobs $${MOLECULE_JOBS:-$$(($$(nproc) + 1))}

build: venv
	ansible-galaxy collection build --force --output-path build/

clean:
	rm -rf $(VENV) .collections build tests/output
