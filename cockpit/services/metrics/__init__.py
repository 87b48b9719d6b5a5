"""metrics subsystem (see DESIGN.md): the OpenMetrics endpoint over the live trackers."""
