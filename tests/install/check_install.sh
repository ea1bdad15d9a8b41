#!/usr/bin/env bash
# The installed package as a user sees it (ctest: install_package):
#  1. find_package(batchcast COMPONENTS client), with OpenCV made unfindable,
#     loads neither OpenCV nor libjpeg-turbo; examples/consumer.cc builds
#     (consumer_project/CMakeLists.txt);
#  2. COMPONENTS server defines batchcast::server; an unknown component
#     fails with a message naming it;
#  3. `pkg-config --cflags --libs batchcast-client` lists the libraries the
#     static archives need and compiles and links examples/consumer.cc;
#  4. both consumers read an epoch from the installed batchcast-server.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR WITH_CUDA(ON|OFF) (a built tree).
set -euo pipefail
BUILD=$1
SRC=$2
WITH_CUDA=${3:-OFF}
T=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "check_install: $*" >&2; exit 1; }
P=$T/prefix
cmake --install "$BUILD" --prefix "$P" >"$T/install.log" || { cat "$T/install.log"; fail "install failed"; }

# 1. client alone (OpenCV unfindable: the package must not ask for it).
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S "$SRC/tests/install/consumer_project" -B "$T/client" "${GEN[@]}" \
  -DCMAKE_PREFIX_PATH="$P" -DBATCHCAST_EXAMPLES="$SRC/examples" \
  -DCMAKE_DISABLE_FIND_PACKAGE_OpenCV=ON >"$T/client.log" 2>&1 \
  || { cat "$T/client.log"; fail "find_package(batchcast COMPONENTS client) failed"; }
cmake --build "$T/client" >"$T/client-build.log" 2>&1 \
  || { cat "$T/client-build.log"; fail "consumer.cc did not build against batchcast::client"; }
echo "ok: find_package(batchcast COMPONENTS client) without OpenCV/libjpeg-turbo; consumer built"

# 2. server component; an unknown one.
cmake -S "$SRC/tests/install/consumer_project" -B "$T/server" "${GEN[@]}" \
  -DCMAKE_PREFIX_PATH="$P" -DBATCHCAST_COMPONENTS=server >"$T/server.log" 2>&1 \
  || { cat "$T/server.log"; fail "find_package(batchcast COMPONENTS server) failed"; }
if cmake -S "$SRC/tests/install/consumer_project" -B "$T/bogus" "${GEN[@]}" \
    -DCMAKE_PREFIX_PATH="$P" -DBATCHCAST_COMPONENTS=bogus >"$T/bogus.log" 2>&1; then
  fail "COMPONENTS bogus was accepted"
fi
grep -q "unknown component 'bogus'" "$T/bogus.log" || { cat "$T/bogus.log"; fail "no message for an unknown component"; }
echo "ok: COMPONENTS server; COMPONENTS bogus refused"

# 3. pkg-config.
PC=$(find "$P" -name batchcast-client.pc)
[ -n "$PC" ] || fail "no batchcast-client.pc installed"
OWN_LIBS=$(grep '^Libs:' "$PC")
[ "$WITH_CUDA" != ON ] || [[ "$OWN_LIBS" == *" -lcudart_static "* ]] \
  || fail "CUDA build, but no -lcudart_static in $PC: $OWN_LIBS"
if [ -n "${PKG_CONFIG_SYSROOT_DIR:-}" ]; then
  # The GPU host's .gpu-deps/env.sh unpacks packages under a sysroot that
  # pkg-config prepends to every path, this install's too: no build there.
  echo "skipped: a pkg-config build under PKG_CONFIG_SYSROOT_DIR ($OWN_LIBS)"
else
  export PKG_CONFIG_PATH=$(dirname "$PC")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  LIBS=$(pkg-config --libs batchcast-client)
  for lib in -lbatchcast_client -lbatchcast_core -lzmq -lspdlog -lfmt -lrt -pthread; do
    [[ " $LIBS " == *" $lib "* ]] || fail "pkg-config --libs batchcast-client lacks $lib: $LIBS"
  done
  ${CXX:-c++} -std=c++20 "$SRC/examples/consumer.cc" -o "$T/consumer-pc" \
    $(pkg-config --cflags --libs batchcast-client) 2>"$T/pc.log" \
    || { cat "$T/pc.log"; fail "consumer.cc did not build with pkg-config batchcast-client"; }
  echo "ok: pkg-config batchcast-client: $LIBS"
fi

# 4. both read an epoch of the installed server.
NAME=bc-install-check-$$
"$P/bin/batchcast-server" --log-level warn serve --synthetic 640 --size 8 --batch-size 32 \
  --name "$NAME" --status-interval 0 >"$T/server-run.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do
  "$P/bin/batchcast-server" stat "$NAME" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$T/server-run.log"; fail "the installed server exited"; }
  sleep 0.1
done
for c in "$T/client/consumer" "$T/consumer-pc"; do
  [ -x "$c" ] || continue
  out=$(timeout 60 "$c" "$NAME" --batch-size 32 --epochs 1) || fail "$c failed: $out"
  [[ "$out" == *"epoch 0: 20 batches, 640 samples"* ]] || fail "$c: unexpected output: $out"
done
echo "ok: both consumers read an epoch of the installed batchcast-server"
