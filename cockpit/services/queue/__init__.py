"""queue subsystem (see DESIGN.md)."""
