# Sourced by each job's bash at its start (BASH_ENV, set by the run: convlab.snakefile.jobenvironment):
# the moment the job's shell starts, in microseconds (bash 5; empty in an older bash), from which a
# cell job times its start-up. Then the BASH_ENV the user had, if any.
export CONVLAB_JOB_STARTED="${EPOCHREALTIME:-}"
if [ -n "${CONVLAB_USER_BASH_ENV:-}" ] && [ -r "$CONVLAB_USER_BASH_ENV" ]; then
  . "$CONVLAB_USER_BASH_ENV"
fi
