"""A far link on one machine: a TCP proxy that delays every byte by a fixed time each way and
can cap the rate, so `scp`, `rsync` and the cockpit are measured over the same emulated link.

Each direction reads what arrives, stamps it with the time it may leave (now + delay) and a
writer sends it no earlier than that; with `--rate` the writer also paces bytes to that many
per second. What is queued in one direction is bounded (QUEUE_CAP): past it the reader waits,
so TCP back-pressure still reaches the sender, like a link whose buffer is full. The throughput
of a transfer over it is then set by the bytes the protocol keeps in flight (SSH channel
windows, SFTP requests), as on a real long link; loss and jitter are not emulated.

Run: .venv/bin/python -m bench.linkproxy LISTEN_PORT TARGET_HOST TARGET_PORT --rtt-ms 100 [--rate-mbps 0]
(or `start_proxy()` from a bench, which runs it as its own process so that it does not
share the measuring process's interpreter lock). Never part of the tests' timings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections import deque

READ_SIZE = 256 << 10
"""Bytes read from a socket at once."""
QUEUE_CAP = 256 << 20
"""Bytes held for one direction before its reader waits: above any bandwidth-delay product a
bench asks for (10 Gbit/s x 200 ms = 250 MB), and a bound on the proxy's memory."""


class Direction:
    """One direction of one connection: bytes in, held until their time, bytes out."""

    def __init__(self, delay: float, rate: float) -> None:
        self.delay = delay
        self.rate = rate
        self.queue: deque[tuple[float, bytes]] = deque()
        self.queued = 0
        self.more = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.closed = False

    async def pump_in(self, reader: asyncio.StreamReader) -> None:
        """Read until EOF, stamping each block with the time it may leave."""
        try:
            while block := await reader.read(READ_SIZE):
                while self.queued >= QUEUE_CAP:
                    self.room.clear()
                    await self.room.wait()
                self.queue.append((time.monotonic() + self.delay, block))
                self.queued += len(block)
                self.more.set()
        except (ConnectionError, OSError):
            pass
        finally:
            self.closed = True
            self.more.set()

    async def pump_out(self, writer: asyncio.StreamWriter) -> None:
        """Send each block at its time (and no faster than the rate), then close."""
        sent_until = time.monotonic()
        try:
            while True:
                if not self.queue:
                    if self.closed:
                        break
                    self.more.clear()
                    await self.more.wait()
                    continue
                due, block = self.queue.popleft()
                self.queued -= len(block)
                self.room.set()
                wait = due - time.monotonic()
                if self.rate:
                    sent_until = max(sent_until, time.monotonic()) + len(block) / self.rate
                    wait = max(wait, sent_until - time.monotonic())
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(block)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


async def serve(listen_port: int, host: str, port: int, delay: float, rate: float,
                ready: asyncio.Event | None = None) -> None:
    """Accept on 127.0.0.1:listen_port and relay each connection to host:port, delayed."""

    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        for w in (client_w, server_w):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up, down = Direction(delay, rate), Direction(delay, rate)
        await asyncio.gather(up.pump_in(client_r), up.pump_out(server_w),
                             down.pump_in(server_r), down.pump_out(client_w),
                             return_exceptions=True)

    server = await asyncio.start_server(relay, "127.0.0.1", listen_port)
    if ready is not None:
        ready.set()
    print(f"linkproxy listening on {listen_port}", flush=True)
    async with server:
        await server.serve_forever()


def start_proxy(host: str, port: int, rtt_ms: float,
                rate_mbps: float = 0.0) -> tuple[subprocess.Popen[bytes], int]:
    """Run the proxy as its own process; returns it and the port it listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        listen = int(probe.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-m", "bench.linkproxy", str(listen), host, str(port),
                             "--rtt-ms", str(rtt_ms), "--rate-mbps", str(rate_mbps)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"linkproxy exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", listen), 0.2):
            return proc, listen
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("linkproxy did not start listening")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("listen_port", type=int)
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--rtt-ms", type=float, default=100.0, help="round trip added (half each way)")
    parser.add_argument("--rate-mbps", type=float, default=0.0,
                        help="cap per direction and connection in megabits/s (0: none)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen_port, args.host, args.port, args.rtt_ms / 2000.0,
                          args.rate_mbps * 1e6 / 8))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
