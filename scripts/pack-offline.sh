#!/usr/bin/env bash
# Builds slotproxy-<version>-offline.tgz: the npm package (what `npm pack` ships) with its runtime
# dependencies bundled inside it, for hosts that cannot reach the npm registry. Run it on a machine
# that can (or whose npm cache holds the locked versions); on the target:
#   npm install -g --offline ./slotproxy-<version>-offline.tgz
# Usage: bash scripts/pack-offline.sh [--prebuilt] [OUT_DIR]   (default: the repository root)
#   --prebuilt: pack dist/ as it is (built by `npm run build` already) instead of building it again.
# Prints the tarball's path on stdout; everything else goes to stderr.
set -euo pipefail

pack_flags=()
if [ "${1:-}" = --prebuilt ]; then
  pack_flags=(--ignore-scripts)
  shift
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
[ -f dist/cmd/slotproxy.js ] || [ ${#pack_flags[@]} -eq 0 ] || { echo "pack-offline: --prebuilt needs dist/: run npm run build" >&2; exit 1; }
out=$(mkdir -p "${1:-$root}" && cd "${1:-$root}" && pwd)
stage=$(mktemp -d "${TMPDIR:-/tmp}/slotproxy-offline-XXXXXX")
trap 'rm -rf "$stage"' EXIT

# 1. The package as `npm pack` makes it (its `prepare` builds dist/ first, unless --prebuilt).
packed=$(npm pack --silent ${pack_flags[@]+"${pack_flags[@]}"} --pack-destination "$stage" 2>/dev/null | tail -n 1)
tar -xzf "$stage/$packed" -C "$stage"
pkg=$stage/package

# 2. Its runtime dependencies at the locked versions, nothing for development: TypeScript is only
# an optional peer of valibot, hence --omit=optional/peer.
cp package-lock.json "$pkg/"
(cd "$pkg" && npm ci --omit=dev --omit=optional --omit=peer --ignore-scripts --no-audit --no-fund --prefer-offline >&2)

# 3. Packed again with every dependency bundled (bundleDependencies: true), so that installing it
# resolves nothing from a registry.
node -e '
const fs = require("fs");
const file = process.argv[1];
const p = JSON.parse(fs.readFileSync(file, "utf8"));
p.bundleDependencies = true;
delete p.scripts; // nothing to build or prepare on the target: dist/ is in the tarball
delete p.devDependencies;
fs.writeFileSync(file, JSON.stringify(p, null, 2) + "\n");
' "$pkg/package.json"
rm "$pkg/package-lock.json"
version=$(node -p 'require(process.argv[1]).version' "$pkg/package.json")
name=slotproxy-$version-offline.tgz
(cd "$pkg" && npm pack --silent --pack-destination "$stage" >/dev/null 2>&1)
mv "$stage/slotproxy-$version.tgz" "$out/$name"
echo "pack-offline: $(du -h "$out/$name" | cut -f1) with $(ls "$pkg/node_modules" | wc -l) top-level dependencies bundled" >&2
echo "$out/$name"
