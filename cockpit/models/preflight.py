"""Preflight (the seed's Phase 0): is this box fit to run the sweep, before it costs a day?

Judged from one probe record plus a few facts only preflight asks for (driver and CUDA
versions, kernel Xid lines), against what the sweep expects (GPU model and count, the room
the queue will need) and what the profile says survives a teardown. Each check is PASS, WARN
or FAIL with its reason; a box is as bad as its worst check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import PurePosixPath

from cockpit.models.durations import format_bytes, parse_size
from cockpit.models.profile import Profile, StorageTier
from cockpit.models.queue import parse_queue_file
from cockpit.models.snapshot import NA, GpuStatus, HostSnapshot, Mount
from cockpit.models.sweep import Instance

MIN_CGROUP_BYTES = 8 << 30
FULL_PCT = 90.0


class Level(IntEnum):
    """Ordered so the worst check decides the box."""

    PASS = 0
    WARN = 1
    FAIL = 2


@dataclass(frozen=True)
class Check:
    """One preflight finding."""

    name: str
    level: Level
    reason: str


@dataclass(frozen=True)
class NetInterface:
    """A network interface as `ip -o addr` shows it: what NCCL could bind (MN2, MN4)."""

    name: str
    mtu: int
    addrs: tuple[str, ...] = ()
    up: bool = True


@dataclass(frozen=True)
class PreflightFacts:
    """What preflight reads beyond a probe record."""

    driver: str = ""
    cuda: str = ""
    xid_lines: tuple[str, ...] | None = None
    """Kernel Xid lines; None when the kernel log is not readable here."""
    nvswitch: bool | None = None
    """Whether the box has NVSwitches (`/dev/nvidia-nvswitch*`); None: not checked."""
    fabric_manager: str | None = None
    """`systemctl is-active nvidia-fabricmanager` (`active`, `inactive`, ...); None: not checked."""
    interfaces: tuple[NetInterface, ...] | None = None
    """The box's interfaces with their MTUs and addresses; None: not read."""
    nccl_ifname: str | None = None
    """NCCL_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME) the job's launcher sets; None: not set/known."""


@dataclass
class PreflightReport:
    """All checks of one box."""

    instance: str
    checks: list[Check] = field(default_factory=list)
    error: str = ""

    @property
    def level(self) -> Level:
        """The worst level (FAIL when the box could not be checked at all)."""
        if self.error:
            return Level.FAIL
        return max((c.level for c in self.checks), default=Level.PASS)

    def add(self, name: str, level: Level, reason: str) -> None:
        """Record a check."""
        self.checks.append(Check(name, level, reason))


def tier_of(path: str, profile: Profile, instance: Instance) -> StorageTier | None:
    """The profile tier whose path holds `path` (the longest matching prefix)."""
    best: tuple[int, StorageTier] | None = None
    target = PurePosixPath(path)
    for tier in profile.storage.tiers:
        root = PurePosixPath(instance.mounts.get(tier.id, tier.path))
        if target == root or root in target.parents:
            depth = len(root.parts)
            if best is None or depth > best[0]:
                best = (depth, tier)
    return best[1] if best else None


def _mount_for(path: str | None, snap: HostSnapshot) -> Mount | None:
    if path is None:
        return None
    return next((m for m in snap.mounts if m.path == path), None)


def evaluate(instance: Instance, profile: Profile, snap: HostSnapshot,
             facts: PreflightFacts) -> PreflightReport:
    """Every preflight check of one box."""
    report = PreflightReport(instance.name)
    _gpus(report, instance, snap)
    if facts.driver:
        report.add("driver", Level.PASS, f"NVIDIA driver {facts.driver}, CUDA {facts.cuda or '?'}")
    elif snap.gpu.status is GpuStatus.OK:
        report.add("driver", Level.WARN, "driver version not reported")
    _durable(report, instance, profile, snap)
    _room(report, instance, snap)
    _memory(report, snap)
    if isinstance(snap.tmux, NA):
        report.add("tmux", Level.WARN, "tmux is not installed: the queue is started with "
                                       "`nohup ... </dev/null` instead; "
                                       f"{profile.detach.note or 'check the profile for its detach risk'}")
    else:
        report.add("tmux", Level.PASS, "tmux present: the queue runs in a named session")
    if facts.xid_lines:
        report.add("xid", Level.FAIL, f"GPU Xid errors in the kernel log: {facts.xid_lines[-1][:120]}"
                                      f" (re-rent: U22)")
    elif facts.xid_lines is None:
        report.add("xid", Level.PASS, "kernel log not readable here (containers): Xid not checked")
    else:
        report.add("xid", Level.PASS, "no Xid errors in the kernel log")
    for gpu in snap.gpu.gpus:
        temp, clock, top = gpu.temp_c, gpu.sm_clock_mhz, gpu.sm_clock_max_mhz
        if not isinstance(temp, NA) and not isinstance(clock, NA) and not isinstance(top, NA) \
                and temp >= 83 and top > 0 and clock < 0.7 * top:
            report.add("thermal", Level.WARN, f"gpu{gpu.index} throttles: {clock:.0f}/{top:.0f} MHz "
                                              f"at {temp:.0f} C (U23)")
    return report


