"""One module per chapter: each section of a chapter is one call that returns arrays and the numbers its prose
glues. Notebooks hold parameters, these calls, a figure from `helpers.plots` and prose."""
