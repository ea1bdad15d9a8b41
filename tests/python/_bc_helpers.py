"""Shared helpers of the batchcast Python tests (test_loader.py, test_producer.py).

Finds the build: $BATCHCAST_BUILD_DIR (absolute, or relative to the current
directory or to the repository root), else build-py/ or build/ in the
repository. The extension is imported from <build>/python and the server binary
is <build>/tools/batchcast-server. When they are missing the test modules skip
with the reason (require_batchcast / require_server).

Child processes (multiprocessing, spawn) run consumer_main(); spawn copies this
process's sys.path, so they import the same build.
"""
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_dir():
    env = os.environ.get("BATCHCAST_BUILD_DIR")
    candidates = []
    if env:
        candidates = ([env] if os.path.isabs(env)
                      else [os.path.abspath(env), os.path.join(REPO, env)])
    else:
        candidates = [os.path.join(REPO, "build-py"), os.path.join(REPO, "build")]
    for c in candidates:
        if os.path.isdir(os.path.join(c, "python", "batchcast")):
            return c
    return candidates[0] if candidates else None


BUILD = build_dir()
PYDIR = os.path.join(BUILD, "python") if BUILD else None
SERVER_BIN = os.path.join(BUILD, "tools", "batchcast-server") if BUILD else None


def require_batchcast():
    """Imports batchcast from the build tree, or skips the calling test module."""
    if PYDIR and os.path.isdir(PYDIR) and PYDIR not in sys.path:
        sys.path.insert(0, PYDIR)
    try:
        import batchcast
    except ImportError as e:
        pytest.skip(
            f"batchcast extension not built ({e}); build it with `cmake -S . -B build-py -G Ninja "
            f"&& ninja -C build-py` and set BATCHCAST_BUILD_DIR=build-py (looked in {PYDIR})",
            allow_module_level=True,
        )
    try:
        import torch  # noqa: F401
    except ImportError as e:
        pytest.skip(f"torch is not installed: {e}", allow_module_level=True)
    batchcast.set_log_level("warn")
    return batchcast


def require_server():
    if not (SERVER_BIN and os.access(SERVER_BIN, os.X_OK)):
        pytest.skip(f"server binary not built: {SERVER_BIN}", allow_module_level=True)
    return SERVER_BIN


_counter = itertools.count()


def python_env(drop=()):
    """os.environ for a child Python that imports batchcast from the build
    tree (PYDIR first on PYTHONPATH), without the variables in `drop`."""
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PYDIR, env.get("PYTHONPATH")) if p)
    return env


def folder_listing(root):
    """(path, label) of every file of an ImageFolder tree in the server's index order:
    class folders sorted (label = position), then their files sorted."""
    files = []
    for label, cls in enumerate(sorted(os.listdir(root))):
        for name in sorted(os.listdir(os.path.join(root, cls))):
            files.append((os.path.join(root, cls, name), label))
    return files


def unique_name(tag="t"):
    """A server name nobody else uses (tests may run concurrently on one machine)."""
    return f"pyt-{tag}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def server_process(name, *args, timeout=10.0, log_level="warn"):
    """Runs `batchcast-server serve --name NAME ARGS...` until the block ends;
    afterwards proc.output holds what it printed."""
    import batchcast

    cmd = [SERVER_BIN, "--log-level", log_level, "serve", "--name", name, "--status-interval", "0",
           *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd} exited with {proc.returncode}: {proc.stdout.read()}")
            try:
                batchcast.query_stats(name, timeout=0.5)
                break
            except (batchcast.NotFound, batchcast.ServerUnavailable, batchcast.Timeout):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout:
            proc.output = proc.stdout.read()
            proc.stdout.close()


@contextlib.contextmanager
def running(procs):
    """Starts the child processes `procs` ({tag: multiprocessing.Process}) for the
    block; at its end joins each one, killing those still alive after 5 s."""
    for p in procs.values():
        p.start()
    try:
        yield procs
    finally:
        for p in procs.values():
            p.join(5)
            if p.is_alive():
                p.kill()


def endless(loader):
    """Batches across epoch ends."""
    while True:
        yield from loader


