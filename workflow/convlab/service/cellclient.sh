# The cell job's thin client, read by the job's own shell with the cell line's words, as the cell
# rule writes them (convlab.snakefile.runplan.job_commands):
#
#   . workflow/convlab/service/cellclient.sh cell --spec JSON [--image FILE] --bandwidth FILE --out FILE
#
# Where the run named its service for this job (convlab.service.runsocket: the same node, user,
# interpreter, code and identity variables) and that service has a door (convlab.service.door), the
# shell sends the cell there and says the service's line: the job starts no Python, whose start is
# most of a cell job's own time. Any other case goes to the Python client (convlab.app.cellentry),
# which finds or starts the service and says what is wrong with a line: no door yet, a line other
# than the rule's usual one, a door that refuses the request. A door that closes without an answer,
# or gives none in time, is told to it (CONVLAB_CELL_DOOR), and it goes on as after its own socket.

# The door's answer said (the job's status: 0 or 2); 100 where the door took nothing; 101 where it
# took the cell and gave no answer (what it met is in __convlab_door_met).
__convlab_cell_at_door() {
  local -
  set -f
  [[ $# -ge 5 && $1 == cell && ${CONVLAB_SERVICE-on} == on ]] || return 100
  shift
  local spec='' image='' bandwidth='' out='' seen=' '
  while (($# >= 2)); do
    case $1 in
      --spec | --image | --bandwidth | --out) ;;
      *) return 100 ;;
    esac
    [[ $seen != *" $1 "* && $2 != -* ]] || return 100
    seen+="$1 "
    printf -v "${1#--}" '%s' "$2"
    shift 2
  done
  (($# == 0)) && [[ $spec == \{*\} && -n $out ]] || return 100

  # the run's service holds for this job where the facts the run named it for are this job's
  local sep=$'\x1f' node python entry name
  read -r node </proc/sys/kernel/hostname 2>/dev/null || return 100
  hash python 2>/dev/null || return 100
  python=${BASH_CMDS[python]-}
  local facts="$node$sep${SLURMD_NODENAME-}$sep$UID$sep$python$sep${CONVLAB_RUN_CODE-}"
  local named=${CONVLAB_RUN_SOCKET_FOR-}
  [[ $named == "$facts$sep"* ]] || return 100
  # the identity variables, as the run saw them: NAME=value where set, NAME where not
  local IFS=$sep
  local -a variables=(${named#"$facts$sep"})
  IFS=$' \t\n'
  for entry in "${variables[@]}"; do
    name=${entry%%=*}
    [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || return 100
    if [[ $entry == *=* ]]; then
      [[ -v $name && ${!name} == "${entry#*=}" ]] || return 100
    else
      [[ ! -v $name ]] || return 100
    fi
  done

  local socket=${CONVLAB_RUN_SOCKET-} port secret
  [[ $socket == *.sock ]] || return 100
  { read -r port secret <"${socket%.sock}.door"; } 2>/dev/null || return 100
  [[ $port =~ ^[0-9]+$ && -n $secret ]] || return 100

  # the request's fields, as convlab.service.cellrequest.build() makes them
  local timeout=${CONVLAB_CELL_TIMEOUT_S-300} stamp=${CONVLAB_JOB_STARTED-} now=$EPOCHREALTIME
  [[ $timeout =~ ^[0-9]+(\.[0-9]+)?$ && $timeout =~ [1-9] ]] || return 100
  [[ $stamp =~ ^[0-9]+[.,][0-9]{6}$ && $now =~ ^[0-9]+[.,][0-9]{6}$ ]] || return 100
  local started_us=${stamp/[.,]/} now_us=${now/[.,]/}
  local age_us=$((10#$now_us - 10#$started_us))
  # a stamp of this shell is milliseconds old; an older one was inherited: the Python client times it
  ((age_us >= 0 && age_us < 60000000)) || return 100
  local startup_ms
  printf -v startup_ms '%d.%03d' $((age_us / 1000)) $((age_us % 1000))
  local backslash='\' quote='"' json='{"op":"cell"' value
  for name in spec image bandwidth out git_commit run_id; do
    case $name in
      git_commit) value=${CONVLAB_RUN_COMMIT-} ;;
      run_id) value=${CONVLAB_RUN_ID-} ;;
      *) value=${!name} ;;
    esac
    if [[ -z $value ]]; then
      case $name in
        image | bandwidth) json+=",\"$name\":null" ;;
      esac
      continue
    fi
    case $name in
      image | bandwidth | out)
        # made absolute as os.path.abspath would; one it would also tidy goes to the Python client
        [[ /$value/ != */./* && /$value/ != */../* && $value != *//* && $value != */ ]] || return 100
        [[ $value == /* ]] || value=$PWD/$value
        ;;
    esac
    [[ $value != *[[:cntrl:]]* ]] || return 100
    value=${value//"$backslash"/"$backslash$backslash"}
    value=${value//"$quote"/"$backslash$quote"}
    json+=",\"$name\":\"$value\""
    [[ $name != out ]] || json+=",\"timeout_s\":$timeout"
  done
  json+=",\"client\":{\"pid\":$BASHPID,\"started_at\":${stamp/,/.},\"startup_ms\":$startup_ms"
  now=$EPOCHREALTIME
  json+=",\"sent_at\":${now/,/.}}}"

  local fd kind='' line='' sent=0
  { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 100
  # a peer that closes before reading is a failed write here, not a SIGPIPE that ends the job
  trap '' PIPE
  { printf '%s\n%s\n' "$secret" "$json" >&"$fd"; } 2>/dev/null || sent=$?
  trap - PIPE
  if ((sent != 0)); then
    exec {fd}>&-
    return 100
  fi
  # the service answers once the row is written: within the cell's timeout and its grace
  local got=0
  read -r -t $((${timeout%.*} + 31)) -u "$fd" kind || got=$?
  read -r -t 5 -u "$fd" line || true
  exec {fd}>&-
  case $kind in
    ok)
      printf '%s\n' "$line"
      return 0
      ;;
    error)
      printf 'error: %s\n' "$line" >&2
      return 2
      ;;
    refused) return 100 ;;
  esac
  ((got > 128)) && __convlab_door_met=timeout || __convlab_door_met=lost
  return 101
}

# Snakemake's job shells run with `set -euo pipefail`: nothing here may stop the shell.
__convlab_door_met='' __convlab_status=0
__convlab_cell_at_door "$@" || __convlab_status=$?
if ((__convlab_status < 100)); then
  return "$__convlab_status"
fi
__convlab_package=${BASH_SOURCE[0]%convlab/service/cellclient.sh}
__convlab_package=${__convlab_package%/}
CONVLAB_CELL_DOOR=$__convlab_door_met PYTHONPATH=${__convlab_package:-.}${PYTHONPATH:+:$PYTHONPATH} \
  python -S -c 'from convlab.app.cellentry import run; run()' "$@"
