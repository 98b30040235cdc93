"""Agents built only through Interlock's public surface (`interlock.agent`)."""
