"""The book's figures, one module per chapter over one style (`style`), and the explorers a reader with a live
kernel drags (`widgets`). Figures draw the arrays and results the chapters compute; they compute nothing.

May import: core, results, data, models, interp, engines, samplers, evaluation.
"""
