"""Local mode: an embedded AWS emulator and (later) the local server."""
