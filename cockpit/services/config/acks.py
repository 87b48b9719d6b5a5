"""Which platforms' danger-clock banners this user has acknowledged, and against which facts.

Stored as JSON in the user's state directory: `{platform: {"facts": HASH, "at": ISO}}`.
The banner shows again when a profile's clock facts hash changes (a platform changed its
release timer, or a profile was corrected). Writes are atomic (temp file + rename); an
unreadable file is kept aside under a new name, never silently overwritten.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path

from cockpit.models.profile import Profile
from cockpit.services.config.paths import state_dir


class AckStore:
    """Acknowledged banners, read once and written through on every acknowledgement."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_dir() / "banner_acks.json"
        self.problem = ""
        self._acks = self._read()

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.problem = f"{self.path}: unreadable ({exc}); every banner will show again"
            return {}
        if not isinstance(raw, dict):
            self.problem = f"{self.path}: not a JSON object; every banner will show again"
            return {}
        return {k: v for k, v in raw.items() if isinstance(v, dict)}

    def needs_banner(self, profile: Profile) -> bool:
        """True unless this platform's current clock facts were acknowledged."""
        entry = self._acks.get(profile.platform)
        return entry is None or entry.get("facts") != profile.clock_facts_hash()

    def acknowledge(self, profile: Profile, now: dt.datetime | None = None) -> None:
        """Record that the user read this platform's banner as it is now."""
        moment = (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds")
        self._acks[profile.platform] = {"facts": profile.clock_facts_hash(), "at": moment}
        self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.problem and self.path.exists():
            stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}")
            n = 1
            while aside.exists():  # never replace an earlier unreadable copy
                n += 1
                aside = self.path.with_name(f"{self.path.name}.unreadable-{stamp}-{n}")
            self.path.rename(aside)
            self.problem = ""
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".acks-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self._acks, fh, indent=2, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
