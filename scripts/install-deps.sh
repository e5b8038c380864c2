#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, when run as root and
# only those missing. As another user it lists what is missing and stops.
# With the argument "bench", also what the CPU benchmark needs (its peers and
# the plot). ccache is optional: installed as root, only named otherwise (the
# build uses it where present, so CI's several build folders share objects).
set -euo pipefail
pkgs=(cmake g++ make pkg-config libgtest-dev libxxhash-dev libomp-dev
      python3 python3-dev python3-pip python3-numpy python3-pytest bindgen clang-14 libclang-rt-14-dev binutils
      libhwy-dev libopenblas-dev libroaring-dev nlohmann-json3-dev)
optional=(ccache)
if [ "${1:-}" = bench ]; then
  pkgs+=(libfaiss-dev python3-matplotlib)
fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=() missing_optional=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${optional[@]}"; do installed "$p" || missing_optional+=("$p"); done
if [ "$(id -u)" -ne 0 ]; then
  [ ${#missing_optional[@]} -gt 0 ] && echo "optional, not installed: ${missing_optional[*]}" >&2
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "missing Debian packages: ${missing[*]} (run: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
missing+=("${missing_optional[@]}")
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
