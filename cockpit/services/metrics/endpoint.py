"""`--metrics HOST:PORT`: an OpenMetrics/Prometheus endpoint over the fleet's live trackers.

    handle = serve("127.0.0.1", 9400, lambda: monitor.trackers.values())
    ...
    handle.close()                                  # or handle(): the same

Per box (label `instance`): `cockpit_box_up`; per GPU (`gpu`: its index) utilisation, memory
used and total, temperature and power; per mount (`mount`: its path) the used ratio of bytes
and of inodes; the queue's cells (all, done, failed); seconds since the box's last probe
record; its price per hour (label `currency` from the profile); and its open alerts (the
material conditions `cockpit.models.alerts.material` fires on). A value the box did not report
(N/A) has no sample rather than a false zero.

Threads: prometheus_client serves scrapes from its own thread, while the trackers belong to
the asyncio loop and change on every record. So the collector never reads a tracker: on the
loop, `serve` publishes an immutable `FleetSample` every `interval` seconds (and `publish()`
does it at once), and a scrape reads the newest one (one reference, swapped whole). Only the
"seconds since" gauge is computed at scrape time, from the sample's record time.

Label values are box text (a mount path): made visible (no control characters), cut at
`MAX_LABEL` characters, and escaped by prometheus_client; a box can add at most `MAX_GPUS`
and `MAX_MOUNTS` series of each kind. The endpoint binds to loopback unless the user names
another address (`parse_bind`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cockpit.models.alerts import material
from cockpit.models.hostview import HostTracker
from cockpit.models.queue import CellState
from cockpit.models.snapshot import NA, Reachability
from cockpit.models.text import visible

DEFAULT_HOST = "127.0.0.1"
"""Where the endpoint listens unless told otherwise: the numbers name boxes, prices and
paths, which is nobody else's business on a shared machine."""
PUBLISH_INTERVAL_S = 2.0
"""How often the loop publishes a fresh sample (the sweep's default probe interval)."""
MAX_LABEL = 128
"""Characters of a label value from a box (a mount path): Prometheus keeps every distinct
value as a series, so a 1 MB path must not become one."""
MAX_GPUS = 64
"""GPU series per box (the largest boxes have 16 GPUs; MIG slices add a few)."""
MAX_MOUNTS = 32
"""Mount series per box (a profile names a handful; `extra_mounts` a few more)."""
MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuSample:
    """One GPU's numbers (None: not reported)."""

    index: str
    util_ratio: float | None
    mem_used_bytes: float | None
    mem_total_bytes: float | None
    temp_c: float | None
    power_w: float | None


@dataclass(frozen=True)
class MountSample:
    """One mount's use (None: not reported)."""

    path: str
    bytes_ratio: float | None
    inodes_ratio: float | None


@dataclass(frozen=True)
class BoxSample:
    """One box as the endpoint shows it."""

    instance: str
    up: bool
    gpus: tuple[GpuSample, ...]
    mounts: tuple[MountSample, ...]
    cells: int
    cells_done: int
    cells_failed: int
    last_record_at: float | None
    price_per_hour: float | None
    currency: str
    open_alerts: int


@dataclass(frozen=True)
class FleetSample:
    """Every box at one moment: what a scrape reads."""

    boxes: tuple[BoxSample, ...]
    taken_at: float


def label(text: str) -> str:
    """A label value from box text: controls made visible, at most `MAX_LABEL` characters."""
    return visible(text, limit=MAX_LABEL)[:MAX_LABEL]


def _num(value: float | int | NA, scale: float = 1.0) -> float | None:
    return None if isinstance(value, NA) else float(value) * scale


def _ratio(pct: float | NA) -> float | None:
    return None if isinstance(pct, NA) else float(pct) / 100.0


