"""What every layer may use: the environment names the library reads and the repository root (`env`), the checks
of values a user sets (`checks`), the guarded JSON reader (`jsonfile`), progress bars (`progress`), the silencing
of known harmless warnings (`quiet`) and how much of the machine other processes used while a timing ran
(`contention`).

May import: nothing of the library.
"""
