"""cockpit.models.classify: tracebacks as one event, incremental bytes, hostile log shapes."""
# ruff: noqa: E501  (the log excerpts are real lines and keep their real length)

from __future__ import annotations

import random
import tracemalloc

import pytest

from cockpit.models.classify import MAX_CARRY, Finding, LogClassifier, classify_bytes, classify_excerpt
from cockpit.services.config.rulebook import load_rulebook

RULEBOOK = load_rulebook(user=False)

OOM_TB = b"""Epoch 3/20 | step 120 | loss=0.4312
Traceback (most recent call last):
  File "/root/proj/train.py", line 598, in <module>
    main()
  File "/root/proj/engine/trainer.py", line 163, in train_one_epoch
    outputs = self.model(images)
  File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", line 1784, in _call_impl
    return forward_call(*args, **kwargs)
  File "/root/proj/models/unet.py", line 118, in forward
    x = self.decoder(torch.cat([x, skip], dim=1))
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB
Epoch 4/20 | step 1 | loss=0.5
"""

BUS_ERROR_CHAIN = b"""ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data
    data = self._data_queue.get(timeout=timeout)
  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/signal_handling.py", line 66, in handler
    _error_if_any_worker_fails()
RuntimeError: DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/root/proj/train.py", line 77, in train
    for batch in loader:
  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 1146, in _try_get_data
    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e
RuntimeError: DataLoader worker (pid(s) 4321) exited unexpectedly
"""


def ids(found: list[Finding]) -> list[str]:
    return [f.rule.id for f in found]


def test_a_traceback_is_one_event_named_by_its_exception_line_and_user_frame() -> None:
    (oom,) = classify_bytes(RULEBOOK, [OOM_TB])
    assert oom.rule.id == "M2"
    assert oom.line_no == 11
    assert oom.excerpt.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert oom.frame == "unet.py:118 in forward"  # the deepest frame in user code
    assert oom.exception == "torch.OutOfMemoryError"


def test_context_tells_where_an_oom_happened() -> None:
    backward = OOM_TB.replace(b"x = self.decoder(torch.cat([x, skip], dim=1))", b"loss.backward()")
    assert ids(classify_bytes(RULEBOOK, [backward])) == ["M14"]
    optim = OOM_TB.replace(b"/root/proj/models/unet.py", b"/usr/lib/python3/dist-packages/torch/optim/adam.py")
    assert ids(classify_bytes(RULEBOOK, [optim])) == ["M17"]
    # The same message outside a traceback has no frames to read: the plain allocator rule.
    assert ids(classify_bytes(RULEBOOK, [OOM_TB.splitlines()[-2] + b"\n"])) == ["M2"]


def test_the_most_specific_rule_along_an_exception_chain_wins() -> None:
    found = classify_bytes(RULEBOOK, [BUS_ERROR_CHAIN])
    # The ERROR line before the traceback and the traceback itself: both DP15, one event key.
    assert ids(found) == ["DP15", "DP15"]
    assert found[1].excerpt == "RuntimeError: DataLoader worker (pid(s) 4321) exited unexpectedly"
    assert found[1].frame == "train.py:77 in train"
    assert {f.key for f in found} == {"DP15"}


def test_an_unknown_exception_is_a_generic_event_keyed_by_its_type() -> None:
    text = b"""Traceback (most recent call last):
  File "/root/proj/data.py", line 12, in __getitem__
    return self.items[i]["label"]
KeyError: 'label'
Traceback (most recent call last):
  File "/root/proj/data.py", line 14, in __getitem__
    return x.shape
AttributeError: 'NoneType' object has no attribute 'shape'
"""
    first, second = classify_bytes(RULEBOOK, [text])
    assert (first.rule.id, first.key, second.key) == ("PY", "PY:KeyError", "PY:AttributeError")
    assert first.rule.klass == "real-bug" and not first.rule.spec.retry


def test_rank_prefixed_tracebacks_and_interleaved_output() -> None:
    text = b"""[rank1]: Traceback (most recent call last):
[rank1]:   File "/root/proj/train.py", line 40, in step
[rank0]: Epoch 1/3 | step 9 | loss=0.3
[rank1]:     optimizer.step()
[rank1]:   File "/usr/local/lib/python3.10/dist-packages/torch/optim/adam.py", line 166, in step
[rank1]:     self._init_group(group)
[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB.
[rank0]: done
"""
    (oom,) = classify_bytes(RULEBOOK, [text])
    assert (oom.rule.id, oom.frame, oom.line_no) == ("M17", "train.py:40 in step", 7)


def test_a_header_without_a_real_traceback_does_not_swallow_the_log() -> None:
    text = b"ERROR:root:Traceback (most recent call last):\nEpoch 1/2 ok\nKilled\n"
    assert ids(classify_bytes(RULEBOOK, [text])) == ["U9"]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000])
def test_any_chunking_gives_the_same_findings(size: int) -> None:
    text = OOM_TB + BUS_ERROR_CHAIN + b"step 3 loss=nan\r\nKilled\r\n"
    whole = [(f.rule.id, f.line_no, f.excerpt, f.frame) for f in classify_bytes(RULEBOOK, [text])]
    chunks = [text[i:i + size] for i in range(0, len(text), size)]
    cut = [(f.rule.id, f.line_no, f.excerpt, f.frame) for f in classify_bytes(RULEBOOK, chunks)]
    assert cut == whole
    assert [w[0] for w in whole] == ["M2", "DP15", "DP15", "O13", "U9"]


def test_random_chunking_property() -> None:
    rng = random.Random(7)
    text = (OOM_TB + BUS_ERROR_CHAIN) * 3
    whole = ids(classify_bytes(RULEBOOK, [text]))
    for _ in range(50):
        cuts = sorted(rng.sample(range(1, len(text)), 12))
        chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert ids(classify_bytes(RULEBOOK, chunks)) == whole


def test_crlf_progress_bars_and_non_utf8_bytes() -> None:
    text = (b"100%|\xe2\x96\x88\xe2\x96\x88| 50/50 [00:01<00:00]\r 12%|\xe2\x96\x88 | 6/50 loss=nan\r"
            b" 14%|\xe2\x96\x88 | 7/50 loss=0.3\r\n"
            b"caf\xff\xfe bytes \x80 here\r\n"
            b"OSError: [Errno 28] No space left on device \xff\r\n")
    nan, disk = classify_bytes(RULEBOOK, [text[:40], text[40:]])
    assert (nan.rule.id, nan.line_no, nan.excerpt) == ("O13", 1, "12%|█ | 6/50 loss=nan")
    assert (disk.rule.id, disk.line_no) == ("U7", 3)
    assert disk.excerpt == "OSError: [Errno 28] No space left on device \ufffd"
    assert "\r" not in disk.excerpt


def test_a_ten_megabyte_line_is_judged_once_without_buffering_it() -> None:
    classifier = LogClassifier(RULEBOOK)
    found: list[Finding] = []
    filler = b"x" * (1 << 20)
    tracemalloc.start()
    try:
        for index in range(10):
            found += classifier.feed(filler)
            if index == 5:
                found += classifier.feed(b" CUDA error: out of memory ")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert classifier.carried_bytes <= MAX_CARRY
    assert peak < 8 << 20, "a long line must not be accumulated"
    found += classifier.feed(b" still the same line; CUDA error: out of memory again\nKilled\n")
    found += classifier.finish()
    assert ids(found) == ["U10", "U9"], "one finding per rule per line, however long"
    assert found[0].excerpt.count("CUDA error: out of memory") == 1
    assert (found[0].line_no, found[1].line_no) == (1, 2)


def test_a_signature_in_an_unterminated_last_line_is_found_at_finish() -> None:
    classifier = LogClassifier(RULEBOOK)
    assert classifier.feed(b"Epoch 1/2\nRuntimeError: CUDA error: out of memory") == []
    (found,) = classifier.finish()
    assert (found.rule.id, found.line_no) == ("U10", 2)


def test_flush_reports_a_finished_traceback_without_waiting_for_another_line() -> None:
    classifier = LogClassifier(RULEBOOK)
    body = OOM_TB.rsplit(b"Epoch 4/20", 1)[0]
    assert classifier.feed(body) == []  # the next line could still continue the chain
    assert ids(classifier.flush()) == ["M2"]
    assert classifier.feed(b"Epoch 4/20 | step 1 | loss=0.5\n") == []
    assert classifier.finish() == []


def test_reset_after_truncation_restarts_lines_and_drops_open_state() -> None:
    classifier = LogClassifier(RULEBOOK)
    classifier.feed(b"a\nb\nTraceback (most recent call last):\n  File \"x.py\", line 1, in f\n")
    found = classifier.feed(b"Killed\n", reset=True)
    assert [(f.rule.id, f.line_no) for f in found] == [("U9", 1)]


def test_only_new_bytes_are_scanned() -> None:
    classifier = LogClassifier(RULEBOOK)
    assert ids(classifier.feed(b"Killed\n")) == ["U9"]
    assert classifier.feed(b"Epoch 2/3 loss=0.1\n") == []  # the old Killed is not reported again
    assert classifier.bytes_seen == len(b"Killed\nEpoch 2/3 loss=0.1\n")


def clean_log(lines: int) -> bytes:
    rng = random.Random(3)
    out = []
    for i in range(lines):
        kind = i % 7
        if kind == 0:
            out.append(f"Epoch {i % 20 + 1}/20 | step {i} | loss={rng.random():.4f} lr=3e-4 "
                       f"grad_norm={rng.random() * 3:.3f} val_error={rng.random():.3f}")
        elif kind == 1:
            out.append(f"{i % 100:3d}%|███▍  | {i}/50000 [01:2{i % 10}<02:11, 12.3it/s, loss=0.{i % 997}]"
                       f"\r{(i + 1) % 100:3d}%|███▌ | {i + 1}/50000")
        elif kind == 2:
            out.append(f"[2026-11-20 03:12:{i % 60:02d},123] INFO trainer.py:214 - eval mAP=0.{i % 97} "
                       f"error_rate=0.0{i % 9} mean_abs_error=0.3 best=0.77")
        elif kind == 3:
            out.append("/usr/local/lib/python3.10/dist-packages/torch/optim/lr_scheduler.py:143: "
                       "UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`.")
        elif kind == 4:
            out.append(f"Saved checkpoint to /root/autodl-fs/ckpt/epoch_{i}.pth (nan_guard=on, "
                       f"oom_retry: false)")
        elif kind == 5:
            out.append(f"Killed {i % 4} stale workers from the previous run")
        else:
            out.append(f"  warnings.warn(  # step {i} took {rng.random():.2f} nanoseconds of idle")
    return ("\n".join(out) + "\n").encode()


def test_a_clean_log_of_100k_lines_yields_no_event() -> None:
    text = clean_log(100_000)
    assert classify_bytes(RULEBOOK, [text[i:i + 65536] for i in range(0, len(text), 65536)]) == []


# --- issue 17: excerpts as pasted in issue threads, and one verdict per excerpt ------------

HEADLESS = b"""epoch 3 loss 0.41
  File "/home/u/srgan/train.py", line 71, in <module>
    train()
  File "/home/u/srgan/train.py", line 38, in train
    epoch = int(sess.run(global_step) / np.ceil(len(x_train)/batch_size)) + 1
TypeError: object of type 'NoneType' has no len()
next run starts
"""


def test_a_traceback_that_lost_its_header_starts_at_its_first_frame() -> None:
    found = classify_bytes(RULEBOOK, [HEADLESS])
    assert [(f.rule.id, f.line_no, f.exception, f.frame) for f in found] == [
        ("PY", 6, "TypeError", "train.py:38 in train")]


def test_frames_ending_in_an_ordinary_line_are_a_stack_dump_not_a_failure() -> None:
    dump = b'Stack (most recent call last):\n  File "/app/run.py", line 9, in <module>\n    log()\nINFO:root:checkpoint saved\nepoch 2\n'
    assert classify_bytes(RULEBOOK, [dump]) == []


def test_a_rich_boxed_traceback_is_named_by_the_line_below_the_box() -> None:
    log = ("step 1\n"
           "╭──────── Traceback (most recent call last) ────────╮\n"
           "│ /app/train.py:12 in <module>                      │\n"
           "│ ❱ 12 │   x = d['label']                            │\n"
           "╰───────────────────────────────────────────────────╯\n"
           "RuntimeError: CUDA error: an illegal memory access was encountered\n"
           "step 2\n").encode()
    found = classify_bytes(RULEBOOK, [log])
    assert [(f.rule.id, f.line_no) for f in found] == [("CUDA-IMA", 6)]


def test_text_before_a_traceback_header_on_its_line_is_judged() -> None:
    # The terminal echoed ^C where the tqdm bar stopped; the traceback follows on that line.
    log = b"eval:   0%|          | 0/943 [00:00<?, ?it/s]^CTraceback (most recent call last):\n  File \"test.py\", line 214, in <module>\n    main()\n"
    assert [f.rule.id for f in classify_bytes(RULEBOOK, [log])] == ["INT"]


def test_a_warning_rule_matches_on_a_handled_warning_line_others_do_not() -> None:
    sm86 = b"UserWarning: NVIDIA RTX A6000 with CUDA capability sm_86 is not compatible with the current PyTorch installation."
    rule = RULEBOOK.match_line(sm86)
    assert rule is not None and (rule.id, rule.klass) == ("U28", "environment")
    assert RULEBOOK.match_line(b"UserWarning: loss is nan in a metric we ignore") is None


def test_the_verdict_follows_evidence_order_not_line_order() -> None:
    log = b"""[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE) ran for 600020 milliseconds before timing out.
RuntimeError: CUDA error: uncorrectable ECC error encountered
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 812917) of binary: /usr/bin/python
"""
    findings = classify_bytes(RULEBOOK, [log])
    assert [f.rule.id for f in findings] == ["MN3", "U22", "U9"]
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass, verdict.line_no) == (
        "U9", "host-oom", 3)
    # Without the launcher's signal the driver's ECC line is the cause, and the watchdog a symptom.
    cut = log.rsplit(b"\n", 2)[0] + b"\n"
    verdict = classify_excerpt(RULEBOOK, cut)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("U22", "hardware")
    alone = log.split(b"\n", 1)[0] + b"\n"
    verdict = classify_excerpt(RULEBOOK, alone)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("MN3", "probabilistic")


def test_a_scheduler_state_with_a_reason_explains_the_signal_after_it() -> None:
    log = b"""srun: error: node7: task 0: Killed
slurmstepd: error: Detected 1 oom_kill event in StepId=65138579.batch. Some of the step tasks have been OOM Killed.
slurmstepd: error: *** STEP 65138579.0 ON node7 CANCELLED AT 2024-01-01T00:00:00 ***
"""
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("SLURM4", "host-oom")


def test_an_excerpt_that_ends_on_an_exception_line_died_of_it() -> None:
    log = b"loading data\nepoch 1 loss 0.3\nAttributeError: 'NoneType' object has no attribute 'to'\n"
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass, verdict.line_no) == (
        "PY", "real-bug", 3)
    # The same line in the middle of a log is a handled error the program printed.
    assert classify_excerpt(RULEBOOK, log + b"epoch 2 loss 0.2\n") is None


def test_a_bare_exit_code_names_an_excerpt_only_for_a_known_runner() -> None:
    assert classify_excerpt(RULEBOOK, b"epoch 1\n", exit_code=3) is None
    verdict = classify_excerpt(RULEBOOK, b"epoch 1\n", exit_code=3, runner_known=True)
    assert verdict is not None and verdict.rule.id == "U6-gate" and verdict.line_no is None
    verdict = classify_excerpt(RULEBOOK, b"epoch 1\n", exit_code=137)
    assert verdict is not None and verdict.klass == "host-oom"


@pytest.mark.parametrize("line", [
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ReadTimeoutError(\"HTTPSConnectionPool(host='pypi.org', port=443): Read timed out. (read timeout=15)\")': /simple/torch/",
    "wandb: Network error (ReadTimeout), entering retry loop.",
    "submitit WARNING (2022-03-31 21:08:23,557) - Bypassing signal SIGTERM",
    "SLURM auto-requeueing enabled. Setting signal handlers.",
    "W0823 16:54:02.337000 139733055988160 torch/distributed/elastic/multiprocessing/api.py:857] Sending process 6236 closing signal SIGTERM",
    "npm ERR! code ELIFECYCLE",
    "epoch 3: val_error=0.12 timeout_s=30 preempt_checkpoints=True",
    "Killed 3 stale workers",
    "API quota exceeded for today's free tier; using the cached copy",
])
def test_look_alikes_of_the_issue_17_families_are_no_event(line: str) -> None:
    assert RULEBOOK.match_line(line.encode()) is None, line


def test_loguru_and_timestamped_tracebacks_are_one_event() -> None:
    loguru = b"""2023-05-01 10:00:01.123 | ERROR    | __main__:main:20 - An error has been caught in function 'main'
Traceback (most recent call last):

  File "/app/tools/train.py", line 30, in <module>
    main()
    \xe2\x94\x94 <function main at 0x7f>

> File "/app/tools/train.py", line 20, in main
    inps = inps.to(dtype)

AttributeError: 'NoneType' object has no attribute 'to'
2023-05-01 10:00:02.000 | INFO     | __main__:main:25 - shutting down
"""
    found = classify_bytes(RULEBOOK, [loguru])
    assert [(f.rule.id, f.exception, f.frame) for f in found] == [
        ("PY", "AttributeError", "train.py:20 in main")]
    stamped = b"""2024-05-01T10:00:00.120Z step 10 loss 0.3
2024-05-01T10:00:00.123Z Traceback (most recent call last):
2024-05-01T10:00:00.124Z   File "/app/train.py", line 12, in <module>
2024-05-01T10:00:00.124Z     x = batch["label"]
2024-05-01T10:00:00.125Z KeyError: 'label'
2024-05-01T10:00:00.200Z shutting down
"""
    found = classify_bytes(RULEBOOK, [stamped])
    assert [(f.rule.id, f.exception, f.line_no) for f in found] == [("PY", "KeyError", 5)]


@pytest.mark.parametrize(("line", "rule", "klass"), [
    # argparse refusing the launch command (a wrong flag, a launcher that injects --local_rank)
    ("train.py: error: unrecognized arguments: --local_rank=0", "CLI-ARGS", "ops"),
    ("iColoriT training scripts: error: unrecognized arguments: --local-rank=0", "CLI-ARGS", "ops"),
    ("train.py: error: the following arguments are required: --data", "CLI-ARGS", "ops"),
    # Hydra / OmegaConf rejecting the config
    ("omegaconf.errors.ConfigAttributeError: Key 'min_lr' is not in struct", "CONFIG", "ops"),
    ("Error merging 'config' with schema", "CONFIG", "ops"),
    # installed versions that lack a name the code imports
    ("ImportError: cannot import name 'Trainer' from 'transformers' (unknown location)", "IMPORT-VERSION", "environment"),
    ("cannot import name 'builder' from 'google.protobuf.internal' (/x/google/protobuf/internal/__init__.py)", "IMPORT-VERSION", "environment"),
    # the hub's connection failure in both wordings, a notebook traceback named by a network error
    ("huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache. Please check your connection and try again or make sure your Internet connection is on.", "NET", "probabilistic"),
    ("TimeoutError                              Traceback (most recent call last)", "NET", "probabilistic"),
    ("aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host huggingface.co:443 ssl:default", "NET", "probabilistic"),
    # Slurm requeue and submitit's time-out
    ("slurmstepd: error: *** JOB 608 ON SERVER_NAME CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***", "SLURM-PREEMPTED", "probabilistic"),
    ("submitit WARNING (2021-03-31 21:08:23,557) - Caught signal SIGUSR1 on learnfair0001: this job is timed-out.", "SLURM-TIMEOUT", "ops"),
    # other schedulers' memory and walltime kills, older Slurm's memory kill
    ("slurmstepd: error: Job 2381234 exceeded memory limit (8392704 > 8388608), being killed", "SLURM4", "host-oom"),
    ("=>> PBS: job killed: mem 33554432kb exceeded limit 33554432kb", "SLURM4", "host-oom"),
    ("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", "SLURM4", "host-oom"),
    ("=>> PBS: job killed: walltime 86410 exceeded limit 86400", "SLURM-TIMEOUT", "ops"),
    # a signal a launcher or the shell reports
    ("torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL", "U9", "host-oom"),
    ("srun: error: gpu-node-3: task 0: Killed", "U9", "host-oom"),
    ("[1]+  Terminated              nohup python train.py > log.txt 2>&1", "SIGTERM", "ops"),
    ("Detected KeyboardInterrupt, attempting graceful shutdown...", "INT", "ops"),
    # builds and binary wheels that do not match the machine
    ("Failed to initialize NVML: Driver/library version mismatch", "U28", "environment"),
    ("nvcc fatal   : Unsupported gpu architecture 'compute_89'", "U28", "environment"),
    ("A module that was compiled using NumPy 1.x cannot be run in", "IMPORT-VERSION", "environment"),
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "NO-DRIVER", "environment"),
    ("Pod was terminated in response to imminent node shutdown.", "PREEMPT", "probabilistic"),
    # torchrun's root-cause block for the other signals: SIGBUS is /dev/shm, SIGSEGV a native crash
    ("  exitcode  : -7 (pid: 1234)", "DP15", "disk-full"),
    ("Bus error (core dumped)", "DP15", "disk-full"),
    ("  traceback : Signal 11 (SIGSEGV) received by PID 1234", "SEGV", "real-bug"),
    ("  traceback : Signal 6 (SIGABRT) received by PID 1234", "ABORT", "real-bug"),
    # torch's own initialisation warning names a driver state, not the code
    ("UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero.", "NO-DRIVER", "environment"),
    ("RuntimeError: cuda runtime error (999) : unknown error at /pytorch/aten/src/THC/THCGeneral.cpp:47", "GPU-LOST", "hardware"),
    # peers that never arrived, object stores out of reach
    ("RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)", "NCCL-PEER", "probabilistic"),
    ("botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL: \"https://s3.amazonaws.com/bucket\"", "NET", "probabilistic"),
    # a CUDA kernel's own assertion is the bad index, a GPU too old for the kernel is the machine
    ("../aten/src/ATen/native/cuda/Indexing.cu:1141: indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.", "O14", "real-bug"),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "U28", "environment"),
])
def test_issue_17_families_of_collector_d(line: str, rule: str, klass: str) -> None:
    found = RULEBOOK.match_line(line.encode())
    assert found is not None and (found.id, found.klass) == (rule, klass), line


