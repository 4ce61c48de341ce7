"""The measurement service: one long-lived worker per GPU (and one for the cpu), and cell jobs as
thin clients of it, in the manner of Bazel's persistent workers.

- identity: which service a process may use (host, user, GPUs, Slurm job, checkout, code) and
  where its socket lives;
- protocol: the framed JSON request/response;
- cellrequest: a cell request, its fields named there only, built once by the job and written
  and sent with no module but the socket's C one (the frame every message travels in too);
- client: the job's retrying side: finds or starts the service, sends once more, writes the
  job's own error row (standard library only);
- server: the socket, peer checks, dispatch and idle exit;
- workers: starting, timing out and replacing worker processes;
- worker: the worker process, which keeps the CUDA context, modules, plans and pictures, measures
  cells (convlab.run.celljob.measure_job) and runs the other commands through the command table
  (convlab.app.commandtable);
- control: `python -m convlab serve` (run, --status, --stop).
"""