def sample_box(tracker: HostTracker, now: float) -> BoxSample:
    """One tracker's numbers now (on the loop that owns the tracker)."""
    snap = tracker.snapshot
    gpus: dict[str, GpuSample] = {}
    mounts: dict[str, MountSample] = {}
    if snap is not None:
        for gpu in snap.gpu.gpus[:MAX_GPUS]:
            index = str(gpu.index)
            gpus.setdefault(index, GpuSample(
                index, _ratio(gpu.util_pct), _num(gpu.mem_used_mib, MIB),
                _num(gpu.mem_total_mib, MIB), _num(gpu.temp_c), _num(gpu.power_w)))
        for mount in snap.mounts[:MAX_MOUNTS]:
            path = label(mount.path)  # two paths alike after the cut: the first one counts
            mounts.setdefault(path, MountSample(path, _ratio(mount.bytes_pct),
                                                _ratio(mount.inodes_pct)))
    cells = tracker.queue_view().cells
    currency = tracker.profile.currency
    return BoxSample(
        instance=label(tracker.instance.name),
        up=tracker.state.reachability is Reachability.CONNECTED,
        gpus=tuple(gpus.values()),
        mounts=tuple(mounts.values()),
        cells=len(cells),
        cells_done=sum(c.state is CellState.OK for c in cells),
        cells_failed=sum(c.state is CellState.FAILED for c in cells),
        last_record_at=snap.observed_at if snap is not None else None,
        price_per_hour=tracker.instance.price_per_hour,
        currency="" if currency == "none" else currency,
        open_alerts=len(material(tracker, now)),
    )


def sample_fleet(trackers: Iterable[HostTracker], now: float) -> FleetSample:
    """Every tracker's numbers now; a tracker that fails to sample is left out, never the rest."""
    boxes = []
    for tracker in trackers:
        with contextlib.suppress(Exception):  # one box's broken model must not blank the page
            boxes.append(sample_box(tracker, now))
    return FleetSample(tuple(boxes), now)