@pytest.mark.parametrize("line", [
    # a CRLF script's value: U26 names it, not the command line
    "train.py: error: argument --epochs: invalid int value: '20\\r'",
    "usage: train.py [-h] --train-dir TRAIN_DIR [--val-dir VAL_DIR]",
    # the program's own import cycle is a bug, not the environment (a traceback names it)
    "ImportError: cannot import name 'Model' from partially initialized module 'models' (most likely due to a circular import)",
    "submitit INFO (2021-04-01 02:26:27,643) - Job has not timed out. Ran 61 minutes out of requested 120 minutes.",
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno 110] Connection timed out')': /whl/torch_stable.html",
    "Eval Char error rate=0.7037084, Word error rate=3.0769231",
])
def test_look_alikes_of_collector_d_families_are_not_those_events(line: str) -> None:
    found = RULEBOOK.match_line(line.encode())
    assert found is None or found.id == "U26", (line, found and found.id)


def test_an_error_inside_deepspeeds_stop_handler_is_a_stop_from_outside() -> None:
    log = b"""[2023-05-30 20:29:14,854] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 19380
    main()
  File "/opt/conda/lib/python3.8/site-packages/deepspeed/launcher/runner.py", line 556, in main
    result.wait()
  File "/opt/conda/lib/python3.8/subprocess.py", line 1764, in _try_wait
    (pid, sts) = os.waitpid(self.pid, wait_flags)
  File "/opt/conda/lib/python3.8/site-packages/deepspeed/launcher/runner.py", line 548, in sigkill_handler
    result_kill = subprocess.Popen(kill_cmd, env=env)
NameError: free variable 'kill_cmd' referenced before assignment in enclosing scope
"""
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("SIGINT-HANDLER", "ops")
    # The same NameError anywhere else is the program's bug.
    other = log.replace(b"in sigkill_handler", b"in main")
    verdict = classify_excerpt(RULEBOOK, other)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PY", "real-bug")


def test_an_exception_followed_by_its_own_message_lines_still_ends_the_excerpt() -> None:
    # torch's appendix under every CUDA error, or an indented message, is part of the exception.
    cuda = b"""epoch 3 step 200 loss 0.41
RuntimeError: CUDA error: invalid argument
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""
    verdict = classify_excerpt(RULEBOOK, cuda)
    assert verdict is not None and (verdict.rule.id, verdict.line_no) == ("PY", 2)
    # The run went on after it: a handled error it printed, as before.
    assert classify_excerpt(RULEBOOK, cuda + b"epoch 3 step 201 loss 0.40\n") is None


def test_a_native_abort_names_the_run_only_when_nothing_else_does() -> None:
    watchdog = b"""[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE) ran for 600020 milliseconds before timing out.
Aborted (core dumped)
"""
    verdict = classify_excerpt(RULEBOOK, watchdog)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("MN3", "probabilistic")
    verdict = classify_excerpt(RULEBOOK, watchdog.split(b"\n", 1)[1])
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("ABORT", "real-bug")


def test_a_notebook_traceback_is_named_by_its_ipython_header() -> None:
    interrupted = b"""---------------------------------------------------------------------------
KeyboardInterrupt                         Traceback (most recent call last)
<ipython-input-3-4dd6bfff15e9> in <module>
----> 1 trainer.train()
"""
    verdict = classify_excerpt(RULEBOOK, interrupted)
    assert verdict is not None and (verdict.rule.id, verdict.klass, verdict.line_no) == (
        "INT", "ops", 2)
    # The exception line below the header, when present, is what is judged.
    keyerror = b"""KeyError                                  Traceback (most recent call last)
Cell In[5], line 1
----> 1 x = batch['label']

KeyError: 'label'
next cell output
"""
    verdict = classify_excerpt(RULEBOOK, keyerror)
    assert verdict is not None and (verdict.rule.id, verdict.line_no) == ("PY", 5)
    assert classify_excerpt(RULEBOOK, b"Traceback (most recent call last) is how Python starts one\n") is None


@pytest.mark.parametrize(("line", "rule", "klass"), [
    # the same GPU faults in other wrappers: enum names, old torch/lua codes, the GSP, the PSU
    ("CUDA error 214: cudaErrorECCUncorrectable", "U22", "hardware"),
    ("luajit: cuda runtime error (30) : unknown error at /tmp/luarocks_cutorch-scm-1-9927/cutorch/lib/THC/THCStorage.c:113", "GPU-LOST", "hardware"),
    ("NVRM: nvAssertFailedNoLog: Assertion failed: Back to back GSP RPC timeout detected! GPU marked for reset @ kernel_gsp.c:2387", "GPU-LOST", "hardware"),
    ("cuLaunchKernel returned CUDA_ERROR_LAUNCH_FAILED", "GPU-LOST", "hardware"),
    ("NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0", "GPU-LOST", "hardware"),
    ("NVRM: GPU 0000:65:00.0: GPU does not have the necessary power cables connected.", "GPU-LOST", "hardware"),
    ("[  812.123456] I/O error, dev nvme0n1, sector 123456 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 0", "GPU-LOST", "hardware"),
    ("healthCheck: GPU 00000000:3B:00.0: Detected Critical Xid Error", "XID", "hardware"),
    ("thermal thermal_zone0: critical temperature reached (105 C), shutting down", "U23", "hardware"),
    ("[500967.571516] amdgpu 0000:dd:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!", "GPU-LOST", "hardware"),
    ("Jul 14 10:25:59 host kernel: [699615.762794] print_req_error: critical medium error, dev sdf, sector 1811939592", "GPU-LOST", "hardware"),
    # an InfiniBand adapter or port that failed is the node, not a transient peer
    ("node48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error", "IB-FATAL", "hardware"),
    ("c:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error", "IB-FATAL", "hardware"),
    # object stores, cloud APIs and LFS servers that answered with a transient server error
    ("{'Error': {'Code': 'SlowDown', 'Message': 'Please reduce your request rate.'}", "NET", "probabilistic"),
    ("google.api_core.exceptions.ServiceUnavailable: 503 SERVICE UNAVAILABLE", "NET", "probabilistic"),
    ("ERROR:server.lib.inference:Error: Request failed: 503 Service Unavailable ", "NET", "probabilistic"),
    ("openai.RateLimitError: Error code: 429 - {'error': {'message': 'Rate limit reached'}}", "NET", "probabilistic"),
    ("500 response executing GraphQL.", "NET", "probabilistic"),
    ("Smudge error: Error downloading data/x.json (32bb14b): batch response: Fatal error: Server error &{...} from HTTP 502", "NET", "probabilistic"),
    ("ssl.SSLError: [SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC] decryption failed or bad record mac (_ssl.c:2560)", "NET", "probabilistic"),
    ("fatal: the remote end hung up unexpectedly", "NET", "probabilistic"),
    ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Broken pipe", "NCCL-PEER", "probabilistic"),
    # native crashes of the program itself: uncaught logic errors, heap corruption, SIGFPE
    ("terminate called after throwing an instance of 'std::out_of_range'", "CPP-EXC", "real-bug"),
    ("terminate called after throwing an instance of 'std :: out_of_range'", "CPP-EXC", "real-bug"),
    ("  what():  vector::_M_range_check: __n (which is 1) >= this->size() (which is 1)", "CPP-EXC", "real-bug"),
    ("free(): double free detected in tcache 2", "HEAP", "real-bug"),
    ("*** Error in `python': double free or corruption (!prev): 0x000056383cda7e40 ***", "HEAP", "real-bug"),
    ("Floating point exception (core dumped)", "SIGFPE", "real-bug"),
    ("kernel: traps: python[7276] trap divide error ip:7f96bd2cea0b sp:7fffbb710190 error:0 in libcapmds.so[7f96bd202000+106000]", "SIGFPE", "real-bug"),
    ("*** SIGFPE (@0x7f3f25003993) received by PID 38540 (TID 0x7f3976dde700) from PID 620771731; stack trace: ***", "SIGFPE", "real-bug"),
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Segmentation fault. ", "SEGV", "real-bug"),
    ("*** Aborted at 1722869898 (unix time) try \"date -d @1722869898\" if you are using GNU date ***", "ABORT", "real-bug"),
    # torch's own messages for tensors that do not fit the operation, printed without a traceback
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x512 and 256x10)", "TORCH-BUG", "real-bug"),
    ("[rank2]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:2! (when checking argument for argument tensors in method wrapper_CUDA_cat)", "TORCH-BUG", "real-bug"),
    ("RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.cuda.FloatTensor [4, 8]] is at version 2; expected version 1 instead.", "TORCH-BUG", "real-bug"),
    ("IndexError: index out of range in self", "TORCH-BUG", "real-bug"),
    ("[rank0]: ValueError: Unexpected keyword argument 'foo'", "RANK-EXC", "real-bug"),
    ("2021-03-17 12:21:19,650 | x2num.py   | line 14 : NaN or Inf found in input tensor.", "O13", "real-bug"),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8589934592 bytes.", "U10", "real-bug"),
    # the operator's device index, scheduler and hand stops
    ("RuntimeError: CUDA error: invalid device ordinal", "DEVICE-ORDINAL", "ops"),
    ("THCudaCheck FAIL file=/pytorch/torch/csrc/cuda/Module.cpp line=59 error=101 : invalid device ordinal", "DEVICE-ORDINAL", "ops"),
    ("scancel: Terminating job 123456", "SLURM-CANCELLED", "ops"),
    ("Job <1234> is being terminated: TERM_OWNER: job killed by owner.", "SLURM-CANCELLED", "ops"),
    ("43575862.0   python  CANCELLED+      0:15", "SLURM-CANCELLED", "ops"),
    ("job 4242.1 exceeded hard wallclock time - initiate terminate method", "SLURM-TIMEOUT", "ops"),
    ("[2024-01-01 10:00:00] SIGTERM received, saving a checkpoint and exiting", "SIGTERM-LAUNCHER", "ops"),
    ("zsh: warning: 1 jobs SIGHUPed", "SIGTERM-LAUNCHER", "ops"),
    ("2017/03/16 13:50:06 bds: Received OS signal 'hangup'", "SIGTERM-LAUNCHER", "ops"),
    ("MOAB_INFO:  job exceeded wallclock limit", "SLURM-TIMEOUT", "ops"),
    ("Aborted!", "INT", "ops"),
    ("[rank0]: KeyboardInterrupt", "INT", "ops"),
    ("Training interrupted by user.", "INT", "ops"),
    # a CPU instruction this box lacks is the build, not the code
    ("Illegal instruction (core dumped)", "AD3", "environment"),
])
def test_issue_17_families_of_collector_e(line: str, rule: str, klass: str) -> None:
    found = RULEBOOK.match_line(line.encode())
    assert found is not None and (found.id, found.klass) == (rule, klass), (line, found and found.id)


@pytest.mark.parametrize("line", [
    # nvidia-smi's healthy tables and NCCL's set-up lines name ECC, slowdown and IB without a fault
    "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
    "    HW Slowdown                       : Not Active",
    "node1:1234:1250 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>",
    # a retry that is still going, a warning that says it is not a failure, a skipped step
    "wandb: 500 encountered ({\"errors\":[{\"message\":\"An internal error occurred. Please contact support.\",\"path\":[\"upsertBucket\"]}],\"data\":{\"upsertBucket\":null}}), retrying request",
    "2020-03-29 17:42:04.757305: W tensorflow/core/common_runtime/bfc_allocator.cc:219] Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.87GiB. The caller indicates that this is not a failure, but may mean that there could be performance gains if more memory were available.",
    "2025-08-23 06:19:20,889 - trainers.dit_trainer - WARNING - Step 1557: detected nan/inf/spiky gradient (norm=2.1966569423675537); skipping optimizer step.",
    "INFO:werkzeug:127.0.0.1 - - [24/Apr/2023 23:37:51] \"POST /api/inference/text/stream HTTP/1.1\" 200 -",
    # the NCCL watchdog's own abort and torch's exit warning are not a C++ bug or a rank's exception
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "[rank0]:[W1120 10:00:00.123456 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.",
    # ssh's refusal and a bare PermissionError outside a traceback are text
    "git@github.com: Permission denied (publickey).",
    "PermissionError: [Errno 13] Permission denied: '/data'",
    "Sanity check passed: all tensors on the same device (cuda:0)",
    # torch prints this at the end of a run that finished, when rank 0's store exits first
    "[W514 18:33:36.536327028 TCPStore.cpp:138] [c10d] recvValueWithTimeout failed on SocketImpl(fd=3, addr=[localhost]:34658, remote=[localhost]:1234): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
    # a user-defined stop criterion is not a stop by the user
    "Early stopping: training stopped by user-defined criterion (patience 5)",
    "[  +0.000005] pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)",
    "nohup: ignoring input and appending output to 'nohup.out'",
    "epoch 12: 0 I/O errors, 0 medium errors, throughput 812 MB/s",
])
def test_look_alikes_of_collector_e_families_are_no_event(line: str) -> None:
    assert RULEBOOK.match_line(line.encode()) is None, (line, RULEBOOK.match_line(line.encode()))


def test_collector_e_families_decide_the_excerpt_in_evidence_order() -> None:
    # A path the run may not write, at the end of a traceback, is the operator's to fix.
    perm = b"""  File "/home/u/anaconda3/lib/python3.6/os.py", line 220, in makedirs
    mkdir(name, mode)
PermissionError: [Errno 13] Permission denied: '/data'
"""
    verdict = classify_excerpt(RULEBOOK, perm)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PERM", "ops")
    # The same traceback ending in another OSError stays the program's.
    other = perm.replace(b"PermissionError: [Errno 13] Permission denied", b"OSError: [Errno 36] File name too long")
    verdict = classify_excerpt(RULEBOOK, other)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PY", "real-bug")
    # A failed IB port is the node; the peer's completion error after it is the echo.
    ib = b"""n48:1:2 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got completion from peer node48<37948> with error 12, opcode 2, len 1, vendor err 129
n48:1:2 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error
"""
    verdict = classify_excerpt(RULEBOOK, ib)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("IB-FATAL", "hardware")
    # glibc's heap check names the crash; the abort the shell prints after it is the echo.
    heap = b"epoch 3 step 10 loss 0.4\nfree(): double free detected in tcache 2\nAborted (core dumped)\n"
    verdict = classify_excerpt(RULEBOOK, heap)
    assert verdict is not None and (verdict.rule.id, verdict.line_no) == ("HEAP", 2)
    # A missing git-lfs makes the remote hang up: the missing tool is named first.
    lfs = b"git-lfs filter-process: git-lfs: command not found\nfatal: the remote end hung up unexpectedly\n"
    verdict = classify_excerpt(RULEBOOK, lfs)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("AD2", "environment")
    # torch's shape message mid-log, with the run's teardown after it, still names the run.
    shape = b"""step 100 loss 0.3
RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x512 and 256x10)
W0217 11:16:21.705000 29355 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 29650 closing signal SIGTERM
"""
    verdict = classify_excerpt(RULEBOOK, shape)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("TORCH-BUG", "real-bug")


@pytest.mark.parametrize(("line", "rule", "klass"), [
    # NumPy 1.24 removed the builtin aliases, NumPy 2.0 more names: code written for another numpy
    ("AttributeError: module 'numpy' has no attribute 'float'.", "IMPORT-VERSION", "environment"),
    ("AttributeError: module 'numpy' has no attribute 'int'. Did you mean: 'inf'?", "IMPORT-VERSION", "environment"),
    ("AttributeError: `np.NaN` was removed in the NumPy 2.0 release. Use `np.nan` instead.", "IMPORT-VERSION", "environment"),
    # pynvml's exception classes for a GPU the driver cannot reach
    ("pynvml.NVMLError_Unknown: Unknown Error", "GPU-LOST", "hardware"),
    ("pynvml.NVMLError_GpuIsLost: GPU is lost", "GPU-LOST", "hardware"),
    # botocore's own timeout wording (S3, any AWS endpoint)
    ('botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL: "None"', "NET", "probabilistic"),
    ('botocore.exceptions.ConnectTimeoutError: Connect timeout on endpoint URL: "https://s3.us-east-1.amazonaws.com/bucket/shard-00017.tar"', "NET", "probabilistic"),
])
def test_issue_17_families_of_collector_f(line: str, rule: str, klass: str) -> None:
    found = RULEBOOK.match_line(line.encode())
    assert found is not None and (found.id, found.klass) == (rule, klass), (line, found)


@pytest.mark.parametrize("line", [
    # numpy's deprecation warning before the removal is handled, and another module's attribute is not numpy
    "DeprecationWarning: `np.float` is a deprecated alias for the builtin `float`. To silence this warning, use `float` by itself.",
    "AttributeError: module 'utils' has no attribute 'float'",
    # an NVML call the GPU does not support is no lost GPU
    "gpu_monitor: NVMLError_NotSupported reading power.draw, skipping the power column",
    # botocore settings printed at start-up
    "s3 client: read_timeout=120 connect_timeout=60, endpoint URL https://s3.us-east-1.amazonaws.com",
    # a missing file printed outside a traceback is text, not a failure
    "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.json'",
    "PermissionError: 'C:\\\\Users\\\\best_dev_ppl'",
])
def test_look_alikes_of_collector_f_families_are_no_event(line: str) -> None:
    assert RULEBOOK.match_line(line.encode()) is None, (line, RULEBOOK.match_line(line.encode()))


MISSING_PATH_TB = b"""Traceback (most recent call last):
  File "train.py", line 120, in <module>
    data_transforms['train'])
  File "/home/u/anaconda3/lib/python3.7/site-packages/torchvision/datasets/folder.py", line 121, in _find_classes
    classes = [d.name for d in os.scandir(dir) if d.is_dir()]
FileNotFoundError: [Errno 2] No such file or directory: 'your_data_path/train_all'
"""


def test_a_missing_path_at_the_end_of_a_traceback_is_the_operators() -> None:
    verdict = classify_excerpt(RULEBOOK, MISSING_PATH_TB)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH", "ops")
    windows = MISSING_PATH_TB.replace(b"[Errno 2] No such file or directory: 'your_data_path/train_all'",
                                      b"[WinError 3] The system cannot find the path specified: 'D:\\\\data\\\\train'")
    verdict = classify_excerpt(RULEBOOK, windows)
    assert verdict is not None and verdict.rule.id == "PATH"
    # A missing compiler, tool or shared library is the environment's, not a path to fix.
    # CUDA's own compiler missing from its install is the toolchain's.
    for missing, rule in ((b"'nvcc'", "PY"), (b"'/usr/local/cuda/bin/nvcc'", "TOOLCHAIN"), (b"'ninja'", "PY"),
                          (b"'/usr/lib/x86_64-linux-gnu/libcuda.so.1'", "PY")):
        tool = MISSING_PATH_TB.replace(b"'your_data_path/train_all'", missing)
        verdict = classify_excerpt(RULEBOOK, tool)
        assert verdict is not None and verdict.rule.id == rule, (missing, verdict)
    # A missing sample the loader logs and skips is handled: the run goes on.
    skipped = b"""epoch 3 step 120 loss 0.41
skip sample: [Errno 2] No such file or directory: 'images/000123.jpg'
epoch 3 step 121 loss 0.40
"""
    assert classify_excerpt(RULEBOOK, skipped) is None


def test_a_permission_error_without_errno_is_the_path_a_file_in_use_is_not() -> None:
    tb = b"""Traceback (most recent call last):
  File "main.py", line 40, in <module>
    os.makedirs(hparams.model_dir)
