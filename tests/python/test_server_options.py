"""The server's option table seen from Python (_core.server_options(),
python/src/options.cc): what batchcast.Server, batchcast.Producer and
batchcast-launch take follows from it, and device texts are read by the
server's own parsers."""
import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
from batchcast import _core, _server  # noqa: E402


def test_records_describe_every_option():
    options = _core.server_options()
    names = [o.name for o in options]
    assert len(names) == len(set(names)) and "batch_size" in names
    by_name = {o.name: o for o in options}
    batch = by_name["batch_size"]
    assert (batch.group, batch.type, batch.value_name, batch.default, batch.command_line,
            batch.cuda_only) == ("ring", "integer", "N", "64", "--batch-size", False)
    assert by_name["shuffle"].type == "flag" and by_name["shuffle"].default == "true"
    assert by_name["lag_timeout"].type == "seconds" and by_name["mean"].type == "triple"
    assert by_name["key_file"].type == "text" and by_name["key_file"].default == ""
    assert {o.name for o in options if o.cuda_only} == {
        "device_cache_mb", "transcode_cache_mb", "nvjpeg_calls", "read_threads", "nvjpeg_region",
        "gpu_priority"}
    assert {o.group for o in options} == {"source", "ring", "order", "consumers"}
    assert all(o.help and "issue" not in o.help for o in options)


def test_server_and_producer_options_follow_from_the_table():
    options = _core.server_options()
    assert batchcast.SERVER_OPTIONS == {o.name for o in options}
    assert _server.PRODUCER_OPTIONS == {o.name for o in options
                                        if o.group in ("ring", "consumers")}
    assert "lag_policy" in _server.PRODUCER_OPTIONS and "shuffle" not in _server.PRODUCER_OPTIONS


def test_the_server_docstring_lists_the_options_from_the_table():
    doc = batchcast.Server.__doc__
    assert "docs/options.md" in doc
    for o in _core.server_options():
        assert f"        {o.name}: {o.help}." in doc, o.name
    assert "shuffle: shuffle each epoch" in doc and "Default: True." in doc


def test_device_texts_are_read_by_the_servers_parsers():
    assert _core.parse_device("cpu") is None
    assert _core.parse_device("cuda:3") == 3
    for bad in ("gpu1", "cuda:", "cuda:x", "cuda:0,1", "cuda:99999999999", " cpu"):
        with pytest.raises(batchcast.InvalidArgument, match="device"):
            _core.parse_device(bad)
    assert _core.parse_devices("cpu") == []
    assert _core.parse_devices("cuda:2") == [2]
    assert _core.parse_devices("cuda:1,0,3") == [1, 0, 3]
    assert _core.parse_devices("cuda:all") is None
    with pytest.raises(batchcast.InvalidArgument, match=r"device \(--device\).*names cuda:1 twice"):
        _core.parse_devices("cuda:1,1")


def test_text_options_must_be_text():
    with pytest.raises(batchcast.InvalidArgument, match="^window must be text"):
        batchcast.Server.from_text({"synthetic": "10", "window": 4})
    with pytest.raises(TypeError, match="unexpected keyword argument 'windows'"):
        batchcast.Server.from_text({"synthetic": "10", "windows": "4"})


def test_a_choice_outside_its_values_names_them():
    with pytest.raises(batchcast.InvalidArgument, match=r"^placement \(--placement\) must be "
                       r"round-robin or demand, got 'bogus'"):
        batchcast.Server(synthetic=10, placement="bogus")
    for placement in ("round-robin", "demand"):  # one ring: accepted, and said in the stats
        with batchcast.Server(synthetic=10, placement=placement) as server:
            assert server.stats()["placement"] == placement
    with batchcast.Server(synthetic=10) as server:  # by demand unless told otherwise
        assert server.stats()["placement"] == "demand"
