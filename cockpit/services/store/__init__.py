"""The durable store of a sweep: SQLite (WAL, one writer) at `$XDG_DATA_HOME/cockpit/<sweep>.db`.

- `db.Store`: the one writer (`Store.open(path, sweep=..., role="watch")`, `batch()`,
  `sample`, `put_record`, `cell_change`, `event`, `judgement_started`/`_ended`, `alert`,
  `delivery`, `audit`, `touch`, `compact`, `close`). Retention and durability: `db`'s docstring.
- `db.StoreReader`: read-only (`mode=ro`) queries: `samples`, `alerts`, `events`,
  `cell_changes`, `judgements`, `audit`, `latest_records`, `history`, `failing_channels`.
- `db.default_db_path(sweep)`: where a sweep's store lives.
- `lock.find_writer(path) -> WriterInfo | None`: whether a live process writes it (a TUI then
  follows that watcher instead of probing the boxes); `lock.WriterBusy` when opening a second.
- `recorder.TrackerRecorder(store)`: the monitor's `Recorder` (trackers -> rows each tick).
- `schema`: the tables and the ordered migrations (`PRAGMA user_version`).
- `timeline`: rows -> a post-mortem timeline per box and cell (`cockpit report`).

Imports only downward (models, config); never Textual.
"""
