#!/usr/bin/env bash
# Build vCluster's syncer (the program of the vCluster control-plane container) and
# the kine it runs as its datastore, from the Go module proxy.
#
#   lab/vcluster/build.sh OUTDIR      writes OUTDIR/vcluster and OUTDIR/kine
#
# Needs `go` on PATH (vCluster's go.mod asks for go 1.26.3: an older go fetches
# that toolchain through the module proxy, as GOTOOLCHAIN=auto does), the Go
# module proxy (GOPROXY default), and for kine a C compiler with static glibc
# (Debian: gcc, libc6-dev), because kine's SQLite driver is cgo.
#
# Both modules are built from their own go.mod and go.sum, as their releases are:
# the module is downloaded (checksums verified against sum.golang.org), copied
# to a scratch directory (the module cache is read-only) and built there.
set -euo pipefail

# The versions.
# - The syncer: github.com/loft-sh/vcluster, package ./cmd/vcluster, of the release
#   gpufleet renders (VCLUSTER_VERSION in engine/src/resources/virtual_cluster/versions.rs;
#   the lab passes its own copy, which its tests hold equal, in the environment).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z "${VCLUSTER_VERSION:-}" ]]; then
  VCLUSTER_VERSION=$(sed -nE 's/^pub const VCLUSTER_VERSION: &str = "([^"]+)";.*/\1/p' \
    "$here/../../engine/src/resources/virtual_cluster/versions.rs")
fi
[[ -n "$VCLUSTER_VERSION" ]] || { echo "build.sh: no VCLUSTER_VERSION" >&2; exit 1; }
VCLUSTER_VERSION=v${VCLUSTER_VERSION#v}
# - kine: vCluster v0.36 runs the kine of its ghcr.io/loft-sh/kubernetes image
#   (v0.14.16 with patches of vCluster's own, which are not on the module
#   proxy); this is the upstream release it is based on.
KINE_VERSION=v0.14.16

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$out"

log() { printf '[vcluster/build.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

command -v go >/dev/null || { echo "build.sh: go not found on PATH" >&2; exit 1; }
log "$(go version)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/vcluster-build.XXXXXX")
trap 'chmod -R u+w "$scratch" 2>/dev/null; rm -rf "$scratch"' EXIT
# No workspace file around the scratch directory may change the build.
export GOWORK=off

# fetch MODULE VERSION DIR: downloads MODULE@VERSION and copies it to DIR, writable.
fetch() {
  local info dir
  info=$(go mod download -json "$1@$2") || {
    echo "build.sh: failed to download $1@$2: $info" >&2
    exit 1
  }
  dir=$(sed -nE 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p' <<<"$info")
  [[ -n "$dir" ]] || { echo "build.sh: failed to download $1@$2" >&2; exit 1; }
  cp -r "$dir" "$3"
  chmod -R u+w "$3"
}

# progress: one line per 200 packages compiled; messages (with spaces, or '#')
# pass straight through.
progress() {
  awk -v what="$1" '/ |^#/ { print; fflush(); next }
    { n++; if (n % 200 == 0) { printf "[vcluster/build.sh] ... %s: %d packages compiled\n", what, n; fflush() } }
    END { if (n) printf "[vcluster/build.sh] %s: %d packages compiled\n", what, n
          else printf "[vcluster/build.sh] %s: up to date in the build cache, linked\n", what }'
}

log "downloading github.com/loft-sh/vcluster@$VCLUSTER_VERSION"
fetch github.com/loft-sh/vcluster "$VCLUSTER_VERSION" "$scratch/vcluster"
log "downloading github.com/k3s-io/kine@$KINE_VERSION"
fetch github.com/k3s-io/kine "$KINE_VERSION" "$scratch/kine"

# The syncer: static (CGO_ENABLED=0), stamped with its version as its release
# build does (.goreleaser.yaml). The embed_chart tag is left out: it only embeds
# the Helm chart for the CLI's `create`, which the syncer does not use.
log "compiling the syncer (./cmd/vcluster, CGO_ENABLED=0) -> $out/vcluster"
(
  cd "$scratch/vcluster"
  CGO_ENABLED=0 go build -v -trimpath -buildvcs=false \
    -ldflags "-s -w -X github.com/loft-sh/vcluster/pkg/telemetry.SyncerVersion=${VCLUSTER_VERSION#v}" \
    -o "$out/vcluster" ./cmd/vcluster 2>&1 | progress syncer
)

# kine: cgo for SQLite, linked statically as its own release build does
# (scripts/build); netgo and osusergo keep glibc's NSS out of the static binary,
# sqlite_omit_load_extension and no_antithesis_sdk keep dlopen out. The nats tag
# of its release build (the embedded NATS server) is left out: vCluster only
# uses kine's SQLite backend.
log "compiling kine (CGO_ENABLED=1, static) -> $out/kine"
(
  cd "$scratch/kine"
  CGO_ENABLED=1 CGO_CFLAGS="-DSQLITE_USE_ALLOCA=1" go build -v -trimpath -buildvcs=false \
    -tags netgo,osusergo,sqlite_omit_load_extension,no_antithesis_sdk \
    -ldflags "-s -w -X github.com/k3s-io/kine/pkg/version.Version=$KINE_VERSION -X github.com/k3s-io/kine/pkg/version.GitCommit= -extldflags -static" \
    -o "$out/kine" . 2>&1 | progress kine
)

log "done: $out/vcluster ($(du -h "$out/vcluster" | cut -f1)), $out/kine ($(du -h "$out/kine" | cut -f1))"
printf 'vcluster syncer %s\n' "$("$out/vcluster" version)"
"$out/kine" --version
