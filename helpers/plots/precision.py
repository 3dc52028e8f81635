"""float32 against bfloat16 (the appendix): the two formats side by side."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from helpers.core.numbers import counted
from helpers.plots.style import PALETTE, finish


def dtype_comparison(c):
    """Appendix: the logit lens's KL per layer and stitched greedy accuracy per depth, float32 beside bfloat16."""
    fig, (ax_kl, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4))
    for i, (dtype, style) in enumerate((("float32", "-"), ("bfloat16", "--"))):
        kl = np.asarray(c.kl[dtype])
        ax_kl.plot(np.arange(kl.shape[1]), kl.mean(0), style, color=PALETTE[i], lw=1.8, label=dtype)
        depths = sorted(c.sweep[dtype])
        ax_acc.plot(depths, [100 * c.sweep[dtype][d] for d in depths], style, marker="o", color=PALETTE[i], lw=1.8,
                    label=dtype)
    ax_kl.set(xlabel="block input l", ylabel="KL(layer ‖ final), nats", title=f"{c.model}: logit lens")
    ax_acc.set(xlabel="blocks kept (stitched)", ylabel="greedy accuracy, %", ylim=(-3, 103),
               title=f"stitched sweep, {counted(c.n_sweep, 'problem')}")
    ax_acc.xaxis.set_major_locator(MaxNLocator(integer=True))  # depths are whole blocks (ticks 29, 30, not 29.2)
    ax_kl.legend()
    ax_acc.legend()
    return finish(fig)