def _gpus(report: PreflightReport, instance: Instance, snap: HostSnapshot) -> None:
    want = instance.expect_gpu
    reading = snap.gpu
    if reading.status is not GpuStatus.OK:
        level = Level.FAIL if want is not None else Level.WARN
        report.add("gpu", level, f"no GPU readable: {reading.message or reading.status.value}")
        return
    names = [g.name for g in reading.gpus]
    if want is not None and want.count is not None and len(names) < want.count:
        report.add("gpu", Level.FAIL, f"{len(names)} GPU(s) reported, the sweep expects {want.count}")
        return
    if want is not None and want.model is not None:
        wrong = [n for n in names if want.model.lower() not in n.lower()]
        if wrong:
            report.add("gpu", Level.FAIL, f"expected {want.model}, nvidia-smi reports {', '.join(wrong)}")
            return
    report.add("gpu", Level.PASS, f"{len(names)} x {names[0] if names else '?'}")


def _durable(report: PreflightReport, instance: Instance, profile: Profile, snap: HostSnapshot) -> None:
    root = instance.durable_root
    if root is None:
        report.add("durable", Level.WARN, "the sweep names no durable_root: nothing to pull from")
        return
    mount = _mount_for(root, snap)
    if mount is None or mount.error or isinstance(mount.bytes_avail, NA):
        why = mount.error if mount is not None and mount.error else "not found"
        report.add("durable", Level.FAIL, f"durable_root {root} does not exist on the box ({why})")
        return
    irreversible = [a for a in profile.teardown.actions if not a.reversible]
    if instance.durable_mount is not None:
        _declared(report, root, instance.durable_mount, mount)
        return
    tier = tier_of(root, profile, instance)
    if tier is None:
        report.add("durable", Level.WARN, f"durable_root {root} is on no storage tier the "
                                          f"{profile.platform} profile knows: its survival is unknown")
    elif irreversible and not tier.survives_destroy:
        if not any(t.survives_destroy for t in profile.storage.tiers):
            # Nothing the profile knows survives (a bare box): not a mistake in the sweep, a
            # fact of the platform. The gate still holds teardown until the pull is N/N.
            report.add("durable", Level.WARN, f"durable_root {root} is on {tier.label}, and the "
                                              f"{profile.platform} profile knows no storage that "
                                              f"survives {irreversible[-1].label}: pull and verify "
                                              f"before teardown, or declare a mounted volume that "
                                              f"survives as durable_mount")
        else:
            report.add("durable", Level.FAIL, f"durable_root {root} is on {tier.label}, which is "
                                              f"LOST on {irreversible[-1].label}: put it on a tier "
                                              f"that survives")
    else:
        report.add("durable", Level.PASS, f"durable_root {root} is on {tier.label}, which survives "
                                          f"{'teardown' if irreversible else 'stop'}")


def _declared(report: PreflightReport, root: str, declared: str, mount: Mount) -> None:
    """The sweep declares `declared` a mounted volume that survives teardown: durable_root must
    be inside it and on its own filesystem (not the box's root disk). The survival is the
    user's word, not the profile's, and the reason says so."""
    inside = PurePosixPath(root) == PurePosixPath(declared) or \
        PurePosixPath(declared) in PurePosixPath(root).parents
    target = mount.target if isinstance(mount.target, str) else None
    if not inside:
        report.add("durable", Level.FAIL, f"durable_root {root} is not inside the declared "
                                          f"durable_mount {declared}")
    elif target is None or target == "/":
        report.add("durable", Level.FAIL, f"durable_mount {declared} is declared, but durable_root "
                                          f"{root} is on the root filesystem "
                                          f"({target or 'mount point unknown'}): the volume is not "
                                          f"mounted there")
    else:
        report.add("durable", Level.PASS, f"durable_root {root} is on the volume mounted at "
                                          f"{target} ({mount.fstype}), declared durable by the "
                                          f"sweep (the profile cannot vouch for it)")


