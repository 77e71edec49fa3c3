#!/usr/bin/env bash
# Build and install kusionctl, kcl and every shipped plugin under a prefix, so the tool works
# without this checkout:
#
#   <prefix>/bin/kusionctl, <prefix>/bin/kcl
#   <prefix>/lib/kusion/plugins/<name>/{plugin.toml,<library>}   manifest with the library's sha256
#   <prefix>/share/man/man1/*.1                                  kusionctl and kcl man pages
#   <prefix>/share/{bash-completion/completions,zsh/site-functions,fish/vendor_completions.d}/...
#
# kusionctl looks for plugins in <its folder>/../lib/kusion/plugins, and it requires the
# manifest's sha256 to match the library, the folders to be writable by their owner only, and the
# plugin declaration in the library's symbols. (scripts/stage-plugins.sh lays out a build's
# plugins the same way beside <target>/<profile>/kusionctl, for development and tests.)
#
# Usage: scripts/install.sh [--prefix DIR] [--profile release|release-debug|debug] [--from-target DIR]
#   --prefix DIR        where to install (default ~/.local)
#   --profile NAME      the cargo profile to build and install (default release: no debug info;
#                       release-debug keeps line tables for debugging)
#   --from-target DIR   install what the cargo target folder DIR already holds for the profile,
#                       without building (the tests install the debug build this way)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

prefix="$HOME/.local"
profile=release
from_target=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a folder}"; shift 2 ;;
        --prefix=*) prefix="${1#*=}"; shift ;;
        --profile) profile="${2:?--profile needs a name}"; shift 2 ;;
        --profile=*) profile="${1#*=}"; shift ;;
        --from-target) from_target="${2:?--from-target needs a folder}"; shift 2 ;;
        --from-target=*) from_target="${1#*=}"; shift ;;
        -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$profile" in
    debug|dev) profile=dev; out_dir=debug ;;
    release|release-debug) out_dir="$profile" ;;
    *) echo "install.sh: unknown profile '$profile' (release, release-debug or debug)" >&2; exit 2 ;;
esac
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"

# The shipped plugins: every manifest one folder below runtimes/ and plugins/ (examples/ and
# tests/ hold examples and fixtures, not part of the product).
manifests=()
for m in "$root"/runtimes/*/plugin.toml "$root"/plugins/*/plugin.toml; do
    [ -f "$m" ] && manifests+=("$m")
done
[ ${#manifests[@]} -gt 0 ] || { echo "install.sh: no plugin manifests under runtimes/ or plugins/" >&2; exit 1; }

# A top-level `key = "value"` of a TOML file (the manifests and Cargo.toml files are flat there).
toml_value() {
    sed -n "s/^$2[[:space:]]*=[[:space:]]*\"\\(.*\\)\"[[:space:]]*\$/\\1/p" "$1" | head -n 1
}

if [ -n "$from_target" ]; then
    target="$(cd "$from_target" && pwd)"
else
    target="${CARGO_TARGET_DIR:-$root/target}"
    packages=(-p kusionctl -p kusion-kcl)
    for m in "${manifests[@]}"; do
        packages+=(-p "$(toml_value "$(dirname "$m")/Cargo.toml" name)")
    done
    echo "== building (${profile/dev/debug}): ${packages[*]}"
    (cd "$root" && cargo build --locked --profile "$profile" "${packages[@]}" \
        --bin kusionctl --bin kcl --lib)
fi
built="$target/$out_dir"

need() {
    [ -f "$1" ] || { echo "install.sh: $1 is missing: build it first (or drop --from-target)" >&2; exit 1; }
}
need "$built/kusionctl"
need "$built/kcl"

# Owner-writable only: kusionctl refuses plugins from folders others may write.
install -d -m 0755 "$prefix/bin" "$prefix/lib/kusion/plugins" "$prefix/share/man/man1" \
    "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
    "$prefix/share/fish/vendor_completions.d"
chmod 0755 "$prefix/lib/kusion" "$prefix/lib/kusion/plugins"

echo "== installing into $prefix"
install -m 0755 "$built/kusionctl" "$built/kcl" "$prefix/bin/"

commit="$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
for m in "${manifests[@]}"; do
    name="$(toml_value "$m" name)"
    file="$(toml_value "$m" file)"
    [ -n "$name" ] && [ -n "$file" ] || { echo "install.sh: $m has no name or file" >&2; exit 1; }
    case "$file" in
        *.wasm) lib="$target/wasm32-wasip2/$out_dir/$file" ;;
        *) lib="$built/$file" ;;
    esac
    need "$lib"
    dest="$prefix/lib/kusion/plugins/$name"
    rm -rf "$dest"
    install -d -m 0755 "$dest"
    install -m 0755 "$lib" "$dest/$file"
    sum="$(sha256sum "$dest/$file" | cut -d' ' -f1)"
    # The shipped manifest without its comments and checksum lines, with the installed library's
    # sha256 first (top-level keys must come before any [table]).
    {
        echo "# Installed by kusion-rs scripts/install.sh from commit $commit."
        echo "sha256 = \"$sum\""
        grep -v -E '^[[:space:]]*(#|$)|^(sha256|publisher|signature)[[:space:]]*=' "$m"
    } > "$dest/plugin.toml"
    chmod 0644 "$dest/plugin.toml"
    echo "   plugin $name ($file, sha256 ${sum:0:12}...)"
done

"$prefix/bin/kusionctl" manpages "$prefix/share/man/man1"
for tool in kusionctl kcl; do
    "$prefix/bin/$tool" completion bash > "$prefix/share/bash-completion/completions/$tool"
    "$prefix/bin/$tool" completion zsh > "$prefix/share/zsh/site-functions/_$tool"
    "$prefix/bin/$tool" completion fish > "$prefix/share/fish/vendor_completions.d/$tool.fish"
done

echo "== installed; plugins as a fresh shell sees them:"
# No user configuration or plugin path: what the install itself provides.
fresh_home="$(mktemp -d)"
env -u KUSION_PLUGIN_PATH -u KUSION_CONFIG -u CARGO_MANIFEST_DIR HOME="$fresh_home" \
    "$prefix/bin/kusionctl" plugin list
rm -rf "$fresh_home"
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "note: $prefix/bin is not on PATH; add it (export PATH=\"$prefix/bin:\$PATH\")" ;;
esac
