#!/usr/bin/env bash
# The README's main job: ADR 0002's checks told as a story on a lab made here and removed at the end.
# A control-node in use (a found nftables firewall, a Docker engine with the predecessor's service,
# a config file, a container on the registry's port), a second machine on the same underlay, and a
# machine outside — all network namespaces of this run. No link between them is private: the mesh's
# private network is the WireGuard tunnel genesis raises. Nothing outside the lab is touched.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "the lab needs root (network namespaces, nftables, a Docker engine)"; exit 1; }

p="md$(printf '%04x' $((RANDOM % 65536)))"
lab=$(mktemp -d "/tmp/$p.XXXX")
root=$lab/root state=$lab/state sock=$lab/docker.sock
pids=()
wg1="${p}w1" wg2="${p}w2"   # tunnel interfaces: unique on this machine (wireguard-go's sockets share one folder)
cleanup() {
  set +e
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  # each wireguard-go by the pid its agent kept (it outlives an agent on purpose), then its socket
  for f in "$state/agent/wireguard/$wg1.pid" "$lab/m2-state/wireguard/$wg2.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  rm -f "/var/run/wireguard/$wg1.sock" "/var/run/wireguard/$wg2.sock"
  if [ -f "$lab/docker.pid" ]; then
    # the engine of this run, by its pidfile: its containers first, then the engine
    ids=$(DOCKER_HOST=unix://$sock /usr/bin/docker ps -aq 2>/dev/null)
    [ -n "$ids" ] && DOCKER_HOST=unix://$sock /usr/bin/docker rm -f $ids >/dev/null 2>&1
    dpid=$(cat "$lab/docker.pid"); kill "$dpid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$dpid" 2>/dev/null
  fi
  grep " $lab/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
  for n in m1 m2 m3; do ip netns del "$p$n" 2>/dev/null; done
  rm -rf "$lab"
}
trap cleanup EXIT

meshp() { node "$here/bin/dist/main.js" "$@"; }
on() { local ns=$1; shift; nsenter --net="/var/run/netns/$p$ns" -- "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
say() { printf '   %s\n' "$*"; }
check() { if "$@"; then say "ok: ${CHECK_MSG:-$*}"; else say "FAILED: ${CHECK_MSG:-$*}"; exit 1; fi; }
reach() { on "$1" timeout 1 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; }
unreach() { ! reach "$@"; }
get() { on "$1" timeout 2 busybox wget -q -O- "http://$2:$3/" 2>/dev/null; }
until_ok() { local n=$1; shift; for _ in $(seq "$n"); do "$@" && return 0; sleep 0.5; done; return 1; }

# A predecessor's firewall on machine $1, kept in $2/etc/nftables.conf: it drops all but tcp port $3.
found_firewall() {
  mkdir -p "$2/etc"
  cat > "$2/etc/nftables.conf" <<NFT
#!/usr/sbin/nft -f
table inet filter
flush table inet filter
table inet filter {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iif "lo" accept
		meta l4proto { icmp, ipv6-icmp } accept
		tcp dport $3 accept
	}
}
NFT
  on "$1" nft -f "$2/etc/nftables.conf"
}

step "the lab: m1 (control-node in use) and m2 on an underlay (10.77.0.0/24), m3 outside (10.78.0.0/24); the mesh's private network will be a tunnel"
for n in m1 m2 m3; do ip netns add "$p$n"; ip -n "$p$n" link set lo up; done
ip link add "${p}pa" type veth peer name "${p}pb"; ip link set "${p}pa" netns "${p}m1"; ip link set "${p}pb" netns "${p}m2"
ip link add "${p}oa" type veth peer name "${p}ob"; ip link set "${p}oa" netns "${p}m1"; ip link set "${p}ob" netns "${p}m3"
ip -n "${p}m1" addr add 10.77.0.1/24 dev "${p}pa"; ip -n "${p}m2" addr add 10.77.0.2/24 dev "${p}pb"
ip -n "${p}m1" addr add 10.78.0.1/24 dev "${p}oa"; ip -n "${p}m3" addr add 10.78.0.2/24 dev "${p}ob"
for l in "m1 ${p}pa" "m1 ${p}oa" "m2 ${p}pb" "m3 ${p}ob"; do set -- $l; ip -n "$p$1" link set "$2" up; done
ip -n "${p}m2" route add default via 10.77.0.1; ip -n "${p}m3" route add default via 10.78.0.1
on m1 sysctl -qw net.ipv4.ip_forward=1

step "the predecessor's machine: its firewall allows 8080 and drops the rest"
mkdir -p "$root/etc/web"
found_firewall m1 "$root" 8080
printf 'listen 8080\nwritten-by predecessor\n' > "$root/etc/web/web.conf"
cp "$root/etc/web/web.conf" "$lab/web.conf.orig"
mkdir -p "$lab/data" "$lab/exec"
setsid nsenter --net="/var/run/netns/${p}m1" -- dockerd --data-root "$lab/data" --exec-root "$lab/exec" \
  --pidfile "$lab/docker.pid" -H "unix://$sock" >"$lab/dockerd.log" 2>&1 &
disown  # stopped by its pidfile in cleanup, after its containers
export DOCKER_HOST=unix://$sock
until_ok 60 /usr/bin/docker info >/dev/null 2>&1 || { echo "dockerd did not start"; cat "$lab/dockerd.log"; exit 1; }
img=$(mktemp -d "$lab/img.XXXX"); mkdir -p "$img/bin"; cp /bin/busybox "$img/bin/"
for c in sh httpd nc sleep cat echo ls mkdir wget; do ln -s busybox "$img/bin/$c"; done
tar -C "$img" -c . | /usr/bin/docker import - lab/busybox:1 >/dev/null
serve() { echo "mkdir -p /www && echo $1 > /www/index.html && exec httpd -f -p ${2:-80} -h /www"; }
/usr/bin/docker run -d --name web -p 8080:80 lab/busybox:1 sh -c "$(serve predecessor-web)" >/dev/null
/usr/bin/docker run -d --name old-registry -p 15000:5000 lab/busybox:1 sh -c "$(serve old-registry 5000)" >/dev/null
/usr/bin/docker run -d --name stray -p 18081:80 lab/busybox:1 sh -c "$(serve stray)" >/dev/null
until_ok 20 get m2 10.77.0.1 8080 >/dev/null
say "web answers from m2: $(get m2 10.77.0.1 8080)"
cp "$root/etc/nftables.conf" "$lab/nftables.conf.orig"

# The shipped catalogue names real images (postgres, nats, registry, rabbitmq, nginx); no registry is
# reachable here, so genesis runs the lab's busybox stand-ins in their place (examples/lab/images.json).
common=(--state "$state" --root "$root" --docker-socket "$sock" --images "$here/examples/lab/images.json" --node m1)
step "1. genesis without --adopted on this machine: refused, naming what it found"
if on m1 node "$here/bin/dist/main.js" genesis "${common[@]}" --yes; then echo "it should have refused"; exit 1; fi

step "2. genesis --adopted: the registry's port is held, so refused, naming the holder"
# No --private-interface: the private network is a WireGuard tunnel (100.96.0.0/16), its port a foundation port.
net=(--adopted --tunnel-interface "$wg1" --endpoint 10.77.0.1:51820)
if on m1 node "$here/bin/dist/main.js" genesis "${common[@]}" "${net[@]}" --yes; then echo "it should have refused"; exit 1; fi

step "   ... given another port, the foundation comes up"
on m1 node "$here/bin/dist/main.js" genesis "${common[@]}" "${net[@]}" --port registry=15001 --yes
setsid nsenter --net="/var/run/netns/${p}m1" -- node "$here/bin/dist/main.js" controller serve --state "$state" --listen 0.0.0.0:7443 --console-listen 10.77.0.1:7444 >"$lab/controller.log" 2>&1 &
pids+=($!)
setsid nsenter --net="/var/run/netns/${p}m1" -- node "$here/bin/dist/main.js" agent --state "$state/agent" --root "$root" --docker-socket "$sock" --interval 2 >"$lab/agent-m1.log" 2>&1 &
pids+=($!)
adm() { on m1 node "$here/bin/dist/main.js" "$@" --state "$state" --controller 127.0.0.1:7443; }
gap0() { adm node list --json 2>/dev/null | node -e "const n=JSON.parse(require('fs').readFileSync(0)).nodes.find(x=>x.name==='$1'); process.exit(n&&n.gap===0&&n.appliedVersion>0?0:1)" 2>/dev/null; }
until_ok 80 gap0 m1
adm node list
console_url=$(grep -o '"console":"[^"]*"' "$lab/controller.log" | head -1 | cut -d'"' -f4)
# Pinned to the controller's own certificate (its name is not the lab address: the pin is what is checked).
console_up() { on m1 node -e "require('https').get({host:'10.77.0.1',port:7444,path:'/',ca:require('fs').readFileSync('$state/tls/controller.crt'),checkServerIdentity:()=>undefined},(r)=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"; }
CHECK_MSG="the web console answers at $console_url" check until_ok 20 console_up
say "the web console: $console_url (m1's lab address, with the controller's certificate; sign in with the text of $state/admin.credential); it goes with the lab"
mesh1() { on m1 ip -4 -o addr show dev "$wg1" 2>/dev/null | awk '{print $4}' | cut -d/ -f1; }
until_ok 40 test -n "$(mesh1)"
say "m1's agent raised the tunnel genesis chose: $wg1 $(mesh1) ($(on m1 wg show "$wg1" listen-port)/udp)"

step "3. nothing that serves changed"
CHECK_MSG="web still answers from m2: $(get m2 10.77.0.1 8080)" check test "$(get m2 10.77.0.1 8080)" = predecessor-web
CHECK_MSG="web.conf is byte for byte what it was" check cmp -s "$root/etc/web/web.conf" "$lab/web.conf.orig"
say "the found table now, the mesh's rules marked meshp:"; on m1 nft list table inet filter | sed 's/^/      /'

step "4. the second machine enrols over the underlay (the control port is the one door there) and brings its tunnel up"
say "m2 is in use too: a found nftables firewall of its own, which drops everything but ssh"
found_firewall m2 "$lab/m2-root" 22
cp "$lab/m2-root/etc/nftables.conf" "$lab/m2-nftables.conf.orig"
say "no policy rule is set: every member has the control-node in its view (the mesh's own rule), whatever the policy"
token=$(adm token create --adopted --tag demo --json | node -e "process.stdout.write(JSON.parse(require('fs').readFileSync(0)).token)")
setsid nsenter --net="/var/run/netns/${p}m2" -- node "$here/bin/dist/main.js" agent --state "$lab/m2-state" --root "$lab/m2-root" \
  --controller 10.77.0.1:7443 --token "$token" --name m2 --interval 2 \
  --tunnel wireguard --tunnel-interface "$wg2" --endpoint 10.77.0.2:51820 >"$lab/agent-m2.log" 2>&1 &
pids+=($!)
until_ok 80 gap0 m2
adm node list
m1mesh=$(mesh1)
until_ok 40 reach m2 "$m1mesh" 15432
on m2 wg show "$wg2" | sed 's/^/      /'
say "m2's found table now, the tunnel's port opened in its own terms:"; on m2 nft list table inet filter | grep meshp: | sed 's/^/      /'

step "5. the store (15432) answers over the tunnel, not from outside"
CHECK_MSG="m2 reaches the store at m1's mesh address $m1mesh" check reach m2 "$m1mesh" 15432
CHECK_MSG="m2 does not reach it over the underlay" check unreach m2 10.77.0.1 15432
CHECK_MSG="m3 does not" check unreach m3 10.78.0.1 15432
say "and by name: m2 asks its own resolver, on its mesh address (a node's names are its view's; the store's is every member's)"
mesh2() { on m2 ip -4 -o addr show dev "$wg2" 2>/dev/null | awk '{print $4}' | cut -d/ -f1; }
m2mesh=$(mesh2)
storeip() { on m2 dig +short +tries=1 +time=2 "@$m2mesh" store.default.mesh 2>/dev/null; }
storebyname() { test "$(storeip)" = "$m1mesh"; }
CHECK_MSG="m2 resolves store.default.mesh to m1's mesh address $m1mesh" check until_ok 20 storebyname
CHECK_MSG="and reaches the store by that name's address" check reach m2 "$(storeip)" 15432

step "6. the predecessor's control still writes web.conf: assigned, the change is reported, not reverted"
( i=0; while true; do i=$((i+1)); printf 'listen 8080\nwritten-by predecessor, pass %s\n' $i > "$root/etc/web/web.conf"; sleep 1; done ) &
writer=$!; pids+=($writer)
adm module assign m1 web --yes
changed() { meshp host status --state "$state/agent" --json | grep -q '"state": "changed"'; }
until_ok 60 changed
meshp host status --state "$state/agent" | grep -E 'web|STATE'

step "7. the operator stops the predecessor's control and takes the module: the cutover"
kill "$writer"
adm module take m1 web --yes
newweb() { test "$(get m2 10.77.0.1 8080)" = mesh-web; }
until_ok 120 newweb
CHECK_MSG="web now answers from m2: $(get m2 10.77.0.1 8080)" check newweb

step "7b. untake, previewed by m1's agent: the predecessor's container and web.conf back; then take again"
upreview() { adm module untake m1 web --preview --json 2>/dev/null | node -e "process.stdout.write(JSON.parse(require('fs').readFileSync(0)).preview.id)"; }
until_ok 60 upreview >/dev/null
adm module untake m1 web --preview
adm module untake m1 web --yes --preview-id "$(upreview)" --timeout 120
oldweb() { test "$(get m2 10.77.0.1 8080)" = predecessor-web; }
CHECK_MSG="the predecessor's container answers again from m2" check until_ok 60 oldweb
# Its original is the one first recorded: web.conf as the assignment found it (a pass of the predecessor's writer), read from m1's host.db.
recorded() { (cd "$here" && node --input-type=module -e "import { SqliteHostStore } from '@meshp/state-sqlite'; const s = new SqliteHostStore(process.argv[1]); const o = await s.getOriginal('file:/etc/web/web.conf').finally(() => s.close()); process.stdout.write(Buffer.from(o.original));" "$state/agent"); }
recorded >"$lab/web.conf.recorded"
CHECK_MSG="web.conf is byte for byte its recorded original ($(head -c 60 "$lab/web.conf.recorded" | tr '\n' ' '))" check cmp -s "$root/etc/web/web.conf" "$lab/web.conf.recorded"
adm module take m1 web --yes
CHECK_MSG="taken again: web answers from m2 with the mesh's" check until_ok 120 newweb

step "8. converge, previewed: every reachable port, and what the flip closes"
adm node converge m1 --preview
id=$(adm node converge m1 --preview --json | node -e "process.stdout.write(JSON.parse(require('fs').readFileSync(0)).preview.id)")
adm node converge m1 --yes --preview-id "$id"
CHECK_MSG="the declared port 8080 is open" check newweb
CHECK_MSG="the stray published port 18081, which no rule mentioned, is closed" check unreach m2 10.77.0.1 18081
CHECK_MSG="the found configuration is still on disk, byte for byte" check cmp -s "$root/etc/nftables.conf" "$lab/nftables.conf.orig"
CHECK_MSG="the tunnel went through the flip: m2 still reaches the store over it" check until_ok 20 reach m2 "$m1mesh" 15432
on m1 nft list tables | sed 's/^/      /'

step "   ... and back to adopted: the found firewall is enabled again"
adm node adopt m1 --yes
foundback() { on m1 nft list table inet filter >/dev/null 2>&1; }
until_ok 60 foundback
CHECK_MSG="table inet filter is back" check foundback

step "9. converge the member m2 over the tunnel: its preview counts the tunnel's port as the agent does"
adm module assign m2 ssh --yes >/dev/null; adm module take m2 ssh --yes >/dev/null
sshtaken() { adm node show m2 --json 2>/dev/null | grep -q '"ssh"' && gap0 m2; }
until_ok 60 sshtaken
adm node converge m2 --preview
id2=$(adm node converge m2 --preview --json | node -e "process.stdout.write(JSON.parse(require('fs').readFileSync(0)).preview.id)")
adm node converge m2 --yes --preview-id "$id2"
CHECK_MSG="the tunnel went through m2's flip: m2 still reaches the store over it" check until_ok 20 reach m2 "$m1mesh" 15432
CHECK_MSG="m2's found configuration is still on disk, byte for byte" check cmp -s "$lab/m2-root/etc/nftables.conf" "$lab/m2-nftables.conf.orig"
on m2 nft list tables | sed 's/^/      /'
step "   ... and m2 back to adopted: its found firewall is enabled again"
adm node adopt m2 --yes
foundback2() { on m2 nft list table inet filter >/dev/null 2>&1; }
CHECK_MSG="m2's table inet filter is back" check until_ok 60 foundback2
CHECK_MSG="and the tunnel still carries" check until_ok 20 reach m2 "$m1mesh" 15432
adm node list
step "done: the lab is removed"
