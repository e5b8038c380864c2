#!/bin/sh
# Installs a built mnemo into a prefix and builds two out-of-tree C programs
# against it, one with find_package(mnemo CONFIG) and one with
# `pkg-config --cflags --libs mnemo`, then runs both.
#
# Usage: tests/consumers/run.sh BUILD_DIR WORK_DIR C_COMPILER
set -eu
build=$1
work=$2
cc=$3
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix

rm -rf "$work"
mkdir -p "$work"
echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/mnemo.h lib/cmake/mnemo/mnemoConfig.cmake lib/cmake/mnemo/mnemoConfigVersion.cmake \
         lib/pkgconfig/mnemo.pc; do
  if [ ! -f "$prefix/$f" ]; then
    echo "missing from the install: $f" >&2
    exit 1
  fi
done

echo "== find_package(mnemo CONFIG)"
cmake -S "$here/find_package" -B "$work/find_package" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/find_package.log"
cmake --build "$work/find_package" >>"$work/find_package.log" || { cat "$work/find_package.log"; exit 1; }
# The build tree's rpath names the prefix's lib folder: no search path needed.
"$work/find_package/consumer"

echo "== pkg-config --cflags --libs mnemo"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs mnemo)
echo "   $flags"
# shellcheck disable=SC2086 # the flags are words
"$cc" -Wall -Wextra -Werror -o "$work/pkgconfig_consumer" "$here/consumer.c" $flags -lm
# pkg-config gives no run-time path; the loader is told where the prefix is.
LD_LIBRARY_PATH="$prefix/lib" "$work/pkgconfig_consumer"
