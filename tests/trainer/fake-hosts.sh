#!/usr/bin/env bash
# Hosts on one machine for multi-host tests: each host is a network
# namespace with its own hostname (a UTS namespace), an address on a private
# link to the first host, and a folder of its own at DIR/local (a bind mount
# in its mount namespace), so node-local paths differ between hosts while
# the rest of the filesystem is shared, as on a cluster with a shared home.
#   fake-hosts.sh up DIR NAME...   makes the hosts; writes DIR/enter-NAME (runs a
#                                  command on NAME) and DIR/agent (Open MPI's
#                                  rsh agent: plm_rsh_agent=DIR/agent)
#   fake-hosts.sh down DIR         removes them
# Needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2; exits 77
# when namespaces cannot be made here (a container without the rights).
# mpirun runs on the first host: DIR/enter-NAME1 mpirun --host NAME1,NAME2 ...
set -euo pipefail
what=$1 dir=$2
shift 2
tag="mfh$(printf '%s' "$dir" | cksum | cut -c1-6)" # one set of names per folder

down() {
  [[ -f "$dir/hosts" ]] || return 0
  while read -r name; do
    ip netns del "$tag-$name" 2>/dev/null || true
  done <"$dir/hosts"
  rm -f "$dir/hosts"
}

if [[ $what == down ]]; then
  down
  exit 0
fi
[[ $what == up && $# -ge 2 ]] || { echo "usage: fake-hosts.sh up DIR NAME NAME... | down DIR" >&2; exit 2; }
command -v ip >/dev/null && command -v unshare >/dev/null || { echo "fake-hosts.sh: needs ip (iproute2) and unshare" >&2; exit 77; }
mkdir -p "$dir/local"
down
first=$1 i=0
for name in "$@"; do
  i=$((i + 1))
  if ! ip netns add "$tag-$name" 2>"$dir/error"; then
    echo "fake-hosts.sh: cannot make a network namespace here: $(cat "$dir/error")" >&2
    down
    exit 77
  fi
  echo "$name" >>"$dir/hosts"
  ip -n "$tag-$name" link set lo up
  if [[ $name != "$first" ]]; then # a link from the first host to this one
    ip -n "$tag-$first" link add "h$i" type veth peer name "p$i" netns "$tag-$name"
    ip -n "$tag-$first" addr add "10.213.$i.1/24" dev "h$i"
    ip -n "$tag-$name" addr add "10.213.$i.2/24" dev "p$i"
    ip -n "$tag-$first" link set "h$i" up
    ip -n "$tag-$name" link set "p$i" up
    ip -n "$tag-$name" route add default via "10.213.$i.1"
  fi
  mkdir -p "$dir/local-$name"
  cat >"$dir/enter-$name" <<ENTER
#!/bin/sh
# Runs a command on host $name (made by fake-hosts.sh).
exec ip netns exec $tag-$name unshare --uts --mount sh -c 'hostname $name && mount --bind "$dir/local-$name" "$dir/local" && exec "\$@"' enter-$name "\$@"
ENTER
  chmod +x "$dir/enter-$name"
done
# Open MPI starts its daemon on another host as `agent HOST COMMAND...`.
cat >"$dir/agent" <<'AGENT'
#!/bin/sh
host=$1
shift
exec "$(dirname "$0")/enter-$host" sh -c "$*"
AGENT
chmod +x "$dir/agent"
