"""A model as the project holds it: the transformers module it runs, its tokenizer, where it came from and which
blocks it keeps.

`load_model` returns a `ModelHandle`; an embedded model's handle builds its module only when something first runs it
(`ModelHandle.module`), so a chapter whose every number is stored reads them by the handle's identity without loading
any weights. `ModelHandle.at_depth` cuts it (`helpers.models.truncation` does the surgery
on the module) and returns another handle that knows its truncation. Everything that stores a number keys it by
`ModelHandle.identity()`: where the weights came from, a fingerprint of them, the depth, the truncation and the dtype.
The handle carries what the project knows of a model beside the transformers objects, never on them, and passes it
explicitly, as TransformerLens's `HookedTransformer` carries its `cfg`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from helpers.models import precision
from helpers.models.adapter import adapter
from helpers.models.truncation import METHODS, kept_blocks, truncate


@dataclass(frozen=True)
class ModelInfo:
    """What was loaded: enough to label a figure and to reproduce the load."""

    name: str
    source: str
    architecture: str
    n_layers: int
    hidden_size: int
    vocab_size: int
    dtype: str
    device: str
    chat: bool

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Origin:
    """Where a model came from: the name it was loaded by, its source ('embedded:<file>', 'local:<folder>',
    'hub:<id>', or 'unregistered' for a module the project did not load), a fingerprint of its weights, and, where a
    completion ends at more than its EOS, that rule ('blank line': a base model prompted with worked examples)."""

    name: str
    source: str
    weights: str | None = None
    stops: str | None = None

    def as_dict(self) -> dict:
        """The origin's part of an identity: {'model', 'source', 'weights'} and 'stops' where set ('weights' is
        absent for an unregistered module, which has none to fingerprint)."""
        base = {"model": self.name, "source": self.source}
        if self.source != UNREGISTERED:
            base["weights"] = self.weights
        return base | ({"stops": self.stops} if self.stops else {})


UNREGISTERED = "unregistered"


@dataclass(frozen=True)
class Truncation:
    """A cut made here: by which method, to how many blocks, which of the original blocks it keeps, and of how many."""

    method: str
    depth: int
    kept_blocks: tuple[int, ...]
    original_layers: int

    def as_dict(self) -> dict:
        return {"method": self.method, "depth": self.depth, "kept_blocks": list(self.kept_blocks),
                "original_layers": self.original_layers}


@dataclass(frozen=True, eq=False)
class ModelHandle:
    """A model the project loaded (or wrapped): `module` (the transformers model, in eval mode), `tokenizer`,
    `origin`, `info` (what was loaded, shared by its truncations) and `truncation` (None for the model as loaded).

    The module is built at its first use: `build` makes it (loading the weights, or cutting the loaded model's), and
    what can be known before that (`config` of the model as loaded, `n_layers`, `dtype`, `device`, `identity()`) is
    answered without it, equal to what the built module says (`module` checks its dtype and depth when it builds).

    Handles compare by identity of the object: two loads of one checkpoint are two handles with equal `identity()`."""

    build: Callable[[], nn.Module] = field(repr=False)
    tokenizer: Any
    origin: Origin
    info: ModelInfo | None = None
    truncation: Truncation | None = None
    loaded_config: Any = field(default=None, repr=False)  # the config of the model as loaded, read without its weights
    loaded_generation_config: Any = field(default=None, repr=False)  # and its generation config (its EOS ids)
    _built: list = field(default_factory=list, init=False, repr=False)  # [module] once built (the handle is frozen)

    @classmethod
    def of(cls, module: nn.Module, tokenizer: Any, origin: Origin, info: ModelInfo | None = None) -> ModelHandle:
        """A handle on a module already built."""
        handle = cls(lambda: module, tokenizer, origin, info, loaded_config=module.config,
                     loaded_generation_config=getattr(module, "generation_config", None))
        handle._built.append(module)
        return handle

    @classmethod
    def wrap(cls, module: nn.Module, tokenizer: Any = None) -> ModelHandle:
        """A handle on a module the project did not load (a test's, a user's own): named by its config's path or
        class, with no weights fingerprint."""
        name = getattr(module.config, "_name_or_path", "") or type(module).__name__
        return cls.of(module, tokenizer, Origin(name, UNREGISTERED))

    @property
    def loaded(self) -> bool:
        """Whether the module is built (its weights in memory)."""
        return bool(self._built)

    @property
    def module(self) -> nn.Module:
        """The transformers model, built at the first use and kept."""
        if not self._built:
            module = self.build()
            dtype = next((p.dtype for p in module.parameters()), torch.float32)
            if self.info is not None and (precision.name(dtype) != self.info.dtype
                                          or adapter(module).n_layers != self.n_layers):
                raise RuntimeError(f"{self.name} was built with {adapter(module).n_layers} blocks in {dtype}, where "
                                   f"its handle promised {self.n_layers} in {self.info.dtype}: a bug in its loader")
            self._built.append(module)
        return self._built[0]

    @property
    def name(self) -> str:
        """The name the model was loaded by."""
        return self.origin.name

    @property
    def config(self):
        """The module's config (its layer count is the truncation's); the model as loaded answers without building."""
        if self._built or self.truncation is not None or self.loaded_config is None:
            return self.module.config
        return self.loaded_config

    @property
    def generation_config(self):
        """The module's generation config (what ends a completion: `helpers.models.loading.stop_token_ids`), read
        without building the module where it was read at the load."""
        if self._built or self.loaded_generation_config is None:
            return self.module.generation_config
        return self.loaded_generation_config

    @property
    def n_layers(self) -> int:
        """The blocks this model runs."""
        if self._built or self.info is None:
            return adapter(self.module).n_layers
        return self.truncation.depth if self.truncation is not None else self.info.n_layers

    @property
    def original_layers(self) -> int:
        """The blocks of the model as loaded."""
        return self.truncation.original_layers if self.truncation else self.n_layers

    @property
    def dtype(self) -> torch.dtype:
        """Its weights' number format."""
        if self._built or self.info is None:
            return next((p.dtype for p in self.module.parameters()), torch.float32)
        return getattr(torch, self.info.dtype)

    @property
    def device(self) -> str:
        """'cpu' or 'cuda': where its weights are."""
        if self._built or self.info is None:
            return next((p.device.type for p in self.module.parameters()), "cpu")
        return torch.device(self.info.device).type

    def identity(self) -> dict:
        """{'model', 'source', 'weights', 'depth', 'truncation', 'dtype'} (and 'stops' where set): everything about
        the model that changes its numbers ('weights' fingerprints the files it was loaded from, so other weights
        under the same name never share its records). A truncation at full depth runs the original blocks, so it has
        the original's identity."""
        t = self.truncation
        if t is not None and t.depth < t.original_layers:
            shape = {"depth": t.depth, "truncation": t.method}
        else:
            shape = {"depth": t.depth if t is not None else int(self.config.num_hidden_layers), "truncation": None}
        return {**self.origin.as_dict(), **shape, "dtype": precision.name(self.dtype)}

    def truncated(self, depth: int, method: str = "stitch") -> ModelHandle:
        """This model cut to `depth` blocks by `method` (`helpers.models.truncation.truncate`): a new module tree over
        the same weights, even at full depth, with its truncation recorded."""
        if self.truncation is not None:
            raise ValueError(f"{self.name} is already cut to {self.truncation.depth} blocks: cut the model as loaded")
        kept = kept_blocks(self.n_layers, depth, method)
        cut = ModelHandle(lambda: truncate(self.module, depth, method), self.tokenizer, self.origin, self.info,
                          Truncation(method, depth, tuple(kept), self.n_layers),
                          loaded_generation_config=self.loaded_generation_config)
        if self._built:  # the weights are in memory: cut now (no reading), so the cut answers from its own module
            cut._built.append(truncate(self.module, depth, method))
        return cut

    def at_depth(self, depth: int, method: str = "stitch") -> ModelHandle:
        """This model cut to `depth` blocks by `method`; at its own depth, itself (a truncation there would run the
        same blocks, under the same identity, at the cost of a second module tree)."""
        if depth == self.n_layers:
            if method not in METHODS:
                raise ValueError(f"method must be one of {METHODS}, got {method!r}")
            return self
        return self.truncated(depth, method)
