#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and kubectl v1.20.2 offline from Debian
# bookworm's `kubernetes` source package (no prebuilt binaries are reachable from CI), plus
# installs Debian's golang-go (build) and etcd-server (run).
# Result: $OUT/bin/{kube-apiserver,kube-controller-manager,kubectl}. kubectl is the oracle of
# the differential tests (`kubectl apply --server-side` of the same manifests) and the
# benchmark's comparison, so it comes from the same source as the server.
# Idempotent: does nothing when every binary already exists (a cache built before kubectl was
# added gets only kubectl). Needs root (apt) and ~2 GB of disk.
set -euo pipefail

CACHE="${KUSION_CACHE:-$HOME/.cache/kusion-rs}"
OUT="${KUSION_K8S_DIR:-$CACHE/k8s-v1.20.2}"
BINS=(kube-apiserver kube-controller-manager kubectl)

have_all() {
  local b
  for b in "${BINS[@]}"; do [ -x "$OUT/bin/$b" ] || return 1; done
  command -v etcd >/dev/null
}

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Only update the package lists when a package cannot be found (keeps reruns fast).
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@" >/dev/null 2>&1; then
    $sudo apt-get -o DPkg::Lock::Timeout=300 update >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@" >/dev/null
  fi
}

if have_all; then
  echo "k8s control plane binaries present in $OUT/bin"
  exit 0
fi

mkdir -p "$OUT"
# One builder at a time per cache dir: a second caller waits, then finds the binaries.
exec 9>"$OUT/.build.lock"
flock 9
if have_all; then exit 0; fi

command -v etcd >/dev/null || apt_install etcd-server
for b in "${BINS[@]}"; do [ -x "$OUT/bin/$b" ] || missing=1; done
[ -n "${missing:-}" ] || exit 0

apt_install golang-go ca-certificates debian-archive-keyring patch xz-utils
mkdir -p "$OUT"/{apt/lists/partial,apt/parts,src,bin,gocache,gopath/src/k8s.io}
cd "$OUT"

# A private sources list with deb-src entries, so the host's /etc/apt stays untouched.
cat > apt/parts/kusion-debian.sources <<'LIST'
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
LIST
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$OUT/apt/parts" -o "Dir::State::Lists=$OUT/apt/lists")
apt-get "${apt_opts[@]}" update >/dev/null
if ! ls src/kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
  (cd src && apt-get "${apt_opts[@]}" source --download-only kubernetes >/dev/null)
fi
if ! ls src/golang-github-modern-go-reflect2-dev_*.deb >/dev/null 2>&1; then
  (cd src && apt-get "${apt_opts[@]}" download golang-github-modern-go-reflect2-dev >/dev/null)
fi

tree=src/kubernetes-1.20.2
if [ ! -f "$tree/.kusion-prepared" ]; then
  rm -rf "$tree" src/debian-dir src/reflect2
  tar -xzf src/kubernetes_*.orig.tar.gz -C src
  mkdir -p src/debian-dir && tar -xJf src/kubernetes_*.debian.tar.xz -C src/debian-dir
  while read -r p; do
    [ -n "$p" ] && [ "${p#\#}" = "$p" ] || continue
    patch -s -d "$tree" -p1 < "src/debian-dir/debian/patches/$p"
  done < src/debian-dir/debian/patches/series
  # The vendored reflect2 1.0.1 crashes at run time when built with Go >= 1.18; Debian's 1.0.2 works.
  dpkg -x src/golang-github-modern-go-reflect2-dev_*.deb src/reflect2
  r2=src/reflect2/usr/share/gocode/src/github.com/modern-go/reflect2
  vend="$tree/vendor/github.com/modern-go/reflect2"
  rm -f "$vend"/*.go "$vend"/*.s
  cp "$r2"/*.go "$r2"/*.s "$vend"/
  touch "$tree/.kusion-prepared"
fi

# Kubernetes 1.20 builds in GOPATH mode with its vendor tree; nothing is fetched.
export GOPATH="$OUT/gopath" GOCACHE="$OUT/gocache" GOPROXY=off GOFLAGS= GO111MODULE=off CGO_ENABLED=0
ln -sfn "$OUT/$tree" "$GOPATH/src/k8s.io/kubernetes"
cd "$GOPATH/src/k8s.io/kubernetes"

# The release tarball lacks the generated OpenAPI definitions the apiserver links; generate them
# with the vendored openapi-gen over every package tagged `+k8s:openapi-gen=`.
gen=pkg/generated/openapi/zz_generated.openapi.go
if [ ! -s "$gen" ]; then
  go build -o "$OUT/bin/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
  # Every non-vendor directory holding Go code (staging mapped to its vendor/ import path); its
  # files carrying a `// +k8s:` tag line and an `+k8s:openapi-gen=` marker make it an input.
  dirs=$(find -H . -path ./vendor -prune -o -path './_*' -prune -o -path './.*' -prune -o -type f -name '*.go' -print \
    | sed -e 's|^\./||' -e 's|^staging/src/|vendor/|' -e 's|/[^/]*$||' | LC_ALL=C sort -u)
  inputs=""
  for d in $dirs; do
    case "$d" in vendor/k8s.io/code-generator/*|vendor/k8s.io/sample-apiserver/*) continue ;; esac
    tagged=$(grep -l '^// *+k8s:' "$d"/*.go 2>/dev/null || true)
    [ -n "$tagged" ] || continue
    if grep -l '+k8s:openapi-gen=' $tagged >/dev/null 2>&1; then
      inputs="$inputs,k8s.io/kubernetes/$d"
    fi
  done
  "$OUT/bin/openapi-gen" --logtostderr -i "${inputs#,}" -p k8s.io/kubernetes/pkg/generated/openapi \
    -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
    -r "$OUT/openapi_violations.report"
  if ! diff -q <(LC_ALL=C sort "$OUT/openapi_violations.report") <(LC_ALL=C sort api/api-rules/violation_exceptions.list) >/dev/null; then
    echo "openapi-gen: API rule violations differ from upstream's known list; the generated file is suspect" >&2
    rm -f "$gen"
    exit 1
  fi
fi

ver=k8s.io/kubernetes/vendor/k8s.io/component-base/version
cver=k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version
ldflags="-s -w -X $ver.gitVersion=v1.20.2 -X $ver.gitMajor=1 -X $ver.gitMinor=20 -X $ver.gitTreeState=clean"
ldflags="$ldflags -X $cver.gitVersion=v1.20.2 -X $cver.gitMajor=1 -X $cver.gitMinor=20"
for b in "${BINS[@]}"; do
  [ -x "$OUT/bin/$b" ] && continue
  echo "building $b (several minutes on 2 cores)"
  go build -tags selinux,notest -ldflags "$ldflags" -o "$OUT/bin/$b.tmp" "./cmd/$b"
  mv "$OUT/bin/$b.tmp" "$OUT/bin/$b"
done
"$OUT/bin/kube-apiserver" --version
