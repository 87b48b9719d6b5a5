"""Local GPUs through NVML (`pynvml` from nvidia-ml-py), for `host: local` instances.

Every query degrades to NA on NVMLError_NotSupported and friends (nvitop's approach), and
a machine without the NVIDIA driver reports "no GPU (NVML not found)" instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from cockpit.models.snapshot import NA, Gpu, GpuProcess, GpuReading, GpuStatus

T = TypeVar("T")


def _q(func: Callable[[], T]) -> T | NA:
    import pynvml

    try:
        return func()
    except pynvml.NVMLError as exc:
        return NA(str(exc) or type(exc).__name__)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_gpus() -> GpuReading:
    """One reading of every local GPU."""
    try:
        import pynvml
    except ImportError:
        return GpuReading(GpuStatus.ABSENT, (), "no GPU (nvidia-ml-py not installed)")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return GpuReading(GpuStatus.ABSENT, (), "no GPU (NVML not found)")
    except pynvml.NVMLError as exc:
        return GpuReading(GpuStatus.FAILED, (), f"NVML failed to initialise: {exc}")
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
            util = _q(lambda h=handle: float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
            mem = _q(lambda h=handle: pynvml.nvmlDeviceGetMemoryInfo(h))
            procs = _q(lambda h=handle: pynvml.nvmlDeviceGetComputeRunningProcesses(h))
            mig = _q(lambda h=handle: pynvml.nvmlDeviceGetMigMode(h)[0])
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    uuid=uuid,
                    util_pct=util,
                    mem_used_mib=mem if isinstance(mem, NA) else mem.used / 2**20,
                    mem_total_mib=mem if isinstance(mem, NA) else mem.total / 2**20,
                    temp_c=_q(lambda h=handle: float(pynvml.nvmlDeviceGetTemperature(
                        h, pynvml.NVML_TEMPERATURE_GPU))),
                    power_w=_q(lambda h=handle: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                    power_limit_w=_q(
                        lambda h=handle: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
                    sm_clock_mhz=_q(lambda h=handle: float(pynvml.nvmlDeviceGetClockInfo(
                        h, pynvml.NVML_CLOCK_SM))),
                    sm_clock_max_mhz=_q(lambda h=handle: float(pynvml.nvmlDeviceGetMaxClockInfo(
                        h, pynvml.NVML_CLOCK_SM))),
                    mig_mode=mig if isinstance(mig, NA) else ("Enabled" if mig else "Disabled"),
                    processes=() if isinstance(procs, NA) else tuple(
                        GpuProcess(uuid, int(p.pid),
                                   NA("not reported") if p.usedGpuMemory is None
                                   else p.usedGpuMemory / 2**20)
                        for p in procs
                    ),
                )
            )
        return GpuReading(GpuStatus.OK, tuple(gpus))
    except pynvml.NVMLError as exc:
        return GpuReading(GpuStatus.FAILED, (), f"NVML query failed: {exc}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
