"""cockpit: watch, verify and safely tear down training sweeps on rented GPUs.

Nothing is imported eagerly here so that `cockpit --help` stays fast and the headless
layers never pull in Textual or torch.
"""

from __future__ import annotations

__version__ = "0.1.0"
