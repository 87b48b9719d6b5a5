"""The embedded demo fleet: sandboxed boxes on localhost with a fake trainer and GPU."""

from __future__ import annotations
