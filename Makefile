# The README's two commands: `make demo` (the main job) and `make test` (the whole suite).
# Both work on a fresh Debian 12 machine as root: they install what they need first.
SHELL := /bin/bash
APT_PKGS := nftables iptables ipset iproute2 docker.io busybox-static ufw openssl systemd python3 python3-grpcio python3-protobuf python3-cryptography protobuf-compiler protobuf-compiler-grpc postgresql-15 chromium chromium-driver dnsutils dnsmasq-base coturn iperf3 radvd
# wireguard-tools recommends a kernel image: these two are installed without recommends.
APT_NORECS := wireguard-go wireguard-tools
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: all deps apt npm build test demo bench proto-lint clean compat-agents lint format dist

all: build

apt:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi; \
	missing=""; for p in $(APT_NORECS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing (no recommends):$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

npm: node_modules/.installed

deps: apt npm

build: deps
	tsc -b
	chmod +x bin/dist/main.js examples/agent/dist/main.js
	@# npm links a workspace's bin only if its target exists, and on a clean clone dist/ is built after `npm ci`.
	ln -sfn ../@meshp/cli/dist/main.js node_modules/.bin/meshp

test: build compat-agents
	tsc --noEmit -p tsconfig.tap.json
	$(MAKE) lint
	@# Each file's timeout is kept in idle-machine time, stretched on a busy machine (test/helpers/budget.ts).
	tap --node-arg=--import=$(CURDIR)/test/helpers/file-budget.ts

# eslint (eslint.config.js): typed where the code is, so a switch over a union must handle every member.
# prettier (.prettierrc.json): the layout, checked (`make format` applies it).
# dependency-cruiser (.dependency-cruiser.cjs): no circle of imports, no plugin importing a sibling
# plugin, core importing no package and doing no I/O; it reads the built packages' types, so it builds first.
lint: build
	eslint --max-warnings 0 .
	prettier --check --log-level warn .
	depcruise $(GRAPH_SRC) --config .dependency-cruiser.cjs

GRAPH_SRC := core/src lib/*/src plugins/*/src bin/src examples/*/src

format: npm
	prettier --write --log-level warn .

demo: build
	bash examples/lab/demo.sh

# One tarball to install meshp on a machine with Node.js: dist/meshp-VERSION-linux-ARCH.tar.gz
# (bin/meshp, the built packages with their production node_modules, the systemd units). README: "Installing".
dist: build
	packaging/dist.sh $(CURDIR)/dist

bench: build
	@set -e; for b in bench/*.bench.mjs; do echo "== $$b"; node "$$b"; done

proto-lint: deps
	cd proto && buf lint && buf breaking --against released

clean:
	tsc -b --clean

# The agents of two earlier commits, built from git history for test/compat/agents-n2.test.ts.
compat-agents: npm
	test/compat/build-agent.sh 63980d1 $(CURDIR)/.compat/meshp-compat-63980d1
	test/compat/build-agent.sh f3ee622 $(CURDIR)/.compat/meshp-compat-f3ee622

