"""Scoring decodes: the stored decodes by model and method and their scores (`decodes`), answer extraction and
equivalence (`grading`), intervals and paired tests (`stats`), and the cost model of FLOPs and decoded tokens
(`cost`).

May import: core, results, data, models, interp, engines, samplers.
"""
