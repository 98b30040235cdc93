"""The team's agent, shipped as its own layer beside Interlock's."""
