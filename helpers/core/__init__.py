"""What every layer may use: the environment names the library reads and the repository root (`env`), the checks
of values a user sets (`checks`), the guarded JSON reader (`jsonfile`), progress bars (`progress`) and the
silencing of known harmless warnings (`quiet`).

May import: nothing of the library.
"""
