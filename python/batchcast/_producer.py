"""batchcast.Producer: serve the batches of any Python iterable to batchcast Loaders."""
from __future__ import annotations

import itertools
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from batchcast import _check, _core
from batchcast._read_only import ReadOnly
from batchcast._server import PRODUCER_OPTIONS, _check_options, _Serving, _wait

_TUPLE_NAMES = ("image", "label")


def _tuple_names(n: int) -> Tuple[str, ...]:
    return tuple(_TUPLE_NAMES[i] if i < 2 else f"field{i}" for i in range(n))


def _dtype_names(torch: Any) -> Dict[Any, str]:
    return {
        torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16", torch.int32: "int32",
        torch.int64: "int64", torch.float16: "float16", torch.bfloat16: "bfloat16",
        torch.float32: "float32", torch.float64: "float64", torch.bool: "bool",
    }


class _Stopped(Exception):
    pass


class Producer(_Serving):
    """Serves the batches of a Python iterable (e.g. an existing torch DataLoader)
    through a batchcast ring, to any number of :class:`batchcast.Loader` s::

        train = torch.utils.data.DataLoader(dataset, batch_size=128, shuffle=True, num_workers=8)
        with batchcast.Producer(train, name="cifar", window=8) as producer:
            producer.run()                      # serve until the epochs end, or Ctrl-C

        # in each training process:
        for images, labels in batchcast.Loader("cifar", batch_size=64): ...

    The iterable yields batches: a tuple/list of tensors (served as fields
    ``image``, ``label``, ``field2``, ...; Loaders yield tuples), a dict of
    tensors (fields named by its keys; Loaders yield dicts), or one tensor
    (field ``image``). numpy arrays are accepted too. Every field has its
    batch dimension first; the per-sample shape and dtype (``t.shape[1:]``,
    ``t.dtype``) come from the first batch and must not change. A dict key
    ``index`` is not a field: it gives the dataset index of each sample (what
    ``Loader.indices`` reports); without it the index is a running sample
    counter within the epoch.

    One producer epoch is one pass over the iterable (``iter()`` again for the
    next), and every pass must yield exactly ``epoch_len`` samples.
    ``epoch_len`` is inferred for a torch DataLoader with automatic batching
    (``len(loader.sampler)``, minus the remainder with ``drop_last``) and for a
    list/tuple of batches; otherwise pass ``epoch_len=``. A one-shot iterator
    (a generator) can serve only ``epochs=1``.

    Args:
        iterable: the batches.
        device: ring memory, ``"cpu"``, or ``"cuda:N"`` (``"cuda"``: the current
            device) where the build supports CUDA: batches are then copied to
            the device on torch's current stream and published in its order.
        window: ring slots; the fastest Loader is at most this many slots ahead
            of the slowest.
        name: server name the Loaders connect to.
        batch_size: samples per ring slot (default: the iterable's
            ``batch_size`` attribute, else the first batch's size); larger
            batches of the iterable are split over several slots.
        epochs: passes over the iterable (None: until close()).
        epoch_len: samples per pass, when it cannot be inferred.
        start: start serving at once (default); otherwise on start()/run().
        **options: endpoint (with key_file, allow_remote: tcp:// is
            always CURVE, README "Security"), lag_policy, lag_timeout, min_consumers (the
            producer waits for that many Loaders before its first write),
            heartbeat_timeout, heartbeat_interval, max_leases, max_consumers.

    A wrong argument (type or value) is a :class:`batchcast.InvalidArgument`
    naming it.

    The first batch is drawn (and the server started, so ``.endpoint`` works)
    in the constructor; the rest of the iteration runs in a background thread.
    Errors of that thread (an exception of the iterable, a pass of the wrong
    length, a batch whose fields changed) stop the server, so the Loaders see
    a "server stopped" error, and are re-raised by :meth:`wait`, :meth:`run`
    and on leaving the ``with`` block.
    """

    def __init__(
        self,
        iterable: Iterable[Any],
        *,
        device: str = "cpu",
        window: int = 8,
        name: str = "batchcast",
        batch_size: Optional[int] = None,
        epochs: Optional[int] = None,
        epoch_len: Optional[int] = None,
        start: bool = True,
        **options: Any,
    ) -> None:
        import torch
        import torch.utils.dlpack

        _check_options("Producer", options, PRODUCER_OPTIONS)
        # A wrong argument is an InvalidArgument naming it (batchcast/_check.py);
        # window, name and the **options are checked by the server's option table.
        device = _check.text("device", device)
        epochs = _check.integer("epochs", epochs, 1, optional=True)
        epoch_len = _check.integer("epoch_len", epoch_len, 1, optional=True)
        batch_size = _check.integer("batch_size", batch_size, 1, optional=True)
        start = _check.boolean("start", start)
        if device == "cuda":
            device = f"cuda:{torch.cuda.current_device()}"
        self._torch = torch
        self._from_dlpack = torch.utils.dlpack.from_dlpack
        self._dtypes = _dtype_names(torch)
        self._torch_dtypes = {v: k for k, v in self._dtypes.items()}
        self._iterable = iterable
        self._epochs = epochs
        try:
            iterator = iter(iterable)
        except TypeError:
            _check.fail("iterable", "an iterable of batches", iterable)
        if iterator is iterable and epochs != 1:
            raise ValueError(
                "the iterable is a one-shot iterator (e.g. a generator): it can serve one epoch "
                "only; pass epochs=1, or a re-iterable object (a DataLoader, a list, ...)"
            )
        try:
            first = next(iterator)
        except StopIteration:
            raise ValueError("the iterable yielded no batch") from None
        names, tensors, _ = self._normalize(first, None)
        self._names = names
        first_n = int(tensors[0].shape[0])
        self._specs: List[Tuple[str, str, Tuple[int, ...]]] = []
        for nm, t in zip(names, tensors):
            if t.dtype not in self._dtypes:
                raise TypeError(f"field {nm!r} has dtype {t.dtype}, which batchcast cannot serve")
            self._specs.append((nm, self._dtypes[t.dtype], tuple(int(d) for d in t.shape[1:])))
        if batch_size is None:
            attr = getattr(iterable, "batch_size", None)
            batch_size = attr if isinstance(attr, int) and attr > 0 else first_n
        if epoch_len is None:
            epoch_len = self._infer_epoch_len(iterable)
        if epoch_len < 1:
            _check.fail("epoch_len", "positive (the samples of one pass)", epoch_len)
        self._epoch_len = int(epoch_len)
        self._batch_size = int(batch_size)
        opts = dict(options)
        opts.update(
            name=name, device=device, window=window, batch_size=self._batch_size,
            epochs=epochs or 0,
        )
        self._attach(_core.Server.start_external(opts, self._specs, self._epoch_len))
        self._pending: Optional[Tuple[Iterator[Any], Any]] = (iterator, first)
        self._closing = False
        self._error: Optional[BaseException] = None
        self._error_reported = False
        self._epochs_done = 0
        self._samples = 0
        self._thread: Optional[threading.Thread] = None
        if start:
            self.start()

    # ---- setup helpers ----

    def _infer_epoch_len(self, iterable: Any) -> int:
        dataset = getattr(iterable, "dataset", None)
        bs = getattr(iterable, "batch_size", None)
        sampler = getattr(iterable, "sampler", None)
        if dataset is not None and isinstance(bs, int) and bs > 0:  # a torch DataLoader
            n = None
            for source in (sampler, dataset):
                try:
                    n = len(source)  # type: ignore[arg-type]
                    break
                except TypeError:
                    continue
            if n is not None:
                return n // bs * bs if getattr(iterable, "drop_last", False) else n
        if isinstance(iterable, (list, tuple)):
            return sum(int(self._normalize(b, None)[1][0].shape[0]) for b in iterable)
        raise ValueError(
            f"cannot infer how many samples one pass over {type(iterable).__name__} yields: "
            "pass epoch_len= (every pass must yield exactly that many samples)"
        )

    def _normalize(
        self, batch: Any, expect: Optional[Tuple[str, ...]]
    ) -> Tuple[Tuple[str, ...], List[Any], Optional[Any]]:
        """(field names, tensors, index tensor or None) of one batch."""
        torch = self._torch
        index = None
        if isinstance(batch, dict):
            items = dict(batch)
            index = items.pop("index", None)
            names = tuple(str(k) for k in items)
            values: Sequence[Any] = list(items.values())
        elif isinstance(batch, (tuple, list)):
            names = _tuple_names(len(batch))
            values = batch
        else:
            names = ("image",)
            values = [batch]
        if not values:
            raise ValueError("a batch has no fields")
        if expect is not None and names != expect:
            raise ValueError(f"a batch has fields {list(names)}, the first batch had "
                             f"{list(expect)}")
        tensors = []
        for nm, v in zip(names, values):
            try:
                t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v)
            except Exception as e:  # strings, ragged lists, ...
                raise TypeError(f"field {nm!r} is not a tensor ({type(v).__name__}): {e}") from None
            if t.dim() == 0:
                raise ValueError(f"field {nm!r} has no batch dimension (a 0-d tensor)")
            tensors.append(t)
        n = int(tensors[0].shape[0])
        for nm, t in zip(names, tensors):
            if int(t.shape[0]) != n:
                raise ValueError(
                    f"fields of one batch disagree on its size: {names[0]!r} has {n}, "
                    f"{nm!r} has {int(t.shape[0])}"
                )
        if index is not None:
            index = torch.as_tensor(index).reshape(-1).to(device="cpu", dtype=torch.int64)
            if int(index.shape[0]) != n:
                raise ValueError(f"'index' has {int(index.shape[0])} entries for a batch of {n}")
        return names, tensors, index

    # ---- the producer thread ----

    def start(self) -> "Producer":
        """Starts the background thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run_thread, name=f"batchcast-producer-{self._name}", daemon=True
            )
            self._thread.start()
        return self

    def _run_thread(self) -> None:
        try:
            self._produce()
        except _Stopped:
            pass
        except BaseException as e:  # noqa: BLE001 - reported by wait()/run()/__exit__
            if self._closing and isinstance(e, _core.Cancelled):
                return
            self._error = e
            self._core.stop()  # consumers get "server stopped" at once

    def _produce(self) -> None:
        torch = self._torch
        assert self._pending is not None  # the thread runs _produce once
        iterator, first = self._pending
        self._pending = None
        epoch = 0
        while self._epochs is None or epoch < self._epochs:
            batches: Iterator[Any]
            if epoch == 0:
                batches = itertools.chain([first], iterator)
                del first
            else:
                batches = iter(self._iterable)
            seen = 0
            for batch in batches:
                if self._closing:
                    raise _Stopped
                _, tensors, index = self._normalize(batch, self._names)
                del batch
                n = int(tensors[0].shape[0])
                if seen + n > self._epoch_len:
                    raise ValueError(
                        f"pass {epoch} over the iterable yields more than epoch_len="
                        f"{self._epoch_len} samples"
                    )
                for (nm, dtype, shape), t in zip(self._specs, tensors):
                    if tuple(t.shape[1:]) != shape or self._dtypes.get(t.dtype) != dtype:
                        raise ValueError(
                            f"field {nm!r} changed: {dtype}{list(shape)} per sample in the first "
                            f"batch, {t.dtype}{list(t.shape[1:])} now"
                        )
                if index is None:
                    index = torch.arange(seen, seen + n, dtype=torch.int64)
                indices = index.numpy()
                for lo in range(0, n, self._batch_size):
                    hi = min(n, lo + self._batch_size)
                    self._write(epoch, indices[lo:hi], [t[lo:hi] for t in tensors])
                seen += n
                self._samples += n
            if seen != self._epoch_len:
                raise ValueError(
                    f"pass {epoch} over the iterable yielded {seen} samples, but epoch_len is "
                    f"{self._epoch_len}: every pass must yield exactly epoch_len samples"
                )
            epoch += 1
            self._epochs_done = epoch
        self._core.end_stream()

    def _write(self, epoch: int, indices: Any, tensors: List[Any]) -> None:
        while True:
            if self._closing:
                raise _Stopped
            try:
                slot = self._core.begin_batch(epoch, indices, 1.0)
                break
            except _core.Timeout:
                continue  # check for close() now and then
        # Each field of the slot as a tensor on the ring's device (DLPack), then
        # one copy per field: torch converts device and (bool -> uint8) dtype.
        gpu = _core.parse_device(slot.device)
        for i, src in enumerate(tensors):
            dst = self._from_dlpack(slot.field_dlpack(i))
            dst.copy_(src, non_blocking=gpu is not None)
            del dst
        stream = 0
        if gpu is not None:
            # The copies were queued on torch's current stream of the ring's
            # device; the slot's event is recorded there (no host sync).
            stream = self._torch.cuda.current_stream(gpu).cuda_stream
        self._core.commit_batch(slot, stream)

    # ---- control ----

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until everything was served: the iterable's epochs were all
        written and every Loader left (or close()). Re-raises the error that
        stopped the producer. Returns False when `timeout` seconds passed first."""
        import time

        timeout = _check.seconds("timeout", timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._thread is not None:
            while self._thread.is_alive():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._thread.join(0.1 if left is None else min(0.1, left))
        self._raise_error()
        if self._closing:
            return True
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done = _wait(self._core, left)
        if done:
            self._raise_error()
        return done

    def run(self) -> None:
        """start() + wait(): serves until done; Ctrl-C stops (via the ``with`` block or close())."""
        self.start()
        self.wait()

    def _raise_error(self) -> None:
        if self._error is not None:
            self._error_reported = True
            raise self._error

    def close(self) -> None:
        """Stops serving (Loaders get a "server stopped" error) and joins the thread. Idempotent."""
        self._closing = True
        self._finalizer()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __exit__(self, *exc: Any) -> None:
        self.close()
        if exc[0] is None and self._error is not None and not self._error_reported:
            self._raise_error()

    # ---- state ----

    epoch_len = ReadOnly("_epoch_len", int)
    batch_size = ReadOnly("_batch_size", int, "Samples per ring slot.")
    fields = ReadOnly("_specs", list, "[(name, dtype name, per-sample shape)].")
    epochs_done = ReadOnly("_epochs_done", int, "Passes over the iterable written completely.")
    samples_written = ReadOnly("_samples", int)

    @property
    def error(self) -> Optional[BaseException]:
        """The error that stopped the producer thread, if any."""
        return self._error

    def __repr__(self) -> str:
        return (
            f"batchcast.Producer(name={self._name!r}, fields={[s[0] for s in self._specs]}, "
            f"epoch_len={self._epoch_len}, batch_size={self._batch_size})"
        )
