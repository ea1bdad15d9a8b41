"""Where the jobs' batches come from: the four sources, on both sides.

  synthetic   tensors made once on the device (data-unbound: the GPU's limit)
  dataloader  one torch DataLoader per job over the ImageFolder (the train
              transform of bench_files.torch_dataloader), the node's cores
              split among the jobs
  batchcast   one batchcast-server process over the same folder (Server), each
              job a batchcast.Loader
  hosted      the same server as a batchcast.Server inside job 0's process
              (HostedServer), every job, job 0 too, a batchcast.Loader

open_data() is the job's side; Server and HostedServer the parent's (its
stats and the CPU it used).
"""
import os
import time
from typing import Any, Callable, Dict, Iterator, Tuple

from bench_files import torch_dataloader
from bench_proc import CpuMeter, server_thread_cpu_seconds
from bench_server import ServerProcess, stat_text, wait_up

SOURCES = ("synthetic", "dataloader", "batchcast", "hosted")
DEFAULT_SOURCES = SOURCES[:3]
SERVED = ("batchcast", "hosted")  # the sources a batchcast server feeds


def server_options(args: Any) -> Dict[str, Any]:
    """The benchmark's server as batchcast.Server keywords, as the README's
    recipes give them (device, batch, size, dtype); every other option is
    the server's default unless given (--server-window, --server-workers)."""
    on_gpu = args.device.startswith("cuda")
    opts: Dict[str, Any] = dict(device=args.device if on_gpu else "cpu",
                                batch_size=args.server_batch, size=args.size,
                                dtype="bfloat16" if args.amp else "float32")
    if args.server_window:
        opts["window"] = args.server_window
    if args.server_workers:
        opts["workers"] = args.server_workers
    return opts


def open_data(torch: Any, cfg: Dict[str, Any]) -> Tuple[Iterator[Any], Callable[[], None]]:
    """The job's batches of source cfg["source"], endlessly, and how to close them."""
    dev, bs, size = cfg["device"], cfg["batch_size"], cfg["size"]
    if cfg["source"] == "synthetic":
        dtype = torch.bfloat16 if cfg["amp"] else torch.float32
        images = torch.randn(bs, 3, size, size, device=dev).to(dtype)
        labels = torch.randint(0, 1000, (bs,), device=dev)

        def forever() -> Iterator[Any]:
            while True:
                yield images, labels

        return forever(), lambda: None
    if cfg["source"] == "dataloader":
        loader = torch_dataloader(cfg["data"], size, bs, cfg["workers"],
                                  pin_memory=dev.startswith("cuda"))
    else:
        import batchcast

        batchcast.set_log_level("warn")
        loader = batchcast.Loader(cfg["endpoint"], batch_size=bs,
                                  name=f"colocate-job{cfg['index']}")

    def endless() -> Iterator[Any]:
        while True:
            yield from loader

    it = endless()

    def close() -> None:
        it.close()
        if hasattr(loader, "close"):
            loader.close()

    return it, close


class Server:
    """Source "batchcast": a batchcast-server process over the dataset, for
    one MPS setting (started with its environment `env`)."""

    def __init__(self, args: Any, env: Dict[str, str], log: Any) -> None:
        name = f"colocate-{os.getpid()}-{int(time.time() * 1000) % 100000}"
        self.process = ServerProcess(args.server_bin, name, server_options(args), data=args.data,
                                     log=log, env=env, log_level="info")
        self.name, self.pid, self.bin = name, self.process.pid, args.server_bin
        self._ready(args)

    def _ready(self, args: Any) -> None:
        self.epoch_len = int(self.stats().get("epoch_len", 0))
        self.warm = not args.device.startswith("cuda")  # the CPU path has no cache to warm

    def stats(self) -> Dict[str, Any]:
        import batchcast

        return batchcast.query_stats(self.name, timeout=5)

    def stat_text(self) -> str:
        return stat_text(self.bin, self.name)

    def loading_cpu(self) -> Dict[int, float]:
        """{key: CPU seconds} of the server, for CpuMeter.used."""
        return CpuMeter.read([self.pid])

    def stop(self) -> None:
        self.process.stop()


class HostedServer(Server):
    """Source "hosted": the server, a batchcast.Server, inside the process of
    `job` (a JobProc started with host=...; it lives and ends with it).
    Its CPU is that of its bc-* threads."""

    def __init__(self, args: Any, name: str, job: Any) -> None:
        self.name, self.pid, self.bin = name, job.pid, args.server_bin
        wait_up(name, job.proc)
        self._ready(args)

    def loading_cpu(self) -> Dict[int, float]:
        return {self.pid: server_thread_cpu_seconds(self.pid)}

    def stop(self) -> None:
        pass  # ends with its job (JobProc.stop)
