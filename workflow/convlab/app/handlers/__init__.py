"""The commands' handlers, by area. Each is ``handler(args, console) -> exit status``, named by the
command table (convlab.app.commandtable) and imported only when its command runs.

A handler says its output to its Console, never to sys.stdout, so that it runs alike in its own
process and in a service worker; it opens the paths it is given as they are (a worker has already
taken them relative to the job's directory: convlab.app.command.in_directory).

- service: a cell job measured in its own process (CONVLAB_SERVICE=off), and `serve`;
- cells: cells run by hand (`run`), and the grid's shared-memory count;
- device: device-wide measurements (copy bandwidth, compute ceiling, the floor benchmark) and the
  gallery's edge maps;
- data: the source picture and its downscaled copies;
- report: the summary, the figures and the report pages;
- history: the results database (record, history, compare) and its page;
- pipeline: the pipeline benchmark, a full Snakemake run against a bare one (`bench-pipeline`).
"""