def expected_images(indices, size):
    """The synthetic source's images: byte p of sample i is (i*2654435761 + p) mod 251."""
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    p = np.arange(3 * size * size, dtype=np.int64)
    base = (idx * 2654435761) % 251
    return ((base[:, None] + (p % 251)[None, :]) % 251).astype(np.uint8).reshape(-1, 3, size, size)


def check_synthetic_batch(images, labels, indices, size):
    """Asserts that a batch's bytes follow the synthetic formula; returns nothing."""
    idx = np.asarray(indices, dtype=np.int64)
    images, labels = images.cpu(), labels.cpu()  # CUDA rings: compare on the host
    assert tuple(images.shape) == (len(idx), 3, size, size), images.shape
    np.testing.assert_array_equal(images.numpy(), expected_images(idx, size))
    np.testing.assert_array_equal(labels.numpy(), idx % 1000)


def mapping_of(address):
    """The /proc/self/maps line whose range holds `address`, or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= address < hi:
                return lo, hi, (parts[5] if len(parts) > 5 else "")
    return None


def consumer_main(tag, endpoint, batch_size, drop_last, join, size, epochs, queue, hold_after=None,
                  device=None):
    """A Loader in a child process; every message it sends starts with `tag`.
    Sends ("ready", pid) once connected, then per epoch ("epoch", loader.epoch,
    len(loader), batches, [indices...]) (every batch's bytes checked against the
    synthetic formula), and finally ("end", message) after the EndOfStream of the
    following loop, or ("error", text) on anything else. With hold_after=N it
    keeps the tensors of its first N batches, sends ("holding", N) and sleeps
    (to be killed). With device="cuda"/"cpu" every tensor must be on that kind
    of device."""
    def send(*msg):
        queue.put((tag,) + msg)

    try:
        import batchcast

        batchcast.set_log_level("warn")
        loader = batchcast.Loader(endpoint, batch_size=batch_size, drop_last=drop_last, join=join,
                                  timeout=30)
        send("ready", os.getpid())
        if hold_after is not None:
            held = []
            for images, labels in loader:
                held.append((images, labels))
                if len(held) == hold_after:
                    send("holding", hold_after)
                    time.sleep(600)
        for _ in range(epochs):
            seen = []
            batches = 0
            for images, labels in loader:
                if device is not None:
                    assert images.device.type == device and labels.device.type == device, (
                        images.device, labels.device)
                idx = loader.indices.numpy().copy()
                check_synthetic_batch(images, labels, idx, size)
                seen.append(idx)
                batches += 1
            flat = np.concatenate(seen).tolist() if seen else []
            send("epoch", loader.epoch, len(loader), batches, flat)
        try:
            for _ in loader:
                pass
            send("error", "a loop after the last epoch did not raise EndOfStream")
        except batchcast.EndOfStream as e:
            send("end", str(e))
    except BaseException as e:  # reported to the parent
        import traceback

        send("error", f"{e!r}\n{traceback.format_exc()}")


def collect(queue, procs, done_kinds=("end", "error"), timeout=45.0, until=None):
    """Messages from children, by tag, until every tag in `procs` sent a message of
    `done_kinds` (or `until(messages)` is true). Fails on timeout or on a child
    that died without a final message."""
    import queue as queue_mod

    messages = {tag: [] for tag in procs}
    deadline = time.monotonic() + timeout

    def finished(tag):
        return any(m[0] in done_kinds for m in messages[tag])

    while not (until(messages) if until else all(finished(t) for t in procs)):
        try:
            msg = queue.get(timeout=0.2)
            messages[msg[0]].append(msg[1:])
            continue
        except queue_mod.Empty:
            pass
        for tag, proc in procs.items():
            if not proc.is_alive() and not finished(tag) and queue.empty():
                if until is None:
                    raise AssertionError(
                        f"consumer {tag} exited with {proc.exitcode} without reporting: "
                        f"{messages[tag]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"consumers did not finish in {timeout} s: "
                                 f"{ {t: [m[0] for m in ms] for t, ms in messages.items()} }")
    return messages
