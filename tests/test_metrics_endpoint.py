"""The metrics endpoint, scraped over real HTTP and read with prometheus_client's own parser.

The trackers are fed the replay fleet's probe records (tests/replay.py: the real wire format
through the real `parse_record`), so every value below is traceable to a record line.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.models.alerts import material
from cockpit.models.events import HostStateChanged
from cockpit.models.hostview import HostTracker
from cockpit.models.parse import parse_record
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.metrics.endpoint import (
    MAX_LABEL,
    BindError,
    MetricsHandle,
    is_loopback,
    parse_bind,
    serve,
)
from tests.replay import NOW, r1_record, replay_events, replay_sweep

MIB = 1024 * 1024
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def fleet(tmp_path: Path) -> dict[str, HostTracker]:
    loaded = replay_sweep(tmp_path)
    rulebook = load_rulebook(user=False)
    trackers = {inst.name: HostTracker(inst, loaded.profiles[inst.profile], rulebook)
                for inst in loaded.sweep.instances}
    for event in replay_events(with_key_problem=False):
        if isinstance(event, HostStateChanged):
            trackers[event.state.instance].absorb_state(event.state)
        else:
            trackers[event.snapshot.instance].absorb(event.snapshot)
    return trackers


def scrape(handle: MetricsHandle) -> Samples:
    with urllib.request.urlopen(handle.url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def trackers(tmp_path: Path) -> dict[str, HostTracker]:
    return fleet(tmp_path)


@pytest.fixture
def endpoint(trackers: dict[str, HostTracker]) -> Iterator[MetricsHandle]:
    handle = serve("127.0.0.1", 0, trackers.values, clock=lambda: NOW + 10)
    yield handle
    handle.close()


def test_scrape_reports_each_box_from_recorded_records(
        endpoint: MetricsHandle, trackers: dict[str, HostTracker]) -> None:
    assert endpoint.port > 0 and not endpoint.exposed
    got = scrape(endpoint)

    def value(name: str, **labels: str) -> float:
        return got[(name, tuple(sorted(labels.items())))]

    # a1's third record: GPU 0 at 97%, 61234 MiB, 71 C, 371.5 W; GPU 1 at 3+seq = 6%.
    assert value("cockpit_gpu_utilization_ratio", instance="a1", gpu="0") == pytest.approx(0.97)
    assert value("cockpit_gpu_utilization_ratio", instance="a1", gpu="1") == pytest.approx(0.06)
    assert value("cockpit_gpu_memory_used_bytes", instance="a1", gpu="0") == 61234 * MIB
    assert value("cockpit_gpu_memory_total_bytes", instance="a1", gpu="0") == 81920 * MIB
    assert value("cockpit_gpu_temperature_celsius", instance="a1", gpu="0") == 71
    assert value("cockpit_gpu_power_watts", instance="a1", gpu="0") == pytest.approx(371.5)
    assert value("cockpit_gpu_utilization_ratio", instance="r1", gpu="0") == pytest.approx(0.12)
    # The data disk: used 40.3 GB of 53687091200 (used + avail); inodes 3001000 of 3276800.
    assert value("cockpit_disk_used_ratio", instance="a1", mount="/root/autodl-tmp") == \
        pytest.approx(40_300_000_000 / 53_687_091_200)
    assert value("cockpit_inodes_used_ratio", instance="a1", mount="/root/autodl-tmp") == \
        pytest.approx(3_001_000 / (3_001_000 + 275_800))
    assert value("cockpit_disk_used_ratio", instance="r1", mount="/workspace") == \
        pytest.approx(102_005_473_280 / 107_374_182_400)
    # The queue: 4 cells, baseline and no_aug ok, det_baseline exit=1, aug_strong running.
    assert value("cockpit_queue_cells", instance="a1") == 4
    assert value("cockpit_queue_cells_done", instance="a1") == 2
    assert value("cockpit_queue_cells_failed", instance="a1") == 1
    # The last records arrived at NOW; the endpoint's clock says NOW + 10.
    assert value("cockpit_seconds_since_last_record", instance="a1") == pytest.approx(10)
    assert value("cockpit_seconds_since_last_record", instance="r1") == pytest.approx(10)
    assert ("cockpit_seconds_since_last_record", (("instance", "v1"),)) not in got  # no record
    assert value("cockpit_price_per_hour", instance="a1", currency="CNY") == pytest.approx(1.98)
    assert value("cockpit_price_per_hour", instance="r1", currency="USD") == pytest.approx(0.69)
    assert value("cockpit_box_up", instance="a1") == 1
    assert value("cockpit_box_up", instance="v1") == 0
    a1_alerts = material(trackers["a1"], NOW + 10)
    assert any(a.kind == "cell-failed" for a in a1_alerts)
    assert value("cockpit_open_alerts", instance="a1") == len(a1_alerts)


def test_scrape_reads_the_published_sample_not_the_live_trackers(
        endpoint: MetricsHandle, trackers: dict[str, HostTracker]) -> None:
    before = scrape(endpoint)
    key = ("cockpit_gpu_utilization_ratio", (("gpu", "0"), ("instance", "r1")))
    record = r1_record(4, NOW + 2).replace(b"RTX 4090, GPU-11111111-aaaa-bbbb-cccc-dddddddddddd, 12,",
                                           b"RTX 4090, GPU-11111111-aaaa-bbbb-cccc-dddddddddddd, 88,")
    trackers["r1"].absorb(parse_record(record, instance="r1", observed_at=NOW + 2))
    assert scrape(endpoint)[key] == before[key] == pytest.approx(0.12)
    endpoint.publish()
    assert scrape(endpoint)[key] == pytest.approx(0.88)


def test_hostile_mount_path_is_a_bounded_valid_label(tmp_path: Path) -> None:
    trackers = fleet(tmp_path)
    hostile = '/w"s\\p{a="b"}\x1b[2J' + "x" * 5000
    record = r1_record(4, NOW + 2).replace(b"@@mount /workspace\n", f"@@mount {hostile}\n".encode()) \
        .replace(b" fuse /workspace\n", f" fuse {hostile}\n".encode())
    trackers["r1"].absorb(parse_record(record, instance="r1", observed_at=NOW + 2))
    handle = serve("127.0.0.1", 0, trackers.values, clock=lambda: NOW + 10)
    try:
        got = scrape(handle)  # the parser would raise on a broken exposition
    finally:
        handle.close()
    mounts = [dict(labels)["mount"] for (name, labels) in got
              if name == "cockpit_disk_used_ratio" and dict(labels)["instance"] == "r1"]
    assert len(mounts) == 1
    [mount] = mounts
    assert mount.startswith('/w"s\\p{a="b"}␛[2J') and len(mount) <= MAX_LABEL
    assert "\x1b" not in mount


async def test_serve_on_a_loop_publishes_every_interval(tmp_path: Path) -> None:
    trackers = fleet(tmp_path)
    handle = serve("127.0.0.1", 0, trackers.values, interval=0.05)
    try:
        record = r1_record(4, NOW + 2).replace(b"dddddddddddd, 12,", b"dddddddddddd, 55,")
        trackers["r1"].absorb(parse_record(record, instance="r1", observed_at=NOW + 2))
        key = ("cockpit_gpu_utilization_ratio", (("gpu", "0"), ("instance", "r1")))
        deadline = asyncio.get_running_loop().time() + 20
        while True:
            got = await asyncio.to_thread(scrape, handle)
            if got[key] == pytest.approx(0.55):
                break
            assert asyncio.get_running_loop().time() < deadline, "never republished"
            await asyncio.sleep(0.05)
    finally:
        handle.close()


@pytest.mark.parametrize(("text", "bind"), [
    ("9400", ("127.0.0.1", 9400)),
    (":9400", ("127.0.0.1", 9400)),
    ("localhost:9400", ("localhost", 9400)),
    ("0.0.0.0:9400", ("0.0.0.0", 9400)),
    ("[::1]:9400", ("::1", 9400)),
])
def test_parse_bind(text: str, bind: tuple[str, int]) -> None:
    assert parse_bind(text) == bind


@pytest.mark.parametrize("text", ["", "host", "host:", "host:0", "host:65536", "host:http",
                                  "::1:9400", "[::1]9400"])
def test_parse_bind_refuses_with_the_forms(text: str) -> None:
    with pytest.raises(BindError, match=r"HOST:PORT|brackets"):
        parse_bind(text)


def test_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
