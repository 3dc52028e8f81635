"""Reading what the blocks do, through the named hooks of `helpers.models.hooks`: the residual stream
(`residual`), the logit lens (`lens`), measures (`metrics`), interventions, skip effects, erasure, attribution
and layer maps, and the stored studies that run them over problem sets (`depth` for chapter 01, `studies` for
the lens and truncation agreement). Only the stored studies touch the results store.

May import: core, results, data, models.
"""
