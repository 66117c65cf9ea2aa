# gpufleet.llm_server — the two commands a newcomer needs:
#   make deploy   set up the controller virtualenv (first use) and run site.yml on llm-server
#   make test     install/start everything the tests need and run every test
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
LIMIT ?= llm-server
ARGS ?=
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: deploy test venv venv-test lint sanity unit molecule build clean help

help:
	@echo "make deploy [LIMIT=host|group] [ARGS='--tags sm120-patch --check --diff']"
	@echo "make test   (lint, sanity, unit, molecule; installs Docker/images/venv as needed)"

venv:
	@scripts/bootstrap-venv.sh $(PYTHON) $(VENV) requirements.txt

venv-test:
	@scripts/bootstrap-venv.sh $(PYTHON) $(VENV) requirements-test.txt

deploy: venv
	ansible-playbook site.yml -l $(LIMIT) $(ARGS)

test:
	@scripts/test.sh

lint: venv-test
	ansible-lint --profile production

sanity: venv-test
	scripts/ansible-test-sanity.sh

unit: venv-test
	pytest tests/unit tests/integration

molecule: venv-test
	scripts/ensure-docker.sh && scripts/build-base-image.sh && scripts/build-base-image.sh trixie gpufleet/debian13-systemd:latest && molecule test --all

build: venv
	ansible-galaxy collection build --force --output-path build/

clean:
	rm -rf $(VENV) .collections build tests/output
