"""Helpers for the executable book *Search versus Depth*: a package per layer, listed in `LAYERS` from the bottom up.

Each package may import the packages of the rows below its own and nothing above, nor the other package of its
row (`tests/test_layers.py` holds the library to this, and the book's architecture page draws it). Import the
modules you need; importing `helpers` itself, or any package of it, is cheap.
"""

__version__ = "0.1.0"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),               # environment names, value checks, the guarded JSON reader, progress bars
    ("results",),            # the results store and what identifies a stored computation
    ("data",),               # problem sets, prompts, token sequences, the papers' numbers
    ("models",),             # loading, number formats, the decoder's parts, truncation, checkpoints
    ("interp", "engines"),   # reading the residual stream; running decode programs (transformers, vLLM)
    ("samplers",),           # plain decoding, power sampling (MH), SMC, the toy model, decode settings
    ("evaluation",),         # stored decodes and their scores, intervals and paired tests, the cost model
    ("plots",),              # the figures by chapter and the live explorers
    ("chapters",),           # one module per chapter: the calls a notebook makes
    ("runner",),             # profiles, parameter checks, executing the notebooks, building the book
    ("bench",),              # the benchmarks against the baselines users run
)
# Above them all: `helpers.cli` (the command line) and `helpers.__main__`. Importing any of it changes nothing in
# the host process (`helpers.core.quiet`).
