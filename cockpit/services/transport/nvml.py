"""Local GPUs through NVML (`pynvml` from nvidia-ml-py), for `host: local` instances.

Every query degrades to NA on NVMLError_NotSupported and friends (nvitop's approach), and
a machine without the NVIDIA driver reports "no GPU (NVML not found)" instead of failing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from cockpit.models.snapshot import NA, Gpu, GpuProcess, GpuReading, GpuStatus


def _q(func: Callable[..., Any], *args: Any) -> Any:
    """Call one NVML function; NVML errors (NotSupported, ...) become NA with the reason."""
    import pynvml

    try:
        return func(*args)
    except pynvml.NVMLError as exc:
        return NA(str(exc) or type(exc).__name__)


def _num(value: Any, scale: float = 1.0) -> float | NA:
    return value if isinstance(value, NA) else float(value) / scale


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
            util = _q(pynvml.nvmlDeviceGetUtilizationRates, handle)
            mem = _q(pynvml.nvmlDeviceGetMemoryInfo, handle)
            procs = _q(pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
            mig = _q(pynvml.nvmlDeviceGetMigMode, handle)
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    uuid=uuid,
                    util_pct=util if isinstance(util, NA) else float(util.gpu),
                    mem_used_mib=mem if isinstance(mem, NA) else mem.used / 2**20,
                    mem_total_mib=mem if isinstance(mem, NA) else mem.total / 2**20,
                    temp_c=_num(_q(pynvml.nvmlDeviceGetTemperature, handle,
                                   pynvml.NVML_TEMPERATURE_GPU)),
                    power_w=_num(_q(pynvml.nvmlDeviceGetPowerUsage, handle), 1000.0),
                    power_limit_w=_num(_q(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle), 1000.0),
                    sm_clock_mhz=_num(_q(pynvml.nvmlDeviceGetClockInfo, handle,
                                         pynvml.NVML_CLOCK_SM)),
                    sm_clock_max_mhz=_num(_q(pynvml.nvmlDeviceGetMaxClockInfo, handle,
                                             pynvml.NVML_CLOCK_SM)),
                    mig_mode=mig if isinstance(mig, NA) else ("Enabled" if mig[0] else "Disabled"),
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
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
