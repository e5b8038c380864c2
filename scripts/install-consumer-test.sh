#!/usr/bin/env bash
# Installs a built tree into a scratch prefix (library, header, CMake package,
# pkg-config file), then builds examples/consumer/consumer.c out of tree twice,
# with find_package(mnemo CONFIG) and with `pkg-config --cflags --libs mnemo`,
# and runs both. Usage: scripts/install-consumer-test.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)/examples/consumer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --build "$build" --target mnemo -j"${JOBS:-2}" >/dev/null
for component in runtime development; do
  cmake --install "$build" --prefix "$prefix" --component "$component" >/dev/null
done
libdir=$(dirname "$(find "$prefix" -name mnemo.pc)")/..

echo "== find_package(mnemo CONFIG)"
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/cmake-build/consumer"

echo "== pkg-config --cflags --libs mnemo"
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$work/consumer-pc" "$src/consumer.c" \
  $(pkg-config --cflags --libs mnemo) -lm
LD_LIBRARY_PATH=$libdir "$work/consumer-pc"
echo "install consumers: both built and ran"
