#!/usr/bin/env bash
# Installs the Debian packages batchcast needs to build, test and run its demo
# (clang: the thread-safety check of scripts/check_thread_safety.sh; gcc's
# AddressSanitizer, UBSan, LeakSanitizer and ThreadSanitizer runtimes:
# scripts/check_sanitizers.sh; clang-format 14: scripts/check_format.sh;
# flake8 and mypy: scripts/check_python.sh).
# Idempotent: does nothing when everything is already installed.
set -euo pipefail
PKGS=(build-essential clang cmake ninja-build pkg-config clang-format flake8 mypy
      libasan8 libubsan1 liblsan0 libtsan2
      libzmq3-dev cppzmq-dev libboost-dev libgtest-dev libgmock-dev googletest libbenchmark-dev
      libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libdlpack-dev
      libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libtiff-dev libwebp-dev libopencv-dev
      libarchive-dev libcivetweb-dev
      pybind11-dev python3-dev python3-numpy python3-pytest python3-torch python3-torchvision
      python3-pil python3-setuptools python3-pip python3-venv)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
