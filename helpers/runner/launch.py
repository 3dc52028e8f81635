"""The first cell of a chapter notebook opened by hand (Binder, Colab after a clone, your own Jupyter).

It checks that the notebook runs from a checkout, installs the embedded models its parameters name (the book
runner does this for a whole profile), and says which profiles this machine's memory holds. The book's
pages leave the cell out; in a book run it finds nothing to install.
"""

from __future__ import annotations

import os

import psutil

from helpers.core import env

# Peak memory (GiB) of a notebook kernel that loads the model in float32 and runs a short forward pass; the
# reproducibility page ("Memory") says how each figure was measured, and which is scaled rather than measured.
PEAK_GIB = {"smollm2-135m": 1.2, "qwen2.5-coder-0.5b": 3.1, "qwen2.5-coder-1.5b": 9.6}
KERNEL_GIB = 0.4  # Jupyter, matplotlib and the widgets beside the model
# What decoding many rows at once adds (their KV buffer), at the batch the profiles that run the model decode at
# (the same page: a chapter's peak less the forward pass and the kernel).
DECODE_GIB = {"smollm2-135m": 0.3, "qwen2.5-coder-0.5b": 1.8}
BINDER_GIB = 2.0  # what mybinder.org guarantees a session


def profile_memory(profile: str) -> float | None:
    """Estimated peak GiB of a profile's chapters (its largest model), or None for hub models we cannot size."""
    from helpers.runner.planning import job_models, plan

    names = job_models(plan(profile))
    peaks = [PEAK_GIB[n] + DECODE_GIB.get(n, 0.0) if n in PEAK_GIB else None for n in names]
    return None if not peaks or None in peaks else max(peaks) + KERNEL_GIB


def advice(total_gib: float, profiles: list[str]) -> list[str]:
    """One line per profile: does it fit in `total_gib`?"""
    lines = []
    for name in profiles:
        need = profile_memory(name)
        if need is None:
            lines.append(f"  {name}: hub models; run it where they fit (a GPU; see the README).")
        else:
            verdict = "fits" if need <= total_gib else "does not fit"
            lines.append(f"  {name}: about {need:.1f} GiB, {verdict}.")
    return lines


def check_setup(profile: str = "smoke") -> None:
    """Install what the notebook's parameters (`profile`) need and print which profiles fit this machine.

    In a book run (`python -m helpers run`) it does nothing: the runner has installed and checked the profile's
    models before any chapter, and the cell is left out of the page.
    """
    if os.environ.get(env.BOOK_RUN) == "1":
        return
    from helpers.runner.installs import install_models
    from helpers.runner.planning import in_checkout
    from helpers.runner.profiles import RunError, available_profiles

    if not in_checkout():
        raise RunError("This notebook runs from a checkout of the repository: git clone it, then "
                       "pip install -e '.[book]' in it and open notebooks/ from there.")
    installed = install_models(profile)
    total = psutil.virtual_memory().total / 2**30
    print(f"Set up for the {profile!r} profile" + (f" (installed {', '.join(installed)})" if installed else "")
          + f". This machine has {total:.1f} GiB of memory (Binder guarantees {BINDER_GIB:.0f}):")
    print("\n".join(advice(total, available_profiles())))
    print(f"The parameters above are the {profile!r} profile's. To run a chapter under another profile, change them "
          "to that profile's (notebooks/profiles/NAME.yaml), or run `python -m helpers run --profile NAME --only "
          "CHAPTER` from the checkout.")
