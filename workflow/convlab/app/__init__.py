"""What a user or Snakemake starts: the command line and its command table, the handlers, the
measurement service, and the data and run-time helpers the rules call."""
