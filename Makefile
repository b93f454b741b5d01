# The two commands of README.md: `make run` and `make test`. Everything else is set up on the way.
VENV := .venv
PYTHON := $(VENV)/bin/python

.PHONY: run test setup up down clean

run: setup
	$(PYTHON) scripts/run-iteration iterations/iteration-0 --test breakpoint --duration 60s

test: setup
	scripts/check-infra
	$(PYTHON) -m pytest

setup: $(VENV)/.installed
	scripts/setup-system

$(VENV)/.installed: requirements-dev.txt functions/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

# The local stack alone, left running: open $(BASE_URL)/app?view=home in a browser.
up: setup
	$(PYTHON) scripts/local up

down:
	$(PYTHON) scripts/local down

clean: down
	rm -rf $(VENV) build .local
