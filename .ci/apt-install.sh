#!/usr/bin/env bash
# Installs the named Debian packages that are missing, when running as root; otherwise says what is missing.
# A package the configured archives do not offer is skipped with a note (the tests that need it skip).
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "Note: Debian packages not installed (need root): ${missing[*]}; tests that need them will be skipped." >&2
  exit 0
fi
apt-get update -qq
available=()
for pkg in "${missing[@]}"; do
  if apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [^(]'; then
    available+=("$pkg")
  else
    echo "Note: $pkg is not offered by this system's archives; skipping it." >&2
  fi
done
[ ${#available[@]} -eq 0 ] && exit 0
echo "Installing Debian packages: ${available[*]}"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${available[@]}" >/dev/null
