#!/usr/bin/env bash
# Build Karpenter's controller with its KWOK cloud provider from the Go module proxy, and
# take its CRDs from the same release.
#
#   lab/karpenter/build.sh OUTDIR   writes OUTDIR/karpenter-kwok, OUTDIR/crds/*.yaml
#                                   (NodePool, NodeClaim, NodeOverlay, KWOKNodeClass) and
#                                   OUTDIR/cluster-role.yaml and OUTDIR/roles.yaml
#
# The module is built from its own go.mod and go.sum, as its release is: downloaded
# (checksums verified against sum.golang.org), copied to a scratch directory (the module
# cache is read-only) and built there. Needs `go` on PATH and the Go module proxy.
set -euo pipefail

# The release: KARPENTER_VERSION in lab/src/gobuild.rs, which the lab passes in the
# environment (the script reads the file when run by hand).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z "${KARPENTER_VERSION:-}" ]]; then
  KARPENTER_VERSION=$(sed -nE 's/^pub const KARPENTER_VERSION: &str = "([^"]+)";.*/\1/p' \
    "$here/../src/gobuild.rs")
fi
[[ -n "$KARPENTER_VERSION" ]] || { echo "build.sh: no KARPENTER_VERSION" >&2; exit 1; }

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$out"

log() { printf '[karpenter/build.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

command -v go >/dev/null || { echo "build.sh: go not found on PATH" >&2; exit 1; }
log "$(go version)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/karpenter-build.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
export GOWORK=off

module=sigs.k8s.io/karpenter
log "downloading $module@$KARPENTER_VERSION"
info=$(go mod download -json "$module@$KARPENTER_VERSION") || {
  echo "build.sh: failed to download $module@$KARPENTER_VERSION: $info" >&2
  exit 1
}
dir=$(sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p' <<<"$info")
[[ -n "$dir" ]] || { echo "build.sh: failed to download $module@$KARPENTER_VERSION" >&2; exit 1; }
cp -r "$dir" "$scratch/src"
chmod -R u+w "$scratch/src"

# As its release builds it: static, no VCS stamping. Named karpenter-kwok: the package's
# own name, kwok, is the name of the lab's other KWOK program.
log "compiling the controller (./kwok, CGO_ENABLED=0) -> $out/karpenter-kwok"
(
  cd "$scratch/src"
  CGO_ENABLED=0 go build -v -trimpath -buildvcs=false -ldflags "-s -w" \
    -o "$out/karpenter-kwok.tmp" ./kwok 2>&1 \
    | awk '/ |^#/ { print; fflush(); next } { n++ }
        END { printf "[karpenter/build.sh] %d packages compiled\n", n }'
)
mv -f "$out/karpenter-kwok.tmp" "$out/karpenter-kwok"
# The CRDs its KWOK chart installs (kwok/charts/crds) and the KWOKNodeClass its NodePools
# name (kwok/apis/crds), with their validation schemas and CEL rules.
rm -rf "$out/crds"
mkdir -p "$out/crds"
cp "$scratch/src/kwok/charts/crds/"*.yaml "$scratch/src/kwok/apis/crds/"*.yaml "$out/crds/"
# The controller's permissions, as its chart grants them: the rules of the core ClusterRole
# and of the KWOK provider's, joined into one ClusterRole named karpenter. Only the
# metadata of those templates is Helm's; their rules are plain YAML and taken as they are.
rules_of() {
  awk '/^rules:/ { on = 1; next } on && /^ *\{\{/ { exit } on { print }' "$1"
}
# The rules of the Role in role.yaml whose name ends, after the chart's full name, in $2
# ("", "-dns" or "-lease").
role_rules() {
  awk -v want="$2" '/^---/ { mine = 0; on = 0; next }
    /^  name: \{\{ include "karpenter.fullname" \. \}\}/ {
      suffix = $0; sub(/.*\}\}/, "", suffix); mine = (suffix == want); next }
    mine && /^rules:/ { on = 1; next }
    mine && on && /^ *\{\{/ { on = 0 }
    mine && on { print }' "$1"
}
# Fails when the chart's layout changed and a role came out without rules.
check_rules() {
  [[ $(grep -c 'apiGroups' <<<"$1") -gt 0 ]] || {
    echo "build.sh: found no rules for $2 in the chart's templates" >&2
    exit 1
  }
  printf '%s\n' "$1"
}
templates="$scratch/src/kwok/charts/templates"
{
  printf 'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: karpenter\nrules:\n'
  check_rules "$(rules_of "$templates/clusterrole.yaml")" "the core ClusterRole"
  check_rules "$(rules_of "$templates/clusterrole-kwok.yaml")" "the KWOK ClusterRole"
} >"$out/cluster-role.yaml"
# And its namespaced Roles (role.yaml): the leader-election Lease in its own namespace, the
# kube-dns Service in kube-system, node Leases in kube-node-lease.
role() {
  printf 'apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: %s\n  namespace: %s\nrules:\n' "$1" "$2"
  check_rules "$(role_rules "$templates/role.yaml" "$3")" "Role $1"
}
{
  role karpenter karpenter ""
  echo ---
  role karpenter-dns kube-system -dns
  echo ---
  role karpenter-lease kube-node-lease -lease
} >"$out/roles.yaml"
log "done: $out/karpenter-kwok ($(du -h "$out/karpenter-kwok" | cut -f1)), $(ls "$out/crds" | wc -l) CRDs in $out/crds"
