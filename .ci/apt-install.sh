#!/usr/bin/env bash
# Installs the named Debian packages that are missing, as root. Whenever one cannot be installed (not root,
# no apt-get, not offered by the archives, or apt-get fails) the script stops with one line naming the
# packages and exits 1: a machine without them would otherwise run the suite with their tests skipped.
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
  echo "error: Debian packages missing (only root with apt-get installs them): ${missing[*]}" >&2
  exit 1
fi
apt-get update -qq
available=()
unavailable=()
for pkg in "${missing[@]}"; do
  if offered "$pkg"; then available+=("$pkg"); else unavailable+=("$pkg"); fi
done
if [ ${#unavailable[@]} -gt 0 ]; then
  echo "error: Debian packages not offered by this system's archives: ${unavailable[*]}" >&2
  exit 1
fi
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
