"""Always on: the headless monitor shared by the TUI and `cockpit watch`, and the watcher."""
