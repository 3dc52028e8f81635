"""The results store (`store`: one JSON line per finished unit of work, resumable, checked on reading) and what
identifies a stored computation (`identity`: a model by origin, weights, truncation and dtype; a unit of work by
its content).

May import: core.
"""
