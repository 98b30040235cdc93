"""The Strands side of Interlock: tools, hooks, the scripted model and snapshots.

This is the only package (besides the service functions) that imports strands.
"""
