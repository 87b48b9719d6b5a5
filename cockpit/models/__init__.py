"""Pure data and logic: frozen models, parsers, state machines. No I/O, no Textual."""
