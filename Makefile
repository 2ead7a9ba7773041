# The README's two commands: `make demo` (the main job) and `make test` (the whole suite).
# Both work on a fresh Debian 12 machine as root: they install what they need first.
SHELL := /bin/bash
APT_PKGS := nftables iptables iproute2 docker.io busybox-static ufw openssl systemd
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: all deps apt npm build test demo bench proto-lint clean

all: build

apt:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

npm: node_modules/.installed

deps: apt npm

build: deps
	tsc -b
	chmod +x bin/dist/main.js examples/agent/dist/main.js

test: build
	tsc --noEmit -p tsconfig.tap.json
	tap

demo: build
	bash examples/lab/demo.sh

bench: build
	@set -e; for b in bench/*.bench.mjs; do echo "== $$b"; node "$$b"; done

proto-lint: deps
	cd proto && buf lint && buf breaking --against released

clean:
	tsc -b --clean
