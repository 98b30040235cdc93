"""Peers measured on Interlock's own bench: the same scenario, the same emulator."""
