"""The agent harness: the Strands side of Interlock (tools, hooks, the scripted model,
snapshots, the journal) around the user's agent.

This is the only package (besides the service functions) that imports strands.
"""
