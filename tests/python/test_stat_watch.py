"""`batchcast-server stat NAME --watch` against a real server (pytest, CPU).

A synthetic server and one C++ test consumer (tests/e2e/bc_test_consumer)
run; the watch must: print plain, stamped lines with the producer's and the
consumer's rates when stdout is a pipe; redraw a compact view in place on a
terminal (a pty); exit 0 on Ctrl-C; exit 1 with "went away" when the server
stops; exit 1 at once when there is no such server; refuse a bad interval.
The formatting itself is tested in tests/tools/stat_view_test.cc.
"""
import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest

import _bc_helpers as H

SERVER = H.require_server()
CONSUMER = os.path.join(H.BUILD, "tests", "bc_test_consumer")
if not os.access(CONSUMER, os.X_OK):
    pytest.skip(f"test consumer not built: {CONSUMER}", allow_module_level=True)


def wait_for_server(name, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while subprocess.run([SERVER, "stat", name], capture_output=True).returncode != 0:
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, f"server {name} did not start"
        time.sleep(0.05)


@pytest.fixture
def served():
    """(name, server process) with one consumer reading slowly, for the test."""
    name = H.unique_name("watch")
    server = subprocess.Popen(
        [SERVER, "--log-level", "warn", "serve", "--synthetic", "100000", "--size", "8",
         "--batch-size", "32", "--name", name, "--status-interval", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    consumer = None
    try:
        wait_for_server(name, server)
        consumer = subprocess.Popen(
            [CONSUMER, "--endpoint", name, "--batch-size", "16", "--epochs", "1000",
             "--sleep-ms", "2", "--no-verify"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield name, server
    finally:
        for p in (consumer, server):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in (consumer, server):
            if p is not None:
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def watch(name, *args, **popen):
    return subprocess.Popen([SERVER, "stat", name, "--watch", "--interval", "0.2", *args],
                            **popen)


def test_plain_lines_in_a_pipe_and_ctrl_c_exits_0(served):
    name, _ = served
    proc = watch(name, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "\x1b" not in out
    producer = [line for line in out.splitlines() if f" {name} producer " in line]
    consumer = [line for line in out.splitlines() if f" {name} consumer #" in line]
    assert len(producer) >= 3, out
    assert re.match(r"\d\d:\d\d:\d\d ", producer[0]), producer[0]
    assert " producer - samples/s " in producer[0]          # no rate from one reading
    assert re.search(r" producer [\d.]+k? samples/s epoch \d+ \(\d+%\) blocked \d+% ring free",
                     producer[-1]), producer[-1]
    assert re.search(r" consumer #\d+ \S+ batch 16 rate [\d.]+k? samples/s epoch \d+ step \d+ "
                     r"lag [\d.]+ slots leases \d+ skipped 0", consumer[-1]), consumer[-1]
    # docs/stats.md: the slot wait of the producer and the consumer's wait
    # (a synthetic source has no stages of its own).
    assert re.search(r" stages slot_wait \d+%", producer[-1]), producer[-1]
    assert re.search(r" wait \d+%", consumer[-1]), consumer[-1]


def test_terminal_view_redrawn_in_place(served):
    name, _ = served
    master, slave = pty.openpty()
    proc = watch(name, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            out += os.read(master, 65536)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) == 0, proc.stderr.read()
    os.close(master)
    text = out.decode()
    assert text.startswith(f"{name} (pid ")
    # Every later frame first moves the cursor back up over the previous one.
    ups = re.findall(r"\x1b\[(\d+)A\r", text)
    assert len(ups) >= 3, text
    frames = text.count("\x1b[J")
    assert frames == len(ups) + 1
    assert re.search(r"producer  [\d.]+k? samples/s  epoch", text), text
    assert re.search(r"\n\s+id\s+name\s+batch\s+rate/s\s+epoch:step\s+lag/slots\s+leases", text)


def test_server_going_away_ends_with_1(served):
    name, server = served
    proc = watch(name, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.6)
    server.send_signal(signal.SIGINT)
    server.wait(10)
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 1
    assert f"batchcast-server stat: server '{name}' went away: " in err, err


def test_no_such_server_and_bad_interval():
    r = subprocess.run([SERVER, "stat", "no-such-server-here", "--watch"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 1
    assert "no batchcast server named 'no-such-server-here'" in r.stderr, r.stderr
    r = subprocess.run([SERVER, "stat", "x", "--watch", "--interval", "0"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    assert "--interval" in r.stderr and "Traceback" not in r.stderr
