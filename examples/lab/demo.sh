#!/usr/bin/env bash
# The README's main job. Until the full lab of seed 003 lands, it walks `meshp host apply` through
# adopting a machine in use on a temporary root: a found file held, a new one created, a change by
# the predecessor reported and not reverted, the module taken, then unassigned.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
meshp() { node "$here/bin/dist/main.js" "$@"; }
lab=$(mktemp -d /tmp/meshp-demo.XXXXXX)
trap 'rm -rf "$lab"' EXIT
root=$lab/root state=$lab/state decl=$here/examples/host-apply
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "a machine in use: the predecessor wrote /etc/web/web.conf"
mkdir -p "$root/etc/web"
printf 'listen 8080\nwritten-by predecessor\n' > "$root/etc/web/web.conf"
cat "$root/etc/web/web.conf"

step "preview: what adopting would change (nothing is touched)"
meshp host apply --state "$state" --root "$root" --declaration "$decl/declaration.json" --preview

step "adopt: the found file is held, the missing one created"
meshp host apply --state "$state" --root "$root" --declaration "$decl/declaration.json" --yes

step "the predecessor is still writing: the change is reported, not reverted"
printf 'listen 8080\nwritten-by predecessor, again\n' > "$root/etc/web/web.conf"
meshp host apply --state "$state" --root "$root" --declaration "$decl/declaration.json" --yes
cat "$root/etc/web/web.conf"

step "take the module: its file converges (the original stays recorded)"
meshp host apply --state "$state" --root "$root" --declaration "$decl/declaration-taken.json" --yes
cat "$root/etc/web/web.conf"

step "status, for scripts"
meshp host status --state "$state" --json