PermissionError:  'C:\\\\Users\\\\best_dev_ppl'
"""
    verdict = classify_excerpt(RULEBOOK, tb)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PERM", "ops")
    locked = tb.replace(b"PermissionError:  'C:\\\\Users\\\\best_dev_ppl'",
                        b"PermissionError: [WinError 32] The process cannot access the file because it is being used by another process: 'runs\\\\events.out'")
    verdict = classify_excerpt(RULEBOOK, locked)
    assert verdict is not None and verdict.rule.id == "PY"


OLD_WORKER_RERAISE = b"""[session 2][epoch  1][iter 3800] loss: 1.4599, lr: 5.00e-03
Traceback (most recent call last):
  File "trainval_net.py", line 364, in <module>
    data = next(data_iter)
  File "/home/u/anaconda3/lib/python3.6/site-packages/torch/utils/data/dataloader.py", line 301, in _process_next_batch
    raise batch.exc_type(batch.exc_msg)
IndexError: Traceback (most recent call last):
  File "/home/u/anaconda3/lib/python3.6/site-packages/torch/utils/data/dataloader.py", line 55, in _worker_loop
    samples = collate_fn([dataset[i] for i in batch_indices])
  File "/home/u/proj/lib/roi_data_layer/roibatchLoader.py", line 72, in __getitem__
    blobs = get_minibatch(minibatch_db, self._num_classes)
"""


def test_an_old_dataloader_reraise_is_the_workers_exception() -> None:
    # torch < 1.0 re-raised a worker's error as `Type: <the worker's traceback>`.
    (found,) = classify_bytes(RULEBOOK, [OLD_WORKER_RERAISE])
    assert (found.rule.id, found.exception, found.line_no) == ("PY", "IndexError", 7)
    # With the worker's own exception line, that line names it (a specific rule wins).
    whole = OLD_WORKER_RERAISE + b"IndexError: list index out of range\n"
    (found,) = classify_bytes(RULEBOOK, [whole])
    assert (found.rule.id, found.excerpt, found.line_no) == ("PY", "IndexError: list index out of range", 12)
    missing = OLD_WORKER_RERAISE.replace(b"IndexError: Traceback", b"FileNotFoundError: Traceback") \
        + b"FileNotFoundError: [Errno 2] No such file or directory: 'data/VOC2007/JPEGImages/000005.jpg'\n"
    verdict = classify_excerpt(RULEBOOK, missing)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH", "ops")
    # torch 0.4 showed a worker's KeyError as the repr of its traceback, on one line.
    quoted = b"KeyError: 'Traceback (most recent call last):\\n  File \"/x/voc0712.py\", line 67, in __call__\\n    label_idx = self.class_to_ind[name]\\nKeyError: \\'trepang\\'\\n'\n"
    verdict = classify_excerpt(RULEBOOK, quoted)
    assert verdict is not None and (verdict.rule.id, verdict.finding.exception if verdict.finding else "") == ("PY", "KeyError")
    # A log line that merely quotes the header is no exception.
    assert classify_excerpt(RULEBOOK, b"step 9 loss 0.3\nworker said: 'Traceback (most recent call last):' (ignored, retried)\nstep 10 loss 0.3\n") is None
    # The same words inside a message are not a re-raise: an ordinary traceback stays one event.
    plain = b"""Traceback (most recent call last):
  File "train.py", line 3, in <module>
    main()
ValueError: bad config
"""
    (found,) = classify_bytes(RULEBOOK, [plain])
    assert (found.rule.id, found.exception) == ("PY", "ValueError")


@pytest.mark.parametrize(("line", "rule", "klass"), [
    # conda and pip that cannot resolve the pins: the environment cannot be built
    ("ResolvePackageNotFound: ", "ENV-SOLVE", "environment"),
    ("PackagesNotFoundError: The following packages are not available from current channels:", "ENV-SOLVE", "environment"),
    ("ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/#dealing-with-dependency-conflicts", "ENV-SOLVE", "environment"),
    # docker without the NVIDIA container toolkit
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].', "NO-DRIVER", "environment"),
    ('Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]]', "NO-DRIVER", "environment"),
    # a wheel without code for this GPU, ROCm's wording and CUDA's
    ("RuntimeError: HIP error: invalid device function", "U28", "environment"),
    ("torch.AcceleratorError: HIP error: invalid device function", "U28", "environment"),
    ("RuntimeError: CUDA error: invalid device function", "U28", "environment"),
    # cuDNN / cuSolver that cannot start under JAX or TensorFlow
    ("jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed. Look at the errors above for more details.", "DNN-INIT", "environment"),
    ("2024-07-19 15:49:01.341533: E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:439] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR", "DNN-INIT", "environment"),
    ("jaxlib._jax.XlaRuntimeError: INTERNAL: cuSolver internal error", "DNN-INIT", "environment"),
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: No valid engine configs for Matmul_MUL_Reduction_Matmul_", "DNN-INIT", "environment"),
    # ROCm's GPU hang, an NVLink link down in nvidia-smi nvlink -s
    ("HW Exception by GPU node-1 (Agent handle: 0x5899c75e9d60) reason :GPU Hang", "GPU-LOST", "hardware"),
    ("         Link 5: <inactive>", "GPU-LOST", "hardware"),
    # the Hub refusing a gated or private repo
    ("huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-66f4b037-1bf3d7d219afbc904ee05694)", "HF-AUTH", "ops"),
    ("Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-2-7b-hf/resolve/main/config.json.", "HF-AUTH", "ops"),
    ("OSError: You are trying to access a gated repo.", "HF-AUTH", "ops"),
    ("requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/api/models/org/private-model", "HF-AUTH", "ops"),
    # wandb started without a key
    ("wandb: ERROR api_key not configured (no-tty). call wandb.login(key=[your_api_key])", "U35", "ops"),
    ("wandb.errors.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])", "U35", "ops"),
    # a registry that does not answer the TLS handshake, a typographic apostrophe
    ('docker: Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: TLS handshake timeout.', "NET", "probabilistic"),
    ("ConnectionError: Couldn\u2019t reach https://raw.githubusercontent.com/huggingface/datasets/1.1.2/datasets/squad/squad.py", "NET", "probabilistic"),
    # a Ray node that stopped answering its heartbeats
    ("The node with node id: 75b2eec8a61cdafd and ip: 10.4.4.107 has been marked dead because the detector has missed too many heartbeats from it.", "NCCL-PEER", "probabilistic"),
    # FSDP that cannot flatten mixed parameters, JAX shape checks
    ("ValueError: `FlatParameter` requires uniform dtype but got torch.float16 and torch.float32", "TORCH-BUG", "real-bug"),
    ("ValueError: Must flatten tensors with uniform dtype but got torch.bfloat16 and torch.float32", "TORCH-BUG", "real-bug"),
    ("TypeError: dot_general requires contracting dimensions to have the same shape, got [1] and [15].", "TORCH-BUG", "real-bug"),
    ("TypeError: add got incompatible shapes for broadcasting: (3, 4), (5, 4).", "TORCH-BUG", "real-bug"),
    # a pin no wheel exists for (pip lists what it has), bitsandbytes without its native library
    ("ERROR: Could not find a version that satisfies the requirement torch==1.8.1 (from versions: 1.13.0, 1.13.1, 2.0.0)", "ENV-SOLVE", "environment"),
    ("RuntimeError: CUDA Setup failed despite GPU being available. Inspect the CUDA SETUP outputs above to fix your environment!", "LIB-MISSING", "environment"),
    # Ray's memory monitor killing workers: host RAM, not the GPU
    ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", "U9", "host-oom"),
    ("(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at ", "U9", "host-oom"),
])
def test_issue_17_families_of_collector_g(line: str, rule: str, klass: str) -> None:
    found = RULEBOOK.match_line(line.encode())
    assert found is not None and (found.id, found.klass) == (rule, klass), (line, found)


@pytest.mark.parametrize("line", [
    # conda's first solve failing over to the flexible one is a retry, not a failure
    "Solving environment: failed with initial frozen solve. Retrying with flexible solve.",
    # AMD_LOG_LEVEL chatter: the runtime skips a code object and goes on
    ":3:hip_platform.cpp         :715 : 8802962852 us: [pid:19349 tid:0x14dec9d33080] init: Returned hipErrorNoBinaryForGpu : continue parsing remaining modules",
    # a healthy cuDNN and NVLink status
    "I0611 08:35:28.413281  146213 cuda_dnn.cc:529] Loaded cuDNN version 8902",
    "         Link 0: 25.781 GB/s",
    # a memory access fault is the program's, not a hung GPU
    "Memory access fault by GPU node-2 (Agent handle: 0x5640a8bb1980) on address 0x7feea09c5000. Reason: Page not present or supervisor privilege.",
    # a gated repo the token can read, a configured wandb key
    "Access to model meta-llama/Llama-2-7b-hf granted, downloading config.json",
    "wandb: W&B API key is configured. Use `wandb login --relogin` to force relogin",
    # a handshake timeout the client retries
    "Pulling fs layer: net/http: TLS handshake timeout, retrying in 5 seconds",
    # Ray and FSDP status lines, a JAX precision setting
    "ray status: 4 nodes alive, 0 nodes marked dead",
    "FSDP: flattening 24 parameters with uniform dtype torch.bfloat16",
    "jax_default_matmul_precision=highest (dot_general)",
    # a GPU container started the right way, a download the client retries, a broadcast that fits
    "docker run --gpus all --rm nvidia/cuda:12.2.0-base-ubuntu22.04 nvidia-smi",
    "Couldn\u2019t reach https://huggingface.co/api/models/bert-base-uncased, retrying (1/5)",
    "data: broadcasting labels to shape (32, 4) for the multi-task head",
    # pip's resolver note after a successful install is not a failed resolution
    "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. This behaviour is the source of the following dependency conflicts.",
    # pip that found the pin, bitsandbytes set-up chatter; pip with no index listing may be offline
    "Requirement already satisfied: torch==2.1.0 in ./venv/lib/python3.10/site-packages (2.1.0)",
    "CUDA SETUP: PyTorch settings found: CUDA_VERSION=118, Highest Compute Capability: 7.5.",
    "ERROR: Could not find a version that satisfies the requirement torch==2.1.0 (from versions: none)",
    # Ray's summary with nothing killed, its threshold setting
    "(raylet) 0 Workers (tasks / actors) killed due to memory pressure (OOM), 1 Workers crashed due to other reasons",
    "ray start --head (RAY_memory_usage_threshold=0.95, node running low on memory triggers worker kills)",
])
def test_look_alikes_of_collector_g_families_are_no_event(line: str) -> None:
    assert RULEBOOK.match_line(line.encode()) is None, (line, RULEBOOK.match_line(line.encode()))


def test_collector_g_families_decide_the_excerpt_in_evidence_order() -> None:
    # A ROCm GPU hang names the run; torchrun's SIGTERMs and exit code after it are the echo.
    hang = b"""Loss/train_mean_inlier_rep_error: 4.7540 (4.7279) | Grad/point: 65.9949 (74.0430)
HW Exception by GPU node-4 (Agent handle: 0x1ebc04e0) reason :GPU Hang
W0902 15:10:48.626000 819010 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 819027 closing signal SIGTERM
E0902 15:10:49.013000 819010 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6) local_rank: 0 (pid: 819025) of binary: /bin/python
"""
    verdict = classify_excerpt(RULEBOOK, hang)
    assert verdict is not None and (verdict.rule.id, verdict.klass, verdict.line_no) == ("GPU-LOST", "hardware", 2)
    # conda that cannot resolve exported build strings; the retried first solve alone is clean.
    solve = b"""Collecting package metadata (repodata.json): done
Solving environment: failed

ResolvePackageNotFound:
  - libffi==3.3=hb1e8313_2
  - python==3.9.0=h88f2d9e_2
"""
    verdict = classify_excerpt(RULEBOOK, solve)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("ENV-SOLVE", "environment")
    retried = b"""Collecting package metadata (current_repodata.json): done
