"""The report stage: figures and pages drawn from the summary, the seed comparison and the seed table.

Imports nothing here: the command line reads the seed table (convlab.report.seeds, standard library only)
before it has site-packages.
"""