def _room(report: PreflightReport, instance: Instance, snap: HostSnapshot) -> None:
    budget = instance.budget
    cells = len(parse_queue_file(snap.queue.queue_text)) if snap.queue.queue_text else 0
    targets = [("data", instance.checkpoints or instance.run_logs), ("durable", instance.durable_root)]
    for label, path in targets:
        mount = _mount_for(path, snap)
        if mount is None or isinstance(mount.bytes_avail, NA):
            continue
        need_bytes = 0
        need_inodes = 0
        if budget is not None and cells:
            per_cell = parse_size(budget.checkpoint) if budget.checkpoint else 0
            need_bytes = per_cell * cells + (parse_size(budget.scratch) if budget.scratch and
                                             label == "data" else 0)
            need_inodes = (budget.inodes_per_cell or 0) * cells
        problems = []
        if need_bytes and mount.bytes_avail < need_bytes:
            free = mount.bytes_avail
            problems.append(f"needs {format_bytes(need_bytes)} for {cells} cells, {format_bytes(free)} "
                            f"free: short {format_bytes(need_bytes - free)}")
        inodes = mount.inodes_avail
        if need_inodes and not isinstance(inodes, NA) and inodes < need_inodes:
            problems.append(f"needs {need_inodes} inodes for {cells} cells, {inodes} free: short "
                            f"{need_inodes - inodes} inodes")
        name = f"room ({label} {path})"
        if problems:
            report.add(name, Level.FAIL, "; ".join(problems))
            continue
        worst = max((p for p in (mount.bytes_pct, mount.inodes_pct) if not isinstance(p, NA)), default=0.0)
        if worst >= FULL_PCT:
            report.add(name, Level.WARN, f"already {worst:.0f}% full (bytes or inodes)")
        else:
            fits = f"fits {cells} cells" if need_bytes or need_inodes else "no budget in the sweep"
            free_inodes = inodes if not isinstance(inodes, NA) else "?"
            report.add(name, Level.PASS, f"{format_bytes(mount.bytes_avail)} and {free_inodes} inodes free; "
                                         f"{fits}")


def _memory(report: PreflightReport, snap: HostSnapshot) -> None:
    memory = snap.memory
    if isinstance(memory.max_bytes, NA):
        report.add("memory", Level.PASS, f"{memory.source}: no memory.max limit")
    elif memory.max_bytes < MIN_CGROUP_BYTES:
        report.add("memory", Level.WARN, f"cgroup memory.max is {format_bytes(memory.max_bytes)}: size "
                                         f"num_workers against it (U9)")
    else:
        report.add("memory", Level.PASS, f"cgroup memory.max {format_bytes(memory.max_bytes)}")


