"""batchcast.Loader: a zero-copy PyTorch iterable over a batchcast server."""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar, Union

from batchcast import _check, _core
from batchcast._read_only import ReadOnly

_JOINS = ("immediate", "next_epoch")
T = TypeVar("T")


def _optional(convert: Callable[[Any], T]) -> Callable[[Any], Optional[T]]:
    """`convert`, keeping None."""
    return lambda v: None if v is None else convert(v)


def _is_tuple_layout(names: Tuple[str, ...]) -> bool:
    """True for image, label, field2, field3, ... (what a tuple producer makes)."""
    expected = ["image", "label"] + [f"field{i}" for i in range(2, len(names))]
    return list(names) == expected[: len(names)]


def _consumer_device(torch: Any, device: Any) -> str:
    """The device text told to the server (see Loader's ``device``)."""
    if device is None:
        cuda = torch.cuda
        if cuda.is_available() and cuda.is_initialized():
            return f"cuda:{cuda.current_device()}"
        return "cpu"
    if isinstance(device, bool):
        _check.fail("device", "'cuda:N', 'cpu', an int or a torch.device", device)
    if isinstance(device, int):
        device = f"cuda:{device}"
    if isinstance(device, torch.device):
        index = device.index if device.index is not None else (
            torch.cuda.current_device() if device.type == "cuda" else None)
        device = "cpu" if device.type != "cuda" else f"cuda:{index}"
    try:
        _core.parse_device(device)  # the server reads it so
    except (TypeError, _core.InvalidArgument):
        _check.fail("device", "'cuda:N', 'cpu', an int or a torch.device", device)
    return device


