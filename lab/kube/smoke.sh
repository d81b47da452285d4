#!/usr/bin/env bash
# Smoke test for gpufleet-kube: a whole control plane on 127.0.0.1, checked
# with curl only (no kubectl).
#
#   lab/kube/smoke.sh BIN          e.g. lab/kube/smoke.sh /tmp/gpufleet-kube
#
# Needs openssl and curl. Starts etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok on random free loopback ports in a temp dir, runs the
# checks, prints timings and RSS, and kills everything it started on exit.
# KEEP=1 keeps the temp dir (logs, certs, kubeconfigs) for inspection.
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 BIN" >&2; exit 2; }
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stages="$here/stages/kwok-stages.yaml"
w=$(mktemp -d /tmp/gpufleet-kube-smoke.XXXXXX)
pids=()

log() { printf '[smoke %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { log "FAIL: $*"; exit 1; }
cleanup() {
  local rc=$?
  # Stop only what this script started, by pid, newest first, waiting for each
  # to exit before stopping the next: kube-apiserver whose etcd is already
  # gone ignores SIGTERM for minutes (it keeps retrying etcd), so etcd goes
  # last, and anything still alive after 15s gets SIGKILL.
  local i p t
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    p=${pids[$i]}
    kill -0 "$p" 2>/dev/null || continue
    t=$(now_ms)
    kill "$p" 2>/dev/null || true
    while kill -0 "$p" 2>/dev/null && (($(now_ms) - t < 15000)); do sleep 0.1; done
    kill -0 "$p" 2>/dev/null && { log "pid $p ignored SIGTERM for 15s: SIGKILL"; kill -9 "$p" 2>/dev/null || true; }
    wait "$p" 2>/dev/null || true
    log "stopped pid $p ($(cat "$w/name.$p" 2>/dev/null)) in $(($(now_ms) - t)) ms"
  done
  if [[ $rc -ne 0 ]]; then
    for f in "$w"/*.log; do echo "----- tail $f"; tail -n 25 "$f"; done
  fi
  if [[ "${KEEP:-}" == 1 ]]; then log "kept $w"; else rm -rf "$w"; fi
  exit $rc
}
trap cleanup EXIT INT TERM

# A free port: one nothing answers on (bash /dev/tcp), from a random range.
used_ports=" "
freeport() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    [[ "$used_ports" == *" $p "* ]] && continue
    if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then used_ports+="$p "; echo "$p"; return; fi
  done
}
now_ms() { date +%s%3N; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# PSS splits the shared, file-backed pages of the one binary between processes.
pss_kb() { awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup"; }

# ---------------------------------------------------------------- PKI (openssl)
log "PKI in $w"
cd "$w"
ossl() { openssl "$@" 2>/dev/null; }
# One CA signs everything: the apiserver serving cert, client certs, and
# (via kube-controller-manager) CSRs. It is also the client CA.
ossl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=gpufleet-lab-ca" \
  -keyout ca.key -out ca.crt
# A separate front-proxy CA for the aggregation layer (kubeadm's layout). With
# it the apiserver publishes requestheader settings in the
# kube-system/extension-apiserver-authentication ConfigMap; without it the
# controller-manager and scheduler log "missing content for CA bundle
# requestheader-client-ca-file" every few seconds.
ossl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=gpufleet-lab-front-proxy-ca" \
  -keyout front-proxy-ca.key -out front-proxy-ca.crt
cert() { # name subject extensions [ca]
  local ca=${4:-ca}
  ossl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr"
  printf '%s\n' "$3" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 3650 \
    -extfile "$1.ext" -out "$1.crt"
}
cert apiserver "/CN=kube-apiserver" \
  "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth"
cert admin "/O=system:masters/CN=gpufleet-admin" "extendedKeyUsage=clientAuth"
cert front-proxy-client "/CN=front-proxy-client" "extendedKeyUsage=clientAuth" front-proxy-ca
# Built-in RBAC bindings exist for these two user names.
cert kcm "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
cert scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
cert kwok "/O=system:masters/CN=kwok-controller" "extendedKeyUsage=clientAuth"
ossl genrsa -out sa.key 2048
ossl rsa -in sa.key -pubout -out sa.pub

etcd_client=$(freeport); etcd_peer=$(freeport); api=$(freeport)
kcm_port=$(freeport); sched_port=$(freeport); kwok_port=$(freeport)
server="https://127.0.0.1:$api"

kubeconfig() { # name
  cat >"$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "$server", certificate-authority: "$w/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$w/$1.crt", client-key: "$w/$1.key"}
contexts:
- name: lab
  context: {cluster: lab, user: $1}
current-context: lab
EOF
}
for n in admin kcm scheduler kwok; do kubeconfig $n; done

k() { # method path [json-body] -> body on stdout; HTTP code in $w/code
  local m=$1 p=$2 data=()
  shift 2
  [[ $# -gt 0 ]] && data=(--data "$1")
  curl -sS --cacert ca.crt --cert admin.crt --key admin.key -X "$m" \
    -H 'Content-Type: application/json' "${data[@]}" \
    -o "$w/body" -w '%{http_code}' "$server$p" >"$w/code" || true
  cat "$w/body"
}
code() { cat "$w/code"; }
wait_for() { # seconds description command...
  local t=$1 d=$2 start
  shift 2
  start=$(now_ms)
  until "$@" >/dev/null 2>&1; do
    (($(now_ms) - start < t * 1000)) || fail "timeout after ${t}s: $d"
    sleep 0.2
  done
  log "ok: $d ($(($(now_ms) - start)) ms)"
}
start() { # name args... ; logs to $w/name.log
  local n=$1
  shift
  "$bin" "$@" >"$w/$n.log" 2>&1 &
  pids+=($!)
  echo "$n" >"$w/name.$!"
  eval "pid_${n//-/_}=$!"
}

# ---------------------------------------------------------------- etcd
log "versions: $("$bin" version | tr '\n' ';')"
t0=$(now_ms)
start etcd etcd \
  --name=lab --data-dir="$w/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_client" \
  --advertise-client-urls="http://127.0.0.1:$etcd_client" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-cluster="lab=http://127.0.0.1:$etcd_peer" \
  --unsafe-no-fsync=true --log-level=warn
etcd_health() { curl -sf "http://127.0.0.1:$etcd_client/health" | grep -q '"health":"true"'; }
wait_for 30 "etcd /health" etcd_health

# ---------------------------------------------------------------- kube-apiserver
t1=$(now_ms)
start kube-apiserver kube-apiserver \
  --etcd-servers="http://127.0.0.1:$etcd_client" \
  --bind-address=127.0.0.1 --secure-port="$api" \
  --tls-cert-file="$w/apiserver.crt" --tls-private-key-file="$w/apiserver.key" \
  --client-ca-file="$w/ca.crt" \
  --authorization-mode=RBAC \
  --service-cluster-ip-range=10.96.0.0/12 \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$w/sa.pub" \
  --service-account-signing-key-file="$w/sa.key" \
  --allow-privileged=true \
  --requestheader-client-ca-file="$w/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$w/front-proxy-client.crt" \
  --proxy-client-key-file="$w/front-proxy-client.key"
readyz() { [[ "$(k GET /readyz)" == ok ]]; }
wait_for 120 "kube-apiserver /readyz" readyz
api_ready_ms=$(($(now_ms) - t1))

v=$(k GET /version)
echo "$v" | grep -q "\"gitVersion\": \"$("$bin" kube-apiserver --version | awk '{print $2}')\"" ||
  fail "/version: $v"
log "ok: /version $(echo "$v" | grep gitVersion | tr -d ' ,')"

k POST /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"smoke"}}' >/dev/null
[[ $(code) == 201 ]] || fail "create namespace: $(code) $(cat body)"
log "ok: namespace smoke created (201)"

# ---------------------------------------------------------------- controllers, scheduler, kwok
start kube-controller-manager kube-controller-manager \
  --kubeconfig="$w/kcm.kubeconfig" \
  --authentication-kubeconfig="$w/kcm.kubeconfig" \
  --authorization-kubeconfig="$w/kcm.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$kcm_port" \
  --leader-elect=false \
  --controllers='*,-service-lb-controller,-cloud-node-lifecycle-controller,-node-route-controller' \
  --use-service-account-credentials=true \
  --root-ca-file="$w/ca.crt" \
  --service-account-private-key-file="$w/sa.key" \
  --cluster-signing-cert-file="$w/ca.crt" --cluster-signing-key-file="$w/ca.key" \
  --service-cluster-ip-range=10.96.0.0/12
start kube-scheduler kube-scheduler \
  --kubeconfig="$w/scheduler.kubeconfig" \
  --authentication-kubeconfig="$w/scheduler.kubeconfig" \
  --authorization-kubeconfig="$w/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$sched_port" \
  --leader-elect=false
start kwok kwok \
  --kubeconfig="$w/kwok.kubeconfig" \
  --config="$stages" \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds=40 \
  --server-address="127.0.0.1:$kwok_port"
# Their serving certs are self-signed in memory (no --tls-cert-file): -k.
hz() { curl -sfk "https://127.0.0.1:$1/healthz" | grep -qx ok; }
kcm_hz() { hz "$kcm_port"; }
sched_hz() { hz "$sched_port"; }
kwok_hz() { curl -sf "http://127.0.0.1:$kwok_port/healthz" | grep -qx ok; }
wait_for 60 "kube-controller-manager /healthz" kcm_hz
wait_for 60 "kube-scheduler /healthz" sched_hz
wait_for 60 "kwok /healthz" kwok_hz

# The serviceaccount controller must have made the default SA before pods can
# pass ServiceAccount admission.
sa() { k GET /api/v1/namespaces/smoke/serviceaccounts/default >/dev/null; [[ $(code) == 200 ]]; }
wait_for 60 "serviceaccount smoke/default (serviceaccount controller)" sa

# ---------------------------------------------------------------- fake node
k POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"kwok-gpu-0",
  "annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"},
  "labels":{"type":"kwok","kubernetes.io/hostname":"kwok-gpu-0","kubernetes.io/os":"linux"}},
  "spec":{"taints":[{"key":"kwok.x-k8s.io/node","value":"fake","effect":"NoSchedule"}]},
  "status":{"allocatable":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/gpu":"8"},
            "capacity":{"cpu":"32","memory":"256Gi","pods":"110","nvidia.com/gpu":"8"}}}' >/dev/null
[[ $(code) == 201 ]] || fail "create node: $(code) $(cat body)"
t_node=$(now_ms)
node_ready() {
  k GET /api/v1/nodes/kwok-gpu-0 | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}
wait_for 60 "node kwok-gpu-0 Ready (kwok)" node_ready
gpus=$(k GET /api/v1/nodes/kwok-gpu-0 | tr -d ' \n' | grep -o '"allocatable":{[^}]*}')
log "node allocatable: $gpus"

tol='"tolerations":[{"key":"kwok.x-k8s.io/node","operator":"Exists","effect":"NoSchedule"}]'
# Pod bound directly to the node (no scheduler involved).
k POST /api/v1/namespaces/smoke/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bound"},
  "spec":{"nodeName":"kwok-gpu-0",'"$tol"',"containers":[{"name":"c","image":"busybox"}]}}' >/dev/null
[[ $(code) == 201 ]] || fail "create bound pod: $(code) $(cat body)"
phase_is() { k GET "/api/v1/namespaces/smoke/pods/$1" | tr -d ' \n' | grep -q "\"phase\":\"$2\""; }
wait_for 60 "pod smoke/bound Running (kwok)" phase_is bound Running

# Pod placed by the scheduler, asking for GPUs.
k POST /api/v1/namespaces/smoke/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"scheduled"},
  "spec":{'"$tol"',"containers":[{"name":"c","image":"cuda","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}}' >/dev/null
[[ $(code) == 201 ]] || fail "create scheduled pod: $(code) $(cat body)"
wait_for 60 "pod smoke/scheduled Running (scheduler + kwok)" phase_is scheduled Running

# Deployment -> ReplicaSet -> Pods (deployment + replicaset controllers, scheduler, kwok).
k POST /apis/apps/v1/namespaces/smoke/deployments '{"apiVersion":"apps/v1","kind":"Deployment",
  "metadata":{"name":"web"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},
  "template":{"metadata":{"labels":{"app":"web"}},"spec":{'"$tol"',"containers":[{"name":"c","image":"nginx"}]}}}}' >/dev/null
[[ $(code) == 201 ]] || fail "create deployment: $(code) $(cat body)"
deploy_ready() { k GET /apis/apps/v1/namespaces/smoke/deployments/web | tr -d ' \n' | grep -q '"readyReplicas":3'; }
wait_for 90 "deployment smoke/web 3/3 ready" deploy_ready

# Job (job controller; kwok's pod-complete stage finishes Job pods).
k POST /apis/batch/v1/namespaces/smoke/jobs '{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"once"},
  "spec":{"template":{"spec":{"restartPolicy":"Never",'"$tol"',"containers":[{"name":"c","image":"busybox"}]}}}}' >/dev/null
[[ $(code) == 201 ]] || fail "create job: $(code) $(cat body)"
job_done() { k GET /apis/batch/v1/namespaces/smoke/jobs/once | tr -d ' \n' | grep -q '"succeeded":1'; }
wait_for 90 "job smoke/once succeeded" job_done

# Garbage collection: deleting the Deployment (background propagation) must
# remove its ReplicaSet and Pods (garbagecollector controller + kwok pod-delete).
web_pods() { k GET '/api/v1/namespaces/smoke/pods?labelSelector=app%3Dweb' | tr -d ' \n' | grep -oE '"name":"web-[^"]*","(generateName|namespace)"' | wc -l; }
n=$(web_pods)
[[ $n == 3 ]] || fail "expected 3 web pods before GC, saw $n"
rs_count() { k GET '/apis/apps/v1/namespaces/smoke/replicasets?labelSelector=app%3Dweb' | tr -d ' \n' | grep -oE '"name":"web-[^"]*","(generateName|namespace)"' | wc -l; }
[[ $(rs_count) == 1 ]] || fail "expected 1 web ReplicaSet before GC"
k DELETE /apis/apps/v1/namespaces/smoke/deployments/web '{"propagationPolicy":"Background"}' >/dev/null
gc_done() { [[ $(rs_count) == 0 && $(web_pods) == 0 ]]; }
wait_for 90 "GC removed the deployment's ReplicaSet and pods" gc_done

# Namespace deletion (namespace controller; pods go through kwok's pod-delete).
k DELETE /api/v1/namespaces/smoke >/dev/null
ns_gone() { k GET /api/v1/namespaces/smoke >/dev/null; [[ $(code) == 404 ]]; }
wait_for 120 "namespace smoke deleted" ns_gone

# ---------------------------------------------------------------- report
# Let the node live past node-monitor-grace-period (50s) so a missing lease
# renewal would show up as a taint below; also lets the processes go idle.
left=$((70 - ($(now_ms) - t_node) / 1000))
((left > 0)) && { log "waiting ${left}s (node age 70s)"; sleep "$left"; }
# node-lifecycle-controller would taint the node unreachable if kwok's lease
# renewals were missing (grace period 50s); by now it has had the chance.
node_ready || fail "node kwok-gpu-0 no longer Ready"
k GET /api/v1/nodes/kwok-gpu-0 | tr -d ' \n' | grep -q 'node.kubernetes.io/unreachable\|node.kubernetes.io/not-ready' &&
  fail "node kwok-gpu-0 got a not-ready/unreachable taint"
log "ok: node still Ready, no not-ready/unreachable taint"
log "RESULT apiserver /readyz after ${api_ready_ms} ms (whole run $((($(now_ms) - t0) / 1000)) s)"
for n in etcd kube_apiserver kube_controller_manager kube_scheduler kwok; do
  p="pid_$n"
  log "RESULT $n: RSS $(($(rss_kb "${!p}") / 1024)) MiB, PSS $(($(pss_kb "${!p}") / 1024)) MiB"
done
log "PASS"