# -- job groups (issue 21) ---------------------------------------------------------------------
MAX_INTERFACES = 64
"""Interfaces read per box (`ip -o addr`): a GPU node has a handful (lo, eth, ib, docker0);
a host with hundreds of veths is listing containers NCCL must not use anyway."""
_VIRTUAL = ("lo", "docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "tun", "tap")
"""Interface name prefixes NCCL should not pick for inter-node traffic (MN2)."""


def parse_interfaces(text: str) -> tuple[NetInterface, ...]:
    """`ip -o addr show` and `ip -o link show` output (either or both) as interfaces: total,
    bounded by MAX_INTERFACES; a line out of shape is skipped."""
    found: dict[str, NetInterface] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[0].rstrip(":").isdigit():
            continue
        name = parts[1].rstrip(":").split("@", 1)[0]
        old = found.get(name)
        if old is None and len(found) >= MAX_INTERFACES:
            continue
        mtu = old.mtu if old else 0
        if "mtu" in parts[:-1]:
            value = parts[parts.index("mtu") + 1]
            mtu = int(value) if value.isdigit() and len(value) <= 6 else mtu
        addrs = old.addrs if old else ()
        if parts[2] in ("inet", "inet6") and len(addrs) < 16:
            addrs = (*addrs, parts[3].split("/", 1)[0])
        up = ("UP" in line.split(">", 1)[0]) if "<" in line else (old.up if old else True)
        found[name] = NetInterface(name, mtu, addrs, up)
    return tuple(found.values())


def nccl_interface(facts: PreflightFacts) -> tuple[NetInterface | None, str]:
    """The interface NCCL would use on this box, and why (or why it cannot be told)."""
    if facts.interfaces is None:
        return None, "interfaces not read"
    if facts.nccl_ifname:
        wanted = facts.nccl_ifname.lstrip("=")
        if wanted.startswith("^"):
            excluded = wanted[1:].split(",")
            left = [i for i in facts.interfaces if i.up and i.addrs
                    and not any(i.name.startswith(x) for x in excluded)]
            return (left[0] if len(left) == 1 else None,
                    f"NCCL_SOCKET_IFNAME={facts.nccl_ifname} leaves {len(left)} interface(s)")
        match = [i for i in facts.interfaces if any(i.name.startswith(w) for w in wanted.split(","))]
        return (match[0] if match else None,
                f"NCCL_SOCKET_IFNAME={facts.nccl_ifname}" + ("" if match else " matches nothing"))
    real = [i for i in facts.interfaces if i.up and any("." in a for a in i.addrs)
            and not i.name.startswith(_VIRTUAL)]
    if len(real) == 1:
        return real[0], "the only non-virtual interface with an IPv4 address"
    return None, (f"{len(real)} candidate interfaces ({', '.join(i.name for i in real[:6])})"
                  if real else "no non-virtual interface with an IPv4 address")


def group_report(name: str, members: dict[str, tuple[int, HostSnapshot | None, PreflightFacts]]
                 ) -> PreflightReport:
    """Checks across the boxes of one job group: `members` maps each box to (ranks it runs,
    its probe record, its facts). Same GPU model and count, same driver and CUDA, fabric
    manager where NVSwitch exists (MN1), the interface NCCL would use and its MTU (MN2, MN4);
    each PASS / WARN / FAIL with the fix."""
    report = PreflightReport(f"job {name}")
    models: dict[str, str] = {}
    for box, (ranks, snap, _facts) in members.items():
        if snap is None or snap.gpu.status is not GpuStatus.OK:
            continue
        names = sorted({g.name for g in snap.gpu.gpus})
        models[box] = " + ".join(names) or "none"
        count = len(snap.gpu.gpus)
        if count < ranks:
            report.add(f"gpus ({box})", Level.FAIL, f"{count} GPU(s) for {ranks} rank(s): give "
                                                    f"the box fewer ranks (--nproc-per-node) or rent more")
        elif count > ranks:
            report.add(f"gpus ({box})", Level.WARN, f"{count} GPUs, {ranks} rank(s): "
                                                    f"{count - ranks} GPU(s) bill idle")
    if len(set(models.values())) > 1:
        shown = ", ".join(f"{b}: {m}" for b, m in models.items())
        report.add("gpu model", Level.FAIL, f"different GPUs ({shown}): every rank runs at the "
                                            f"slowest one's pace; rent the same model everywhere")
    elif models:
        report.add("gpu model", Level.PASS, f"{next(iter(models.values()))} on every box")
    drivers = {b: f.driver for b, (_, _, f) in members.items() if f.driver}
    cudas = {b: f.cuda for b, (_, _, f) in members.items() if f.cuda}
    if len(set(cudas.values())) > 1 and len({c.split(".")[0] for c in cudas.values()}) > 1:
        report.add("cuda", Level.FAIL, f"CUDA differs in major version ({_by_box(cudas)}): NCCL "
                                       f"and the wheels' kernels must match; use one image on every box")
    elif len(set(drivers.values())) > 1 or len(set(cudas.values())) > 1:
        report.add("driver", Level.WARN, f"drivers/CUDA differ ({_by_box(drivers)}; "
                                         f"{_by_box(cudas)}): prefer one image and driver on every box")
    elif drivers:
        report.add("driver", Level.PASS, f"driver {next(iter(drivers.values()))}, CUDA "
                                         f"{next(iter(cudas.values()), '?')} on every box")
    for box, (_, _, facts) in members.items():
        if facts.nvswitch and facts.fabric_manager != "active":
            report.add(f"fabric manager ({box})", Level.FAIL,
                       f"NVSwitch present but nvidia-fabricmanager is "
                       f"{facts.fabric_manager or 'not known to run'}: every rank hangs at NCCL "
                       f"init (MN1). systemctl start nvidia-fabricmanager (its version must "
                       f"match the driver)")
        elif facts.nvswitch:
            report.add(f"fabric manager ({box})", Level.PASS, "NVSwitch present, fabric manager active")
    chosen: dict[str, NetInterface] = {}
    for box, (_, _, facts) in members.items():
        iface, why = nccl_interface(facts)
        if facts.interfaces is None:
            continue
        if iface is None:
            level = Level.FAIL if facts.nccl_ifname else Level.WARN
            report.add(f"nccl interface ({box})", level,
                       f"{why}: NCCL may bind docker0, lo or a slow NIC (MN2). Set "
                       f"NCCL_SOCKET_IFNAME to the inter-node interface (or ^docker0,lo)")
        else:
            chosen[box] = iface
            report.add(f"nccl interface ({box})", Level.PASS,
                       f"{iface.name} ({', '.join(iface.addrs[:2])}), MTU {iface.mtu}: {why}")
    if len({i.mtu for i in chosen.values()}) > 1:
        shown = ", ".join(f"{b}: {i.name} {i.mtu}" for b, i in chosen.items())
        report.add("mtu", Level.FAIL, f"MTUs differ ({shown}): small messages pass, large ones "
                                      f"hang (MN4). Set one MTU on every box; test with "
                                      f"ping -M do -s 8972 <peer>")
    elif len(chosen) > 1:
        report.add("mtu", Level.PASS, f"MTU {next(iter(chosen.values())).mtu} on every box")
    return report


def _by_box(values: dict[str, str]) -> str:
    return ", ".join(f"{box} {value}" for box, value in values.items()) or "not reported"
