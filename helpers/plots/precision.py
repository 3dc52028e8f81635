"""float32 against bfloat16 (the appendix): the two formats side by side."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from helpers.core.numbers import counted
from helpers.plots.style import finish, model_colour


def dtype_comparison(c):
    """Appendix: the logit lens's KL per layer and stitched greedy accuracy per depth, float32 beside bfloat16: one
    model, so its colour of the book throughout, each format a line style and marker of its own (a method's colour
    would read as that method)."""
    fig, (ax_kl, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4))
    colour = model_colour(c.model)
    for dtype, style, marker, width in (("float32", "-", "o", 2.4), ("bfloat16", "--", "s", 1.4)):
        kl = np.asarray(c.kl[dtype])
        ax_kl.plot(np.arange(kl.shape[1]), kl.mean(0), style, color=colour, lw=width, label=dtype)
        depths = sorted(c.sweep[dtype])
        ax_acc.plot(depths, [100 * c.sweep[dtype][d] for d in depths], style, marker=marker, mfc="white",
                    color=colour, lw=width, label=dtype)
    ax_kl.set(xlabel="block input l", ylabel="KL(layer ‖ final), nats", title=f"{c.model}: logit lens")
    ax_acc.set(xlabel="blocks kept (stitched)", ylabel="greedy accuracy, %", ylim=(-3, 103),
               title=f"stitched sweep, {counted(c.n_sweep, 'problem')}")
    ax_acc.xaxis.set_major_locator(MaxNLocator(integer=True))  # depths are whole blocks (ticks 29, 30, not 29.2)
    ax_kl.legend()
    ax_acc.legend()
    return finish(fig)
