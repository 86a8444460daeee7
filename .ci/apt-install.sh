#!/usr/bin/env bash
# Installs the named Debian packages that are missing, when running as root; otherwise says what is missing.
# A package the archives offer but that fails to install stops the run with one line naming it.
# A package no archive offers is reported (the CI=true test run then fails on whatever needed it).
set -euo pipefail

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]; }
offered() {
  # The policy is read into a variable, not piped into grep: under pipefail an early-exiting grep makes
  # apt-cache die of SIGPIPE (status 141) and every package would look unavailable.
  local policy
  policy="$(apt-cache policy "$1" 2>/dev/null || true)"
  [[ "$policy" =~ Candidate:\ [^\(] ]]
}

missing=()
for pkg in "$@"; do
  installed "$pkg" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "Note: Debian packages not installed (need root): ${missing[*]}; install them with apt-get." >&2
  exit 0
fi
apt-get update -qq
available=()
for pkg in "${missing[@]}"; do
  if offered "$pkg"; then
    available+=("$pkg")
  else
    echo "Note: $pkg is not offered by this system's archives; the tests that need it will fail under CI." >&2
  fi
done
[ ${#available[@]} -eq 0 ] && exit 0
echo "Installing Debian packages: ${available[*]}"
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${available[@]}" \
  >/tmp/nnsql-apt.log 2>&1; then
  tail -n 20 /tmp/nnsql-apt.log >&2
  echo "error: apt-get could not install: ${available[*]} (log: /tmp/nnsql-apt.log)" >&2
  exit 1
fi
for pkg in "${available[@]}"; do
  installed "$pkg" || { echo "error: Debian package $pkg did not install" >&2; exit 1; }
done
