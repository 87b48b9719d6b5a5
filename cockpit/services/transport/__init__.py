"""transport subsystem (see DESIGN.md)."""
