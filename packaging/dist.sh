#!/usr/bin/env bash
# `make dist`: one tarball that installs meshp on a machine with Node.js (>= 20.19) and nothing else:
#   meshp-VERSION-linux-ARCH/bin/meshp    the launcher (the systemd units run /usr/local/bin/meshp: link it there)
#   meshp-VERSION-linux-ARCH/lib/         the built packages and their production node_modules
#   meshp-VERSION-linux-ARCH/systemd/     the units of examples/systemd, as shipped
# Built from the checkout's packages as `npm pack` makes them (what an npm install would get), so no
# test, source or dev dependency goes in. Usage: packaging/dist.sh [OUT_DIR] (default dist/).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$here/dist}" && cd "${1:-$here/dist}" && pwd)
version=$(node -p "require('$here/bin/package.json').version")
arch=$(node -p process.arch)
name="meshp-$version-linux-$arch"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

test -f "$here/bin/dist/main.js" || { echo "build first: make build" >&2; exit 1; }
workspaces=(core bin $(cd "$here" && ls -d lib/* plugins/*))
mkdir "$work/tarballs"
(cd "$here" && npm pack --silent "${workspaces[@]/#/-w=}" --pack-destination "$work/tarballs" >/dev/null)
# testkit is for plugin authors, not for a machine: left out.
rm -f "$work"/tarballs/meshp-testkit-*.tgz

lib="$work/$name/lib"
mkdir -p "$lib"
echo '{ "name": "meshp-dist", "private": true, "type": "module" }' > "$lib/package.json"
# --ignore-scripts: the one native addon (better-sqlite3) is not compiled here; its build from this
# checkout (this Node's ABI, this architecture) is copied in below.
(cd "$lib" && npm install --omit=dev --prefer-offline --ignore-scripts --no-audit --no-fund --no-package-lock "$work"/tarballs/*.tgz >/dev/null)
mkdir -p "$lib/node_modules/better-sqlite3/build/Release"
cp "$here/node_modules/better-sqlite3/build/Release/better_sqlite3.node" "$lib/node_modules/better-sqlite3/build/Release/"

mkdir -p "$work/$name/bin" "$work/$name/systemd"
install -m 0755 "$here/packaging/meshp" "$work/$name/bin/meshp"
cp "$here"/examples/systemd/*.service "$here/examples/systemd/agent.env.example" "$here/examples/systemd/README.md" "$work/$name/systemd/"
cp "$here/LICENSE" "$work/$name/"

tar -C "$work" --owner=0 --group=0 -czf "$out/$name.tar.gz" "$name"
echo "$out/$name.tar.gz"
