#!/usr/bin/env bash
# Build the Kubeflow MPI Operator's controller from the Go module proxy, and take its
# MPIJob CRD and its controller's ClusterRole from the same release.
#
#   lab/mpi-operator/build.sh OUTDIR   writes OUTDIR/mpi-operator, OUTDIR/mpijobs-crd.yaml and
#                                      OUTDIR/cluster-role.yaml
#
# The module is built from its own go.mod and go.sum, as its release is: downloaded
# (checksums verified against sum.golang.org), copied to a scratch directory (the module
# cache is read-only) and built there. Needs `go` on PATH and the Go module proxy.
set -euo pipefail

# The release: MPI_OPERATOR_VERSION in lab/src/gobuild.rs, which the lab passes in the
# environment (the script reads the file when run by hand).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z "${MPI_OPERATOR_VERSION:-}" ]]; then
  MPI_OPERATOR_VERSION=$(sed -nE 's/^pub const MPI_OPERATOR_VERSION: &str = "([^"]+)";.*/\1/p' \
    "$here/../src/gobuild.rs")
fi
[[ -n "$MPI_OPERATOR_VERSION" ]] || { echo "build.sh: no MPI_OPERATOR_VERSION" >&2; exit 1; }

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$out"

log() { printf '[mpi-operator/build.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

command -v go >/dev/null || { echo "build.sh: go not found on PATH" >&2; exit 1; }
log "$(go version)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/mpi-operator-build.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
export GOWORK=off

module=github.com/kubeflow/mpi-operator
log "downloading $module@$MPI_OPERATOR_VERSION"
info=$(go mod download -json "$module@$MPI_OPERATOR_VERSION") || {
  echo "build.sh: failed to download $module@$MPI_OPERATOR_VERSION: $info" >&2
  exit 1
}
dir=$(sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p' <<<"$info")
[[ -n "$dir" ]] || { echo "build.sh: failed to download $module@$MPI_OPERATOR_VERSION" >&2; exit 1; }
cp -r "$dir" "$scratch/src"
chmod -R u+w "$scratch/src"

# As its Dockerfile builds it: static, no VCS stamping.
log "compiling the controller (./cmd/mpi-operator, CGO_ENABLED=0) -> $out/mpi-operator"
(
  cd "$scratch/src"
  CGO_ENABLED=0 go build -v -trimpath -buildvcs=false -ldflags "-s -w" \
    -o "$out/mpi-operator.tmp" ./cmd/mpi-operator 2>&1 \
    | awk '/ |^#/ { print; fflush(); next } { n++ }
        END { printf "[mpi-operator/build.sh] %d packages compiled\n", n }'
)
mv -f "$out/mpi-operator.tmp" "$out/mpi-operator"
# The CRD the release's manifests install (manifests/base), with its validation schema.
cp "$scratch/src/manifests/base/kubeflow.org_mpijobs.yaml" "$out/mpijobs-crd.yaml"
# The controller's ClusterRole, as the release's manifests grant it (manifests/base).
cp "$scratch/src/manifests/base/cluster-role.yaml" "$out/cluster-role.yaml"
log "done: $out/mpi-operator ($(du -h "$out/mpi-operator" | cut -f1)), $out/mpijobs-crd.yaml, $out/cluster-role.yaml"
