#!/usr/bin/env bash
# Pins Debian packages for a plugin image that needs a runtime Go cannot
# build (cdk8s: Node.js). Reads the package names of LIST (one per line, #
# comments) and writes, for amd64 and arm64, the newest version each of
# bookworm, bookworm-updates and bookworm-security holds, with its SHA-256 and
# address, as LOCK's lines: ARCH PACKAGE VERSION SHA256 URL.
#
# The list is the dependency closure written out by hand (apt-cache depends
# --recurse tells it), less what only maintainer scripts need, since the image
# builder unpacks packages and runs none of their scripts. Run it again to take
# Debian's security updates; the images and bin/ are rebuilt from the new lock.
#
# Usage: hack/debian-lock.sh deploy/plugins/cdk8s/debian.list deploy/plugins/cdk8s/debian.lock
set -euo pipefail
list=$1 lock=$2
mirror=http://deb.debian.org
suites="debian/dists/bookworm debian/dists/bookworm-updates debian-security/dists/bookworm-security"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mapfile -t pkgs < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")
{
  echo "# Written by hack/debian-lock.sh from $list on $(date -u +%Y-%m-%d); do not edit."
  echo "# ARCH PACKAGE VERSION SHA256 URL"
  for arch in amd64 arm64; do
    for s in $suites; do
      curl -fsS "$mirror/$s/main/binary-$arch/Packages.xz" | xz -dc >"$tmp/$(echo "$s" | cut -d/ -f1).$(basename "$s").$arch"
    done
    for p in "${pkgs[@]}"; do
      best="" bestv=""
      for f in "$tmp"/*."$arch"; do
        base=$mirror/$(basename "$f" | cut -d. -f1)
        # The package's stanza: Version, Filename and SHA256.
        line=$(awk -v p="$p" -v base="$base" '
          /^Package: / { inp = ($2 == p) }
          inp && /^Version: / { v = $2 }
          inp && /^Filename: / { fn = $2 }
          inp && /^SHA256: / { sum = $2 }
          /^$/ { if (inp && v != "") print v, sum, base "/" fn; inp = 0; v = "" }
        ' "$f" | head -n1)
        [ -n "$line" ] || continue
        v=${line%% *}
        if [ -z "$bestv" ] || dpkg --compare-versions "$v" gt "$bestv"; then best=$line bestv=$v; fi
      done
      [ -n "$best" ] || { echo "debian-lock: $p not found for $arch" >&2; exit 1; }
      echo "$arch $p $best"
    done
  done
} >"$lock.tmp"
mv "$lock.tmp" "$lock"