Solving environment: failed with initial frozen solve. Retrying with flexible solve.
Solving environment: done
"""
    assert classify_excerpt(RULEBOOK, retried) is None
    # wandb's missing key at the end of a traceback is the operator's, not a Python bug.
    wandb = b"""Traceback (most recent call last):
  File "/proj/train.py", line 394, in main
    run = wandb.init(
  File "/opt/conda/lib/python3.10/site-packages/wandb/sdk/wandb_login.py", line 247, in prompt_api_key
    raise UsageError("api_key not configured (no-tty). call " + directive)
wandb.errors.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])
"""
    verdict = classify_excerpt(RULEBOOK, wandb)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("U35", "ops")


@pytest.mark.parametrize(("line", "rule", "klass"), [
    # a JIT or extension build with no compiler or CUDA headers on the box
    ("RuntimeError: Failed to find C compiler. Please specify via CC environment variable.", "TOOLCHAIN", "environment"),
    ("error: command 'nvcc' failed: No such file or directory", "TOOLCHAIN", "environment"),
    ("error: command '/usr/bin/gcc' failed with exit code 1", "TOOLCHAIN", "environment"),
    ("/bin/sh: 1: nvcc: not found", "TOOLCHAIN", "environment"),
    ("RuntimeError: Error building extension 'fused_adam'", "TOOLCHAIN", "environment"),
    ("RuntimeError: Ninja is required to load C++ extensions", "TOOLCHAIN", "environment"),
    ("#error -- unsupported GNU version! gcc versions later than 11 are not supported!", "TOOLCHAIN", "environment"),
    # a GPU gone from the bus as lspci and the PCIe hotplug driver see it, an AMD ring timeout, HBM rows
    ("41:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev ff)", "GPU-LOST", "hardware"),
    ("pcieport 0000:40:01.1: pciehp: Slot(3): Link Down", "GPU-LOST", "hardware"),
    ("[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx timeout, signaled seq=38, emitted seq=40", "GPU-LOST", "hardware"),
    ("amdgpu 0000:03:00.0: amdgpu: GPU reset begin!", "GPU-LOST", "hardware"),
    ("GPU 3: row remapping failure occurred, the GPU must be reset", "U22", "hardware"),
    ("csrc/flash_attn/flash_api.cpp:4:10: fatal error: Python.h: No such file or directory", "TOOLCHAIN", "environment"),
    ("OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.", "NO-DRIVER", "environment"),
    # a launcher's subprocess that died of a signal: SIGKILL is the host's OOM killer
    ("subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' returned non-zero exit status -9.", "U9", "host-oom"),
    ("Container killed on request. Exit code is 137", "U9", "host-oom"),
    ("subprocess.CalledProcessError: Command '['torchrun', 'train.py']' returned non-zero exit status -15.", "SIGTERM-LAUNCHER", "ops"),
    # an HGX box whose fabric manager is not running, a Windows DLL that cannot load
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized", "NO-DRIVER", "environment"),
    ('OSError: [WinError 126] The specified module could not be found. Error loading "C:\\Python310\\lib\\site-packages\\torch\\lib\\c10.dll" or one of its dependencies.', "LIB-MISSING", "environment"),
    # apt and safetensors out of space
    ("E: You don't have enough free space in /var/cache/apt/archives/.", "U7", "disk-full"),
    ('safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })', "U7", "disk-full"),
    # /dev/shm is a tmpfs that ran out of space: the container's shm size, like a full disk
    ("RuntimeError: unable to write to file </torch_739_144252761_4>", "DP15", "disk-full"),
    ("RuntimeError: unable to write to file </torch_739_144252761_4>: No space left on device (28)", "U7", "disk-full"),
    # the shell's "Killed" in the box's locale (glibc's strsignal)
    ("已杀死", "U9", "host-oom"),
    ("./run.sh: line 12: 48213 強制終了            python train.py", "U9", "host-oom"),
    ("Getötet", "U9", "host-oom"),
    # the GPU's firmware (GSP) crashing, the driver finding the GPU gone, DCGM failing a GPU, TPU chips
    ("Jun 12 16:25:44 box kernel: NVRM: GPU0 kgspHealthCheck_TU102: ****************************** GSP-CrashCat Report *******************************", "GPU-LOST", "hardware"),
    ("Jun 12 16:25:44 box kernel: GSP task watchdog timeout @ pc:0x1b3e756, partition:4#0, task:3", "GPU-LOST", "hardware"),
    ("NVRM: GPU0 _kgspProcessRpcEvent: Failed to process received event 0x1004 (RC_TRIGGERED) from GPU0: status=0x21", "GPU-LOST", "hardware"),
    ("[   35.5] NVRM: nvCheckOkFailedNoLog: Check failed: GPU lost from the bus [NV_ERR_GPU_IS_LOST] (0x0000000F) returned from nvdEngineDumpCallbackHelper", "GPU-LOST", "hardware"),
    ("| GPU Memory                | Fail - GPU: 0                                  |", "GPU-LOST", "hardware"),
    ("E0827 23:43:41.200122   39475 synchronous_driver.cc:820] [/dev/accel0 tpu1013:pe1:0] !!!! FATAL ERROR !!!! for [/dev/accel0 tpu1013:pe1:0] , fatal_error: true", "GPU-LOST", "hardware"),
    ("E0511 18:18:50.796852     915 tpunetd_client.cc:311] Detected failure SLICE_FAILURE_CHIP_DRIVER_ERROR in session e6c885828b538167; Start failure handling", "GPU-LOST", "hardware"),
    # rate limits and server errors after urllib3 gave up retrying
    ("HTTP Error 429 thrown while requesting HEAD https://huggingface.co/org/model/resolve/main/config.json", "NET", "probabilistic"),
    ("urllib3.exceptions.ResponseError: too many 500 error responses", "NET", "probabilistic"),
    ("urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='www.modelscope.cn', port=443): Max retries exc", "NET", "probabilistic"),
    # bitsandbytes that found no CUDA runtime or no driver library, PBS deleting a job
    ("DEBUG: Possible options found for libcudart.so: set()", "LIB-MISSING", "environment"),
    ("CUDA SETUP: WARNING! libcuda.so not found! Do you have a CUDA driver installed? If you are on a cluster, make sure you are on a CUDA machine!", "LIB-MISSING", "environment"),
    ("04/18/2016 22:55:25;0008;PBS_Server.12149;Job;7082041.hal-sched1.local;Job deleted at request of root@hal-sched1", "SLURM-CANCELLED", "ops"),
    # launch mistakes: argparse without the program name, hydra without its config, torchrun's
    # variables missing, a device string, a repo id the Hub does not know, LSF's bkill
    ("error: unrecognized arguments: --local-rank=0", "CLI-ARGS", "ops"),
    ("hydra.errors.MissingConfigException: Cannot find primary config 'config'. Check that it's in your config search path.", "CONFIG", "ops"),
    ("ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR expected, but not set", "CONFIG", "ops"),
    ("ValueError: Invalid CUDA 'device=0,1,2,3' requested. Use 'device=cpu' or pass valid CUDA device(s) if available", "DEVICE-ORDINAL", "ops"),
    ("huggingface_hub.utils._errors.RepositoryNotFoundError: 404 Client Error. (Request ID: Root=1-abc)", "HF-AUTH", "ops"),
    ("bkill: Job <1234> is being terminated", "SLURM-CANCELLED", "ops"),
    # a stack built for another cuDNN, PTX newer than the driver, a wheel for another platform
    ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 9, 2) but found runtime version (8, 5, 0).", "U28", "environment"),
    ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.", "U28", "environment"),
    ("ERROR: flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl is not a supported wheel on this platform.", "ENV-SOLVE", "environment"),
    ("AssertionError: CUDA unavailable, invalid device 0 requested", "NO-DRIVER", "environment"),
    # NaN guards in their own words, torch.compile refusing the program
    ("FloatingPointError: Loss became infinite or NaN at iteration=1234!", "O13", "real-bug"),
    ("| epoch 3 | step 400 | loss nan | grad_norm nan |", "O13", "real-bug"),
    ("torch._dynamo.exc.Unsupported: call_function BuiltinVariable(setattr) [TensorVariable(), ConstantVariable(str)] {}", "TORCH-BUG", "real-bug"),
    # a tracker's connection lost, an HTTP reason on its own line, Windows' paging file, ECC counters
    ("neptune.exceptions.NeptuneConnectionLostException: A connection to the Neptune server was lost.", "NET", "probabilistic"),
    ("Reason: Too Many Requests", "NET", "probabilistic"),
    ('OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading "C:\\torch\\lib\\cudnn_cnn_infer64_8.dll" or one of its dependencies.', "U9", "host-oom"),
    ("        DRAM Uncorrectable          : 3", "GPU-LOST", "hardware"),
    # peers and stores going away, resets in any case, a response cut short, an object store's 503
    ("node1:1234:5678 [0] include/socket.h:423 NCCL WARN Net : Call to recv from 10.0.0.2<43811> failed : Broken pipe", "NCCL-PEER", "probabilistic"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousClosedError", "NCCL-PEER", "probabilistic"),
    ('git-lfs: batch response: Post "https://huggingface.co/x.git/info/lfs/objects/batch": read tcp 10.0.0.1:5000->1.2.3.4:443: read: connection reset by peer', "NET", "probabilistic"),
    ("urllib3.exceptions.ProtocolError: Response ended prematurely", "NET", "probabilistic"),
    ("aiohttp.client_exceptions.ClientResponseError: 503, message='Service Unavailable', url=URL('https://storage.googleapis.com/x')", "NET", "probabilistic"),
    # stops from outside and the shell refusing to start the script
    ("Killed by signal 15.", "SIGTERM-LAUNCHER", "ops"),
    ("Training job stopped: MaxRuntimeExceeded", "SLURM-TIMEOUT", "ops"),
    ("python: can't open file '/workspace/trian.py': [Errno 2] No such file or directory", "CLI-ARGS", "ops"),
    ("/bin/bash: ./train.sh: Permission denied", "CLI-ARGS", "ops"),
    # pip's last retry, wandb's backend, Windows' paging file in Chinese, fabric manager via gpu_burn
    ("WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'SSLError(SSLEOFError(8, 'EOF occurred in violation of protocol (_ssl.c:1131)'))': /releases/repo.html", "NET-EXHAUSTED", "probabilistic"),
    ("wandb.errors.error.Error: Couldn't communicate with backend after 15 seconds", "AD1", "probabilistic"),
    ("OSError: [WinError 1455] \u9875\u9762\u6587\u4ef6\u592a\u5c0f\uff0c\u65e0\u6cd5\u5b8c\u6210\u64cd\u4f5c\u3002", "U9", "host-oom"),
    ("  what():  Error (gpu_burn-drv.cpp:298): system not yet initialized", "NO-DRIVER", "environment"),
    # schedulers warning before the kill, a Hub id that is neither a folder nor a repo
    ("======== Most likely we got a SIGTERM from HTCondor             ========", "SIGTERM-LAUNCHER", "ops"),
    ("INFO: 2017-07-13 14:50:17: <Workflow[1] R2A> Caught signal 12 (SIGUSR2: SGE is about to send a SIGKILL)", "SIGTERM-LAUNCHER", "ops"),
    ("OSError: model is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'", "HF-AUTH", "ops"),
    # fp16 loss scale collapsing below 1, gpu_burn's dead workers
    ("| WARNING: overflow detected, setting loss scale to: 0.0001220703125", "O13", "real-bug"),
    ("FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.", "O13", "real-bug"),
    ("No clients are alive!  Aborting", "GPU-LOST", "hardware"),
    # a GPU the driver wants reset, a flag where a number belongs, Slurm refusing the submission
    ("[373871.354096] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2827", "GPU-LOST", "hardware"),
    ("ValueError: invalid literal for int() with base 10: '--work-dir'", "CLI-ARGS", "ops"),
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified", "SUBMIT-REFUSED", "ops"),
    ("ValueError: Unsupported nproc_per_node value: 4(x2)", "CLI-ARGS", "ops"),
    ("RuntimeError: Using hostfile at /home/u/hostfile but host=gpu-0011 was not reachable via ssh. If you are running with a single node please remove /home/u/hostfile or setup passwordless ssh.", "CLI-ARGS", "ops"),
    ("pdsh@box: localhost: ssh exited with exit code 255", "CLI-ARGS", "ops"),
    ("srun: error: Unable to allocate resources: Requested node configuration is not available", "SUBMIT-REFUSED", "ops"),
    # a network error re-raised from a DataLoader worker, anomaly mode naming the backward, Keras shapes
    ("ConnectionError: Caught ConnectionError in DataLoader worker process 8.", "NET", "probabilistic"),
    ("aiohttp.client_exceptions.ClientOSError: Caught ClientOSError in DataLoader worker process 0.", "NET", "probabilistic"),
    ("[W python_anomaly_mode.cpp:104] Warning: Error detected in SoftmaxBackward0. Traceback of forward call that caused the error:", "TORCH-BUG", "real-bug"),
    ('Input 0 of layer "dense_2" is incompatible with the layer: expected axis -1 of input shape to have value 16384, but received input with shape (None, 65536)', "TORCH-BUG", "real-bug"),
    # the shell's and libc's words on a Chinese-locale box (glibc's zh_CN strsignal/strerror)
    ("\u6bb5\u9519\u8bef (\u6838\u5fc3\u5df2\u8f6c\u50a8)", "SEGV", "real-bug"),
    ("run.sh: line 3: 1234 \u5df2\u653e\u5f03               (\u6838\u5fc3\u5df2\u8f6c\u50a8) python train.py", "ABORT", "real-bug"),
    ("\u6d6e\u70b9\u6570\u4f8b\u5916 (\u6838\u5fc3\u5df2\u8f6c\u50a8)", "SIGFPE", "real-bug"),
    ("\u5df2\u7ec8\u6b62", "SIGTERM", "ops"),
    ("OSError: [Errno 28] \u8bbe\u5907\u4e0a\u6ca1\u6709\u7a7a\u95f4", "U7", "disk-full"),
    ("OSError: [Errno 12] \u65e0\u6cd5\u5206\u914d\u5185\u5b58", "U9", "host-oom"),
    ("\u603b\u7ebf\u9519\u8bef (\u6838\u5fc3\u5df2\u8f6c\u50a8)", "DP15", "disk-full"),
    # ROCm, MPS, JAX and Paddle stacks built for another GPU or library version
    ("RuntimeError: HIP error: hipErrorNoBinaryForGpu: Unable to find code object for all current devices!", "U28", "environment"),
    ("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU arch : gfx1030", "U28", "environment"),
    ("E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:407] Loaded runtime CuDNN library: 8.5.0 but source was compiled with: 8.6.0.  CuDNN library needs to have matching major version", "U28", "environment"),
    ("NotImplementedError: The operator 'aten::_linalg_solve_ex.result' is not currently implemented for the MPS device.", "U28", "environment"),
    ("RuntimeError: jaxlib version 0.4.7 is newer than and incompatible with jax version 0.4.1. Please update your jax and/or jaxlib packages.", "IMPORT-VERSION", "environment"),
    ("RuntimeError: Unable to initialize backend 'cuda': INTERNAL: no supported devices found for platform CUDA", "NO-DRIVER", "environment"),
    ("RuntimeError: No HIP GPUs are available", "NO-DRIVER", "environment"),
    ("paddle.fluid.core_avx.EnforceNotMet: Cannot load cudnn shared library. Cannot invoke method cudnnGetVersion", "LIB-MISSING", "environment"),
    # AMD RAS and recovery, a double-bit error reported in words
    ("[ 1234.56] amdgpu 0000:c1:00.0: amdgpu: 1 uncorrectable hardware errors detected in UMC block", "GPU-LOST", "hardware"),
    ("[drm:amdgpu_device_gpu_recover [amdgpu]] *ERROR* GPU Recovery Failed: -110", "GPU-LOST", "hardware"),
    ("Error: An uncorrectable double-bit error (DBE) has been detected on GPU 3", "GPU-LOST", "hardware"),
    # mpirun naming the signal a rank died of
    ("mpirun noticed that process rank 3 with PID 4321 on node n2 exited on signal 9 (Killed).", "U9", "host-oom"),
    ("mpirun noticed that process rank 0 with PID 1234 on node n1 exited on signal 15 (Terminated).", "SIGTERM-LAUNCHER", "ops"),
    ("mpirun noticed that process rank 0 with PID 1234 on node n1 exited on signal 11 (Segmentation fault).", "SEGV", "real-bug"),
    ("mpirun noticed that process rank 1 with PID 99 on node n1 exited on signal 6 (Aborted).", "ABORT", "real-bug"),
    # orchestrators: the kubelet stopping a container, storage and spec errors, SageMaker's memory hint, Ray's dead node
    ("  Normal   Killing  30s  kubelet  Stopping container trainer", "K8S-STOP", "ops"),
    ("  Warning  Evicted  1m  kubelet  Pod ephemeral local storage usage exceeds the total limit of containers 10Gi.", "K8S5", "disk-full"),
    ('Error: error validating "job.yaml": error validating data: ValidationError(Job.spec): unknown field "gpu" in io.k8s.api.batch.v1.JobSpec', "CONFIG", "ops"),
    ("Please use an instance type with more memory, or reduce the size of job data processed on an instance.", "U9", "host-oom"),
    ("ray.exceptions.NodeDiedError: Task failed due to the node (node ID: abc) where this task was running crashing unexpectedly.", "NCCL-PEER", "probabilistic"),
    # clouds and clusters refusing the request: no quota (ops) or no capacity now (transient)
    ('    "message": "Quota failure for project my-proj. The request for 2 K80 accelerators exceeds the allowed maximum of 0 A100, 0 K80",', "QUOTA", "ops"),
    ('    "message": "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",', "QUOTA", "ops"),
    ("botocore.exceptions.ClientError: An error occurred (VcpuLimitExceeded) when calling the StartInstances operation: You have requested more vCPU capacity than your current vCPU limit of 96 allows", "QUOTA", "ops"),
    ('Error from server (Forbidden): pods "train-0" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4', "QUOTA", "ops"),
    ("sky.exceptions.ResourcesUnavailableError: Failed to provision all possible launchable resources. Relax the task's resource requirements", "CAPACITY", "probabilistic"),
    ("An error occurred (InsufficientInstanceCapacity) when calling the RunInstances operation: We currently do not have sufficient p4d.24xlarge capacity", "CAPACITY", "probabilistic"),
    ("The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request.  '(resource type:compute)'. ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "CAPACITY", "probabilistic"),
    # job specs refused at submission, orchestration stops, an MPI peer gone, a container without driver
    ('Error from server (Forbidden): error when creating "nbody.yml": admission webhook "validation.gatekeeper.sh" denied the request: [userpodlimits] container <cudasample> has no cpu limit', "CONFIG", "ops"),
    ("Pod spec contains permanent error", "CONFIG", "ops"),
    ("uncaught exception during training: An error occurred (403) when calling the HeadObject operation: Forbidden", "CONFIG", "ops"),
    ("Task's current input in-abc hit its timeout of 300s", "SLURM-TIMEOUT", "ops"),
    ('Error from server (BadRequest): container "pytorch" in pod "mnist-master-0" is waiting to start: trying and failing to pull image', "K8S3", "environment"),
    ("An MPI communication peer process has unexpectedly disconnected.  This", "NCCL-PEER", "probabilistic"),
    ("WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.", "NO-DRIVER", "environment"),
    ('runc create failed: unable to start container process: container init was OOM-killed (memory limit too low?)', "K8S-OOM", "host-oom"),
    # Paddle's shm and GPU memory, MXNet's cudaMalloc, TF's gather index, a Hub id that is a path
    ("It may be caused by insufficient shared storage space. This problem usually occurs when using docker as a development environment.", "DP15", "disk-full"),
    ("ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate 1.531250GB memory on GPU 0, available memory is only 416.625000MB.", "U10", "real-bug"),
    ("[10:00:00] src/storage/./pooled_storage_manager.h:107: cudaMalloc failed: out of memory", "U10", "real-bug"),
    ("> InvalidArgumentError: indices[6,4] = 23624 is not in [0, 23624)", "TORCH-BUG", "real-bug"),
    ("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': './Model/Bloom_6B4_zh/'.", "HF-AUTH", "ops"),
    ("ValueError: Undefined dataset mllm_demo in dataset_info.json.", "CONFIG", "ops"),
    ("huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the files on the Hub and we cannot find the appropriate snapshot folder for the specified revision on the local disk.", "NET", "probabilistic"),
    ("TimeoutError: timed out", "NET", "probabilistic"),
    # a driver that never bound to the GPU, fabric manager failing, AMD firmware missing
    ("[188549.9] NVRM: The NVIDIA probe routine was not called for 3 device(s).", "NO-DRIVER", "environment"),
    ("[188549.9] NVRM: No NVIDIA graphics adapter probed!", "NO-DRIVER", "environment"),
    ("Sep 18 03:19:01 box systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE", "NO-DRIVER", "environment"),
    ('[    9.6] amdgpu 0000:23:00.0: Direct firmware load for amdgpu/arcturus_gpu_info.bin failed with error -2', "NO-DRIVER", "environment"),
    # the training libraries' own checks of what they were given at launch
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for AxolotlConfigWCapabilities", "CONFIG", "ops"),
    ("ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target modules and try again.", "CONFIG", "ops"),
    ("KeyError: 'Non-existent config key: MODEL.ROI_HEADS.NUM_CLASS'", "CONFIG", "ops"),
    ("KeyError: 'MyHead is not in the models registry. Please check whether the value of `MyHead` is correct or it was registered as expected.'", "CONFIG", "ops"),
    ("RuntimeError: Dataset 'coco_custom.yaml' error \u274c Dataset 'coco_custom.yaml' images not found, missing path '/data/coco/images/val'", "CONFIG", "ops"),
    ("RuntimeError: Could not find a dataset with the ID 501. Make sure the requested dataset ID exists", "CONFIG", "ops"),
    ("FileNotFoundError: Couldn't find a dataset script at /content/my_data/my_data.py or any data file in the same directory.", "CONFIG", "ops"),
    ("OSError: Incorrect path_or_model_id: '/models/llama-3-8b'. Please provide either the path to a local folder or the repo_id of a model on the Hub.", "CONFIG", "ops"),
    ("ValueError: Some specified arguments are not used by the HfArgumentParser: ['--lora_rank', '8']", "CLI-ARGS", "ops"),
    ("RuntimeError: Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, ort, xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device string: gpu", "DEVICE-ORDINAL", "ops"),
    # a GPU without bf16, per-process limits, NVML refused inside a container
    ("ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0", "U28", "environment"),
    ("RuntimeError: unable to open shared memory object </torch_1234_567> in read-write mode: Too many open files (24)", "ULIMIT", "environment"),
    ("RuntimeError: can't start new thread", "ULIMIT", "environment"),
    # file descriptors passed between DataLoader workers ran out (ulimit -n), not /dev/shm
    ("RuntimeError: received 0 items of ancdata", "ULIMIT", "environment"),
    ("Failed to initialize NVML: Unknown Error", "NO-DRIVER", "environment"),
    # dataset registries in YAML, nnU-Net v1's task ids, ultralytics' missing paths, NaN in a distribution
    ("ValueError: Undefined dataset tatsu-lab/alpaca in /home/u/chatllms/configs/../../data/dataset_info.yaml", "CONFIG", "ops"),
    ("RuntimeError: Could not find a task with the ID 50. Make sure the requested task ID exists", "CONFIG", "ops"),
    ("Dataset '/home/u/yolov8/ClassAction-1/data.yaml' not found \u26a0\ufe0f, missing paths ['/home/u/datasets/ClassAction-1/valid/images']", "CONFIG", "ops"),
    ("ValueError: Expected parameter loc (Tensor of shape (2, 2)) of distribution Normal(loc: torch.Size([2, 2]), scale: torch.Size([2, 2])) to satisfy the constraint Real(), but found invalid values:", "O13", "real-bug"),
    # a df row at 100% (blocks or inodes), the kernel OOM killer's task table, a wrapped shm hint
    ("/dev/vda1        640K  640K     0  100% /", "U7", "disk-full"),
    ("overlay          100G  100G     0 100% /", "U7", "disk-full"),
    ("Mar  7 04:05:01 vm kernel: [412403.401693] [ pid ]   uid  tgid total_vm      rss nr_ptes swapents oom_score_adj name", "U9", "host-oom"),
    ("memory. Please try to raise your shared memory limit.", "DP15", "disk-full"),
    # a corrupted infoROM, a container entrypoint that is not there
    ("WARNING: infoROM is corrupted at gpu 0000:00:05.0", "GPU-LOST", "hardware"),
    ("[FATAL tini (7)] exec /app/docker/entrypoint.sh failed: No such file or directory", "CLI-ARGS", "ops"),
    ('docker: Error response from daemon: failed to create task: exec: "python3": executable file not found in $PATH: unknown.', "CLI-ARGS", "ops"),
    # scheduler state in scontrol's words, HTCondor and LSF removals, qsub refusing the request
    ("JobState=TIMEOUT Reason=TimeLimit Dependency=(null)", "SLURM-TIMEOUT", "ops"),
    ("   JobState=CANCELLED Reason=None Dependency=(null)", "SLURM-CANCELLED", "ops"),
    ("   JobState=OUT_OF_MEMORY Reason=OutOfMemory Dependency=(null)", "SLURM4", "host-oom"),
    ("Job was removed by user u via condor_rm", "SLURM-CANCELLED", "ops"),
    ("TERM_OWNER: job killed by owner.", "SLURM-CANCELLED", "ops"),
    ("qsub: Job exceeds queue resource limits MSG=cannot satisfy queue max walltime requirement", "SUBMIT-REFUSED", "ops"),
    ("Training interrupted by user (KeyboardInterrupt). Saving checkpoint...", "INT", "ops"),
    # a loss printed without a separator, EFA/OFI and barrier failures between nodes, a dead HCA
    ("iter 120: loss nan, time 512.3ms, mfu 42.1%", "O13", "real-bug"),
    ("NCCL WARN NET/OFI Request 0x7f completed with error. RC: 21. Error: 4165 (Cancelled).", "NCCL-PEER", "probabilistic"),
    ("RuntimeError: [Rank 3]: Ranks 0, 1, 2 failed to pass monitoredBarrier in 1800000 ms", "NCCL-PEER", "probabilistic"),
    ("kernel: mlx5_core 0000:3b:00.0: poll_health:800:(pid 0): Fatal error 1 detected", "IB-FATAL", "hardware"),
    # RDMA registration hitting the locked-memory limit is the box's ulimit, not its RAM
    ("NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory", "ULIMIT", "environment"),
    # loss scales collapsing to tiny or single-digit values, cuBLAS rejecting a parameter
    ("Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 7.973755960878054e-205", "O13", "real-bug"),
    ("[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4, reducing to 2", "O13", "real-bug"),
    (" On entry to GEMM_EX  parameter number 9 had an illegal value", "O13", "real-bug"),
    ("Steps:   0%|   | 1/2000 [00:14<8:16:07, 14.89s/it, lr=1e-5, step_loss=nan, td=2.85s][2024-07-10 15:50:45] [deepspeed] OVERFLOW! Rank 0 Skipping step.", "O13", "real-bug"),
    # sacct's pipe-separated states, LSF signalling a job, NHC's Xid check, EFA errors, forrtl's Ctrl-C
    ("239024.0|galvani-cn001|CANCELLED|0:10", "SLURM-CANCELLED", "ops"),
    ("239024|node1|TIMEOUT|0:0", "SLURM-TIMEOUT", "ops"),
    ("LSF kill failed with stdout: Job <8055> is being signaled", "SLURM-CANCELLED", "ops"),
    ("sbatch: error: batch job submission failed: job violates accounting/qos policy (job submit limit, user's size and/or time limits)", "SUBMIT-REFUSED", "ops"),
    ("srun: error: Unable to create step for job 16413634: Invalid generic resource (gres) specification", "SUBMIT-REFUSED", "ops"),
    ("Found XID errors: 63", "XID", "hardware"),
    ("libfabric:451707:1708520807::efa:cq:efa_rdm_txe_handle_error():737<warn> err: 5, message: Invalid address", "NCCL-PEER", "probabilistic"),
    ("forrtl: error (200): program aborting due to control-C event", "INT", "ops"),
    # zsh's and PyCharm's and Windows' words for a crashed or killed process
    ("[1]    14957 segmentation fault (core dumped)  python train.py --data_root ../data", "SEGV", "real-bug"),
    ("Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)", "SEGV", "real-bug"),
    ("Process finished with exit code -1073741819 (0xC0000005)", "SEGV", "real-bug"),
    ("Process finished with exit code 137 (interrupted by signal 9: SIGKILL)", "U9", "host-oom"),
    ("Process finished with exit code 143 (interrupted by signal 15: SIGTERM)", "SIGTERM-LAUNCHER", "ops"),
    # NCCL's NVLS transport failing at init (fabric manager / IMEX), an IB test's fatal error,
    # an ECC error whose errno suffix reads "Cannot allocate memory"
    ("h100-node:2341:2380 [5] transport/nvls.cc:157 NCCL WARN Cuda failure 1 'invalid argument'", "NO-DRIVER", "environment"),
    ("h100-28:238:1313 [0] transport/net_ib.cc:139 NCCL WARN communicator encountered a fatal error (detected in ncclIbTest)", "NCCL-PEER", "probabilistic"),
    ("CUDA Error: uncorrectable ECC error encountered: Cannot allocate memory", "U22", "hardware"),
    # Lightning reports the Ctrl-C it caught as a warning
    ("/envs/torch/lib/python3.7/site-packages/pytorch_lightning/utilities/distributed.py:25: UserWarning: Detected KeyboardInterrupt, attempting graceful shutdown...", "INT", "ops"),
])
def test_issue_17_families_of_round_5(line: str, rule: str, klass: str) -> None:
    found = RULEBOOK.match_line(line.encode())
    assert found is not None and (found.id, found.klass) == (rule, klass), (line, found)


@pytest.mark.parametrize("line", [
    # a build that falls back to a prebuilt kernel, a compiler that is configured
    "Error building extension 'fused_adam', falling back to the PyTorch implementation",
    "CC=/usr/bin/gcc-11 found C compiler, building triton kernels",
    # exit statuses that are not signals
    "subprocess.CalledProcessError: Command '['python', 'prep.py']' returned non-zero exit status 9.",
    "Exit code is 0",
    # ENOSPC from inotify is a kernel watch limit, not a full disk
    "OSError: [Errno 28] inotify watch limit reached",
    "Error: ENOSPC: System limit for number of file watchers reached, watch '/app/src'",
    # TensorFlow probing optional libraries (TensorRT, a CUDA runtime on a CPU box) and going on
    "2024-01-01 00:00:00.000000: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'libnvinfer.so.7'; dlerror: libnvinfer.so.7: cannot open shared object file: No such file or directory",
    "W0000 00:00:1700000000.123456 1234 dso_loader.cc:64] Could not load dynamic library 'libcudart.so.12'; dlerror: libcudart.so.12: cannot open shared object file",
    # a reset the client reconnects after, a NaN step the loss scaler skipped, a store that answered
    "E1124 10:00:00.000 1234 server.cc:100] Connection reset by peer; reconnecting",
    "Loss: nan -> skipping step (inf/nan grads), scaler reduced to 32768.0",
    "aiohttp.client_exceptions.ClientResponseError: 404, message='Not Found'",
    "bash: /etc/profile.d/conda.sh: Permission denied, using defaults",
    # retries with attempts left, a loss scale that is still large, a gpu_burn that passed
    "WARNING: Retrying (Retry(total=3, connect=None, read=None, redirect=None, status=None)) after connection broken by 'ReadTimeoutError()': /simple/torch/",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    "| WARNING: overflow detected, setting loss scale to: 64.0",
    "100.0%  proc'd: 5720 (15340 Gflop/s) - 5712 (15318 Gflop/s)   errors: 0 - 0   temps: 61 C - 63 C",
    # a number parsed fine, a submission that went through, another exception from a worker
    "ValueError: invalid literal for int() with base 10: 'abc'",
    "Submitted batch job 123456",
    "KeyError: Caught KeyError in DataLoader worker process 0.",
    # JAX falling back to the CPU on a CPU box, MPS falling back per op, RAS counters at zero
    "INFO:jax._src.xla_bridge:Unable to initialize backend 'rocm': module 'jaxlib.xla_extension' has no attribute 'GpuAllocatorConfig'",
    "UserWarning: The operator 'aten::index_fill_' is not currently supported on the MPS backend and will fall back to run on the CPU.",
    "amdgpu 0000:c1:00.0: amdgpu: 0 uncorrectable hardware errors detected in UMC block",
    # mpirun's normal end, a kubelet starting a container
    "mpirun: all 8 processes exited normally",
    "  Normal   Started  30s  kubelet  Started container trainer",
    # a disk quota is a full disk, quota and capacity that were fine
    "quota check passed: 8 of 16 GPUs in use",
    "capacity reserved: 8x H100 in us-east-1a",
    # a registry lookup that worked, a validation that passed
    "Registered MyHead in the models registry",
    "config validation passed: 0 validation errors",
    # a snap's squashfs is always full, a root disk with room, a tmpfs
    "/dev/loop3        56M   56M     0 100% /snap/core18/2812",
    "/dev/vda1        640K  320K  320K   50% /",
    "tmpfs            126K     1  126K    1% /dev/shm",
    # scheduler states that ended well, a tracker's starting loss without a separator
    "   JobState=COMPLETED Reason=None Dependency=(null)",
    "best loss inf -> 0.734 (saved)",
    # a NaN only in validation while training is finite, a scale that is still healthy, a finished sacct row
    "5/5 [==============================] - 2s 454ms/step - loss: 1.0597 - val_loss: nan",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    "239025.batch|galvani-cn001|COMPLETED|0:0",
    "Process finished with exit code 0",
    # the same words inside a sentence
    "\u6bb5\u9519\u8bef\u5904\u7406\u5b8c\u6210",
    "\u4efb\u52a1\u5df2\u7ec8\u6b62\u7684\u6570\u91cf: 0",
    # a tracker's starting values, clean ECC counters, an LSF submission, a torch.compile note
    "best_loss = inf",
    "Epoch 00001: min_val_loss: inf -> 0.52134",
    "        DRAM Uncorrectable          : 0",
    "Job <12> is submitted to queue <gpu>.",
    "torch._dynamo hit config.cache_size_limit (8)",
    "| loss 0.312 | nan_count 0 |",
    # a healthy GPU in lspci, a network port going down, an AMD GPU that was not reset
    "41:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev a1)",
    "igb 0000:05:00.0 eth0: Link is Down",
    "amdgpu 0000:03:00.0: amdgpu: SMU is initialized successfully!",
    # a locale word inside a sentence, a DCGM test that passed, bitsandbytes that found a runtime
    "日志: 进程已杀死的数量 0",
    "| GPU Memory                | Pass - GPU: 0, 1                               |",
    "DEBUG: Possible options found for libcudart.so: {PosixPath('/usr/local/cuda/lib64/libcudart.so')}",
    # a PBS job that ended by itself, a retry that urllib3 is still making
    "04/18/2016 22:55:25;0010;PBS_Server.12149;Job;7082041.hal-sched1.local;Exit_status=0",
    "Retrying (Retry(total=4)) after connection broken by 'ResponseError('too many 500 error responses')': /simple/torch/",
])
def test_look_alikes_of_round_5_families_are_no_event(line: str) -> None:
    assert RULEBOOK.match_line(line.encode()) is None, (line, RULEBOOK.match_line(line.encode()))


IGNORED_TB = b"""Epoch 10: 100%|##########| 100/100 [00:10<00:00]
Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2c1d5e3d30>
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1478, in __del__
    self._shutdown_workers()
  File "/usr/lib/python3.10/multiprocessing/process.py", line 160, in is_alive
    assert self._parent_pid == os.getpid(), 'can only test a child process'
