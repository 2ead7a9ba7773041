#!/usr/bin/env bash
# Builds the whole meshp of an earlier commit (its agent) from git history, into DIR, for the
# compat test: COMMIT's tree (git archive; the repository is not touched), today's node_modules linked in except the workspace
# packages (@meshp/*), which point at the old tree's own. Idempotent: an existing DIR/bin/dist is kept.
# Usage: test/compat/build-agent.sh COMMIT DIR
set -euo pipefail
commit=$1 dir=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -f "$dir/bin/dist/main.js" ]; then exit 0; fi
if ! git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null; then
  # A shallow clone has no history to build from: the compat test then skips, naming this command.
  echo "build-agent: commit $commit is not in this clone's history; the N-2 agent test will say it was not built" >&2
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
git -C "$root" archive "$commit" | tar -x -C "$dir"
mkdir -p "$dir/node_modules/@meshp"
for e in "$root"/node_modules/* "$root"/node_modules/.bin; do
  name=$(basename "$e")
  [ "$name" = "@meshp" ] && continue
  ln -s "$e" "$dir/node_modules/$name"
done
for e in "$root"/node_modules/@meshp/*; do
  name=$(basename "$e")
  target=$(readlink "$e")
  [ -d "$dir/node_modules/@meshp/$target" ] || [ -d "$dir/${target#../../}" ] || continue
  ln -s "$target" "$dir/node_modules/@meshp/$name"
done
(cd "$dir" && "$root/node_modules/.bin/tsc" -b)
