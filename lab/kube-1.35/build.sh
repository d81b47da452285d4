#!/usr/bin/env bash
# Build kube-1.35, the control-plane programs of Kubernetes 1.35 (kube-apiserver,
# kube-controller-manager, kube-scheduler) that 1.35 virtual clusters run, from the Go
# module proxy, the way lab/kube/build.sh builds gpufleet-kube.
#
#   lab/kube-1.35/build.sh OUT
#
# Needs only `go` (>= 1.26) on PATH and the Go module proxy. It shares most packages'
# dependencies with gpufleet-kube, so after that build it takes a few minutes on 2 cores.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT" >&2
  exit 2
fi
out=$1
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

log() { printf '[kube-1.35/build.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

command -v go >/dev/null || { echo "build.sh: go not found on PATH" >&2; exit 1; }
log "$(go version)"

kube_version=$(go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)
kube_major=${kube_version#v}; kube_major=${kube_major%%.*}
kube_minor=${kube_version#v*.}; kube_minor=${kube_minor%%.*}
build_date=$(date ${SOURCE_DATE_EPOCH:+--date=@${SOURCE_DATE_EPOCH}} -u +'%Y-%m-%dT%H:%M:%SZ')
log "kubernetes $kube_version (major $kube_major, minor $kube_minor)"

# The version stamping of kubernetes' hack/lib/version.sh, as lab/kube/build.sh does it.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitCommit="
  ldflags+=" -X $pkg.gitVersion=$kube_version"
  ldflags+=" -X $pkg.gitMajor=$kube_major"
  ldflags+=" -X $pkg.gitMinor=$kube_minor"
  ldflags+=" -X $pkg.buildDate=$build_date"
done

mkdir -p "$(dirname "$out")"
log "compiling (CGO_ENABLED=0, -trimpath, tags selinux,notest,grpcnotrace) -> $out"
CGO_ENABLED=0 go build -v -trimpath -buildvcs=false \
  -tags selinux,notest,grpcnotrace \
  -ldflags "$ldflags" \
  -o "$out" . 2>&1 |
  awk '/ |^#/ { print; fflush(); next } { n++; if (n % 200 == 0) { printf "[kube-1.35/build.sh] ... %d packages compiled\n", n; fflush() } } END { printf "[kube-1.35/build.sh] %d packages compiled\n", n }'

log "done: $out ($(du -h "$out" | cut -f1))"
"$out" version