AssertionError: can only test a child process
"""


def test_an_exception_cpython_ignored_is_no_event_in_any_chunking() -> None:
    # CPython printed it from a finaliser and went on: it cannot have ended the run, even
    # when the excerpt ends on its exception line.
    assert classify_excerpt(RULEBOOK, IGNORED_TB) is None
    for cut in range(1, len(IGNORED_TB)):
        assert classify_bytes(RULEBOOK, [IGNORED_TB[:cut], IGNORED_TB[cut:]]) == [], cut
    # ...but an exception that names its cause still counts (a flush at exit on a full disk)
    full = IGNORED_TB.replace(b"AssertionError: can only test a child process",
                              b"OSError: [Errno 28] No space left on device")
    verdict = classify_excerpt(RULEBOOK, full)
    assert verdict is not None and verdict.rule.id == "U7"
    # and the same traceback without CPython's note is the program's exception
    plain = IGNORED_TB.replace(b"Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f2c1d5e3d30>\n", b"")
    verdict = classify_excerpt(RULEBOOK, plain)
    assert verdict is not None and verdict.rule.id == "PY"


def test_lines_logged_at_warning_severity_are_still_judged() -> None:
    # A glog/abseil W is not "handled": TensorFlow logs a fatal OOM at W before raising it
    # (an excerpt may end there), torch logs its agent's SIGTERM at W, c10 a busy port.
    oom = (b"2019-05-01 10:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1401] OP_REQUIRES failed at "
           b"conv_ops.cc:446 : Resource exhausted: OOM when allocating tensor with shape[64,256,56,56] and type float\n")
    verdict = classify_excerpt(RULEBOOK, oom)
    assert verdict is not None and verdict.klass == "real-bug"
    line = (b"W0823 16:54:02.337000 139733055988160 torch/distributed/elastic/agent/server/api.py:688] "
            b"Received Signals.SIGTERM death signal, shutting down workers\n")
    verdict = classify_excerpt(RULEBOOK, line)
    assert verdict is not None and verdict.klass == "ops"
    # and c10's port warning still names the busy port
    port = b"[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29400 (errno: 98 - Address already in use).\n"
    verdict = classify_excerpt(RULEBOOK, port)
    assert verdict is not None and verdict.klass == "environment"


def test_an_error_glued_before_a_warning_on_one_line_is_still_judged() -> None:
    # stderr interleaving: the RuntimeError's message lost its newline and the anomaly-mode
    # UserWarning follows on the same line; the warning marker hushes only what comes after it.
    line = (b"RuntimeError: one of the variables needed for gradient computation has been modified by an "
            b"inplace operation: [torch.FloatTensor [1, 2, 2]] Good luck!/usr/lib/python3/site-packages/torch/"
            b"autograd/__init__.py:175: UserWarning: Error detected in BmmBackward0.")
    found = RULEBOOK.match_line(line)
    assert found is not None and found.id == "TORCH-BUG"
    # the same words inside the warning's own text stay a handled warning
    hushed = (b"/usr/lib/python3/site-packages/torch/autograd/__init__.py:175: UserWarning: one of the "
              b"variables needed for gradient computation has been modified by an inplace operation")
    assert RULEBOOK.match_line(hushed) is None


def test_tensorflow_not_finding_a_path_it_was_given_is_the_operators() -> None:
    tb = b"""Traceback (most recent call last):
  File "tools/train.py", line 194, in <module>
    train()
  File "/usr/lib/python3.6/site-packages/tensorflow/python/framework/errors_impl.py", line 473, in __exit__
    c_api.TF_GetCode(self.status.status))
tensorflow.python.framework.errors_impl.NotFoundError: ../data/tfrecord; No such file or directory
"""
    verdict = classify_excerpt(RULEBOOK, tb)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH", "ops")
    # any other NotFoundError (a missing op, a missing variable) stays TensorFlow's error
    other = tb.replace(b"../data/tfrecord; No such file or directory", b"Key conv1/kernel not found in checkpoint")
    verdict = classify_excerpt(RULEBOOK, other)
    assert verdict is not None and verdict.rule.id == "TF-ERR"


def test_a_missing_file_named_through_a_registry_is_still_the_operators() -> None:
    # mmcv's registry re-raises with the class name in front of the errno
    tb = b"""Traceback (most recent call last):
  File "tools/train.py", line 187, in main
    datasets = [build_dataset(cfg.data.train)]
  File "/opt/conda/lib/python3.6/site-packages/mmcv/utils/registry.py", line 54, in build_from_cfg
    raise type(e)(f'{obj_cls.__name__}: {e}')
