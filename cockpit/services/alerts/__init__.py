"""alerts subsystem (see DESIGN.md)."""
