"""config subsystem (see DESIGN.md)."""