class FleetCollector(Collector):
    """Turns the newest published `FleetSample` into metric families at each scrape."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.sample = FleetSample((), 0.0)
        """Replaced whole by the loop (`publish`), read whole by the scrape thread."""

    def collect(self) -> Iterator[Metric]:
        """The families of the newest sample (called by prometheus_client's thread)."""
        sample = self.sample  # one read: the whole scrape sees one moment
        now = self.clock()
        box_l, gpu_l, mount_l = ["instance"], ["instance", "gpu"], ["instance", "mount"]
        up = GaugeMetricFamily("cockpit_box_up", "1 while the box answers its probe", labels=box_l)
        util = GaugeMetricFamily("cockpit_gpu_utilization_ratio", "GPU utilisation (0-1)",
                                 labels=gpu_l)
        mem = GaugeMetricFamily("cockpit_gpu_memory_used_bytes", "GPU memory used", labels=gpu_l)
        mem_total = GaugeMetricFamily("cockpit_gpu_memory_total_bytes", "GPU memory", labels=gpu_l)
        temp = GaugeMetricFamily("cockpit_gpu_temperature_celsius", "GPU temperature",
                                 labels=gpu_l)
        power = GaugeMetricFamily("cockpit_gpu_power_watts", "GPU power draw", labels=gpu_l)
        disk = GaugeMetricFamily("cockpit_disk_used_ratio",
                                 "Bytes used / (used + available) per mount", labels=mount_l)
        inodes = GaugeMetricFamily("cockpit_inodes_used_ratio",
                                   "Inodes used / (used + available) per mount", labels=mount_l)
        cells = GaugeMetricFamily("cockpit_queue_cells", "Cells in the queue", labels=box_l)
        done = GaugeMetricFamily("cockpit_queue_cells_done", "Cells finished with exit 0",
                                 labels=box_l)
        failed = GaugeMetricFamily("cockpit_queue_cells_failed", "Cells that failed",
                                   labels=box_l)
        since = GaugeMetricFamily("cockpit_seconds_since_last_record",
                                  "Seconds since the box's last probe record", labels=box_l)
        price = GaugeMetricFamily("cockpit_price_per_hour", "The sweep's price per hour",
                                  labels=["instance", "currency"])
        alerts = GaugeMetricFamily("cockpit_open_alerts", "Material alert conditions open now",
                                   labels=box_l)
        for box in sample.boxes:
            name = [box.instance]
            up.add_metric(name, 1.0 if box.up else 0.0)
            for gpu in box.gpus:
                key = [box.instance, gpu.index]
                for family, value in ((util, gpu.util_ratio), (mem, gpu.mem_used_bytes),
                                      (mem_total, gpu.mem_total_bytes), (temp, gpu.temp_c),
                                      (power, gpu.power_w)):
                    if value is not None:
                        family.add_metric(key, value)
            for mount in box.mounts:
                key = [box.instance, mount.path]
                if mount.bytes_ratio is not None:
                    disk.add_metric(key, mount.bytes_ratio)
                if mount.inodes_ratio is not None:
                    inodes.add_metric(key, mount.inodes_ratio)
            cells.add_metric(name, box.cells)
            done.add_metric(name, box.cells_done)
            failed.add_metric(name, box.cells_failed)
            if box.last_record_at is not None:
                since.add_metric(name, max(0.0, now - box.last_record_at))
            if box.price_per_hour is not None:
                price.add_metric([box.instance, box.currency], box.price_per_hour)
            alerts.add_metric(name, box.open_alerts)
        yield from (up, util, mem, mem_total, temp, power, disk, inodes, cells, done, failed,
                    since, price, alerts)


class BindError(ValueError):
    """`--metrics` was not HOST:PORT."""


def parse_bind(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` -> (host, port); no host means loopback.

    Raises BindError with the accepted forms."""
    forms = "use HOST:PORT, e.g. 127.0.0.1:9400, 0.0.0.0:9400, [::1]:9400 or just 9400"
    raw = text.strip()
    if raw.startswith("["):
        host, sep, port_text = raw[1:].partition("]:")
        if not sep:
            raise BindError(f"{forms} (got {visible(text, limit=80)!r})")
    elif ":" in raw:
        host, _, port_text = raw.rpartition(":")
        if ":" in host:
            raise BindError(f"put an IPv6 address in brackets: [{host}]:{port_text}")
    else:
        host, port_text = "", raw
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise BindError(f"{forms} (the port must be 1-65535, got {visible(port_text, limit=80)!r})")
    return host or DEFAULT_HOST, int(port_text)


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class MetricsHandle:
    """A running endpoint: where it listens, `publish()` now, `close()` (also `handle()`)."""

    def __init__(self, server: WSGIServer, thread: threading.Thread, collector: FleetCollector,
                 trackers: Callable[[], Iterable[HostTracker]], clock: Callable[[], float]) -> None:
        self._server = server
        self._thread = thread
        self.collector = collector
        self._trackers = trackers
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        address = server.server_address
        self.host = str(address[0])
        self.port = int(address[1])
        self.exposed = not is_loopback(self.host)
        """True when other machines can scrape it (the user named a non-loopback address)."""

    @property
    def url(self) -> str:
        """The scrape URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def publish(self) -> None:
        """Sample the trackers now (call on the loop that owns them)."""
        self.collector.sample = sample_fleet(self._trackers(), self._clock())

    async def _publish_every(self, interval: float) -> None:
        while True:
            with contextlib.suppress(Exception):  # a failed sample keeps the last one served
                self.publish()
            await asyncio.sleep(interval)

    def close(self) -> None:
        """Stop publishing and serving (idempotent)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __call__(self) -> None:
        self.close()


def serve(host: str, port: int, trackers: Callable[[], Iterable[HostTracker]], *,
          interval: float = PUBLISH_INTERVAL_S,
          clock: Callable[[], float] = time.time) -> MetricsHandle:
    """Start the endpoint on `host:port` (port 0: any free port) in prometheus_client's
    thread; publish a first sample now and, when called on a running loop, every `interval`.

    `trackers` is called on the loop only. Raises OSError when the address cannot be bound.
    """
    collector = FleetCollector(clock)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, thread = start_http_server(port, addr=host, registry=registry)
    handle = MetricsHandle(server, thread, collector, trackers, clock)
    handle.publish()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None  # no loop (a script or a test): the caller publishes
    if loop is not None:
        handle._task = loop.create_task(handle._publish_every(interval))
    return handle
