"""Interlock: durable, exactly-once human-in-the-loop interrupts for Strands agents.

Layout (dependencies point inward):

- domain modules (`errors`, `keys`, `records`, `timing`, `tokens`, `conditions`) import
  neither boto3 nor strands;
- `interlock.adapters` owns every AWS call and takes injected boto3 clients.
"""

__version__ = "0.1.0"
