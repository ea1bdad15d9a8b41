#!/usr/bin/env bash
# Prepares the folder of libraries the GPU host lacks, for device runs:
# ../shared/gpu-host/prepare.sh (ZeroMQ, OpenCV, GoogleTest, spdlog, ...) plus
# what this project adds on top: libarchive, for WebDataset tar shards (the
# host has its dependencies: libxml2, nettle, lz4, zstd, acl, bz2, lzma); and
# the decoders of the formats other than JPEG (Note [Image formats],
# image/include/batchcast/image/image_format.h): libpng, libwebp, libtiff with
# what libtiff needs beyond those (jbig, lerc, deflate, libjpeg 6.2), and zlib
# (png.h includes its header; FindPNG links it); about 3 MB. Not OpenCV's
# imgcodecs: Debian's pulls in GDAL and about 130 libraries (185 MB), far more
# than the carried tree may hold. And civetweb, the metrics endpoint's HTTP
# server, which needs only libc.
#
# Usage (from the project root, on a machine that reaches Debian's archive):
#   scripts/prepare_gpu_deps.sh [DEST]        # DEST defaults to .gpu-deps
# then carry DEST to the device and `source DEST/env.sh` there.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-.gpu-deps}
"$ROOT/../shared/gpu-host/prepare.sh" "$DEST"
EXTRA=(libarchive13 libarchive-dev
       libpng16-16 libpng-dev zlib1g zlib1g-dev libwebp7 libwebpdemux2 libwebpmux3 libwebp-dev
       libtiff6 libtiff-dev libjbig0 liblerc4 libdeflate0 libjpeg62-turbo
       libcivetweb1 libcivetweb-dev)
DEBS=${GPU_HOST_EXTRA_DEBS:-/tmp/gpu-host-extra-debs}
mkdir -p "$DEBS"
if [ "$(ls "$DEBS"/*.deb 2>/dev/null | wc -l)" -lt "${#EXTRA[@]}" ]; then
  (cd "$DEBS" && apt-get download "${EXTRA[@]}" >/dev/null 2>&1) ||
    { echo "could not download: ${EXTRA[*]}" >&2; exit 1; }
fi
for f in "$DEBS"/*.deb; do dpkg -x "$f" "$DEST/root"; done
rm -rf "$DEST/root/usr/share/doc" "$DEST/root/usr/share/man"
rm -f "$DEST/root/usr/lib/x86_64-linux-gnu/libarchive.a" \
  "$DEST"/root/usr/lib/x86_64-linux-gnu/lib{png16,png,webp,webpdemux,webpmux,tiff,tiffxx,z}.a
du -sh "$DEST/root" | awk '{print "with extras: " $1}'