class Loader:
    """Iterates batches of a running batchcast server as torch tensors, zero-copy.

    Replaces a ``torch.utils.data.DataLoader`` in two lines::

        loader = batchcast.Loader("demo", batch_size=64)      # server name or endpoint
        for epoch in range(10):
            for images, labels in loader:                      # one loop = one epoch
                ...

    Args:
        endpoint_or_name: a server name (``batchcast-server serve --name NAME``)
            or an ``ipc://`` / ``tcp://`` endpoint.
        batch_size: this consumer's batch size; any value from 1 to
            ``window * producer_batch_size / 2``, independent of the producer's.
        drop_last: drop the last, incomplete batch of each epoch (default).
        join: ``"immediate"`` starts at the oldest sample still in the ring, and
            a consumer epoch is the next ``epoch_len`` samples of the stream, so
            when joining mid-stream an epoch straddles two producer epochs and
            its coverage of the dataset is only approximate. ``"next_epoch"``
            waits for the next producer epoch, so every consumer epoch is
            exactly one producer epoch (each sample exactly once).
        prefetch: batch requests kept in flight (default 2).
        timeout: seconds one batch may take before :class:`batchcast.Timeout`;
            ``None`` waits as long as the server is alive. A dead server is
            always reported (:class:`batchcast.ServerUnavailable`) within its
            heartbeat timeout (2 s by default).
        connect_timeout: seconds to wait for the server's answer at connection.
        name: shown in the server's stats (default ``"<program>:<pid>"``).
        key_file: ``tcp://`` endpoints only: the server's key file (README
            "Security"). Default: ``$BATCHCAST_KEY_FILE``, else this user's key
            on this machine, which a server of this user uses by default; so
            only a server of another machine or container, or one started with
            ``key_file``, needs it. A server that refuses the key raises
            :class:`batchcast.PermissionDenied` at once.
        as_dict: yield ``{field: tensor}`` dicts instead of tuples. By default
            tuples are yielded when the fields are ``image, label[, field2...]``
            (the built-in pipeline, or a Producer fed tuples) and dicts otherwise.
        group, rank, world_size: a *consumer group*: the Loaders of one server
            that name the same ``group``, each with its own ``rank`` of
            ``world_size``, split the stream as ``DistributedSampler`` would
            (one group per DDP job): each epoch is cut into chunks of
            ``batch_size`` samples, chunk k goes to rank ``k % world_size``,
            every rank gets the same number of batches (``len(loader)``; the
            last incomplete round is dropped for all, so ``drop_last`` must be
            True) and the ranks together see each sample of the epoch once.
            All ranks use the same ``batch_size``, ``join`` and ``world_size``.
            Other groups and Loaders without one each get the whole stream.
            Defaults come from the launcher: under ``torchrun`` (``LOCAL_RANK``,
            ``LOCAL_WORLD_SIZE``) or SLURM (``SLURM_LOCALID``,
            ``SLURM_NTASKS_PER_NODE``) with more than one local rank, the Loader
            joins its job's group (``"torchrun:<run id>:<restart>"``,
            ``"slurm:<job>.<step>"``) with its local rank; explicit arguments
            win; ``group=False`` (or ``""``, or ``BATCHCAST_GROUP=none`` in the
            environment) reads the whole stream anyway. A rank that dies or
            leaves breaks its group: its peers get every batch it got, then
            :class:`batchcast.Cancelled`; other groups go on. Ranks that do not
            all connect within the server's ``group_timeout`` (60 s) get
            :class:`batchcast.Timeout` naming the missing ones.
        device: the GPU this consumer trains on (``"cuda:N"``, an int or a
            ``torch.device``), which a server with a ring per GPU
            (``device="cuda:0,1"`` / ``"cuda:all"``) serves it from. Default:
            torch's current CUDA device when this process has initialized
            CUDA (e.g. after ``torch.cuda.set_device(local_rank)``), else
            none (the server's first ring). ``"cpu"``: none.
        produce: decode this loader's ring in this process (an *attached
            producer*): the server hands the batches it places on that ring
            to this process, which decodes them on its own stream, in its own
            CUDA context, instead of decoding them in the server's process.
            Without MPS the GPU time-slices the contexts of different
            processes, so a trainer whose GPU also decodes for the node loses
            less this way. The stream and every batch stay exactly what the
            server would have made; when this process stops producing
            (``close()``, an error, its death) the server decodes the ring
            again, from the batch in hand. Needs a server of this node started
            by name that decodes the ring on its GPU (an image folder, GPU
            decode) or fills a host ring; this process reads the dataset's
            listing the server saved. A ring that already has a producer, tar shards, a server
            started with ``attach=False``, or a ``device`` where the server
            has no ring (the ring serving it is another GPU's) raise at once.
            Default False.

    A wrong argument (type or value) is a :class:`batchcast.InvalidArgument`
    naming it. Connecting to a server of this machine that is not running
    (killed: its socket file is still there) raises
    :class:`batchcast.ServerUnavailable` at once, not after ``connect_timeout``.

    Iteration: each ``for`` loop runs to the end of the consumer's current
    epoch and ends with ``StopIteration``; ``len(loader)`` is the number of
    batches it yields, as announced by the server (``epoch_len / batch_size``,
    rounded down with ``drop_last``, up without). Files the server drops
    because they fail to decode (``on_error="skip"``, the default) are left out
    of every epoch from then on, never replaced by another sample: such an
    epoch may yield fewer batches than ``len(loader)``, at most one fewer per
    dropped file (the server's stats count them: ``source_counters``
    ``files_dropped_at_decode`` and ``samples_dropped``). Leaving a loop early
    (``break``) and looping again resumes the same epoch where it stopped: the
    stream cannot rewind. When the server has produced all of its epochs,
    iterating raises :class:`batchcast.EndOfStream`.

    Tensors and leases: each batch's tensors view the server's shared ring
    directly (DLPack) when the batch lies in one ring slot, or a private copy
    when it spans two. A zero-copy batch *leases* its slot: the server does not
    overwrite it until the last tensor viewing the batch is freed (the DLPack
    deleter). Holding on to tensors therefore pins ring slots: keeping the
    batches of ``window`` slots alive (``list(loader)``, a list of every
    batch's outputs that still reference the inputs, ...) stalls the producer
    and so every consumer; a consumer may also hold at most ``max_leases`` (16
    by default) batches. ``.clone()`` what you keep.

    Devices: tensors are on the device of the ring that serves this loader,
    :attr:`ring_device`. Host rings give CPU tensors (``.to("cuda",
    non_blocking=True)`` them). CUDA rings give CUDA tensors of the ring's
    GPU N, delivered in the order of torch's *current stream* of device N at
    the time of each ``next``: work queued on that stream sees the batch (no
    host synchronization), and the lease ends only after the work queued on
    it before the last tensor was freed completes. Use the batch on that
    stream (or synchronize yourself). A server with a ring per GPU serves
    each loader from the ring of its ``device``, so N is the loader's own
    GPU. A loader on a GPU M without a ring of its own (a server on cuda:0
    only) gets every batch size correct, on N: ``.to(M, non_blocking=True)``
    copies it to M (read it on M only through such a copy).

    Not thread-safe: iterate a Loader and call its stats() from one thread at a
    time (tensors may be freed on any thread). Blocking waits release the GIL,
    so other Python threads (and other Loaders) run meanwhile.
    """

    def __init__(
        self,
        endpoint_or_name: Union[str, "os.PathLike[str]"] = "batchcast",
        batch_size: int = 64,
        drop_last: bool = True,
        join: str = "immediate",
        prefetch: int = 2,
        timeout: Optional[float] = None,
        *,
        connect_timeout: Optional[float] = 10.0,
        name: Optional[str] = None,
        as_dict: Optional[bool] = None,
        key_file: Union[None, str, "os.PathLike[str]"] = None,
        group: Union[str, bool, None] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        device: Any = None,
        produce: bool = False,
    ) -> None:
        import torch  # imported here so that `import batchcast` does not need torch
        import torch.utils.dlpack

        # Every argument is checked here, so that a wrong one is an
        # InvalidArgument naming it (batchcast/_check.py).
        endpoint = _check.text("endpoint_or_name", endpoint_or_name, path=True)
        if join not in _JOINS:
            _check.fail("join", "'immediate' or 'next_epoch'", join)
        batch_size = _check.integer("batch_size", batch_size, 1, 2**32 - 1)
        prefetch = _check.integer("prefetch", prefetch, 1, 65535)
        drop_last = _check.boolean("drop_last", drop_last)
        timeout = _check.seconds("timeout", timeout)
        connect_timeout = _check.seconds("connect_timeout", connect_timeout, positive=True)
        name = _check.text("name", name, optional=True)
        as_dict = _check.boolean("as_dict", as_dict, optional=True)
        key_file = _check.text("key_file", key_file, optional=True, path=True)
        if group is False:
            group = ""  # no group, whatever the launcher says
        elif group is not None and (not isinstance(group, str) or len(group.encode()) > 256):
            _check.fail("group", "a group name (a string of at most 256 bytes), False or None",
                        group)
        rank = _check.integer("rank", rank, 0, 4095, optional=True)
        world_size = _check.integer("world_size", world_size, 1, 4096, optional=True)
        device = _consumer_device(torch, device)
        produce = _check.boolean("produce", produce)
        self._torch = torch
        self._from_dlpack = (getattr(torch._C, "_from_dlpack", None)
                             or torch.utils.dlpack.from_dlpack)
        self._endpoint = endpoint
        self._batch_size = batch_size
        self._core = _core.Consumer(
            self._endpoint, batch_size, drop_last, join, prefetch, timeout, connect_timeout,
            name or "", key_file=key_file or "", group=group, rank=rank, world_size=world_size,
            device=device,
        )
        self._producer: Optional[Any] = None
        if produce:
            try:
                ring = self._core.ring_device
                # A host ring is decoded on the CPU, for a Loader on any device.
                if device.startswith("cuda") and ring.startswith("cuda") and ring != device:
                    _check.refuse(f"produce=True: this Loader on {device} is served by the ring "
                                  f"on {ring}, and a process decodes only its own GPU's ring "
                                  f"(the server has none on {device})")
                self._producer = _core.AttachedProducer(
                    self._core.server_name, self._core.home_ring, timeout=connect_timeout)
            except BaseException:
                self._core.close()
                raise
        g = self._core.group
        self._group: Optional[str] = g[0] if g else None
        self._rank: Optional[int] = g[1] if g else None
        self._world_size: Optional[int] = g[2] if g else None
        fields = self._core.fields
        self._fields: List[Tuple[str, str, Tuple[int, ...]]] = [
            (n, d, tuple(s)) for n, d, s in fields
        ]
        self._names = tuple(f[0] for f in self._fields)
        self._as_dict = (not _is_tuple_layout(self._names)) if as_dict is None else as_dict
        # DLPack (v0.6) has no bool: the ring exports it as uint8, viewed back here.
        self._bool_fields = frozenset(i for i, f in enumerate(self._fields) if f[1] == "bool")
        self._epoch = 0
        self._indices: Optional[Any] = None
        self._zero_copy = False
        # CUDA rings: batches are delivered on (and leases wait for) torch's
        # current stream of the ring's device, passed before every batch.
        self._ring_device: str = self._core.ring_device
        self._cuda_index: Optional[int] = _core.parse_device(self._ring_device)

    # ---- iteration ----

    def __iter__(self) -> Iterator[Any]:
        return self._iterate_epoch()

    def _iterate_epoch(self) -> Iterator[Any]:
        core = self._core
        from_dlpack = self._from_dlpack
        simple_pair = len(self._names) == 2 and not self._as_dict and not self._bool_fields
        next_item: Callable[[], Any]
        if self._cuda_index is None:
            next_item = core.next
        else:
            device = self._cuda_index
            # The raw cudaStream_t of the current stream, without making a
            # torch.cuda.Stream object per batch (the private call triton
            # uses too; the public one where it is missing).
            raw_stream = getattr(self._torch._C, "_cuda_getCurrentRawStream", None)
            if raw_stream is None:
                current_stream = self._torch.cuda.current_stream

                def raw_stream(index):
                    return current_stream(index).cuda_stream

            def next_item():
                return core.next(raw_stream(device))

        while True:
            item = next_item()  # raises EndOfStream, ServerUnavailable, ...
            if item is None:  # end of this consumer's epoch
                self._epoch = core.marker_epoch
                return
            capsules, self._indices, self._epoch, _, self._zero_copy = item
            if simple_pair:
                yield from_dlpack(capsules[0]), from_dlpack(capsules[1])
            else:
                yield self._convert(capsules)

    def _convert(self, capsules: Tuple[Any, ...]) -> Any:
        tensors = [self._from_dlpack(c) for c in capsules]
        for i in self._bool_fields:
            tensors[i] = tensors[i].view(self._torch.bool)
        if self._as_dict:
            return dict(zip(self._names, tensors))
        return tuple(tensors)

    def __len__(self) -> int:
        """Batches in one epoch of this consumer, as announced; an epoch with
        files dropped at decode may yield up to one fewer per dropped file."""
        return int(self._core.batches_per_epoch)

    # ---- state ----

    epoch = ReadOnly("_epoch", int,
                     "The consumer epoch (from 0) of the last batch, or of the epoch that just "
                     "ended.")

    @property
    def indices(self):
        """Dataset indices (int64 tensor) of the samples of the last batch, or None."""
        if self._indices is None:
            return None
        return self._torch.from_numpy(self._indices)

    zero_copy = ReadOnly(
        "_zero_copy", bool,
        "True when the last batch views the shared ring (False: a private gathered copy).")
    batch_size = ReadOnly("_batch_size", int)
    endpoint = ReadOnly("_endpoint", str)
    epoch_len = ReadOnly("_core.epoch_len", int,
                         "Samples in one epoch (of the producer, and of this consumer).")
    producer_batch_size = ReadOnly("_core.producer_batch_size", int)
    window = ReadOnly("_core.window", int, "Ring slots of the server.")
    fields = ReadOnly("_fields", list,
                      "[(name, dtype name, per-sample shape)] of the server's samples.")
    skipped = ReadOnly("_core.skipped", int, 'Samples this consumer skipped (lag_policy="skip").')
    consumer_id = ReadOnly("_core.consumer_id", int)
    wait_s = ReadOnly(
        "_core.wait_s", float,
        "Seconds this Loader waited for the server's batches since it connected (this "
        "process' side of the server's per-consumer stat wait_s; docs/stats.md).")
    group = ReadOnly("_group", _optional(str),
                     "The consumer group it joined (given, or the launcher's), None without one.")
    rank = ReadOnly("_rank", _optional(int), "Its rank in its group, None without a group.")
    world_size = ReadOnly("_world_size", _optional(int),
                          "Ranks in its group, None without a group.")

    @property
    def producing(self) -> bool:
        """True while this process decodes its ring (``produce=True``): False
        without ``produce``, after ``close()``, or once the server took the
        ring back (:attr:`producer_error` says why)."""
        return self._producer is not None and bool(self._producer.running)

    @property
    def producer_error(self) -> Optional[str]:
        """Why this process stopped decoding its ring, or None."""
        return None if self._producer is None else self._producer.error

    ring_device = ReadOnly(
        "_ring_device", str,
        "Where the tensors are: 'cpu' or 'cuda:N', the ring serving this loader.")

    def stats(self, server: bool = True) -> Dict[str, Any]:
        """The server's stats (the JSON of ``batchcast-server stat NAME --json``) as a dict,
        with this Loader's own figures under ``"loader"``.

        ``stats()["loader"]`` is measured in this process, since the previous
        ``stats()`` call (the first: since the Loader connected), a wait in
        progress included:

        - ``wait_s``: seconds iteration waited for the server's batches;
        - ``wall_s``: the interval's length in seconds;
        - ``wait_fraction``: ``wait_s / wall_s``, from 0 to 1: the share of the
          time this job was input-bound;
        - with ``produce=True``: ``produced_batches`` and ``produced_samples``,
          what this process decoded into its ring since the Loader connected,
          and ``producing`` (False once the server took the ring back).

        So a training loop logs its stall in one line every log interval::

            writer.add_scalar("input_bound", loader.stats(server=False)["loader"]["wait_fraction"],
                              step)

        Each call starts a new interval. ``server=False`` asks no server: the
        dict then holds ``"loader"`` only (cheap; no round trip). The server's
        own view of this consumer's wait is its ``consumers`` entry's
        ``wait_s`` (docs/stats.md).
        """
        server = _check.boolean("server", server)
        out: Dict[str, Any] = json.loads(self._core.stats()) if server else {}
        wait_s, wall_s, fraction = self._core.take_wait_share()
        out["loader"] = {"wait_s": wait_s, "wall_s": wall_s, "wait_fraction": fraction}
        if self._producer is not None:
            out["loader"].update(produced_batches=int(self._producer.batches),
                                 produced_samples=int(self._producer.samples),
                                 producing=bool(self._producer.running))
        return out

    # ---- resume (docs/semantics.md, "Resume") ----

    def state_dict(self) -> Dict[str, Any]:
        """This loader's place in the stream, to resume there after a restart.

        A small dict of ints and strings (``torch.save`` keeps it beside the
        model's state): the stream's identity (what shapes a sample: dataset,
        shard, seed, transform, size, dtype, ...), the epoch, the batches
        yielded in it, where in the stream it continues, and its group's
        world size. It reflects the batches this loader has yielded so far
        (not those only prefetched)::

            torch.save({"model": model.state_dict(), "loader": loader.state_dict()}, path)
        """
        return self._core.position()

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Continues from a :meth:`state_dict` of an earlier process, before the first batch.

        The batches that follow are those the saved loader would have got
        next: the same samples in the same order, the same pixels (a
        sample's are a function of the seed, the epoch and its index),
        whatever the stream does meanwhile; its later epochs go on as usual.
        It works against the same server or one restarted with the same
        options. A different ``batch_size`` continues from the same sample
        in batches of the new size. In a group every rank loads a state
        saved at the same step (any rank's: it is the group's place), with
        the same ``world_size``.

        Raises :class:`batchcast.InvalidArgument` naming what is wrong, and
        the loader stays where it was: a state of another stream (each
        differing component with both values), of another world size, a
        corrupt or truncated dict, one of a newer format, a group whose
        ranks resumed elsewhere, a call after the first batch.
        """
        self._core.resume(state_dict)
        self._epoch = int(state_dict["epoch"])

    # ---- lifetime ----

    def close(self) -> None:
        """Leaves the stream. Tensors already handed out stay valid (their leases
        keep the connection until they are freed). With ``produce=True`` the
        server decodes this loader's ring again from then on."""
        if self._producer is not None:
            self._producer.stop()
        self._core.close()

    closed = ReadOnly("_core.closed", bool)

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if "_epoch" not in self.__dict__:  # its __init__ raised (a traceback shows it)
            return f"batchcast.Loader({self.__dict__.get('_endpoint', '?')!r}, not opened)"
        state = "closed" if self.closed else f"epoch {self._epoch}"
        group = (f", group={self._group!r}, rank={self._rank}, world_size={self._world_size}"
                 if self._group is not None else "")
        return (f"batchcast.Loader({self._endpoint!r}, batch_size={self._batch_size}{group}, "
                f"{state})")
