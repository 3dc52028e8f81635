"""The book runner: profiles (`profiles`), the checks of a chapter's parameters (`params`), executing a notebook
(`execute`), planning a profile's run and building the book (`run`), the launch cell of a notebook opened by hand
(`launch`), the glued values of a build as data (`glued`), the pages' source links (`source_links`),
the measure of how much code the notebooks hold (`notebook_code`), and the library's map for the
architecture page (`architecture`).

May import: core, results, data, models, interp, engines, samplers, evaluation, plots, chapters.
"""