FileNotFoundError: CocoDataset: [Errno 2] No such file or directory: 'data/coco/annotations/instances_train2017.json'
"""
    verdict = classify_excerpt(RULEBOOK, tb)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH", "ops")


def test_an_ignored_exception_under_a_long_object_repr_is_still_ignored() -> None:
    # The marker starts the line; a repr longer than the kept bytes must not hide it.
    long = IGNORED_TB.replace(b"at 0x7f2c1d5e3d30>", b"at 0x7f2c1d5e3d30 " + b"x" * 600 + b">")
    assert classify_excerpt(RULEBOOK, long) is None
    for cut in (100, len(long) // 2):
        assert classify_bytes(RULEBOOK, [long[:cut], long[cut:]]) == [], cut


@pytest.mark.parametrize(("line", "rule", "klass"), [
    # round 10's families, written before its files landed
    ("019 (4321.000.000) 2024-01-01 10:00:00 Job was aborted.\tvia condor_rm (by user alice)", "SLURM-CANCELLED", "ops"),
    ("ray.exceptions.TaskCancelledError: Task: TaskID(16310a0f0a45af5cffffffffffffffffffffffff01000000) was cancelled.", "SLURM-CANCELLED", "ops"),
    ("Status for job 'raysubmit_6Vq2': STOPPED", "SLURM-CANCELLED", "ops"),
    ("Cancelling jobs (9) on cluster sky-2920-weichiang...", "SLURM-CANCELLED", "ops"),
    ("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size 256 != 4 * 8 * 4", "CONFIG", "ops"),
    ("ValueError: --load_best_model_at_end requires the save and eval strategy to match, but found", "CONFIG", "ops"),
    ("OSError: /root/autodl-tmp/models/Qwen2-7B does not appear to have a file named config.json. Checkout 'https://huggingface.co//root/autodl-tmp/models/Qwen2-7B/tree/None' for available files.", "PATH", "ops"),
    ("ValueError: Can't find 'adapter_config.json' at 'output/checkpoint-500'", "PATH", "ops"),
    ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000", "DEVICE-ORDINAL", "ops"),
    ("nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible", "GPU-LOST", "hardware"),
    ("Your session crashed after using all available RAM.", "U9", "host-oom"),
    ("Your notebook tried to allocate more memory than is available. It has restarted.", "U9", "host-oom"),
    ("[2024-01-01 10:00:00 +0000] [1] [ERROR] Worker (pid:12) was sent SIGKILL! Perhaps out of memory?", "U9", "host-oom"),
    ("ERROR: Invalid option:2", "CLI-ARGS", "ops"),
    ("getopt: unrecognized option '--epochs'", "CLI-ARGS", "ops"),
    ("Error: No such option: --lr", "CLI-ARGS", "ops"),
    # Megatron counts NaN iterations; Keras' TerminateOnNaN stops the fit
    (" iteration      300/  500000 | lm loss: 7.234E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   4 |", "O13", "real-bug"),
    ("Batch 1523: Invalid loss, terminating training", "O13", "real-bug"),
    # round 10's tuning files: families they showed
    ("{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1.3333333333333334e-07, 'epoch': 0.14}", "O13", "real-bug"),
    ("ValueError: Some keys are not used by the HfArgumentParser: ['split']", "CLI-ARGS", "ops"),
    ("ValueError: remaining_argv: ['--train_type', 'sft']", "CLI-ARGS", "ops"),
    ("subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' returned non-zero exit status 255.", "CLI-ARGS", "ops"),
    ("tune download: error: It looks like you are trying to access a gated repository. Please ensure you have access", "HF-AUTH", "ops"),
    ("ValueError: The requested device for vllm (cuda:4) is not available. You are likely using vLLM without restricting the number of GPUs for training.", "DEVICE-ORDINAL", "ops"),
    ("[rank0]: RuntimeError: world_size (1) is not divisible by 2", "CONFIG", "ops"),
    ("RuntimeError: Unsloth currently does not work on multi GPU setups - sadly we are a 2 brother team", "CONFIG", "ops"),
    ("No data found. Please verify arguments (train_data_dir must be the parent of folders with images)", "CONFIG", "ops"),
    ("ValueError: No file with name: consolidated.00.pth found in /tmp/Meta-Llama-3-8B-Instruct.", "PATH", "ops"),
    ("AssertionError: Checkpoint /data/detectron2_modelzoo/basemodel/R-50-MSRA.pkl not found!", "PATH", "ops"),
    ("trainer-0   ns   Evicted   node-3   Pod The node had condition: [DiskPressure].", "K8S5", "disk-full"),
    ("trainer-0   ns   Evicted   node-3   Pod The node had condition: [MemoryPressure].", "K8S-OOM", "host-oom"),
    ("ERROR:RetryJob Not retrying job due to wall clock limit (job automatically killed on the worker node)", "SLURM-TIMEOUT", "ops"),
    ("Tue Jul 30 21:43:41: Exited by LSF signal TERM_EXTERNAL_SIGNAL. The CPU time used is 0.0 seconds;", "SLURM-CANCELLED", "ops"),
    ("salloc: error: Job submit/allocate failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)", "SUBMIT-REFUSED", "ops"),
    ("qsub: submit filter returned an error code, aborting job submission.", "SUBMIT-REFUSED", "ops"),
    ("qsub: PBS: Job rejected by all possible destinations (check syntax,", "SUBMIT-REFUSED", "ops"),
    ("Sep 25 20:36:21 borg kernel: [3064665.956283] ata3.00: failed command: WRITE DMA EXT", "GPU-LOST", "hardware"),
    ("Sep 25 20:36:21 borg kernel: [3064665.956308] ata3.00: error: { ICRC ABRT }", "GPU-LOST", "hardware"),
    ("Subject: SMART error (CurrentPendingSector) detected on host: stout", "GPU-LOST", "hardware"),
    ("Device: /dev/sdb [SAT], 1 Currently unreadable (pending) sectors", "GPU-LOST", "hardware"),
    ("   1 | 03/07/2021 | 07:10:10 | Power Supply #0xc4 | Failure detected () | Asserted", "GPU-LOST", "hardware"),
    (" 1  Standard     Pwr. Supply Bay Failed     No", "GPU-LOST", "hardware"),
    # round 11's families, written before its files landed
    ("ERROR : ckpt.pt: Failed to copy: Put \"https://bucket.s3.amazonaws.com/ckpt.pt\": dial tcp 52.216.0.1:443: i/o timeout", "NET", "probabilistic"),
    ("s3fs: curl_easy_perform() returned 28: Timeout was reached", "NET", "probabilistic"),
    ("ValueError: ('curl: (56) Recv failure: Connection reset by peer', 'pipe:curl -s https://host/shard-0001.tar')", "NET", "probabilistic"),
    ("jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: failed to connect to all addresses", "NET", "probabilistic"),
    ("jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: PjRT_Client_Connect. # of tasks that reached the barrier: 7/8.", "MN3", "probabilistic"),
    ("The actor is dead because its node has died. Node Id: abc", "NCCL-PEER", "probabilistic"),
    ("(raylet) The node with node id: abc and address: 10.0.0.5 has been marked dead because the detector has missed too many heartbeats from it.", "NCCL-PEER", "probabilistic"),
    ("huggingface_hub.errors.HfHubHTTPError: 403 Forbidden: You don't have the rights to create a model under the namespace \"org\".", "HF-AUTH", "ops"),
    ("ValueError: Can't find a valid checkpoint at output/checkpoint-1000", "PATH", "ops"),
    ("[rank0]: AssertionError: world size 4 is not divisible by tensor parallel size (3) times pipeline parallel size (1)", "CONFIG", "ops"),
    ("ImportError: Extension horovod.torch has not been built: /usr/lib/python3.8/dist-packages/horovod/torch/mpi_lib_v2.so not found", "LIB-MISSING", "environment"),
    ("RuntimeError: Distributed package doesn't have NCCL built in", "U28", "environment"),
    ("RuntimeError: Couldn't load custom C++ ops. This can happen if your PyTorch and torchvision versions are incompatible", "U28", "environment"),
    # round 11's tuning files: families they showed (collectors aa-ad)
    ("ResourceLimitExceeded: An error occurred (ResourceLimitExceeded) when calling the CreateTrainingJob operation: The account-level service limit 'ml.p3.2xlarge for training job usage' is 0 Instances", "QUOTA", "ops"),
    ("You've exceeded the number of hours allowed to use GPU. Your quota will reset to 30 hours in 2 days.", "QUOTA", "ops"),
    ("(autoscaler +34s) Error: No available node types can fulfill resource request defaultdict(<class 'float'>, {'CPU': 8.0, 'GPU': 8.0}).", "SUBMIT-REFUSED", "ops"),
    ("remote: error: File tools/data/location2tz.txt is 176.47 MB; this exceeds GitHub's file size limit of 100.00 MB", "U33", "ops"),
    ('2016/01/10 19:16:52 Failed to create file system for "remote:": Didn\'t find section in config file', "CONFIG", "ops"),
    ("root@tensorflow-benchmarks-worker-1.tensorflow-benchmarks-worker: Permission denied (publickey,password).", "SSH-AUTH", "ops"),
    ("Error: failed to run torchrun --nproc_per_node=2 on VM-48-13-centos, is localhost: False, exception: No authentication method", "SSH-AUTH", "ops"),
    ("ValueError: => No checkpoint found at '/home/u/logs/checkpoint_600.pth.tar'", "PATH", "ops"),
    ("lmdb.Error: /home/u/images/train.lmdb: No such file or directory", "PATH", "ops"),
    ("ValueError: File data/mllm_dome.json not found.", "PATH", "ops"),
    ('ClientError: An error occurred (ValidationException) when calling the CreateTrainingJob operation: No S3 objects found under S3 URL "s3://bucket/abalone/train" given in input data source.', "PATH", "ops"),
    ("horovod.common.exceptions.HorovodVersionMismatchError: Framework tensorflow installed with version 2.3.0 but found version 2.4.1.", "U28", "environment"),
    ("DNN library is not found.", "DNN-INIT", "environment"),
    ("Exception: data did not match any variant of untagged enum ModelWrapper at line 1251019 column 3", "IMPORT-VERSION", "environment"),
    ("NotImplementedError: Loading a dataset cached in a LocalFileSystem is not supported.", "IMPORT-VERSION", "environment"),
    ("[fe535b5ccf9b:00019] Signal: Segmentation fault (11)", "SEGV", "real-bug"),
    ("terminate called after throwing an instance of 'dmlc::Error'", "ABORT", "real-bug"),
    ('"message": "Exception [Connection was closed before we received a valid response from endpoint URL: \\"http://minio:9000/bucket/model.tar.gz\\""', "NET", "probabilistic"),
    # round 12's families, written before its files landed
    ("nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown", "U28", "environment"),
    ("Error invalid device function at line 29 in file /src/csrc/ops.cu", "U28", "environment"),
    ("wandb: ERROR Error while calling W&B API: permission denied (<Response [403]>)", "U35", "ops"),
    ("wandb.errors.UsageError: Invalid project name 'my/project': cannot contain characters '/,\\,#,?,%,:', found '/'", "U35", "ops"),
    ("modal.exception.AuthError: Token missing. Could not authenticate client.", "U35", "ops"),
    ("hydra.errors.MissingConfigException: Could not find 'model/resnet101'", "CONFIG", "ops"),
    ("has not produced any output (state: TIMEOUT)", "SLURM-TIMEOUT", "ops"),
    ("has not produced any output (state: CANCELLED)", "SLURM-CANCELLED", "ops"),
    ("[W 2024-01-01 10:00:00,000] Trial 3 failed with parameters: {'lr': 0.1} because of the following error: KeyboardInterrupt().", "INT", "ops"),
    ("comet_ml.exceptions.CometRestApiException: Comet Rest Api Exception status_code=503", "NET", "probabilistic"),
    # ops that leave no traceback behind, or end one with a path the run was given
    # (offline mode without a cached file is a configuration, not a network failure)
    ("huggingface_hub.utils._errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.", "CONFIG", "ops"),
    ("[1]+  Stopped                 python train.py", "INT", "ops"),
    ("zsh: terminated  python train.py", "SIGTERM-LAUNCHER", "ops"),
    ("zsh: hangup  python train.py", "SIGTERM-LAUNCHER", "ops"),
    ("srun: error: gpu01: task 0: Terminated", "SIGTERM-LAUNCHER", "ops"),
    ("Signal handler called with signal 15", "SIGTERM-LAUNCHER", "ops"),
    ("Got signal: SIGTERM", "SIGTERM-LAUNCHER", "ops"),
    ("Exiting due to SIGINT", "SIGTERM-LAUNCHER", "ops"),
    ("/bin/sh: 1: ./run.sh: Permission denied", "CLI-ARGS", "ops"),
    ("FileNotFoundError: ./data/train.csv", "PATH", "ops"),
    ("IsADirectoryError: [Errno 21] Is a directory: 'output/'", "PATH", "ops"),
    ("NotADirectoryError: [Errno 20] Not a directory: 'data/train.txt/images'", "PATH", "ops"),
    ("AssertionError: data/coco/annotations/instances_train2017.json does not exist", "PATH", "ops"),
    ("AssertionError: Dataset not found at /data/imagenet", "PATH", "ops"),
    ("OSError: Unable to open file (unable to open file: name = 'data/train.h5', errno = 2, error message = 'No such file or directory', flags = 0, o_flags = 0)", "PATH", "ops"),
    ("botocore.exceptions.NoCredentialsError: Unable to locate credentials", "CREDENTIALS", "ops"),
    ("google.auth.exceptions.DefaultCredentialsError: Your default credentials were not found.", "CREDENTIALS", "ops"),
    ('CUDA error at /src/kernels.cu:123 code=700(cudaErrorIllegalAddress) "cudaDeviceSynchronize()"', "CUDA-IMA", "real-bug"),
    # round 12's tuning files: families they showed (collectors ae-ag)
    ("{'loss': nan, 'grad_norm': nan, 'learning_rate': 8e-05, 'epoch': 0.01}", "O13", "real-bug"),
    ("2021-08-12 05:44:07,141 Epoch[1] Batch[7] Speed: 143.86 samples/sec,  IDLoss=nan,", "O13", "real-bug"),
    (" iteration     5426/  250000 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 |", "O13", "real-bug"),
    ("neptune.exceptions.MissingApiToken: Missing API token. Use \"NEPTUNE_API_TOKEN\" environment variable", "U35", "ops"),
    ("COMET ERROR: The given api key REDACTED is invalid, please check it against the dashboard.", "U35", "ops"),
    ("wandb: ERROR Error while calling W&B API: project not found (<Response [404]>)", "U35", "ops"),
    ("Modal requires authentication. Run 'modal token new' to set up credentials", "U35", "ops"),
    ("NotFoundError: No secret named huggingface - you can add secrets to your account at https://modal.com/secrets", "U35", "ops"),
    ("E   TypeError: Descriptors cannot not be created directly.", "IMPORT-VERSION", "environment"),
    ("this machine does not have the resources to deploy this pod", "CAPACITY", "probabilistic"),
    # round 13's families, written before its files landed
    ("sbatch: error: Invalid partition name specified", "SUBMIT-REFUSED", "ops"),
    ("sbatch: error: Invalid generic resource (gres) specification", "SUBMIT-REFUSED", "ops"),
    ("qsub: Unknown queue", "SUBMIT-REFUSED", "ops"),
    ('job 123 exceeds job hard limit "h_vmem" of queue "gpu.q@node1" (13421772800.00000 > limit:12884901888.00000) - sending SIGKILL', "U9", "host-oom"),
    ('Lmod has detected the following error: The following module(s) are unknown: "cuda/12.1"', "ENV-SOLVE", "environment"),
    ("ModuleCmd_Load.c(213):ERROR:105: Unable to locate a modulefile for 'cuda/11.8'", "ENV-SOLVE", "environment"),
    ("EnvironmentNameNotFound: Could not find conda environment: torch2", "ENV-SOLVE", "environment"),
    ("CondaError: Run 'conda init' before 'conda activate'", "ENV-SOLVE", "environment"),
    ("  Warning  DeadlineExceeded  2m  job-controller  Job was active longer than specified deadline", "SLURM-TIMEOUT", "ops"),
    ("0/3 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: present}.", "K8S1", "environment"),
    ("Message: Not enough quota available for Standard_NC24ads_A100_v4 in SubscriptionId abc. Current usage/limit: 0/0.", "QUOTA", "ops"),
    ("KeyError: 'LOCAL_RANK'", "CONFIG", "ops"),
    ("AssertionError: Micro batch size per gpu: 0 has to be greater than 0", "CONFIG", "ops"),
    ("lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1]", "CONFIG", "ops"),
    # round 13's tuning files: families they showed (collectors ah-ak)
    ('Lmod has detected the following error:  These module(s) or extension(s) exist but cannot be loaded as requested: "m4/1.4.18"', "ENV-SOLVE", "environment"),
    ("job 3132467 exceeded MEM usage hard limit (2528 > 1126)", "U9", "host-oom"),
    ("value is outside the range set by RESRSV_LIMIT defined in lsb.queues. Job not submitted.", "SUBMIT-REFUSED", "ops"),
    ("qsub: submit error (Job exceeds queue resource limits MSG=cannot satisfy queue max mem requirement)", "SUBMIT-REFUSED", "ops"),
    ("srun: error: Unable to create step for job X: Invalid generic resource (gres) specification", "SUBMIT-REFUSED", "ops"),
    ('"code":"ClusterMinNodesExceedCoreQuota","message":"The specified subscription has a Standard DSv2 family vCPU quota of 6"', "QUOTA", "ops"),
    ('"Message":"AzureMLCompute cluster deal-uat does not exist",', "CONFIG", "ops"),
    ('test.py [options] fit: error: Parser key "trainer.strategy":', "CLI-ARGS", "ops"),
    ("main.py: error: 'Configuration check failed :: No action for destination key \"trainer.process_position\" to check its value.'", "CLI-ARGS", "ops"),
    ("Epoch 41/250: 100%|####| 9375/9375 [07:11<00:00, 21.73it/s, DR=713, DF=nan, G=nan, GP=2.16e+4, LR=0.0001]", "O13", "real-bug"),
    ("discrim_loss nan", "O13", "real-bug"),
    # NaN losses in the forms loggers print them (probes, before any file showed them)
    ("loss: tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)", "O13", "real-bug"),
    ('{"step": 100, "loss": NaN, "lr": 0.001}', "O13", "real-bug"),
    ("Detected NaN in loss. Stopping training.", "O13", "real-bug"),
    ("       3/99      3.2G        nan        nan        nan         21        640", "O13", "real-bug"),
    # a stack too old or too new for the code (probes)
    ("AttributeError: module 'torch' has no attribute 'compile'", "IMPORT-VERSION", "environment"),
    ("TypeError: Trainer.__init__() got an unexpected keyword argument 'gpus'", "IMPORT-VERSION", "environment"),
    ("AttributeError: 'MessageFactory' object has no attribute 'GetPrototype'", "IMPORT-VERSION", "environment"),
    ("CUDA_ERROR_NO_BINARY_FOR_GPU", "U28", "environment"),
    ("RuntimeError: Error compiling objects for extension", "TOOLCHAIN", "environment"),
    ("ERROR: Could not build wheels for flash-attn, which is required to install pyproject.toml-based projects", "ENV-SOLVE", "environment"),
    ("ERROR: No matching distribution found for torch==2.1.0+cu121", "ENV-SOLVE", "environment"),
    ("E: Unable to locate package libgl1-mesa-glx", "ENV-SOLVE", "environment"),
    ("        Remapping Failure Occurred        : Yes", "GPU-LOST", "hardware"),
    # process supervisors' and time limits' own words (probes)
    ("train.service: Main process exited, code=killed, status=15/TERM", "SIGTERM-LAUNCHER", "ops"),
    ("2024-01-01 10:00:00,000 INFO stopped: train (terminated by SIGTERM)", "SIGTERM-LAUNCHER", "ops"),
    ("train.service: Failed with result 'oom-kill'.", "U9", "host-oom"),
    ("train.service: A process of this unit has been killed by the OOM killer.", "U9", "host-oom"),
    ("timeout: sending signal TERM to command 'python'", "SLURM-TIMEOUT", "ops"),
    ("Your notebook was stopped because it exceeded the max allowed execution duration.", "SLURM-TIMEOUT", "ops"),
    # NICs, filesystems and NVMe failing; peers gone over sockets (probes)
    ("mlx5_core 0000:3b:00.0: Port module event: module 0, Cable unplugged", "IB-FATAL", "hardware"),
    ("kernel: mlx5_core 0000:3b:00.0: mlx5_fw_fatal_reporter_err_work:664:(pid 12): Driver is in error state. Unloading", "IB-FATAL", "hardware"),
    ("NETDEV WATCHDOG: eth0 (ixgbe): transmit queue 0 timed out", "IB-FATAL", "hardware"),
    ("kernel: EXT4-fs (nvme0n1p2): Remounting filesystem read-only", "GPU-LOST", "hardware"),
    ("nvme nvme0: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff", "GPU-LOST", "hardware"),
    ("nvme nvme0: I/O 123 QID 4 timeout, aborting", "GPU-LOST", "hardware"),
    ("node2:1:2 [0] misc/socket.cc:538 NCCL WARN NET/Socket : peer 10.0.0.3<41234> shutdown", "NCCL-PEER", "probabilistic"),
    ("[E ProcessGroupGloo.cpp:138] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error", "NCCL-PEER", "probabilistic"),
])
def test_issue_17_families_of_rounds_10_to_13(line: str, rule: str, klass: str) -> None:
    # judged as an exception line (PATH names only a traceback's exception)
    found = RULEBOOK.match_line(line.encode(), traceback=[])
    assert found is not None and (found.id, found.klass) == (rule, klass), (line, found)


@pytest.mark.parametrize("line", [
    "warning: invalid option value in config, using default",
    "Unknown option 'foo' in the config file, ignoring it",
    "the job was stopped and resumed from checkpoint-500 as planned",
    "Loading checkpoint shards: config.json found, 4 files named model-0000x-of-00004",
    "GPU 0 entered D3cold (runtime PM), resuming on first use",
    "RAM usage is 45% of all available RAM",
    " iteration      300/  500000 | lm loss: 7.234E+00 | number of skipped iterations:   3 | number of nan iterations:   0 |",
    # fp16's first steps: the scaler still calibrating, the loss finite
    "{'loss': 2.6257, 'grad_norm': nan, 'learning_rate': 6.666666666666667e-08, 'epoch': 0.07}",
    "Device: /dev/sdb [SAT], 0 Currently unreadable (pending) sectors",
    "   2 | 03/07/2021 | 07:10:12 | Power Supply #0xc5 | Presence detected | Asserted",
    "Conditions: Ready=True DiskPressure=False MemoryPressure=False",
    "ata3: SATA link up 6.0 Gbps (SStatus 133 SControl 300)",
    "sbatch: Submitted batch job 123456 (job submit plugin: ok)",
    "curl: (0) ok, 1.2 GB in 30 s",
    "dial tcp 10.0.0.1:443: connected after 2 retries",
    "Barrier reached by 8/8 tasks",
    "git@github.com: Permission denied (publickey).",
    "Checkpoint found at 'logs/checkpoint_600.pth.tar', resuming",
    "[fe535b5ccf9b:00019] Signal handler installed for SIGSEGV",
    "has not produced any output yet (state: RUNNING)",
    "comet_ml: upload finished, status_code=200",
    "[1]+  Done                    python train.py",
    "zsh: correct 'pyhton' to 'python' [nyae]? y",
    "Installing signal handler for SIGTERM (called with signal handlers enabled)",
    "{'best_loss': inf, 'epoch': 0}",
    " iteration      100/  250000 | loss scale: 65536.0 | grad norm: nan | number of skipped iterations:   1 |",
    "{'loss': 0.4213, 'grad_norm': 1.02, 'learning_rate': 8e-05, 'epoch': 0.01}",
    "sbatch: Submitted batch job 4242 to partition gpu (Invalid flags ignored: none)",
    "Lmod is automatically replacing \"gcc/9\" with \"gcc/11\".",
    "local_rank = int(os.environ['LOCAL_RANK'])",
    "Epoch 41/250: 100%|####| 9375/9375 [07:11<00:00, 21.73it/s, DR=713, DF=0.31, G=1.2, NaNs=0]",
    "Job submitted. Job <4242> is submitted to queue <gpu>.",
    "WARNING: NaN detected in loss, skipping batch",
    "tensor(0.4213, device='cuda:0', grad_fn=<NllLossBackward0>)",
    "       3/99      3.2G    0.04213    0.02131    0.01012         21        640",
    '{"step": 100, "loss": 0.42, "best_loss": Infinity}',
    "AttributeError: module 'models' has no attribute 'resnet'",
    "TypeError: MyModel.__init__() got an unexpected keyword argument 'depth'",
    "        Remapping Failure Occurred        : No",
    "train.service: Main process exited, code=exited, status=0/SUCCESS",
    "2024-01-01 10:00:00,000 INFO exited: train (exit status 0; expected)",
    "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged",
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "nvme nvme0: 32/0/0 default/read/poll queues",
    # ranks' aborts interleaved on one line: no type name stands closed in it
    "terminate called after throwing an instance of 'terminate called after throwing an instance of 'terminate called after throwing an instan",
])
def test_look_alikes_of_rounds_10_to_13_are_no_event(line: str) -> None:
    assert RULEBOOK.match_line(line.encode()) is None, line


ROUND_14_FAMILIES = [
    # pre-round probes, from the tools' own wording
    ("openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key provided'}}", "CREDENTIALS", "ops"),
    ("RuntimeError: Attempting to deserialize object on CUDA device 1 but torch.cuda.device_count() is 1. Please use torch.load with map_location", "DEVICE-ORDINAL", "ops"),
    ("      error: [Errno 2] No such file or directory: '/usr/local/cuda/bin/nvcc'", "TOOLCHAIN", "environment"),
    ("subprocess.CalledProcessError: Command '['which', 'c++']' returned non-zero exit status 1.", "TOOLCHAIN", "environment"),
    ("ERROR: Cannot install transformers==4.40.0 and tokenizers==0.20.0 because these package versions have conflicting dependencies.", "ENV-SOLVE", "environment"),
    ("docker: Error response from daemon: unknown or invalid runtime name: nvidia.", "NO-DRIVER", "environment"),
    ('absl.flags._exceptions.IllegalFlagValueError: flag --train_logdir=None: Flag --train_logdir must have a value other than None.', 'CLI-ARGS', 'ops'),
    ('absl.flags._exceptions.ValidationError: Flag --train_logdir must be specified.', 'CLI-ARGS', 'ops'),
    ("FATAL Flags parsing error: Unknown command line flag 'batchsize'", 'CLI-ARGS', 'ops'),
    ('AssertionError: The None.pdparams does not exists!', 'PATH', 'ops'),
    ('Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}', 'LIB-MISSING', 'environment'),
    ('Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor', 'LIB-MISSING', 'environment'),
    ('Could not load library libcudnn_cnn_infer.so.8. Error: /usr/lib/x86_64-linux-gnu/libcudnn_cnn_infer.so.8: symbol _ZN5cudnn3ops version libcudnn_ops_infer', 'LIB-MISSING', 'environment'),
    ('Outdated cuDNN installation found.', 'U28', 'environment'),
    ('CUDA backend failed to initialize: Unable to use CUDA because of the following issues with CUDA components:', 'U28', 'environment'),
    ("torch._inductor.exc.InductorError: CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmp1/cuda_utils.c', '-O3', '-shared', '-fPIC', '-o', '/tmp/tmp1/cuda_utils.so', '-lcuda']' returned non-zero exit status 1.", 'TOOLCHAIN', 'environment'),
    ("[rank1]: subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.", 'TOOLCHAIN', 'environment'),
    ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:", 'U28', 'environment'),
    ('RuntimeError: operator torchvision::nms does not exist', 'U28', 'environment'),
    ('RuntimeError: Cuda extensions are being compiled with a version of Cuda that does not match the version used to compile Pytorch binaries.  Pytorch binaries were compiled with Cuda 12.1.', 'U28', 'environment'),
    ('[rank6]:[E222 18:40:45.627415948 ProcessGroupNCCL.cpp:1362] [PG ID 0 PG GUID 0(default_pg) Rank 6] Future for ProcessGroup abort timed out after 600000 ms', 'MN3', 'probabilistic'),
    ('Error: Error waiting to create Vm: Error code 8, message: There is no more capacity in the zone "us-central1-c"; you can try in another zone', 'CAPACITY', 'probabilistic'),
    ('Error: Service error:InternalError. Out of host capacity.. http status code: 500. Opc request id: xxxx', 'CAPACITY', 'probabilistic'),
    ('ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes.', 'NET', 'probabilistic'),
    ("OSError: Unable to create file (unable to open file: name = 'model_data/yolo.h5', errno = 13, error message = 'Permission denied', flags = 13, o_flags = 242)", 'PERM', 'ops'),
    ("IOError: Unable to create file (Unable to open file: name = './store/model.h5', errno = 2, error message = 'no such file or directory', flags = 13, o_flags = 242)", 'PATH', 'ops'),
    ('ValueError: Token must be specified for push to hub', 'HF-AUTH', 'ops'),
    ('remote: DENIED update refs/heads/main: forbidden', 'HF-AUTH', 'ops'),
    ("OSError: Could not find kaggle.json. Make sure it's located in /root/.kaggle. Or use the environment method.", 'CREDENTIALS', 'ops'),
    ('AssertionError: Batch size 4 is wrong. It must be a multiple of # GPUs 3.', 'CONFIG', 'ops'),
    ('amdgpu 0000:29:00.0: WARN: GPU thermal throttling temperature reached, expect performance decrease. HBM.', 'U23', 'hardware'),
    ("[198542.8] mlx5_core 0000:5e:00.0: device's health compromised - reached miss count", 'IB-FATAL', 'hardware'),
    ('[198542.918249] mlx5_core 0000:5e:00.0: synd 0x7: irisc not responding', 'IB-FATAL', 'hardware'),
    ('distributed.nanny - WARNING - Worker exceeded 95% memory budget. Restarting', 'U9', 'host-oom'),
    ('Aug 04 10:48:44 debian earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%', 'U9', 'host-oom'),
    ('Aug 04 10:48:44 debian earlyoom[845]: sending SIGTERM to process 324012 uid 1000 "python3.13": oom_score 1288, VmRSS 30165 MiB', 'U9', 'host-oom'),
    ('Jan 01 10:00:00 host systemd-oomd[612]: Killed /user.slice/user-1000.slice/session-3.scope due to memory pressure for /user.slice', 'U9', 'host-oom'),
    ('g++: fatal error: Killed signal terminated program cc1plus', 'U9', 'host-oom'),
    ("31.55 nvcc error   : 'cudafe++' died due to signal 9 (Kill signal)", 'U9', 'host-oom'),
    ('229/230 [============================>.] - ETA: 2s - loss: 0.2038 - acc: 0.9209Killed', 'U9', 'host-oom'),
    ('  Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)', 'DP15', 'disk-full'),
    ('  "messageKind": "spot_interrupted",', 'PREEMPT', 'probabilistic'),
    ('There are not enough slots available in the system to satisfy the 8 slots', 'DEVICE-ORDINAL', 'ops'),
    ('24 2022-10-16 06:55:24 +0000 1 Corrected error(s): memory read error at CPU_SrcID#1_MC#1_Chan#1_DIMM#0 location: 3:1:0:-1', 'GPU-LOST', 'hardware'),
    ('Probable Cause DIMM_Degraded', 'GPU-LOST', 'hardware'),
    ('/usr/bin/ld: cannot find -lcuda: No such file or directory', 'LIB-MISSING', 'environment'),
    ("IOError: [Errno 2] No such file or directory: 'multi30k_model_e13_*.pt'", 'PATH', 'ops'),
    ('[Apr16 16:08] hwmon hwmon1: Undervoltage detected!', 'U23', 'hardware'),
    ('2024-05-17 23:15:33,005 - modelscope - ERROR - Authentication token does not exist, failed to access model 01-ai/Yi-1.5-34B-Chat which may not exist or may be private. Please login first.', 'HF-AUTH', 'ops'),
    ('[ 9329.469310] e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:', 'IB-FATAL', 'hardware'),
    ('3    | Dec-09-2024 | 21:12:29 | Power Supply 2 PS2 Status                         | Power Supply      | Critical | Power Supply Failure detected', 'GPU-LOST', 'hardware'),
    ('"message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."', 'CAPACITY', 'probabilistic'),
    ('10:23:28          "code": "AllocationFailed",', 'CAPACITY', 'probabilistic'),
    ('EI0006: 2024-08-05-18:15:21.270.506 Getting socket times out. Reason: Remote Rank did not send the data in time. Please check the reason for the rank being stuck', 'MN3', 'probabilistic'),
    ('EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [4294967295].', 'MN3', 'probabilistic'),
    ('EL0004: [PID: 1234] 2025-04-09-21:56:46.123 Failed to allocate memory. Possible Cause: Available memory is insufficient. Solution: Close applications not in use. TraceBack (most recent call last): Memory_Allocation_Failure(EL0004)', 'U10', 'real-bug'),
    ('EZ9999: 2024-05-17-01:30:26.960.959  Op Cast does not has any binary.', 'LIB-MISSING', 'environment'),
    ('[Error]: System Direct Memory Access (DMA) hardware execution error. ', 'GPU-LOST', 'hardware'),
    ('2022-12-08 17:57:33,992-INFO: Total iter: 20, epoch: 0, batch: 20, loss: [nan]', 'O13', 'real-bug'),
    ('INFO - [R0] | E6 iter[ 14/ 15] | [Loss] nan | [exp] ./exp/0125/car/3dbf3ah_hvae_lion_B40 | [step]   104', 'O13', 'real-bug'),
    ('#10 304.0 E: Failed to fetch http://archive.ubuntu.com/ubuntu/pool/main/libp/libpipeline/libpipeline1_1.5.2-2build1_amd64.deb  502  Bad Gateway [IP: 91.189.91.38 80]', 'NET', 'probabilistic'),
    ('SMART overall-health self-assessment test result: FAILED!', 'GPU-LOST', 'hardware'),
    ('Drive failure expected in less than 24 hours. SAVE ALL DATA.', 'GPU-LOST', 'hardware'),
    ('SMART Failure: HARDWARE IMPENDING FAILURE GENERAL HARD DRIVE FAILURE', 'GPU-LOST', 'hardware'),
    ('2025-01-06 15:36:29,760\tINFO tune.py:1009 -- Stop signal received (e.g. via SIGINT/Ctrl+C), ending Ray Tune run. This will try to checkpoint the experiment state one last time.', 'INT', 'ops'),
    ('[ip-10-0-0-1:1234 :0:5678] Caught signal 7 (Bus error: nonexistent physical address)', 'DP15', 'disk-full'),
    ('  (0) RESOURCE_EXHAUSTED: Attempting to reserve 10.51G at the bottom of memory. That was not possible. There are 8.97G free, 0B reserved, and 8.97G reservable.', 'U10', 'real-bug'),
    ('jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 17.63G of 15.48G hbm.', 'U10', 'real-bug'),
    ('[2023-03-01 01:31:13Z] Experiment cancel requested, checking remained jobs...', 'SLURM-CANCELLED', 'ops'),
    ('time="2022-10-16T07:01:34.463Z" level=info msg="node xyz-1665903600-2446912677 message: workflow shutdown with strategy: Terminate" namespace= ns123', 'SLURM-CANCELLED', 'ops'),
    ('C-c C-cERROR: InterruptException:', 'INT', 'ops'),
    ('UnityEnvironment worker: keyboard interrupt', 'INT', 'ops'),
    ('INFO:mlagents.envs:Learning was interrupted. Please wait while the graph is generated.', 'INT', 'ops'),
    ("lightning_fabric.utilities.exceptions.MisconfigurationException: ReduceLROnPlateau conditioned on metric val_loss which is not available. Available metrics are: ['train_loss']", 'METRIC', 'real-bug'),
    ('RuntimeError: Early stopping conditioned on metric `val_loss` which is not available. Pass in or modify your `EarlyStopping` callback to use any of the following: `valid/loss`', 'METRIC', 'real-bug'),
    ('ERROR: Unexpected segmentation fault encountered in worker.', 'SEGV', 'real-bug'),
    ('RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable', 'NO-DRIVER', 'environment'),
    ("fastmoe: Test NCCL failure common.cu:777 'unhandled system error'", 'NCCL', 'environment'),
    ('2023-10-26 12:12:07.399692: W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at nccl_create.cc:112 : Internal: unhandled system error', 'NCCL', 'environment'),
    ("OSError: [Errno 5] Input/output error: '/media/project/nnUNet/nnUNet_preprocessed/FA1791_LAD_axial.pkl'", 'GPU-LOST', 'hardware'),
    ('[05/05/2024-16:16:20] [TRT] [E] 1: [caskUtils.cpp::trtSmToCask::147] Error Code 1: Internal Error (Unsupported SM: 0x900)', 'U28', 'environment'),
    ("ValueError: You can't train a model that has been loaded in 8-bit precision on a different device than the one you're training on.", 'TORCH-BUG', 'real-bug'),
    ('NVRM: API mismatch: the client has the version 535.104.05, but', 'U28', 'environment'),
    ('wandb: ERROR Error while calling W&B API: entity my-team not found during upsertBucket (<Response [404]>)', 'U35', 'ops'),
    ('ConnectionError: Tried to launch distributed communication on port `29500`, but another process is utilizing it. Please specify a different port', 'D4', 'environment'),
    ('Exception: CUDA SETUP: Setup Failed!', 'LIB-MISSING', 'environment'),
    ('TimeoutError: Unsloth: HuggingFace seems to be down after trying for 120 seconds :(', 'NET', 'probabilistic'),
    ('Memory on the node (IP: 10.1.180.84, ID: ba65c8) where the task (task ID: d221d2, name=head, rank=0, pid=4503) was running was 1.85TB / 1.95TB (0.950101), which exceeds the memory usage threshold 0.95. Ray killed this worker', 'U9', 'host-oom'),
    ('(pid=1521999)  But your machine only has: [0]', 'DEVICE-ORDINAL', 'ops'),
    ('salloc: error: Job submit/allocate failed: Socket timed out on send/recv operation', 'CAPACITY', 'probabilistic'),
    ("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'", 'U10', 'real-bug'),
    ('ng30903:3063028:3066152 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes', 'U10', 'real-bug'),
    ("subprocess.CalledProcessError: Command '['python.exe', 'train_dreambooth_lora_sd3.py']' returned non-zero exit status 3221225477.", 'SEGV', 'real-bug'),
]

ROUND_14_LOOK_ALIKES = [
    "AuthenticationError: retrying with a refreshed token (attempt 1 of 3)",
    "Attempting to deserialize object on CUDA device 0 with map_location='cuda:0'",
    "nvcc found at /usr/local/cuda/bin/nvcc",
    "Command '['which', 'c++']' found /usr/bin/c++",
    "Successfully installed transformers-4.40.0 tokenizers-0.19.1",
    "Runtimes: io.containerd.runc.v2 nvidia runc",
    'absl flags: --train_logdir must be specified or defaults to /tmp',
    'Checking that checkpoint.pdparams does not exist yet: ok',
    'Loaded cuDNN version 90100 (libcudnn_ops.so.9)',
    'An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu.',
    "Command '['/usr/bin/gcc', '/tmp/tmp1/cuda_utils.c', '-O3', '-lcuda']' finished in 1.2s",
    "Command '['ninja', '-v']' finished: 12 targets built",
    'xFormers 0.0.28 loaded C++/CUDA extensions (built for PyTorch 2.5.0+cu124)',
    'registered operator torchvision::nms for CUDA',
    'ProcessGroup abort completed in 12 ms',
    'capacity in the zone us-central1-c: 8 of 8 TPU nodes available',
    'Collecting torch==2.1.1 (from -r requirements.txt (line 84)) hashes match',
    'Found kaggle.json at /root/.kaggle/kaggle.json',
    'remote: update refs/heads/main: ok',
    'Batch size 4 is fine for 4 GPUs',
    'amdgpu 0000:29:00.0: thermal throttling temperature set to 95C',
    'mlx5_core 0000:5e:00.0: irisc_index 0',
    'earlyoom[845]: mem avail: 20105 of 30236 MiB (66.49%), swap free: 4860 of 5119 MiB (95.0%)',
    'distributed.worker.memory - WARNING - Unmanaged memory use is high.',
    '230/230 [==============================] - 2984s 13s/step - loss: 0.2198 - acc: 0.9168 - jobs_killed: 0',
    'NCCL INFO Allocated shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)',
    '  "messageKind": "rebalance_recommendation",',
    'There are 8 slots available in the system',
    'EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0: DEV 0000:3a:0a.0 (INTERRUPT)',
    '/usr/bin/ld: found -lcuda at /usr/lib/x86_64-linux-gnu/libcuda.so',
    '[  +4.031876] hwmon hwmon1: Voltage normalised',
    "OSError: [Errno 2] No such file or directory: 'ninja'",
    '[    2.1] e1000e 0000:00:19.0 eth0: Intel(R) PRO/1000 Network Connection',
    '4    | Dec-10-2024 | 09:00:00 | Power Supply 2 PS2 Status                         | Power Supply      | OK       | Presence detected',
    'HCCL INFO: Getting socket from remote rank 3 succeeded',
    '2022-12-08 17:57:32,672-INFO: Total iter: 0, epoch: 0, batch: 0, loss: [10.0123]',
    'INFO - [R0] | E5 iter[ 14/ 15] | [Loss] 51566519.44 | [best] 0 -100.000x1e-2',
    'SMART overall-health self-assessment test result: PASSED',
    'Stop signal handler installed (SIGINT/Ctrl+C ends the run cleanly)',
    'Reserved 10.51G at the bottom of memory for the TPU program',
    'shutdown strategy: Terminate is set for this workflow (spec.shutdown)',
    'Press Ctrl-C to send a keyboard interrupt to the worker',
    'EarlyStopping conditioned on metric val_loss: improved by 0.012 >= min_delta = 0.0. New best score: 0.412',
    '    raise MisconfigurationException(',
    '#  Out of bounds values : 0 OK',
    'wandb: Error while calling W&B API: retrying (<Response [200]>) ok',
    'accelerate: launching distributed communication on port 29500',
    'CUDA SETUP: Setup complete, using libbitsandbytes_cuda118.so',
    'Memory on the node (IP: 10.1.180.84) is 0.61 of the memory usage threshold 0.95',
    'sbatch: Submitted batch job 42 (socket timeout 60 s)',
]


@pytest.mark.parametrize(("line", "rule", "klass"), ROUND_14_FAMILIES)
def test_issue_17_families_of_round_14(line: str, rule: str, klass: str) -> None:
    # judged as an exception line (PATH names only a traceback's exception)
    found = RULEBOOK.match_line(line.encode(), traceback=[])
    assert found is not None and (found.id, found.klass) == (rule, klass), (line, found)


@pytest.mark.parametrize("line", ROUND_14_LOOK_ALIKES)
def test_look_alikes_of_round_14_are_no_event(line: str) -> None:
    assert RULEBOOK.match_line(line.encode()) is None, line


def test_a_traceback_glued_to_the_terminals_ctrl_c_is_the_interrupt() -> None:
    # Ctrl-C while Ray waited: the library raises its own error about the wait, not a bug
    tb = b"""2019-07-05 16:26:45,004 WARNING util.py:64 -- The operation took 0.17 seconds
