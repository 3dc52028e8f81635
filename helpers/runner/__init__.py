"""The book runner: profiles and the checks of a chapter's parameters (`run`), the launch cell of a notebook opened
by hand (`launch`), the glued values of a build as data (`glued`), the pages' source links (`source_links`) and
the measure of how much code the notebooks hold (`notebook_code`).

May import: core, results, data, models, interp, engines, samplers, evaluation, plots, chapters.
"""
