#!/bin/sh
# The end-to-end tests leave no host ring behind: `start STAMP` (before
# them) records the time; `check STAMP` (after them) fails for every ring of
# this user in /dev/shm made since then that no live server holds (a live
# server keeps a shared flock on its ring, core/src/host_shm.h).
set -eu
mode=$1 stamp=$2
case $mode in
  start) : > "$stamp" ;;
  check)
    left=0
    for ring in /dev/shm/batchcast-"$(id -u)"-*.ring; do
      [ -e "$ring" ] && [ "$ring" -nt "$stamp" ] || continue
      if flock -n -x "$ring" true; then
        echo "left behind: $ring" >&2
        left=1
      fi
    done
    exit $left ;;
  *) echo "usage: $0 start|check STAMP" >&2; exit 2 ;;
esac