^CTraceback (most recent call last):
  File "/envs/py36/lib/python3.6/site-packages/ray/worker.py", line 2316, in wait
    worker.current_task_id,
Exception: [RayletClient] Raylet connection closed.
"""
    verdict = classify_excerpt(RULEBOOK, tb)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("INT", "ops")
    # the same traceback without the ^C is the library's error
    verdict = classify_excerpt(RULEBOOK, tb.replace(b"^C", b""))
    assert verdict is not None and verdict.klass == "real-bug"
    # a rule that names the exception itself still wins under ^C
    full = tb.replace(b"Exception: [RayletClient] Raylet connection closed.",
                      b"OSError: [Errno 28] No space left on device")
    verdict = classify_excerpt(RULEBOOK, full)
    assert verdict is not None and verdict.klass == "disk-full"


def test_the_cause_under_an_nccl_errors_last_error_line_names_it() -> None:
    tb = b"""[rank1]: Traceback (most recent call last):
[rank1]:   File "/root/proj/train_ddp.py", line 52, in setup_distributed
[rank1]:     dist.barrier()
[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3087, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5
[rank1]: ncclInternalError: Internal check failed.
[rank1]: Last error:
[rank1]: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000
"""
    verdict = classify_excerpt(RULEBOOK, tb)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("DEVICE-ORDINAL", "ops")
    other = tb.replace(b"Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
                       b"NET/IB : Got completion from peer 10.0.0.1 with status=12")
    verdict = classify_excerpt(RULEBOOK, other)
    assert verdict is not None and verdict.rule.id != "DEVICE-ORDINAL"


RAY_ACTOR_TB = b"""(RolloutWorker pid=155213) 2023-07-01 11:37:19,640\tERROR worker.py:763 -- Exception raised in creation task: The actor died because of an error raised in its creation task, ray::RolloutWorker.__init__() (pid=155213, ip=192.168.50.3)
(RolloutWorker pid=155213)   File "/opt/conda/lib/python3.8/site-packages/ray/rllib/evaluation/rollout_worker.py", line 662, in __init__
(RolloutWorker pid=155213)     self.policy_dict, self.is_policy_to_train = self.config.get_multi_agent_setup(
(RolloutWorker pid=155213)   File "/opt/conda/lib/python3.8/site-packages/ray/rllib/algorithms/algorithm_config.py", line 2182, in get_multi_agent_setup
(RolloutWorker pid=155213)     raise ValueError(
(RolloutWorker pid=155213) ValueError: `observation_space` not provided in PolicySpec for default_policy
Traceback (most recent call last):
  File "ppo_4x4grid.py", line 62, in <module>
"""


def test_a_ray_workers_headless_traceback_behind_its_prefix_is_read() -> None:
    # Ray prints an actor's traceback without a header, each line behind `(Actor pid=N) `
    verdict = classify_excerpt(RULEBOOK, RAY_ACTOR_TB)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PY", "real-bug"), verdict
    assert verdict.finding is not None and verdict.finding.exception == "ValueError"
    # A worker's prefix on an ordinary log line starts nothing
    quiet = b"(RolloutWorker pid=155213) iteration 3: episode_reward_mean=12.5\n"
    assert classify_excerpt(RULEBOOK, quiet) is None


NCCL_SHM = b"""  torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5
  ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.
  Last error:
  Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)
"""


def test_a_generic_nccl_error_gives_way_to_the_cause_it_names() -> None:
    # NCCL's "unhandled system error" is what the cause looked like to torch: the cause is
    # named below it (a /dev/shm too small for NCCL's segments)
    verdict = classify_excerpt(RULEBOOK, NCCL_SHM)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("DP15", "disk-full"), verdict
    # alone, it is still the NCCL error
    alone = NCCL_SHM.split(b"\n  Last error:")[0] + b"\n"
    verdict = classify_excerpt(RULEBOOK, alone)
    assert verdict is not None and verdict.rule.id == "NCCL", verdict


CUT_TB_WITH_LINKER = b"""  File "/usr/lib/python3.10/site-packages/torch/_inductor/compile_fx.py", line 430, in fw_compiler
    return inner_compile(
  File "/usr/lib/python3.10/site-packages/torch/_inductor/debug.py", line 239, in inner
/usr/bin/ld: cannot find -lcuda: No such file or directory
collect2: error: ld returned 1 exit status
    return fn(*args, **kwargs)
  File "/usr/lib/python3.10/site-packages/torch/_inductor/graph.py", line 575, in compile_to_module
    mod = PyCodeCache.load(code)
"""


def test_a_line_interleaved_in_a_cut_off_traceback_still_names_the_cause() -> None:
    # the linker's stderr lands between the frames of a traceback the excerpt cuts off
    verdict = classify_excerpt(RULEBOOK, CUT_TB_WITH_LINKER)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("LIB-MISSING", "environment")
    assert verdict.line_no == 4
    # without the interleaved lines, a cut-off traceback names nothing
    bare = b"".join(line for line in CUT_TB_WITH_LINKER.splitlines(keepends=True)
                    if b"ld" not in line[:20] and not line.startswith(b"collect2"))
    assert classify_excerpt(RULEBOOK, bare) is None


SRUN_RANKS_TB = b""" 2: [rank2]:   File "/usr/lib/python3.12/site-packages/lightning/pytorch/trainer/call.py", line 46, in _call_and_handle_interrupt
 2: [rank2]:     return trainer.strategy.launcher.launch(trainer_fn, *args, trainer=trainer, **kwargs)
15: [rank15]:   File "/usr/lib/python3.12/site-packages/megatron/core/transformer/transformer_block.py", line 110, in get_num_layers_to_build
15: [rank15]:     num_layers % config.pipeline_model_parallel_size == 0
15: [rank15]: AssertionError: num_layers should be divisible by pipeline_model_parallel_size
 2: [rank2]:   File "/usr/lib/python3.12/site-packages/lightning/pytorch/strategies/launchers/subprocess_script.py", line 105, in launch
 2: [rank2]:     return function(*args, **kwargs)
"""

INTERLEAVED_RANKS_TB = b"""[rank0]: Traceback (most recent call last):
[rank0]:   File "/src/llamafactory/launcher.py", line 23, in <module>
[rank0]:     launch()
[rank5]:   File "/src/llamafactory/data/loader.py", line 75, in _load_single_dataset
[rank5]:     raise ValueError(f"File {local_path} not found.")
[rank5]: ValueError: File data/mllm_dome.json not found.
[rank2]: Traceback (most recent call last):
"""


def test_a_traceback_read_across_the_tags_of_the_processes_that_print_it() -> None:
    # srun -l's task label and torchrun's rank tag, different on every rank's line
    verdict = classify_excerpt(RULEBOOK, SRUN_RANKS_TB)
    assert verdict is not None and verdict.klass == "real-bug", verdict
    assert verdict.finding is not None and verdict.finding.exception == "AssertionError"
    # rank 0 opened the traceback, rank 5's lines carry its exception: one traceback
    verdict = classify_excerpt(RULEBOOK, INTERLEAVED_RANKS_TB)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH", "ops"), verdict
    # mpirun --tag-output
    tagged = b"".join(b"[1,0]<stderr>:" + line for line in RAY_ACTOR_TB.splitlines(keepends=True)[1:6])
    verdict = classify_excerpt(RULEBOOK, tagged.replace(b"(RolloutWorker pid=155213) ", b""))
    assert verdict is not None and verdict.rule.id == "PY", verdict
    # tags on ordinary lines start nothing
    assert classify_excerpt(RULEBOOK, b" 0: [rank0]: step 10 loss 0.42\n15: [rank15]: step 10 loss 0.41\n") is None


_CUT_HEAD = b"""epoch 3 step 120 loss 0.41
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    main()
"""


@pytest.mark.parametrize(("frames", "rule", "klass"), [
    # inside a network call: a download, a tracker's request
    (b'  File "/usr/lib/python3.10/urllib/request.py", line 222, in urlopen\n'
     b"    return opener.open(url, data, timeout)\n", "NET-CUT", "probabilistic"),
    (b'  File "/opt/conda/lib/python3.10/http/client.py", line 1344, in getresponse\n'
     b"    response.begin()\n", "NET-CUT", "probabilistic"),
    (b'  File "train.py", line 40, in fetch\n'
     b"    path = hf_hub_download(repo_id, filename)\n", "NET-CUT", "probabilistic"),
    # inside an import
    (b'  File "/envs/x/lib/python3.9/site-packages/wandb/sdk/wandb_init.py", line 29, in <module>\n'
     b"    from .backend.backend import Backend\n", "IMPORT-CUT", "environment"),
    (b'  File "<frozen importlib._bootstrap>", line 1050, in _gcd_import\n', "IMPORT-CUT",
     "environment"),
    # anywhere else: the program raised, the exception line is lost
    (b'  File "/envs/x/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl\n'
     b"    return forward_call(*args, **kwargs)\n", "PY-CUT", "real-bug"),
    (b'[rank1]:   File "/envs/x/lib/python3.12/site-packages/torch/autograd/graph.py", line 825, in _engine_run_backward\n'
     b"[rank1]:     return Variable._execution_engine.run_backward(\n", "PY-CUT", "real-bug"),
])
def test_a_log_that_ends_inside_a_traceback_is_judged_by_its_innermost_frame(
        frames: bytes, rule: str, klass: str) -> None:
    log = _CUT_HEAD + frames
    if frames.startswith(b"[rank1]"):
        log = b"".join(b"[rank1]:" + line + b"\n" for line in _CUT_HEAD.splitlines()[1:]) + frames
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == (rule, klass)
    # Only at the end of the log: a live feed may still bring the exception line.
    live = LogClassifier(RULEBOOK)
    assert live.feed(log) + live.flush() == []
    assert [f.rule.id for f in live.finish()] == [rule]


@pytest.mark.parametrize("log", [
    # the exception line arrives: the traceback is judged by it, not by its frames
    _CUT_HEAD + b'  File "/usr/lib/python3.10/urllib/request.py", line 222, in urlopen\n'
    b"    return opener.open(url, data, timeout)\nKeyError: 'label'\n",
    # a stack dump without a header (dynamo's graph-break warning, logging's stack_info)
    b"epoch 3 step 120 loss 0.41\nGraph break: from user code at:\n"
    b'  File "/src/model/base.py", line 32, in forward\n    inputs = module(inputs)\n',
    # cut off while waiting on another process, or re-raising a child's failure: the cause is
    # in the other process's output
    _CUT_HEAD + b'  File "/envs/x/lib/python3.5/multiprocessing/connection.py", line 379, in _recv\n'
    b"    chunk = read(handle, remaining)\n",
    _CUT_HEAD + b'  File "/envs/x/lib/python3.10/site-packages/accelerate/commands/launch.py", line 628, in simple_launcher\n'
    b"    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n",
    # the header under CPython's `Exception ignored in:` at shutdown
    b"training done\nException ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f>\n"
    b"Traceback (most recent call last):\n"
    b'  File "/envs/x/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1328, in __del__\n',
    # a header with no frame yet says nothing about where the program was
    b"epoch 3 step 120 loss 0.41\nTraceback (most recent call last):\n",
])
def test_look_alikes_of_a_cut_off_traceback_are_not_judged_by_its_frames(log: bytes) -> None:
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is None or verdict.rule.id not in {"NET-CUT", "IMPORT-CUT", "PY-CUT"}


def test_a_cut_off_traceback_names_the_log_only_when_nothing_else_does() -> None:
    log = (b"[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: "
           b"WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800156 milliseconds "
           b"before timing out.\n" + _CUT_HEAD
           + b'  File "/envs/x/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl\n'
           b"    return forward_call(*args, **kwargs)\n")
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and verdict.klass == "probabilistic" and verdict.rule.id != "NET-CUT"


ROUND_17_FAMILIES = [
    # (line, rule, class): families first seen in round 17's tuning split (session 28)
    ('xgboost.core.XGBoostError: [07:02:59] /workspace/src/c_api/../common/common.h:174: XGBoost version not compiled with GPU support.', 'U28', 'environment'),
    ('No OpenCL device found', 'U28', 'environment'),
    ('2022-12-08 11:37:51.352219: E external/org_tensorflow/tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:628] failed to get PTX kernel "broadcast" from module: CUDA_ERROR_NOT_FOUND: named symbol not found', 'U28', 'environment'),
    ('beignet-opencl-icd: no supported GPU found, this is probably the wrong opencl-icd package for this hardware', 'U28', 'environment'),
    ('vk::Instance::enumeratePhysicalDevices: ErrorInitializationFailed', 'NO-DRIVER', 'environment'),
    ('RuntimeError: vkCreateInstance failed: VK_ERROR_INCOMPATIBLE_DRIVER', 'NO-DRIVER', 'environment'),
    ('Some of your processes may have been killed by the cgroup out-of-memory handler', 'SLURM4', 'host-oom'),
    ('Job 104759609 has exceeded memory allocation on node1', 'SLURM4', 'host-oom'),
    ('bash: line 1:  227304  Killed  (gmm-latgen-faster  --max-active=7000 --beam=11.0)', 'U9', 'host-oom'),
    ('❌ Training failed with exit code -9', 'U9', 'host-oom'),
    ("INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl.NotFoundError'>,train.record; No such file or directory", 'PATH-LOGGED', 'ops'),
    ('ValueError: Expected a string path to an existing deepspeed config, or a dictionary, or a base64 encoded string. Received: scripts/llava/zero3.json', 'PATH', 'ops'),
    ('ValueError: Failed to find source directory "/home/x/alphafold/uniref90" to mount in Docker container.', 'PATH', 'ops'),
    ('requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://huggingface.co/pyannote/segmentation/resolve/2022.07/pytorch_model.bin', 'HF-AUTH', 'ops'),
    ('[2024-09-20 15:33:14] [INFO] FileNotFoundError: No such file or directory: "/mnt/models/unet/flux1-dev.sft"', 'PATH', 'ops'),
    ("ERROR:root:FileNotFoundError: [Errno 2] No such file or directory: 'data/train.json'", 'PATH', 'ops'),
    ('../src/tree/updater_gpu_hist.cu:784: Exception in gpu_hist: [11:01:50] device_helpers.cuh:431: Memory allocation error on worker 0: std::bad_alloc: cudaErrorMemoryAllocation: out of memory', 'U10', 'real-bug'),
    ('Assign requires shapes of both tensors to match. lhs shape= [384] rhs shape= [528]', 'O20', 'real-bug'),
    ('logits and labels must have the same first dimension, got logits shape [32,271573] and labels shape [960]', 'TORCH-BUG', 'real-bug'),
    ('@ERROR: max connections (25) reached -- try again later', 'NET', 'probabilistic'),
    ("datasets.data_files.EmptyDatasetError: The directory at /data/faces doesn't contain any data files", 'PATH', 'ops'),
    ('[12146.826127] NVRM Xid (PCI:0000:0b:00) : 32, Channel ID 00000009 intr 00008000', 'XID', 'hardware'),
    ("20220503 13:51:11 WARN: NVML: can't get temperature for GPU #0, error code 15", 'GPU-LOST', 'hardware'),
    ("GPU #0: cudaError 30 (unknown error) calling 'result = cudaStreamSynchronize(stream)' (salsa_kernel.cu line 902)", 'GPU-LOST', 'hardware'),
    ('Fatal GPU Error : CUDA error in func dev::eth::cudaminer::search at line 504 unknown error', 'GPU-LOST', 'hardware'),
    ('Temperature limit on GPU #3 reached, aborting...', 'U23', 'hardware'),
    ('Cuda driver error 804 in call at file', 'RP1', 'environment'),
    ('Kokkos::Cuda::initialize ERROR: likely mismatch of architecture', 'U28', 'environment'),
    ('[2019-11-09 07:52:23] Error: Curand error 203 - /home/mio/marian/src/tensors/rand.cpp:75: curandCreateGenerator(&generator_, CURAND_RNG_PSEUDO_DEFAULT)', 'NO-DRIVER', 'environment'),
    ('Failed to pull image "nvcr.io/nvidia/driver:515.65.01-buildroot2021.02.12": rpc error: code = NotFound desc = failed to pull and unpack image', 'K8S3', 'environment'),
    ("[2019-04-15 08:34:14] Error: CUDA error 2 'out of memory' - /src/tensors/gpu/device.cu:32: cudaMalloc(&data_, size)", 'U10', 'real-bug'),
    ('All 10 retry attempts failed. The last failure: Unavailable: Error executing an HTTP request: HTTP response code 503', 'NET', 'probabilistic'),
    ('OSError: HEAD request failed for url https://flair.informatik.hu-berlin.de/resources/embeddings/x.npy with status code 503.', 'NET', 'probabilistic'),
    ("      The zone ''projects/broad-ml4cvd/zones/us-west1-a'' does not have enough resources", 'CAPACITY', 'probabilistic'),
    ('cupy.cuda.nvrtc.NVRTCError: NVRTC_ERROR unknown (7)', 'U28', 'environment'),
    ('RuntimeError: use_libuv was requested but PyTorch was build without libuv support', 'U28', 'environment'),
    ('Processus arrêté', 'U9', 'host-oom'),
    ("  HuggingFace authentication error downloading from 'Prior-Labs/tabpfn_3'. This model is gated and requires you to accept its terms.", 'HF-AUTH', 'ops'),
    ('(LLMRayActor pid=226426) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62 [repeated 3x across cluster]', 'U10', 'real-bug'),
]

ROUND_17_LOOK_ALIKES = [
    # lines that must not raise those families' events
    'INFO: compiled with GPU support: yes',
    '[LightGBM] [Info] Using GPU Device: GeForce GTX 1060 6GB, Vendor: NVIDIA Corporation',
    'W external/org_tensorflow/tensorflow/compiler/xla/stream_executor/gpu/asm_compiler.cc:231] Falling back to the CUDA driver for PTX compilation; ptxas does not support CC 8.9',
    'vk::Instance::enumeratePhysicalDevices: found 1 device',
    'Training failed with exit code -90',
    'memory allocation on node1: 64 GB requested',
    "INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl.NotFoundError'>,  Key global_step not found in checkpoint",
    'NVML: cannot get fan speed for GPU #0, error code 150',
    'CUDA error checking enabled; unknown errors will be reported',
    'cuda error 8040 counted',
    'HTTP response code 200 after 3 attempts',
    'Processus arrêté par le signal, reprise au checkpoint',
    'Note: this repo is gated-free and open to all',
]


@pytest.mark.parametrize(("line", "rule", "klass"), ROUND_17_FAMILIES)
def test_issue_17_families_of_round_17(line: str, rule: str, klass: str) -> None:
    verdict = classify_excerpt(RULEBOOK, line.encode() + b"\n")
    assert verdict is not None and (verdict.rule.id, verdict.klass) == (rule, klass)


@pytest.mark.parametrize("line", ROUND_17_LOOK_ALIKES)
def test_look_alikes_of_round_17_are_no_event(line: str) -> None:
    assert classify_excerpt(RULEBOOK, line.encode() + b"\n") is None


def test_an_assertion_that_a_given_path_exists_is_the_operators() -> None:
    log = b"""Traceback (most recent call last):
  File "C:/Users/DBNet.pytorch-master/tools/train.py", line 74, in <module>
    assert os.path.exists(args.config_file)
AssertionError
"""
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH-ASSERT", "ops")
    # Any other assertion is the program's own check: a bug.
    other = log.replace(b"os.path.exists(args.config_file)", b"x.shape[0] == y.shape[0]")
    verdict = classify_excerpt(RULEBOOK, other)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PY", "real-bug")


def test_a_headless_traceback_behind_line_stamps_is_read() -> None:
    # Jenkins' timestamper puts its own stamp before every line, the frames' too.
    log = b"""[2025-04-08T07:03:00.638Z]   File "/usr/local/lib/python3.9/site-packages/xgboost/core.py", line 2112, in update
[2025-04-08T07:03:00.638Z]     _check_call(
[2025-04-08T07:03:00.639Z]   File "/usr/local/lib/python3.9/site-packages/xgboost/core.py", line 296, in _check_call
[2025-04-08T07:03:00.639Z]     raise XGBoostError(py_str(_LIB.XGBGetLastError()))
[2025-04-08T07:03:00.639Z] xgboost.core.XGBoostError: [07:02:59] common.h:174: label must be in [0, 1]
[2025-04-08T07:03:00.639Z] Stack trace:
"""
    findings = classify_bytes(RULEBOOK, [log])
    assert [(f.rule.id, f.exception) for f in findings] == [("PY", "xgboost.core.XGBoostError")]


def test_tensorflow_not_finding_a_path_on_windows_is_the_operators() -> None:
    log = b"""Traceback (most recent call last):
  File "model_main_tf2.py", line 113, in <module>
    tf.compat.v1.app.run()
tensorflow.python.framework.errors_impl.NotFoundError: NewRandomAccessFile failed to Create/Open: models\\my_ssd\\pipeline.config : The system cannot find the path specified.
; No such process
"""
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH", "ops")


def test_a_cut_off_traceback_that_shows_the_raise_is_judged_by_what_it_raises() -> None:
    log = _CUT_HEAD + (
        b'  File "/envs/x/lib/python3.8/site-packages/datasets/data_files.py", line 499, in get_data_patterns\n'
        b'    raise EmptyDatasetError(f"The directory at {base_path} doesn\'t contain any data files") from None\n')
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("PATH", "ops")
    # A raise no specific rule knows says no more than the cut itself.
    plain = log.replace(b"EmptyDatasetError(f\"The directory at {base_path} doesn't contain any data files\")",
                        b"ValueError(f\"bad shape {x.shape}\")")
    verdict = classify_excerpt(RULEBOOK, plain)
    assert verdict is not None and verdict.rule.id == "PY-CUT"


def test_a_traceback_relogged_by_a_gui_behind_stamps_and_level_tags_is_read() -> None:
    # A trainer GUI re-logs its child's stderr line by line: a stamp and `[INFO] ` before each
    # line, the code lines' indent lost.
    log = b"""[2025-03-07 02:53:28] [INFO] File "C:\\sd-scripts\\library\\utils.py", line 369, in load_safetensors
[2025-03-07 02:53:28] [INFO] state_dict = load_file(path)  # prevent device invalid Error
[2025-03-07 02:53:28] [INFO] File "C:\\env\\lib\\site-packages\\safetensors\\torch.py", line 313, in load_file
[2025-03-07 02:53:28] [INFO] with safe_open(filename, framework="pt", device=device) as f:
[2025-03-07 02:53:28] [INFO] safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer
[2025-03-07 02:53:29] [INFO] Traceback (most recent call last):
[2025-03-07 02:53:29] [INFO] File "C:\\miniconda\\lib\\runpy.py", line 196, in _run_module_as_main
[2025-03-07 02:53:29] [INFO] return _run_code(code, main_globals, None,
[2025-03-07 02:53:29] [INFO] File "C:\\env\\lib\\site-packages\\accelerate\\commands\\launch.py", line 1106, in launch_command
[2025-03-07 02:53:29] [INFO] simple_launcher(args)
[2025-03-07 02:53:29] [INFO] ValueError: bad launch
"""
    findings = classify_bytes(RULEBOOK, [log])
    assert [(f.rule.id, f.line_no, f.exception) for f in findings] == [
        ("PY", 5, "safetensors_rust.SafetensorError"), ("PY", 11, "ValueError")]


def test_a_frame_indented_deeper_than_cpython_carries_the_decorations_indent() -> None:
    # A logger's `[ERROR]` plus one space before each line: the exception line is indented by
    # one space too, and must still end the traceback.
    log = b"""2022-12-28 16:13:02 [ERROR]    File "/src/basics.py", line 138, in evaluate_models
2022-12-28 16:13:02 [ERROR]      losses[k] += task_loss(state, output, target).item()
2022-12-28 16:13:02 [ERROR]  RuntimeError: CUDA error: device-side assert triggered
epoch 1 step 3
"""
    findings = classify_bytes(RULEBOOK, [log])
    assert [(f.rule.id, f.line_no) for f in findings] == [("O14", 3)]


@pytest.mark.parametrize(("tail", "rule"), [
    # tqdm's last redraw, flushed after the traceback when the process exits
    (b"RuntimeError: numel: integer multiplication overflow\n"
     b"Training progress:  18%|#####     | 17940/100000 [1:36:57<7:23:31,  3.08it/s, Loss=0.07]\n", "PY"),
    # an exception with an empty message
    (b"----> 6     data = self.dataset.next()\nStopIteration: \n", "PY"),
    # TensorFlow's errno text on a line of its own
    (b"tensorflow.python.framework.errors_impl.NotFoundError: NewRandomAccessFile failed to "
     b"Create/Open: cfg\\pipeline.config : The system cannot find the path specified.\n; No such process\n",
     "PATH"),
])
def test_an_excerpt_ending_on_an_exception_line_may_carry_what_follows_it_on_exit(
        tail: bytes, rule: str) -> None:
    verdict = classify_excerpt(RULEBOOK, b"epoch 3 step 9 loss 0.4\n" + tail)
    assert verdict is not None and verdict.rule.id == rule


def test_a_progress_bar_that_goes_on_after_an_exception_line_is_a_handled_error() -> None:
    log = (b"RuntimeError: numel: integer multiplication overflow\n"
           b"Training progress:  18%|#####     | 17940/100000 [1:36:57<7:23:31,  3.08it/s]\n"
           b"Training progress:  19%|#####     | 18940/100000 [1:37:57<7:22:31,  3.08it/s]\n")
    assert classify_excerpt(RULEBOOK, log) is None


def test_a_generic_exception_gives_way_to_the_specific_line_printed_under_it() -> None:
    log = b"""Traceback (most recent call last):
  File "/envs/x/lib/python3.9/site-packages/urllib3/util/connection.py", line 85, in create_connection
    sock.connect(sa)
ConnectionRefusedError: [Errno 111] Connection refused
requests.exceptions.ConnectionError: HTTPSConnectionPool(host='zenodo.org', port=443): Max retries exceeded with url: /record/1/files/w.zip (Caused by NewConnectionError)
"""
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("NET", "probabilistic")
    # A specific exception is not outranked by a later line of its tier: the earliest wins.
    specific = log.replace(b"ConnectionRefusedError: [Errno 111] Connection refused",
                           b"FileNotFoundError: [Errno 2] No such file or directory: 'w.zip'")
    verdict = classify_excerpt(RULEBOOK, specific)
    assert verdict is not None and verdict.rule.id == "PATH"


def test_headless_frames_that_stop_in_a_network_call_still_name_it() -> None:
    # The header fell outside the paste; the frames stop inside http.client.
    log = b"""[rank0]:   File "/envs/x/lib/python3.11/site-packages/trl/extras/vllm_client.py", line 160, in update_named_param
[rank0]:     response = self.session.post(url, json={"name": name})
[rank0]:   File "/envs/x/lib/python3.11/http/client.py", line 1395, in getresponse
[rank0]:     response.begin()
"""
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.klass) == ("NET-CUT", "probabilistic")
    # Stopping anywhere else says nothing without the header (it may be a stack dump).
    other = log.replace(b"/envs/x/lib/python3.11/http/client.py", b"/src/model/base.py")
    assert classify_excerpt(RULEBOOK, other) is None


def test_an_exception_whose_repr_goes_on_below_it_still_ends_the_excerpt() -> None:
    log = b"""epoch 3 step 9 loss 0.4
2022-01-23 02:08:36.029 tarfile.ReadError: ("unexpected end of data @ <_io.BufferedReader name='train-30/00000022.tar'>",
<_io.BufferedReader name='train-30/00000022.tar'>, {'__url__': 'train-30/00000022.tar', '__worker__': 'None',
'__rank__': '(18, 32)'})
"""
    verdict = classify_excerpt(RULEBOOK, log)
    assert verdict is not None and (verdict.rule.id, verdict.line_no) == ("PY", 2)
    # Once the repr is closed, more of the run's output means the error was handled.
    assert classify_excerpt(RULEBOOK, log + b"epoch 4 step 1 loss 0.3\n") is None
    # A bracket the message never closes does not swallow the run's output either.
    open_only = b"epoch 3\nValueError: bad value (see the docs\nepoch 4 step 1 loss 0.3\n"
    assert classify_excerpt(RULEBOOK, open_only) is None


def test_a_coloured_log_is_read_as_printed_in_any_chunking() -> None:
    # A program forced to colour its output (loguru, rich, Ray on a terminal): the escape
    # sequences sit inside the words the rules anchor on.
    log = (b"\x1b[32mepoch 3 step 9 loss 0.4\x1b[0m\n"
           b"\x1b[31mTraceback (most recent call last):\x1b[0m\n"
           b'  File "train.py", line 9, in <module>\n    main()\n'
           b"\x1b[31m\x1b[1mKeyError\x1b[0m:\x1b[1m 'label'\x1b[0m\n"
           b"\x1b[36m(RayTrainWorker pid=1942)\x1b[0m Killed\n")
    whole = [(f.rule.id, f.line_no) for f in classify_bytes(RULEBOOK, [log])]
    assert ("PY", 5) in whole
    for size in (1, 3, 7):
        chunks = [log[i:i + size] for i in range(0, len(log), size)]
        assert [(f.rule.id, f.line_no) for f in classify_bytes(RULEBOOK, chunks)] == whole
