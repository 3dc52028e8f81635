"""What the models read: problem sets and prompts (`problems`), the token sequences the analyses read with one
convention for where a solution starts (`sequences`), and the papers' numbers kept as data (`published`).

May import: core, results.
"""
